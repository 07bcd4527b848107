"""Permutation sampling of many parties: one batch of permutations valued at the fast preset, this working tree
against the package at an earlier commit, each in a fresh process (compilation included), one after the other.

    python benchmarks/bench_permutation_calls.py --against 55dc989            # 12 parties, 8 permutations
    python benchmarks/bench_permutation_calls.py --against 55dc989 --parties 12 --permutations 32

A batch of permutations holds only some coalitions of each width, so the last sampler call of a width is mostly
padding when calls are as large as the width's whole set of coalitions allows. Prints each path's `bv.valuate` time,
the coalitions valued, the rows its sampler calls held against the rows they were padded to, and whether the two
paths' values agree (their rows are the same chains, so up to rounding: XLA may vectorise a program of another
shape differently).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import warnings
from pathlib import Path

import numpy as np


def child(num_parties: int, permutations: int) -> None:
    """One valuation in this process; prints a JSON line."""
    import bayesval as bv
    from bayesval.games.stopping import MaxEvaluations
    from bayesval.parties import valuation as party_valuation
    from bayesval.parties.surprise import CoalitionSurprise

    sys.path.insert(0, str(Path(__file__).parent))
    from bench_scale import releases_of

    widths, calls = [], []  # the rows of each width sampled, and the rows each sampler call was padded to
    sample_batches, sample_batch = CoalitionSurprise._sample_batches, CoalitionSurprise._sample_batch

    def recording_width(self, rows):
        widths.append(len(rows.keys))
        return sample_batches(self, rows)

    def recording_call(self, batch, keep_draws):
        calls.append(len(batch.keys))
        return sample_batch(self, batch, keep_draws)

    CoalitionSurprise._sample_batches, CoalitionSurprise._sample_batch = recording_width, recording_call
    party_valuation.PERMUTATION_BATCH = permutations
    releases = releases_of(num_parties)
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        result = bv.valuate(
            bv.models.LinearRegression(),
            releases,
            key=0,
            config="fast",
            stop=MaxEvaluations(permutations * (num_parties + 1)),
            progress_bar=False,
        )
    seconds = time.perf_counter() - start
    record = {
        "seconds": seconds,
        "coalitions": len(result.coalition_values),
        "rows": sum(widths),
        "padded": sum(calls),
        "calls": calls,
        "values": result.values.tolist(),
        "stderr": result.stderr.tolist(),
        "max_r_hat": float(np.max(result.diagnostics["r_hat"])),
    }
    print(json.dumps(record))


def run(num_parties: int, permutations: int, package_root: Path | None) -> dict:
    from bench_compile import run_json

    command = [sys.executable, __file__, "--child", "--parties", str(num_parties), "--permutations", str(permutations)]
    return run_json(command, package_root)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--parties", type=int, default=12)
    parser.add_argument("--permutations", type=int, default=8, help="permutations in the one batch valued")
    parser.add_argument("--against", metavar="REV", help="the commit whose package to compare with")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        return child(args.parties, args.permutations)
    results = {}
    if args.against:
        from bench_compile import checkout

        with checkout(args.against) as tree:
            results[args.against] = run(args.parties, args.permutations, tree)
    results["today"] = run(args.parties, args.permutations, None)
    print(f"{args.parties} parties, one batch of {args.permutations} permutations, fast preset, key 0:")
    for label, result in results.items():
        print(
            f"  {label:>10}: bv.valuate {result['seconds']:7.1f} s   {result['coalitions']} coalitions   "
            f"rows {result['rows']} in calls padded to {result['padded']} {result['calls']}   "
            f"max stderr {max(result['stderr']):.4f}   max R-hat {result['max_r_hat']:.4f}"
        )
    if len(results) == 2:
        before, after = results.values()
        print(f"  ratio today / {args.against}: {after['seconds'] / before['seconds']:.2f}")
        print(
            f"  values equal: {before['values'] == after['values']}; largest difference "
            f"{np.max(np.abs(np.subtract(before['values'], after['values']))):.3g}"
        )


if __name__ == "__main__":
    main()
