"""How many permutations the valuation's permutation sampling needs for a target standard error, on the noise-free
party game, and how many distinct coalitions they value: plain permutations against Latin blocks.

    python benchmarks/bench_permutations_needed.py                      # 12 parties to 0.02, 50 parties to 0.05
    python benchmarks/bench_permutations_needed.py --parties 50 --target 0.05 --permutations 800

Syn parties of 100 points each, valued at their exact statistics (`Party.exact_statistic`, clipped to the declared
bounds): v_C = KL(NIG posterior of C's summed statistics || NIG prior) in closed form (Sim et al. 2023, Sec. 3, the
non-private limit), so every coalition is known without sampling. Over `--permutations` random permutations this
measures, per party, the spread of a marginal contribution at a middle position: pooled over the positions, and
within each position.
* Plain permutations (`PermutationSampler()`, Castro et al. 2009, the valuation's sampler until 2026-11-27) file the
  first and last positions as exact groups and average the middle marginals, which a party gets in (n - 2) / n of
  the permutations: stderr = sqrt((n - 2) / n) x pooled spread / sqrt(P).
* Latin blocks (`PermutationSampler(latin=True)`, the valuation's sampler now) average a party's marginals by
  position, each position getting P / n of them: stderr^2 = sum over middle positions k of spread_k^2 / (n P).
The permutations a target needs follow, and the distinct coalitions they value (the surprise is cached by
coalition; a Latin row is a uniform permutation, so for both): sum over sizes k of C(n, k) (1 - (1 - 1 / C(n, k))^P).
"""

from __future__ import annotations

import argparse
import math

import jax
import numpy as np

import bayesval as bv
from bayesval.datasets.synthetic import make_syn
from bayesval.inference.conjugate import nig_expected_log_density


def noise_free_game(num_parties: int):
    """v(masks (M, n)) -> (M,): the closed-form surprise of the Syn parties' exact statistics, v(empty) = 0."""
    syn = make_syn(seed=0, sizes=(100,) * num_parties)
    parties = [bv.Party(X, y, epsilon=0.5, bounds=syn.bounds, name=f"p{i}") for i, (X, y) in enumerate(syn.parties)]
    statistics = np.stack([party.exact_statistic() for party in parties])
    return closed_form_game(statistics, np.array([len(party.X) for party in parties], np.float64))


def closed_form_game(statistics: np.ndarray, counts: np.ndarray):
    """v(masks (M, n)) -> (M,): the closed-form NIG surprise of each coalition's summed `statistics` (n, size) taken
    as exact (the noise-naive posterior where they are perturbed, Sim et al. 2023, App. A.3), v(empty) = 0."""
    model = bv.models.LinearRegression()
    prior = model.priors(2).model

    def surprise(statistic, count):
        posterior = model.exact_posterior(statistic, count, 2)
        return nig_expected_log_density(posterior, posterior) - nig_expected_log_density(posterior, prior)

    surprises = jax.jit(jax.vmap(surprise))

    def value(masks):
        masks = np.asarray(masks, np.float64)
        return np.where(masks.any(axis=1), np.asarray(surprises(masks @ statistics, masks @ counts)), 0.0)

    return value


def middle_spreads(num_parties: int, permutations: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Per party, the standard deviation of its marginal contribution at a middle position of a random permutation
    (n,), and within each middle position (n, n - 2)."""
    value = noise_free_game(num_parties)
    prefixes = np.tril(np.ones((num_parties, num_parties)))  # row j: the first j + 1 positions
    rng = np.random.default_rng(seed)
    draws = [[[] for _ in range(num_parties - 2)] for _ in range(num_parties)]  # party, middle position
    for _ in range(permutations):
        order = rng.permutation(num_parties)
        masks = prefixes[:, np.argsort(order)]  # row j: the parties at positions 0..j of `order`
        values = np.concatenate([[0.0], value(masks)])
        for position, (party, contribution) in enumerate(zip(order[1:-1], np.diff(values)[1:-1])):
            draws[party][position].append(contribution)
    pooled = np.array([np.std(np.concatenate(by_position), ddof=1) for by_position in draws])
    within = np.array([[np.std(d, ddof=1) if len(d) > 1 else np.nan for d in by_position] for by_position in draws])
    return pooled, within


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
        pooled, within = middle_spreads(num_parties, args.permutations)
        plain = math.ceil((num_parties - 2) / num_parties * (pooled.max() / target) ** 2)
        by_variance = math.ceil(np.nanmax(np.nansum(within**2, axis=1)) / (num_parties * target**2))
        latin = num_parties * max(2, math.ceil(by_variance / num_parties))  # whole blocks, two at least (a variance)
        print(
            f"{num_parties} parties, stderr <= {target}: spread of a middle marginal contribution, largest "
            f"{pooled.max():.3f} pooled over positions, {np.sqrt(np.nanmean(within**2, axis=1)).max():.3f} within one "
            f"(root mean square)",
            flush=True,
        )
        for name, needed, note in (
            ("plain permutations", plain, ""),
            ("Latin blocks", latin, f" ({by_variance} by the variance, rounded up to whole blocks, two at least)"),
        ):
            print(
                f"  {name:>18}: {needed} permutations, {distinct_coalitions(num_parties, needed):,.0f} distinct "
                f"coalitions of {2**num_parties - 1:,}{note}",
                flush=True,
            )


if __name__ == "__main__":
    main()
