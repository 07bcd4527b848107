"""`bayesval demo` as a newcomer runs it: fresh processes one after another, each a fresh private release (OS
entropy), no compilation cache, the whole process timed. The acceptance point of issue 30: at most 60 s wall on 2
cores, no convergence warning, every reward target reached.

    python benchmarks/bench_demo.py [--runs 10]

Prints per run the process's wall time, the reward search's sampler calls (the most any party took, which is the
number of rounds the lockstep search ran), max R-hat and min bulk ESS over the coalition posteriors, whether the run
warned (convergence or an unmet reward target) and whether every reward target was reached; then how many runs
met each part of the point, and all of it.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import bayesval as bv

LIMIT_SECONDS = 60.0


def one_run(scratch: Path, index: int) -> dict:
    saved = scratch / f"demo_{index}.npz"
    command = [sys.executable, "-c", "from bayesval.cli import main; main()", "demo", "--no-progress"]
    start = time.perf_counter()
    finished = subprocess.run(command + ["--save", str(saved)], check=True, capture_output=True, text=True)
    wall = time.perf_counter() - start
    result = bv.ValuationResult.load(saved)
    return {
        "wall": wall,
        "rounds": int(result.rewards.calls.max()),
        "r_hat": max(result.diagnostics["r_hat"]),
        "ess": min(result.diagnostics["ess"]),
        "warned": "Warning" in finished.stderr,
        "reached": bool(result.rewards.reached.all()),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=10)
    args = parser.parse_args()
    runs = []
    with tempfile.TemporaryDirectory() as scratch:
        for index in range(args.runs):
            run = one_run(Path(scratch), index)
            runs.append(run)
            print(
                f"run {index + 1}: {run['wall']:5.1f} s wall, {run['rounds']} reward rounds, max R-hat "
                f"{run['r_hat']:.4f}, min ESS {run['ess']:.0f}, warned {run['warned']}, every target reached "
                f"{run['reached']}",
                flush=True,
            )
    fast = [run["wall"] <= LIMIT_SECONDS for run in runs]
    quiet = [not run["warned"] for run in runs]
    reached = [run["reached"] for run in runs]
    print(
        f"{sum(fast)} of {len(runs)} runs within {LIMIT_SECONDS:.0f} s, {sum(quiet)} without a warning, "
        f"{sum(reached)} with every target reached; all three: {sum(map(all, zip(fast, quiet, reached)))}"
    )


if __name__ == "__main__":
    main()
