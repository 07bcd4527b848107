"""KNN family benchmarks (issue 4): speed against pyDVL, TKNN scaling, and the paper's AUROC table.

    python benchmarks/bench_knn.py speed   # exact KNN-Shapley vs pyDVL; TKNN on up to 100,000 x 1,000
    python benchmarks/bench_knn.py auroc   # Wang et al. 2023 Tables 2/3 protocol on the five OpenML sets
    python benchmarks/bench_knn.py auroc --runs 1 --datasets 2dplanes   # quick look

pyDVL needs numpy < 2, so `speed` builds its own virtual environment (default
/tmp/bayesval_pydvl_venv, `pip install pydvl "numpy<2"`) and runs pyDVL there in a subprocess on
the same data files. Results are recorded in docs/benchmarks.md and docs/knn.md.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
import venv
from pathlib import Path

import jax
import numpy as np

import bayesval  # noqa: F401  (64-bit mode)
from bayesval.datasets.openml import OPENML_DATASETS, load_openml
from bayesval.estimators import DPKNNShapley, KNNShapley, TKNNShapley
from bayesval.experiments import detection_aurocs

PYDVL_SCRIPT = r"""
import json, sys, time
import numpy as np
from joblib import parallel_config
from sklearn.neighbors import KNeighborsClassifier
from pydvl.valuation.dataset import Dataset
from pydvl.valuation.methods.knn_shapley import KNNShapleyValuation

data = np.load(sys.argv[1])
train = Dataset(data["x_train"], data["y_train"])
test = Dataset(data["x_val"], data["y_val"])
with parallel_config(n_jobs=int(sys.argv[3])):
    start = time.perf_counter()
    valuation = KNNShapleyValuation(KNeighborsClassifier(n_neighbors=int(sys.argv[2])), test, progress=False)
    valuation.fit(train)
    seconds = time.perf_counter() - start
result = valuation.result
order = np.argsort(np.asarray(result.indices))
np.save(sys.argv[4], np.asarray(result.values)[order])
print(json.dumps({"seconds": seconds}))
"""


def synthetic(n: int, d: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """x ~ N(0, I_d), y = 1[sum x > 0] (the runtime experiment of Wang et al. 2023, Sec. 6.1)."""
    x = np.random.default_rng(seed).normal(size=(n, d))
    return x, (x.sum(axis=1) > 0).astype(np.int64)


def pydvl_python(venv_dir: Path) -> Path:
    """Python of a virtual environment with pyDVL and numpy < 2, created on first use."""
    python = venv_dir / "bin" / "python"
    if not python.exists():
        print(f"creating {venv_dir} with pydvl and numpy<2 ...", flush=True)
        venv.create(venv_dir, with_pip=True)
        subprocess.run([str(python), "-m", "pip", "install", "-q", "pydvl", "numpy<2"], check=True)
    return python


def timed(fn, repeats: int) -> tuple[float, object, float]:
    """Best wall time of `repeats` calls after a first call (which compiles), the result, the first time."""
    start = time.perf_counter()
    out = fn()
    first = time.perf_counter() - start
    best = first
    for _ in range(repeats):
        start = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - start)
    return best, out, first


def speed(args: argparse.Namespace) -> None:
    python = pydvl_python(Path(args.venv))
    pydvl_version = subprocess.run(
        [str(python), "-c", "import pydvl, numpy; print(pydvl.__version__, numpy.__version__)"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    print(
        f"# KNN family speed, {platform.platform()}, {os.cpu_count()} CPU cores, jax {jax.__version__}, "
        f"pyDVL {pydvl_version[0]} (numpy {pydvl_version[1]}), pyDVL n_jobs={args.pydvl_jobs}\n"
    )
    print(
        "| N_train / N_val (d=10) | bayesval KNN-Shapley (s, warm) | first call incl. compile (s) "
        "| pyDVL KNNShapleyValuation (s) | speed-up (warm) | speed-up (cold) | max abs value diff |"
    )
    print("|---|---|---|---|---|---|---|")
    for n_train, n_val in ((2_000, 200), (10_000, 1_000)):
        x, y = synthetic(n_train + n_val, 10, seed=n_train)
        x_train, y_train, x_val, y_val = x[:n_train], y[:n_train], x[n_train:], y[n_train:]
        estimator = KNNShapley(5, variant="original", distance="euclidean")
        run = functools.partial(lambda e, *data: e.fit(*data[:2]).value(*data[2:]), estimator)
        ours, result, cold = timed(functools.partial(run, x_train, y_train, x_val, y_val), args.repeats)
        with tempfile.TemporaryDirectory() as tmp:
            data, values = Path(tmp) / "data.npz", Path(tmp) / "values.npy"
            np.savez(data, x_train=x_train, y_train=y_train, x_val=x_val, y_val=y_val)
            script = Path(tmp) / "run_pydvl.py"
            script.write_text(PYDVL_SCRIPT)
            out = subprocess.run(
                [str(python), str(script), str(data), "5", str(args.pydvl_jobs), str(values)],
                capture_output=True,
                text=True,
                check=True,
            )
            theirs = json.loads(out.stdout.strip().splitlines()[-1])["seconds"]
            # pyDVL averages over validation points; bayesval sums (Wang et al. 2023, Thm 1)
            diff = float(np.max(np.abs(np.load(values) * n_val - result.values)))
        print(
            f"| {n_train:,} / {n_val:,} | {ours:.3f} | {cold:.2f} | {theirs:.2f} | {theirs / ours:.0f}x "
            f"| {theirs / cold:.0f}x | {diff:.1e} |",
            flush=True,
        )

    print(
        "\n| N_train (N_val=1,000, d=10) | TKNN-Shapley (s) | TKNN per 10^5 x 10^3 pairs (s) "
        "| DP-TKNN eps=1 (s) | soft KNN-Shapley (s) |"
    )
    print("|---|---|---|---|---|")
    sizes = np.array([25_000, 50_000, 100_000, 200_000, 400_000])
    tknn_times = []
    for n_train in sizes:
        x, y = synthetic(n_train + 1_000, 10, seed=int(n_train))
        x_train, y_train, x_val, y_val = x[:n_train], y[:n_train], x[n_train:], y[n_train:]
        tknn = TKNNShapley(-0.5).fit(x_train, y_train)
        seconds, _, _ = timed(functools.partial(tknn.value, x_val, y_val), args.repeats)
        tknn_times.append(seconds)
        dp = TKNNShapley(-0.5, epsilon=1.0, delta=1e-5, classes=[0, 1]).fit(x_train, y_train)
        dp_seconds, _, _ = timed(functools.partial(dp.value, x_val, y_val), 1)
        knn = KNNShapley(5).fit(x_train, y_train)
        knn_seconds, _, _ = timed(functools.partial(knn.value, x_val, y_val), 1)
        print(
            f"| {n_train:,} | {seconds:.3f} | {seconds * 1e5 / n_train:.3f} | {dp_seconds:.3f} | {knn_seconds:.3f} |",
            flush=True,
        )
    slope, intercept = np.polyfit(sizes, tknn_times, 1)
    fitted = slope * sizes + intercept
    r2 = 1 - np.sum((tknn_times - fitted) ** 2) / np.sum((tknn_times - np.mean(tknn_times)) ** 2)
    loglog = np.polyfit(np.log(sizes), np.log(tknn_times), 1)[0]
    print(
        f"\nTKNN time = {intercept:.3f} s + {slope * 1e5:.3f} s per 10^5 training points (R^2 = {r2:.4f}); "
        f"log-log slope {loglog:.2f} (1 = linear)"
    )


def auroc(args: argparse.Namespace) -> None:
    epsilons = (0.1, 0.5, 1.0)
    methods = {"TKNN": TKNNShapley(-0.5), "KNN": KNNShapley(5)}
    for eps in epsilons:
        methods[f"DP-TKNN {eps:g}"] = TKNNShapley(
            -0.5, epsilon=eps, delta=1e-4, sampling_probability=0.01, classes=[0, 1]
        )
        methods[f"DP-KNN {eps:g}"] = DPKNNShapley(5, epsilon=eps, delta=1e-4, classes=[0, 1])
        methods[f"DP-KNN-sub {eps:g}"] = DPKNNShapley(
            5, epsilon=eps, delta=1e-4, sampling_probability=0.01, classes=[0, 1]
        )
    print(
        f"# Detection AUROC, mean (std) of {args.runs} runs: 2,000 train / 200 val, 10% corrupted, "
        "K=5, tau=-0.5, delta=1e-4, q=0.01\n"
    )
    for task in args.tasks:
        print(f"\n## {task}\n")
        print("| dataset | TKNN | KNN | eps | DP-TKNN | DP-KNN (no subsampling) | DP-KNN (q=0.01) |")
        print("|---|---|---|---|---|---|---|")
        for name in args.datasets:
            x, y = load_openml(name, args.data_dir)
            start = time.perf_counter()
            key = jax.random.fold_in(jax.random.PRNGKey(args.seed), OPENML_DATASETS.index(name))
            scores = {
                label: detection_aurocs(est, x, y, key=key, task=task, n_runs=args.runs)
                for label, est in methods.items()
            }
            cell = {label: f"{s.mean():.3f} ({s.std():.3f})" for label, s in scores.items()}
            for i, eps in enumerate(epsilons):
                lead = f"| {name} | {cell['TKNN']} | {cell['KNN']} |" if i == 0 else "| | | |"
                print(
                    f"{lead} {eps:g} | {cell[f'DP-TKNN {eps:g}']} | {cell[f'DP-KNN {eps:g}']} "
                    f"| {cell[f'DP-KNN-sub {eps:g}']} |",
                    flush=True,
                )
            print(f"<!-- {name} {task}: {time.perf_counter() - start:.1f} s -->", file=sys.stderr)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    s = sub.add_parser("speed", help="KNN-Shapley vs pyDVL; TKNN scaling")
    s.add_argument("--venv", default="/tmp/bayesval_pydvl_venv")
    s.add_argument("--repeats", type=int, default=3)
    s.add_argument("--pydvl-jobs", type=int, default=os.cpu_count() or 1)
    a = sub.add_parser("auroc", help="mislabelled / noisy data detection on the OpenML sets")
    a.add_argument("--datasets", nargs="+", default=list(OPENML_DATASETS), choices=OPENML_DATASETS)
    a.add_argument("--tasks", nargs="+", default=["mislabel", "noisy"], choices=["mislabel", "noisy"])
    a.add_argument("--runs", type=int, default=5)
    a.add_argument("--seed", type=int, default=0)
    a.add_argument("--data-dir", default=None, help="folder holding openml/*.npz (default: $BAYESVAL_DATA)")
    args = parser.parse_args()
    speed(args) if args.command == "speed" else auroc(args)


if __name__ == "__main__":
    main()
