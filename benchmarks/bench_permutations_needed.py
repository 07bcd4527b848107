"""How many permutations permutation sampling needs for a target standard error, on the noise-free party game.

    python benchmarks/bench_permutations_needed.py                      # 12 parties to 0.02, 50 parties to 0.05
    python benchmarks/bench_permutations_needed.py --parties 50 --target 0.05 --pairs 400

Syn parties of 100 points each, valued at their exact statistics: v_C = KL(NIG posterior of C's summed exact
statistics || NIG prior) in closed form (Sim et al. 2023, Sec. 3, the non-private limit), so every coalition is
known without sampling. The valuation's sampler (`bayesval.games.samplers.PermutationSampler`, Castro et al. 2009)
values each permutation with its reverse and files a party's first and last positions as exact groups; the spread
of the rest, the mean of a pair's middle marginal contributions, sets the standard error: (n - 2) / n x spread /
sqrt(pairs). This prints that spread per party over `--pairs` random pairs and the permutations a target needs.
With privacy noise the game differs: at 12 parties and epsilon = 0.5, 32 permutations of the real valuation gave a
largest standard error of 0.10 (docs/benchmarks.md), a spread about 1.8 times this noise-free one.
"""

from __future__ import annotations

import argparse
import math
import warnings

import jax
import numpy as np

import bayesval as bv
from bayesval.datasets.synthetic import make_syn
from bayesval.inference.conjugate import nig_expected_log_density


def middle_spread(num_parties: int, pairs: int, seed: int = 0) -> np.ndarray:
    """Per party, the standard deviation over antithetic pairs of the mean of its middle marginal contributions."""
    syn = make_syn(seed=0, sizes=(100,) * num_parties)
    model = bv.models.LinearRegression()
    statistics = np.stack([model.statistic(2).compute(X, y) for X, y in syn.parties])
    counts = np.array([len(X) for X, _ in syn.parties], np.float64)
    prior = model.priors(2).model

    def surprise(statistic, count):
        posterior = model.exact_posterior(statistic, count, 2)
        return nig_expected_log_density(posterior, posterior) - nig_expected_log_density(posterior, prior)

    surprises = jax.jit(jax.vmap(surprise))
    prefixes = np.tril(np.ones((num_parties, num_parties)))  # row j: the first j + 1 positions
    rng = np.random.default_rng(seed)
    means = np.full((pairs, num_parties), np.nan)
    for pair in range(pairs):
        forward = rng.permutation(num_parties)
        middle = []
        for order in (forward, forward[::-1]):
            masks = prefixes[:, np.argsort(order)]  # row j: the parties at positions 0..j of `order`
            values = np.concatenate([[0.0], np.asarray(surprises(masks @ statistics, masks @ counts))])
            contribution = np.full(num_parties, np.nan)
            contribution[order[1:-1]] = np.diff(values)[1:-1]
            middle.append(contribution)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # a party first in one order and last in the other
            means[pair] = np.nanmean(middle, axis=0)
    return np.nanstd(means, axis=0, ddof=1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--parties", type=int, nargs="+", default=[12, 50])
    parser.add_argument("--target", type=float, nargs="+", default=[0.02, 0.05], help="one per --parties")
    parser.add_argument("--pairs", type=int, default=200, help="antithetic pairs drawn to estimate the spread")
    args = parser.parse_args()
    for num_parties, target in zip(args.parties, args.target):
        spread = middle_spread(num_parties, args.pairs)
        pairs = math.ceil(((num_parties - 2) / num_parties * spread.max() / target) ** 2)
        print(
            f"{num_parties} parties: middle spread of a pair, largest {spread.max():.3f}, median "
            f"{np.median(spread):.3f}; stderr <= {target} needs {pairs} pairs = {2 * pairs} permutations "
            f"({2 * pairs * (num_parties - 1)} coalition posteriors before repeats)",
            flush=True,
        )


if __name__ == "__main__":
    main()
