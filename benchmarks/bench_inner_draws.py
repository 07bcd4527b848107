"""What a coalition costs on the importance route, reruns included, and how precise its surprise is, this tree
against the package at an earlier commit, each in a fresh process: for each width the planner packs coalitions into
(`bayesval.parties.plan.member_width`), coalitions whose sizes fall in the width's band are valued as a sampled game
values them (`ImportanceExecutor.until_effective`: the game's repeats, then a rerun of each coalition whose weights
held fewer than 400 effective draws in some repeat or could not be trusted), and the benchmark prints the seconds a
coalition took, how many were drawn again, the weights' median effective draws, and the KL's spread between a
coalition's repeats (pooled over the coalitions: the standard deviation of one repeat's estimate). Every program is
compiled before the timing (a first attempt's and a rerun's call of each width, whichever programs they compile),
and the seconds of each width's are printed.

    python benchmarks/bench_inner_draws.py --parties 24 --against 971b16e

The last line prices a permutation's prefixes: each coalition size from 1 to n - 1 once (a Latin block's mix), at
the band's seconds a coalition. Syn parties of 100 points at epsilon 0.5 (`bench_scale.releases_of`), the fast
preset's budget of a sampled game (2 repeats, 2,048 draws, one rerun).
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from pathlib import Path

import numpy as np


def child(num_parties: int, coalitions: int) -> dict:
    """Value `coalitions` coalitions of each width in this process (`bayesval` as the environment imports it)."""
    import jax

    import bayesval as bv
    from bayesval.inference.data import NoiseAwareData
    from bayesval.parties.importance import ImportanceExecutor
    from bayesval.parties.plan import member_width

    sys.path.insert(0, str(Path(__file__).parent))
    from bench_scale import releases_of

    warnings.simplefilter("ignore")
    data = NoiseAwareData.from_releases(releases_of(num_parties))
    model = bv.models.LinearRegression()
    config = bv.SamplerConfig.preset("fast").for_sampled_game()
    executor = ImportanceExecutor(model.importance_draws, num_parties, config, 4, model.prior_log_density(data))
    rng = np.random.default_rng(0)
    compile_seconds = {}
    result = {"package": str(Path(bv.__file__).parent), "repeats": executor.repeats, "widths": {}}
    for width in sorted({member_width(size, num_parties) for size in range(1, num_parties)}):
        sizes = [size for size in range(1, num_parties) if member_width(size, num_parties) == width]
        codes = []
        while len(codes) < coalitions:
            members = rng.choice(num_parties, rng.choice(sizes), replace=False)
            code = int(np.sum(2 ** members.astype(np.int64)))
            codes += [] if code in codes else [code]
        start = time.perf_counter()  # the band's programs: a first attempt's and a rerun's (one each, or shared)
        executor.coalitions(jax.random.key(1), codes[:1], data, 1)
        executor.coalitions(jax.random.key(1), codes[:1], data, 1, attempt=1)
        compile_seconds[str(width)] = time.perf_counter() - start
        start = time.perf_counter()
        done, reruns = executor.until_effective(jax.random.key(width), codes, data)
        seconds = time.perf_counter() - start
        result["widths"][str(width)] = {
            "sizes": sizes,
            "seconds": seconds / len(codes),
            "reruns": int(np.count_nonzero(reruns)),
            "ess": float(np.median(done.ess)),
            "spread": float(np.sqrt(np.mean(np.var(done.kl, axis=1, ddof=1)))),
            "trusted": int(done.trusted.all(axis=1).sum()),
        }
    result["compile"] = compile_seconds
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--parties", type=int, default=24)
    parser.add_argument("--coalitions", type=int, default=8, help="coalitions a width")
    sys.path.insert(0, str(Path(__file__).parent))
    from bench_compile import package_runs, parsed_or_child

    args = parsed_or_child(parser, child, "coalitions")
    if args is None:
        return
    runs = package_runs(__file__, args.parties, "coalitions", args.coalitions, args.against)
    print(f"\n{args.parties} parties, {args.coalitions} coalitions a width, {runs['this tree']['repeats']} repeats:")
    print("| width (sizes) | package | s a coalition | drawn again | median ESS | KL spread (nats) | trusted |")
    print("|---|---|---|---|---|---|---|")
    for width, band in runs["this tree"]["widths"].items():
        for label, run in runs.items():
            cell = run["widths"][width]
            print(
                f"| {width} ({band['sizes'][0]}-{band['sizes'][-1]}) | {label} | {cell['seconds']:.2f} | "
                f"{cell['reruns']} | {cell['ess']:.0f} | {cell['spread']:.3f} | {cell['trusted']} |"
            )
    for label, run in runs.items():
        permutation = sum(len(cell["sizes"]) * cell["seconds"] for cell in run["widths"].values())
        compiled = ", ".join(f"{name} {seconds:.0f} s" for name, seconds in run["compile"].items())
        print(f"{label}: a permutation's prefixes {permutation:.0f} s; programs compiled: {compiled}")


if __name__ == "__main__":
    main()
