"""How many permutations the valuation's permutation sampling needs for a target standard error, on the noise-free
party game, and how many distinct coalitions they value.

    python benchmarks/bench_permutations_needed.py                      # 12 parties to 0.02, 50 parties to 0.05
    python benchmarks/bench_permutations_needed.py --parties 50 --target 0.05 --permutations 800

Syn parties of 100 points each, valued at their exact statistics (`Party.exact_statistic`, clipped to the declared
bounds): v_C = KL(NIG posterior of C's summed statistics || NIG prior) in closed form (Sim et al. 2023, Sec. 3, the
non-private limit), so every coalition is known without sampling. The valuation's sampler
(`bayesval.games.samplers.PermutationSampler()`, Castro et al. 2009) files a party's first and last positions as
exact groups and averages its middle marginal contributions, which a party gets in (n - 2) / n of the
permutations; so its standard error after P permutations is sqrt((n - 2) / n) x spread / sqrt(P), where spread is
the standard deviation of one middle marginal contribution. This prints the spread per party over
`--permutations` random permutations, the permutations a target needs, and the distinct coalitions those
permutations value (the surprise is cached by coalition): sum over sizes k of C(n, k) (1 - (1 - 1 / C(n, k))^P).
"""

from __future__ import annotations

import argparse
import math

import jax
import numpy as np

import bayesval as bv
from bayesval.datasets.synthetic import make_syn
from bayesval.inference.conjugate import nig_expected_log_density


def middle_spread(num_parties: int, permutations: int, seed: int = 0) -> np.ndarray:
    """Per party, the standard deviation of its marginal contribution at a middle position of a random permutation."""
    syn = make_syn(seed=0, sizes=(100,) * num_parties)
    parties = [bv.Party(X, y, epsilon=0.5, bounds=syn.bounds, name=f"p{i}") for i, (X, y) in enumerate(syn.parties)]
    statistics = np.stack([party.exact_statistic() for party in parties])
    counts = np.array([len(party.X) for party in parties], np.float64)
    model = bv.models.LinearRegression()
    prior = model.priors(2).model

    def surprise(statistic, count):
        posterior = model.exact_posterior(statistic, count, 2)
        return nig_expected_log_density(posterior, posterior) - nig_expected_log_density(posterior, prior)

    surprises = jax.jit(jax.vmap(surprise))
    prefixes = np.tril(np.ones((num_parties, num_parties)))  # row j: the first j + 1 positions
    rng = np.random.default_rng(seed)
    draws = [[] for _ in range(num_parties)]
    for _ in range(permutations):
        order = rng.permutation(num_parties)
        masks = prefixes[:, np.argsort(order)]  # row j: the parties at positions 0..j of `order`
        values = np.concatenate([[0.0], np.asarray(surprises(masks @ statistics, masks @ counts))])
        for party, contribution in zip(order[1:-1], np.diff(values)[1:-1]):
            draws[party].append(contribution)
    return np.array([np.std(party_draws, ddof=1) for party_draws in draws])


def distinct_coalitions(num_parties: int, permutations: int) -> float:
    """The expected number of distinct nonempty coalitions that `permutations` random permutations' prefixes hold."""
    return sum(
        math.comb(num_parties, size) * (1 - (1 - 1 / math.comb(num_parties, size)) ** permutations)
        for size in range(1, num_parties + 1)
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--parties", type=int, nargs="+", default=[12, 50])
    parser.add_argument("--target", type=float, nargs="+", default=[0.02, 0.05], help="one per --parties")
    parser.add_argument("--permutations", type=int, default=400, help="permutations drawn to estimate the spread")
    args = parser.parse_args()
    for num_parties, target in zip(args.parties, args.target):
        spread = middle_spread(num_parties, args.permutations)
        needed = math.ceil((num_parties - 2) / num_parties * (spread.max() / target) ** 2)
        print(
            f"{num_parties} parties: spread of a middle marginal contribution, largest {spread.max():.3f}, median "
            f"{np.median(spread):.3f}; stderr <= {target} needs {needed} permutations, "
            f"{distinct_coalitions(num_parties, needed):,.0f} distinct coalitions of {2**num_parties - 1:,}",
            flush=True,
        )


if __name__ == "__main__":
    main()
