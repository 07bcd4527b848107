"""The cost of one coalition posterior against its member count, at n = 3, 6 and 12 parties: each coalition's
chains carrying every party (the path before member packing) against its members only (`NoiseAwareData.members`),
side by side in one run.

    python benchmarks/bench_scale.py                 # n = 3, 6, 12; 2 chains x 300 sweeps, 2 repeats a coalition
    python benchmarks/bench_scale.py --parties 3 6   # fewer sizes

Each cell times the surprise of up to 16 distinct coalitions of k members (2 repeats each), after a warm-up call
of other coalitions of the same size that compiles the program: milliseconds per coalition (the batch's time over
its padded rows, times the repeats), compilation excluded, and the first call's seconds (compilation included) apart.
"""

from __future__ import annotations

import argparse
import itertools
import time

import jax
import numpy as np

import bayesval as bv
from bayesval.datasets.synthetic import make_syn
from bayesval.inference.data import NoiseAwareData
from bayesval.parties import surprise as party_surprise
from bayesval.parties.surprise import CoalitionSurprise, member_width

CONFIG = bv.SamplerConfig(num_chains=2, num_warmup=100, num_samples=200, num_repeats=2, progress_bar=False)
ROWS = 16


class AllParties(bv.models.LinearRegression):
    """LinearRegression as before member packing: every coalition's chains carry all n parties."""

    packs_members = False


def coalitions(num_parties: int, size: int, count: int, skip: int = 0) -> np.ndarray:
    chosen = itertools.islice(itertools.combinations(range(num_parties), size), skip, skip + count)
    masks = np.zeros((count, num_parties), bool)
    rows = 0
    for rows, members in enumerate(chosen, start=1):
        masks[rows - 1, list(members)] = True
    return masks[:rows]


def cell(model, data, num_parties: int, size: int) -> tuple[float, float]:
    """(first call's seconds with compilation, milliseconds per coalition warm) for coalitions of `size`."""
    surprise = CoalitionSurprise(model, data, CONFIG, k=4, key=jax.random.key(0), max_coalitions=ROWS)
    warm = coalitions(num_parties, size, ROWS)
    start = time.perf_counter()
    surprise(warm)
    first = time.perf_counter() - start
    timed = coalitions(num_parties, size, ROWS, skip=len(warm))
    if not len(timed):  # too few coalitions of this size: time the same ones again, uncached
        surprise, timed = CoalitionSurprise(model, data, CONFIG, 4, jax.random.key(1), ROWS), warm
    start = time.perf_counter()
    surprise(timed)
    seconds = time.perf_counter() - start
    rows = len(timed) * CONFIG.num_repeats
    padded = -(-rows // surprise.batch_rows) * surprise.batch_rows  # a batch costs its padded rows
    return first, 1e3 * seconds * CONFIG.num_repeats / padded


def main() -> None:
    party_surprise.PACK_FROM_CHAIN_SWEEPS = 0  # pack at this short budget too: the cost per coalition is the question
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--parties", type=int, nargs="+", default=[3, 6, 12])
    args = parser.parse_args()
    print(f"{CONFIG.num_chains} chains x {CONFIG.num_warmup + CONFIG.num_samples} sweeps, {CONFIG.num_repeats} repeats")
    print("  n   k   all parties ms   members only ms   ratio   (first call s: all / members)")
    for num_parties in args.parties:
        syn = make_syn(seed=0, sizes=(100,) * num_parties)
        releases = [
            bv.Party(X, y, epsilon=0.5, bounds=syn.bounds, name=f"p{i}", noise_seed=100 + i).release()
            for i, (X, y) in enumerate(syn.parties)
        ]
        data = NoiseAwareData.from_releases(releases)
        for size in sorted({1, num_parties // 2, num_parties}):
            before_first, before = cell(AllParties(), data, num_parties, size)
            if member_width(size, num_parties) == num_parties:  # not packed: the same program
                after_first, after = before_first, before
            else:
                after_first, after = cell(bv.models.LinearRegression(), data, num_parties, size)
            print(
                f"{num_parties:3d} {size:3d} {before:16.1f} {after:17.1f} {before / after:7.2f}"
                f"   ({before_first:.1f} / {after_first:.1f})",
                flush=True,
            )


if __name__ == "__main__":
    main()
