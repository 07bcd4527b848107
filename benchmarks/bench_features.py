"""Cost of a 3-party valuation against the number of features (issue 59): today's code against main's, each run in
a fresh process (compilation included), alternating, in one run.

    python benchmarks/bench_features.py [--features 2 4 8 16] [--models linear logistic] [--budget smoke|fast]
                                        [--rounds 3] [--old /work/main] [--old-up-to D] [--pima]

Each run values three parties of 150 / 250 / 368 rows at epsilon = 0.5, bounds ||x|| <= 4 (|y| <= 4 for linear),
with `bv.valuate` (exact Shapley values, key 0). The rows are synthetic, x ~ N(0, I_d / d) scaled to unit expected
norm, y linear or logistic in x; with --pima the three hospitals are the Pima table's rows 0-149, 150-399 and 400-767,
its 8 features standardised with public constants (rounded population means and standard deviations), as a newcomer
would value them. --budget fast is the CLI's default (the model's `fast` preset); smoke is 4 chains x 30 warm-up
+ 60 draws x 2 repeats, which measures the cost per sweep and the compilation, not convergence.

"old" runs the same script with the package of --old (a checkout of main) first on the path, "new" this checkout's;
with --old-up-to D, "old" runs only where d <= D (main's route at d = 16 takes hours).
Prints per run the wall and CPU seconds of `bv.valuate`, max R-hat and min bulk ESS, then per setting the median
wall seconds of each and their ratio old / new.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

RUN = r"""
import json, resource, sys, time, warnings
import numpy as np
import bayesval as bv
model_name, d, budget, pima = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4] == "1"
sizes = (150, 250, 368)
if pima:
    from bayesval.datasets.pima import read_pima
    X, y, _ = read_pima()
    means = np.array([3.8, 121.0, 69.0, 20.5, 80.0, 32.0, 0.47, 33.0])
    stds = np.array([3.4, 32.0, 19.4, 16.0, 115.0, 7.9, 0.33, 11.8])
    X = (X - means) / stds
    edges = np.cumsum((0,) + sizes)
    tables = [(X[a:b], y[a:b]) for a, b in zip(edges[:-1], edges[1:])]
else:
    rng = np.random.default_rng(d)
    w = rng.normal(size=d)
    tables = []
    for n in sizes:
        X = rng.normal(size=(n, d)) / np.sqrt(d)
        if model_name == "linear":
            y = X @ w + 0.1 * rng.normal(size=n)
        else:
            y = (rng.random(n) < 1 / (1 + np.exp(-2 * X @ w))).astype(float)
        tables.append((X, y))
bounds = bv.Bounds(4.0, 4.0) if model_name == "linear" else bv.Bounds(4.0)
parties = [bv.Party(X, y, epsilon=0.5, bounds=bounds, name=f"h{i + 1}", noise_seed=1000 * d + i)
           for i, (X, y) in enumerate(tables)]
model = bv.models.LinearRegression() if model_name == "linear" else bv.models.LogisticRegression()
config = "fast" if budget == "fast" else bv.SamplerConfig(num_chains=4, num_warmup=30, num_samples=60, num_repeats=2)
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    cpu, start = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
    result = bv.valuate(model, parties, key=0, config=config, progress_bar=False)
    wall, after = time.perf_counter() - start, resource.getrusage(resource.RUSAGE_SELF)
diagnostics = result.diagnostics
print(json.dumps({
    "wall": wall, "cpu": after.ru_utime + after.ru_stime - cpu.ru_utime - cpu.ru_stime,
    "r_hat": float(np.max(diagnostics["r_hat"])), "ess": float(np.min(diagnostics["ess"])),
    "values": np.asarray(result.values).tolist(), "stderr": np.asarray(result.stderr).tolist(),
    "reruns": int(np.sum(diagnostics["reruns"])),
    "warnings": sorted({str(w.message)[:80] for w in caught if "converge" in str(w.message)}),
}))
"""


def run(checkout: Path, model: str, features: int, budget: str, pima: bool) -> dict:
    """One valuation in a fresh process whose `bayesval` is the one of `checkout`."""
    command = [sys.executable, "-c", RUN, model, str(features), budget, "1" if pima else "0"]
    done = subprocess.run(command, cwd=checkout, capture_output=True, text=True, check=False)
    if done.returncode:
        raise RuntimeError(f"{checkout}: {done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--features", type=int, nargs="+", default=[2, 4, 8, 16])
    parser.add_argument("--models", nargs="+", default=["linear", "logistic"], choices=["linear", "logistic"])
    parser.add_argument("--budget", default="smoke", choices=["smoke", "fast"])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--old", default="/work/main", help="a checkout of the code to compare with")
    parser.add_argument("--old-up-to", type=int, default=None, help="run the old checkout only where d <= this")
    parser.add_argument("--pima", action="store_true", help="the three Pima hospitals (8 features, logistic)")
    arguments = parser.parse_args()
    checkouts = {"old": Path(arguments.old), "new": Path(__file__).resolve().parents[1]}
    settings = [("logistic", 8)] if arguments.pima else [(m, d) for m in arguments.models for d in arguments.features]
    table = []
    for model, features in settings:
        walls, cpus = {"old": [], "new": []}, {"old": [], "new": []}
        with_old = arguments.old_up_to is None or features <= arguments.old_up_to
        for round_ in range(arguments.rounds):
            for path in ("old", "new") if round_ % 2 == 0 else ("new", "old"):
                if path == "old" and not with_old:
                    continue
                measured = run(checkouts[path], model, features, arguments.budget, arguments.pima)
                walls[path].append(measured["wall"])
                cpus[path].append(measured["cpu"])
                print(
                    f"{model:8s} d={features:2d} {path}: wall {measured['wall']:7.1f} s, cpu {measured['cpu']:7.1f} s, "
                    f"max R-hat {measured['r_hat']:.3f}, min bulk ESS {measured['ess']:.0f}, "
                    f"reruns {measured['reruns']}, values {[round(v, 3) for v in measured['values']]} "
                    f"± {[round(v, 3) for v in measured.get('stderr', [])]} "
                    f"{measured['warnings']}",
                    flush=True,
                )
        medians = [
            statistics.median(times[path] or [float("nan")]) for times in (walls, cpus) for path in ("old", "new")
        ]
        table.append((model, features, *medians))
    header = f"{'model':8s} {'d':>3s} " + " ".join(f"{name:>9s}" for name in ("old wall", "new wall", "ratio"))
    print(f"\n{header} {'old cpu':>9s} {'new cpu':>9s} {'ratio':>9s}   (medians in seconds, budget {arguments.budget})")
    for model, features, old, new, old_cpu, new_cpu in table:
        print(
            f"{model:8s} {features:3d} {old:9.1f} {new:9.1f} {old / new:9.2f} {old_cpu:9.1f} {new_cpu:9.1f} "
            f"{old_cpu / new_cpu:9.2f}"
        )


if __name__ == "__main__":
    main()
