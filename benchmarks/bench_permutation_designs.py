"""How much a permutation design's Shapley estimate varies, per permutation, on party games whose every coalition is
known: plain permutations, Latin blocks (the package's `PermutationSampler(latin=True)`), the cyclic Latin square,
and independent draws at every position (the ideal that stratifying by position aims at).

    python benchmarks/bench_permutation_designs.py                 # the 6-party noisy game and 12 noise-free parties
    python benchmarks/bench_permutation_designs.py --games free12

Games: `noisy6`, six Syn parties of 100 points at epsilon 0.5 (`bench_scale.releases_of(6)`), every coalition
valued by `bv.valuate` at the fast preset, key 0 (about 160 s on 2 cores), then taken as exact; `free12`, twelve
parties at their exact statistics, every v_C in closed form (`bench_permutations_needed.noise_free_game`). For the
worst party it prints the variance of the Shapley estimate times the permutations spent:
* plain: the first and last positions exact, the middle marginals pooled, (n - 2) / n x their variance;
* independent positions: every middle position's marginals averaged apart, sum_k var_k / n (no covariance);
* cyclic square: blocks whose row t puts player sigma((k + t) mod n) at position k (nested coalitions);
* Latin blocks: the package's draws, rows sigma((pi(k) + t) mod n); a block's estimate, its variance over blocks
  times n. Where this is below "independent positions" the package's layer variances, which assume independence,
  are conservative.
"""

from __future__ import annotations

import argparse
import sys
import warnings
from pathlib import Path

import jax
import numpy as np

import bayesval as bv
from bayesval.games.samplers import PermutationSampler


def noisy_game(num_parties: int):
    """v(masks) from one exact valuation of every coalition at the fast preset (the coalition values as exact)."""
    from bench_scale import releases_of

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        result = bv.valuate(
            bv.models.LinearRegression(),
            releases_of(num_parties),
            key=0,
            config="fast",
            exact_up_to=num_parties,
            progress_bar=False,
        )
    table = np.zeros(2**num_parties)
    codes = np.asarray(result.coalition_masks, np.int64) @ (1 << np.arange(num_parties))
    table[codes] = result.coalition_values
    return lambda masks: table[np.asarray(masks, np.int64) @ (1 << np.arange(num_parties))]


def marginals(orders: np.ndarray, value) -> tuple[np.ndarray, np.ndarray]:
    """Each permutation's (row of `orders`) marginal contribution and position of every player, (P, n) each."""
    count, n = orders.shape
    ranks = np.argsort(orders, axis=1)
    prefixes = ranks[:, None, :] < np.arange(n + 1)[None, :, None]
    steps = np.diff(value(prefixes.reshape(-1, n)).reshape(count, n + 1), axis=1)
    return np.take_along_axis(steps, ranks, axis=1), ranks


def block_variance(orders: np.ndarray, value, n: int) -> np.ndarray:
    """Per player, the variance over blocks of n rows of the block's Shapley estimate, times n (per permutation)."""
    gains, _ = marginals(orders, value)
    estimates = gains.reshape(-1, n, n).mean(axis=1)
    return estimates.var(axis=0, ddof=1) * n


def designs(value, n: int, permutations: int, seed: int = 1) -> dict[str, float]:
    rng = np.random.default_rng(seed)
    gains, ranks = marginals(np.array([rng.permutation(n) for _ in range(permutations)]), value)
    middle = (ranks > 0) & (ranks < n - 1)
    plain = np.array([gains[middle[:, i], i].var(ddof=1) for i in range(n)]) * (n - 2) / n
    within = np.array([[gains[ranks[:, i] == k, i].var(ddof=1) for k in range(1, n - 1)] for i in range(n)])
    blocks = permutations // n
    sigma = np.array([rng.permutation(n) for _ in range(blocks)])
    cyclic = sigma[:, None, :][:, :, (np.arange(n)[None, :] + np.arange(n)[:, None]) % n].reshape(-1, n)
    plan = PermutationSampler(latin=True).plan(n, blocks * n, bv.games.SHAPLEY)
    _, positions = plan.draw(jax.random.key(seed), None)  # each player's position in each row
    latin = np.argsort(np.asarray(positions), axis=1)
    return {
        "plain": plain.max(),
        "independent positions": (within.sum(axis=1) / n).max(),
        "cyclic square": block_variance(cyclic, value, n).max(),
        "Latin blocks": block_variance(latin, value, n).max(),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--games", nargs="+", choices=["noisy6", "free12"], default=["noisy6", "free12"])
    parser.add_argument("--permutations", type=int, default=4800, help="a multiple of 6 and 12")
    args = parser.parse_args()
    sys.path.insert(0, str(Path(__file__).parent))
    from bench_permutations_needed import noise_free_game

    for game in args.games:
        n = 6 if game == "noisy6" else 12
        value = noisy_game(n) if game == "noisy6" else noise_free_game(n)
        variances = designs(value, n, args.permutations)
        plain = variances["plain"]
        print(f"{game}: variance of the worst party's Shapley estimate x permutations ({args.permutations} drawn)")
        for name, variance in variances.items():
            print(f"  {name:>22}: {variance:.4f}  ({plain / variance:4.1f}x below plain)", flush=True)


if __name__ == "__main__":
    main()
