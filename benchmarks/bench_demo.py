"""`bayesval demo` as a newcomer runs it: fresh processes one after another, each a fresh private release (OS
entropy), the whole process timed. The command keeps its compiled programs on disk (`BAYESVAL_CACHE_DIR`), so every
run after a program's first loads it; BAYESVAL_CACHE_DIR=off compiles in every run. The acceptance point of issue
30: at most 60 s wall on 2 cores, no convergence warning, every reward target reached. With `--against REV`, the runs
alternate between this working tree and the package at commit REV (a temporary git worktree,
`bench_compile.checkout`), so that a change's cost is read on one machine at one time: a sandbox's speed varies from
day to day by more than most changes. With `--one-device`, they alternate between this tree as the command runs it
(one CPU device per core, `bayesval.inference.batching.use_cpu_cores`) and this tree held to one CPU device
(XLA_FLAGS).

    python benchmarks/bench_demo.py [--runs 10]
    python benchmarks/bench_demo.py --runs 2 --against a7e7357
    python benchmarks/bench_demo.py --runs 4 --one-device

Prints per run the process's wall time, the reward search's sampler calls (the most any party took, which is the
number of rounds the lockstep search ran), max R-hat and min bulk ESS over the coalition posteriors, whether the run
warned (convergence or an unmet reward target) and whether every reward target was reached; then, per package, how
many runs met each part of the point, and all of it; with two sides also the ratio of the median wall times.
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import bayesval as bv

sys.path.insert(0, str(Path(__file__).parent))
from bench_compile import checkout, package_environment  # noqa: E402

LIMIT_SECONDS = 60.0


ONE_DEVICE = {"XLA_FLAGS": "--xla_force_host_platform_device_count=1"}


def one_run(saved: Path, package_root: Path | None = None, environment: dict | None = None) -> dict:
    """One fresh `bayesval demo` process saving its result to `saved`, timed whole; with `package_root`,
    `bayesval` is imported from there; `environment` is added to the process's."""
    command = [sys.executable, "-c", "from bayesval.cli import main; main()", "demo", "--no-progress"]
    start = time.perf_counter()
    finished = subprocess.run(
        command + ["--save", str(saved)],
        check=True,
        capture_output=True,
        text=True,
        env=package_environment(package_root) | (environment or {}),
    )
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


def summary(runs: list[dict]) -> str:
    """How many runs met each part of the point, and all of it."""
    fast = [run["wall"] <= LIMIT_SECONDS for run in runs]
    quiet = [not run["warned"] for run in runs]
    reached = [run["reached"] for run in runs]
    return (
        f"{sum(fast)} of {len(runs)} runs within {LIMIT_SECONDS:.0f} s, {sum(quiet)} without a warning, "
        f"{sum(reached)} with every target reached; all three: {sum(map(all, zip(fast, quiet, reached)))}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=10, help="runs of each package")
    parser.add_argument("--against", metavar="REV", help="alternate with the package at this commit")
    parser.add_argument("--one-device", action="store_true", help="alternate with this tree on one CPU device")
    args = parser.parse_args()
    if args.against and args.one_device:
        parser.error("--against and --one-device each name the other side: pass one")
    with tempfile.TemporaryDirectory() as scratch, contextlib.ExitStack() as stack:
        packages = {"this tree": (None, None)}
        if args.against:
            packages[args.against] = (stack.enter_context(checkout(args.against)), None)
        if args.one_device:
            packages["one CPU device"] = (None, ONE_DEVICE)
        runs: dict[str, list[dict]] = {label: [] for label in packages}
        for index in range(args.runs):
            for number, (label, (root, environment)) in enumerate(packages.items()):
                run = one_run(Path(scratch) / f"demo_{number}_{index}.npz", root, environment)
                runs[label].append(run)
                print(
                    f"{label}, run {index + 1}: {run['wall']:5.1f} s wall, {run['rounds']} reward rounds, max R-hat "
                    f"{run['r_hat']:.4f}, min ESS {run['ess']:.0f}, warned {run['warned']}, every target reached "
                    f"{run['reached']}",
                    flush=True,
                )
    for label, done in runs.items():
        print(f"{label}: {summary(done)}; median {statistics.median(run['wall'] for run in done):.1f} s")
    if len(runs) == 2:
        medians = [statistics.median(run["wall"] for run in done) for done in runs.values()]
        print(f"this tree / {list(runs)[1]}: {medians[0] / medians[1]:.3f} of the median wall time")


if __name__ == "__main__":
    main()
