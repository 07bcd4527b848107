"""Layered Shapley benchmarks (issue 15): the batched JAX retraining utility against pyDVL's TMC Shapley with a
scikit-learn LogisticRegression utility on the same data, in the same run, and the whole Pima Layered run timed.

    python benchmarks/bench_layered.py [--seconds 20] [--pydvl-python /work/venv-pydvl/bin/python]

pyDVL 0.10 pins numpy < 2, so it lives in its own virtual environment and runs here as a subprocess on the same
arrays (saved to a temporary .npz):

    python -m venv /work/venv-pydvl && /work/venv-pydvl/bin/pip install pydvl scikit-learn

Without that interpreter the benchmark prints the JAX side only. pyDVL runs with joblib n_jobs=1 and one BLAS thread
(several BLAS threads per tiny fit oversubscribe the cores: 26 fits/s instead of 211 on this box); JAX runs as it
comes (XLA uses both cores). Results are recorded in docs/benchmarks.md and docs/layered.md.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from functools import partial
from pathlib import Path

import numpy as np

import bayesval as bv
from bayesval.datasets.watson import watson_split
from bayesval.estimators import LayeredShapley, LogisticRegressionUtility, MonteCarloShapley

PYDVL_TMC = r"""
import json, sys, time, warnings
import numpy as np
from joblib import parallel_config
from sklearn.linear_model import LogisticRegression
from pydvl.valuation import MaxTime, ModelUtility, TMCShapleyValuation
from pydvl.valuation.dataset import Dataset
from pydvl.valuation.scorers import SupervisedScorer

warnings.simplefilter("ignore")
data = np.load(sys.argv[1])
seconds = float(sys.argv[2])

class CountedLogisticRegression(LogisticRegression):
    fits = 0

    def fit(self, X, y):
        CountedLogisticRegression.fits += 1
        return super().fit(X, y)

train, value = Dataset(data["x"], data["y"]), Dataset(data["x_val"], data["y_val"])
scorer = SupervisedScorer("accuracy", value, default=0.0, range=(0.0, 1.0))
utility = ModelUtility(CountedLogisticRegression(), scorer, catch_errors=True, show_warnings=False)
valuation = TMCShapleyValuation(utility, is_done=MaxTime(seconds), seed=0, progress=False, show_warnings=False)
with parallel_config(n_jobs=1):
    start = time.perf_counter()
    valuation.fit(train)
    elapsed = time.perf_counter() - start
print(json.dumps({"evaluations": CountedLogisticRegression.fits, "seconds": elapsed}))
"""


def pydvl_rate(split, seconds: float, python: str) -> dict | None:
    """pyDVL's TMC Shapley evaluations (scikit-learn fits) per second, or None without its interpreter."""
    if not Path(python).exists():
        return None
    with tempfile.TemporaryDirectory() as folder:
        arrays = Path(folder) / "pima.npz"
        np.savez(arrays, x=split.train[0], y=split.train[1], x_val=split.value[0], y_val=split.value[1])
        command = [python, "-c", PYDVL_TMC, str(arrays), str(seconds)]
        threads = {name: "1" for name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")}
        environment = {**os.environ, "PYTHONWARNINGS": "ignore", **threads}  # one BLAS thread: no oversubscription
        output = subprocess.run(command, capture_output=True, text=True, check=True, env=environment).stdout
    return json.loads(output.strip().splitlines()[-1])


def permutation_rate(split, permutations: int) -> dict:
    """The same work as pyDVL's: permutation prefixes of the 100 points, scikit-learn's model (C = 1, intercept,
    accuracy), through the game layer's permutation sampler."""
    utility = partial(LogisticRegressionUtility, penalty="sum", fit_intercept=True, metric="accuracy")
    warm_up = MonteCarloShapley(num_permutations=40, utility=utility, permutations_per_batch=40)
    warm_up.fit(*split.train).value(*split.value)  # compiles for the same batch shapes
    start = time.perf_counter()
    result = MonteCarloShapley(num_permutations=permutations, utility=utility, permutations_per_batch=40, seed=1)
    result = result.fit(*split.train).value(*split.value)
    elapsed = time.perf_counter() - start
    return {"evaluations": result.diagnostics["evaluations"], "seconds": elapsed}


def layered_run(split, epsilon: float | None = None) -> dict:
    """The whole Layered run on Pima (n = 100, alpha = beta = 0.05, c = 0.5), compilation included."""
    start = time.perf_counter()
    result = bv.valuate(LayeredShapley(epsilon=epsilon), split.train, validation=split.value)
    elapsed = time.perf_counter() - start
    return {"evaluations": result.diagnostics["evaluations"], "seconds": elapsed}


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=20.0, help="pyDVL's time budget")
    parser.add_argument("--permutations", type=int, default=400, help="bayesval's permutations")
    parser.add_argument("--pydvl-python", default="/work/venv-pydvl/bin/python")
    args = parser.parse_args(argv)
    split = watson_split("pima", seed=0)
    print(
        f"Pima: {len(split.train[1])} points valued, value set {len(split.value[1])}, "
        f"{split.train[0].shape[1]} features"
    )
    ours = permutation_rate(split, args.permutations)
    rate_ours = ours["evaluations"] / ours["seconds"]
    print(
        f"  bayesval permutation prefixes  {ours['evaluations']:>9,} fits in {ours['seconds']:6.2f} s: "
        f"{rate_ours:>9,.0f} / s"
    )
    theirs = pydvl_rate(split, args.seconds, args.pydvl_python)
    if theirs is None:
        print(f"  pyDVL TMC Shapley              (no interpreter at {args.pydvl_python}: JAX side only)")
    else:
        rate_theirs = theirs["evaluations"] / theirs["seconds"]
        print(
            f"  pyDVL TMC Shapley (sklearn)    {theirs['evaluations']:>9,} fits in {theirs['seconds']:6.2f} s: "
            f"{rate_theirs:>9,.0f} / s"
        )
        print(f"  ratio                          {rate_ours / rate_theirs:,.0f}x")
    for label, epsilon in (("Layered Shapley", None), ("DP Layered Shapley, eps = 1", 1.0)):
        run = layered_run(split, epsilon)
        print(
            f"  whole Pima {label:28s} {run['evaluations']:>7,} coalitions in {run['seconds']:6.2f} s "
            f"({run['evaluations'] / run['seconds']:,.0f} / s, compilation included)"
        )


if __name__ == "__main__":
    sys.exit(main())
