"""Reruns of unconverged coalition posteriors (`SamplerConfig.reruns`, issue 30): one valuation with reruns off and
one with today's default, each in a fresh process (its own compilation, no JAX compilation cache), side by side.

    python benchmarks/bench_reruns.py [--cases short six six-short] [--key 0]
    python benchmarks/bench_reruns.py --cases six-short --against 334839d
                            # reruns on, this working tree against the package at commit 334839d (in a temporary
                            # git worktree): one valuation each, in a fresh process

Cases:
  short  Syn's three parties at epsilon = (0.2, 0.1, 0.2), fixed noise seeds, 4 chains x (200 + 800) sweeps x 3
         repeats: a budget one coalition posterior of seven fails at key 0 (tests/test_reruns.py).
  six    six Syn parties of 100 points at epsilon = 0.5 (fixed noise seeds) at the Gibbs `fast` preset, every
         coalition (63) valued.
  six-short  the same game with half the fast preset's kept sweeps (4 chains x (800 + 800) x 3 repeats).

Prints per run the wall time of `bv.valuate` (compilation included), the coalitions that fail the flags (R-hat >
1.01 or a repeat's bulk ESS < 400), the coalitions rerun, whether the valuation converged, and phi; then the time
ratio and the largest change in phi in units of its standard error.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import warnings
from pathlib import Path

import numpy as np

CASES = ("short", "six", "six-short")


def one_run(case: str, key: int, reruns: int) -> dict:
    import bayesval as bv
    from bayesval.datasets.synthetic import make_syn

    if case == "short":
        syn = make_syn(seed=0)
        parties = [
            bv.Party(X, y, epsilon=eps, rdp_order=2.0, bounds=syn.bounds, name=f"party {i + 1}", noise_seed=100 + i)
            for i, ((X, y), eps) in enumerate(zip(syn.parties, (0.2, 0.1, 0.2)))
        ]
        config = bv.SamplerConfig(num_chains=4, num_warmup=200, num_samples=800, num_repeats=3)
        options = {}
    else:
        syn = make_syn(seed=0, sizes=(100,) * 6)
        parties = [
            bv.Party(X, y, epsilon=0.5, bounds=syn.bounds, name=f"p{i}", noise_seed=100 + i)
            for i, (X, y) in enumerate(syn.parties)
        ]
        config, options = bv.SamplerConfig.preset("fast"), {"exact_up_to": 6}
        if case == "six-short":
            config = config.with_(num_samples=800)
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # convergence is reported below
        result = bv.valuate(
            bv.models.LinearRegression(),
            parties,
            key=key,
            config=config.with_(reruns=reruns, progress_bar=False),
            progress_bar=False,
            **options,
        )
    wall = time.perf_counter() - start
    diagnostics = result.diagnostics
    r_hat, ess = np.array(diagnostics["r_hat"]), np.array(diagnostics["ess"])
    return {
        "wall": wall,
        "failing": int(((r_hat > 1.01) | (ess < 400)).sum()),
        "coalitions": len(r_hat),
        "rerun": int(np.count_nonzero(diagnostics["reruns"])),
        "converged": bool(diagnostics["converged"]),
        "max_r_hat": float(r_hat.max()),
        "min_ess": float(ess.min()),
        "values": np.asarray(result.values).tolist(),
        "stderr": np.asarray(result.stderr).tolist(),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cases", nargs="+", choices=CASES, default=list(CASES))
    parser.add_argument("--key", type=int, default=0)
    parser.add_argument("--child", nargs=2, help=argparse.SUPPRESS)  # case, reruns
    parser.add_argument("--against", metavar="REV", help="reruns on: this working tree against the package at REV")
    args = parser.parse_args()
    if args.child:
        print(json.dumps(one_run(args.child[0], args.key, int(args.child[1]))))
        return
    if args.against is None:
        return compare(args.cases, args.key, {"reruns=0": (0, None), "reruns=1": (1, None)})
    sys.path.insert(0, __file__.rsplit("/", 1)[0])
    from bench_compile import checkout

    with checkout(args.against) as tree:
        compare(args.cases, args.key, {args.against: (1, tree), "today": (1, None)})


def compare(cases: list[str], key: int, paths: dict[str, tuple[int, Path | None]]) -> None:
    """Each case valued once per path (label: (reruns, package root or None for this tree)), in order, each in a
    fresh process; then the second's time over the first's and the largest change in phi."""
    from bench_compile import run_json

    for case in cases:
        runs = {}
        for label, (reruns, root) in paths.items():
            child = [sys.executable, __file__, "--child", case, str(reruns), "--key", str(key)]
            run = runs[label] = run_json(child, root)
            print(
                f"{case:5s} {label:9s} {run['wall']:6.1f} s   failing {run['failing']} of {run['coalitions']}   "
                f"rerun {run['rerun']}   converged {run['converged']}   max R-hat {run['max_r_hat']:.4f}   "
                f"min ESS {run['min_ess']:.0f}   phi {np.round(run['values'], 3).tolist()} ± "
                f"{np.round(run['stderr'], 3).tolist()}",
                flush=True,
            )
        (first, before), (second, after) = runs.items()
        change = np.abs(np.subtract(after["values"], before["values"])) / np.hypot(after["stderr"], before["stderr"])
        print(
            f"{case:5s} time ratio ({second} / {first}) {after['wall'] / before['wall']:.2f}x; largest change in phi "
            f"{change.max():.2f} combined standard errors",
            flush=True,
        )


if __name__ == "__main__":
    main()
