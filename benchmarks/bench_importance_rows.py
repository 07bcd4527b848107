"""What one coalition's importance-sampling row costs against the party slots it carries, this tree against the
package at an earlier commit, each in a fresh process: for each width the planner packs coalitions into (a third of
the parties, two thirds, all of them; `bayesval.parties.plan.member_width`), the seconds of the first call (its
compilation) and of each row after it (`ImportanceExecutor.run`: the Laplace fit, the weighted and resampled draws
and the k-NN KL of a row) and each row's effective draws, and the largest difference of the two packages' KL estimates
on the same rows and keys.

    python benchmarks/bench_importance_rows.py --parties 24 --against 5d53bce
    python benchmarks/bench_importance_rows.py --parties 12 24 50 --rows 8

Syn parties of 100 points at epsilon 0.5 (`bench_scale.releases_of`), rows of random coalitions whose sizes fall in
each width's band, the fast preset's budget of a sampled game. Rows are timed one call each (a call of the route
holds up to 16 rows of one width; one row a call shows a row's own cost).
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from pathlib import Path

import numpy as np


def child(num_parties: int, rows: int) -> dict:
    """Time the rows of each width in this process (`bayesval` as the environment imports it)."""
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
    config = bv.SamplerConfig.preset("fast")
    executor = ImportanceExecutor(model.importance_draws, num_parties, config, 4, model.prior_log_density(data))
    rng = np.random.default_rng(0)
    widths = sorted({member_width(size, num_parties) for size in range(1, num_parties + 1)})
    result = {"package": str(Path(bv.__file__).parent), "widths": {}}
    for width in widths:
        sizes = [size for size in range(1, num_parties) if member_width(size, num_parties) == width]
        masks = np.zeros((rows + 1, num_parties), bool)
        for mask in masks:
            mask[rng.choice(num_parties, rng.choice(sizes), replace=False)] = True
        keys = jax.random.split(jax.random.key(width), rows + 1)
        seconds, kl, ess = [], [], []
        for row in range(rows + 1):
            start = time.perf_counter()
            done = executor.run(keys[row : row + 1], masks[row : row + 1], data)
            seconds.append(time.perf_counter() - start)
            kl.append(float(done.kl[0]))
            ess.append(float(done.ess[0]))
        result["widths"][str(width)] = {"first": seconds[0], "rows": seconds[1:], "kl": kl, "ess": ess}
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--parties", type=int, nargs="+", default=[24])
    parser.add_argument("--rows", type=int, default=6, help="timed rows a width, after the first")
    sys.path.insert(0, str(Path(__file__).parent))
    from bench_compile import package_runs, parsed_or_child

    args = parsed_or_child(parser, child, "rows")
    if args is None:
        return
    for num_parties in args.parties:
        runs = package_runs(__file__, num_parties, "rows", args.rows, args.against)
        print(f"\n{num_parties} parties, {args.rows} rows a width after the first call:")
        print("| width | package | first call (s) | a row: median (min-max) ms | effective draws: median (min) |")
        print("|---|---|---|---|---|")
        for width in runs["this tree"]["widths"]:
            for label, run in runs.items():
                timed = run["widths"][width]
                row_ms = 1e3 * np.array(timed["rows"])
                ess = np.array(timed["ess"])
                print(
                    f"| {width} | {label} | {timed['first']:.1f} | {np.median(row_ms):.0f} "
                    f"({row_ms.min():.0f}-{row_ms.max():.0f}) | {np.median(ess):.0f} ({ess.min():.0f}) |"
                )
        if args.against:
            here, there = runs["this tree"]["widths"], runs[args.against]["widths"]
            medians = {label: sum(np.median(run["widths"][w]["rows"]) for w in here) for label, run in runs.items()}
            gap = max(np.max(np.abs(np.subtract(here[w]["kl"], there[w]["kl"]))) for w in here)
            print(
                f"a row of each width, summed: {medians[args.against]:.2f} s -> {medians['this tree']:.2f} s "
                f"({medians[args.against] / medians['this tree']:.2f}x); largest KL difference on the same rows: "
                f"{gap:.2e} nats"
            )


if __name__ == "__main__":
    main()
