"""Fresh valuations with their programs compiled ahead in a background thread (today's path) against compiled
when first called (`bayesval.compilation.AHEAD = False`, the path before), each in a fresh process (no JAX
compilation cache), alternating, side by side in one run.

    python benchmarks/bench_compile.py [--rounds 3] [--cases syn diab]

syn: Syn's default setting (3 parties, epsilon = 0.2 / 0.1 / 0.2, fixed noise seeds), `LinearRegression` (Gibbs) at
the fast preset. diab: Pima in 3 parties at epsilon = 0.5, `LogisticRegression` (NUTS) at the fast preset (reads
pima_indians_diabetes.csv from $BAYESVAL_DATA). Prints each run's wall time of `bv.valuate` (compilation
included) and phi, then per case the median wall time of each path and their ratio. The values must agree to the
last bit: the programs are the same.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
import warnings


def child(case: str, ahead: bool) -> None:
    import bayesval as bv
    from bayesval import compilation

    compilation.AHEAD = ahead
    sys.path.insert(0, __file__.rsplit("/", 1)[0])
    import bench_valuation

    if case == "syn":
        model, parties = bv.models.LinearRegression(), bench_valuation.syn_parties()
    else:
        model, parties = bench_valuation.diab_parties()
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        result = bv.valuate(model, parties, key=0, config="fast", progress_bar=False)
    print(json.dumps({"seconds": time.perf_counter() - start, "phi": result.values.tolist()}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--cases", nargs="+", choices=["syn", "diab"], default=["syn", "diab"])
    parser.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        return child(args.child[0], args.child[1] == "ahead")
    for case in args.cases:
        seconds: dict[str, list[float]] = {"ahead": [], "when called": []}
        values = set()
        for round_ in range(args.rounds):
            for path in seconds:
                command = [sys.executable, __file__, "--child", case, "ahead" if path == "ahead" else "called"]
                output = json.loads(subprocess.run(command, check=True, capture_output=True, text=True).stdout)
                seconds[path].append(output["seconds"])
                values.add(tuple(output["phi"]))
                print(
                    f"{case} round {round_ + 1} {path:11s} {output['seconds']:6.1f} s   phi {output['phi']}", flush=True
                )
        ahead, called = (statistics.median(times) for times in seconds.values())
        print(
            f"{case}: median {ahead:.1f} s compiled ahead, {called:.1f} s compiled when called, ratio "
            f"{called / ahead:.2f}x; values identical in every run: {len(values) == 1}",
            flush=True,
        )


if __name__ == "__main__":
    main()
