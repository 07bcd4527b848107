"""Layered Shapley benchmarks (issue 15): the batched JAX retraining utility against pyDVL's TMC Shapley with a
scikit-learn LogisticRegression utility on the same data, in the same run, and the whole Pima Layered run timed;
with `calibration` (issue 27), its standard errors against the spread of its values over keys.

    python benchmarks/bench_layered.py [--seconds 20] [--pydvl-python /work/venv-pydvl/bin/python]
    python benchmarks/bench_layered.py calibration [--keys 40] [--players 100]

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
from bayesval.estimators.layered.estimators import layered_shapley

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))  # the test games, with their closed forms
from game_examples import averaging_shapley, averaging_utility  # noqa: E402

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
    result = MonteCarloShapley(num_permutations=permutations, utility=utility, permutations_per_batch=40, key=1)
    result = result.fit(*split.train).value(*split.value)
    elapsed = time.perf_counter() - start
    return {"evaluations": result.diagnostics["evaluations"], "seconds": elapsed}


def layered_run(split, epsilon: float | None = None) -> dict:
    """The whole Layered run on Pima (n = 100, alpha = beta = 0.05, c = 0.5), compilation included."""
    start = time.perf_counter()
    result = bv.valuate(LayeredShapley(epsilon=epsilon), split.train, validation=split.value)
    elapsed = time.perf_counter() - start
    return {"evaluations": result.diagnostics["evaluations"], "seconds": elapsed}


def calibration(keys: int, num_players: int, alpha: float = 0.05, beta: float = 0.05, c: float = 0.5) -> dict:
    """Layered Shapley on the mean-score game v(S) = c mean_{j in S} a_j (a ~ U[0, 1]; Shapley values in closed form)
    over `keys` keys: per point, the mean reported standard error over the spread (std) of its values over keys, and
    the (alpha, beta) guarantee, P(|phi_hat_i - phi_i| >= alpha) <= beta (Watson et al., Thm 3.3)."""
    scores = np.random.default_rng(0).random(num_players)
    game = averaging_utility(scores, c)
    target = averaging_shapley(scores, c)  # the Shapley value: layer 0, v({i}) - v({}), is valued by default
    start = time.perf_counter()
    runs = [layered_shapley(game, num_players, key, alpha=alpha, beta=beta, c=c) for key in range(keys)]
    elapsed = time.perf_counter() - start
    values, stderr = np.array([run.values for run in runs]), np.array([run.stderr for run in runs])
    ratio = stderr.mean(axis=0) / values.std(axis=0, ddof=1)
    errors = np.abs(values - target)
    within = errors <= alpha
    return {
        "ratio": np.percentile(ratio, [10, 50, 90]),
        "covered": within.mean(),
        "worst_point": within.mean(axis=0).min(),
        "largest_error": errors.max() / alpha,
        "zero_stderr": int((stderr == 0).sum()),
        "seconds": elapsed / keys,
    }


def print_calibration(keys: int, num_players: int) -> None:
    """The calibration, as docs/layered.md records it."""
    result = calibration(keys, num_players)
    p10, median, p90 = result["ratio"]
    print(f"mean-score game, n = {num_players}, alpha = beta = 0.05, c = 0.5, {keys} keys")
    print(f"  stderr / spread over points: median {median:.3f}, 10th percentile {p10:.3f}, 90th {p90:.3f}")
    print(
        f"  |error| <= alpha: {result['covered']:.4f} of values, worst point {result['worst_point']:.3f} "
        f"(guarantee: >= 0.95), largest |error| {result['largest_error']:.3f} alpha"
    )
    print(f"  zero standard errors: {result['zero_stderr']}; {result['seconds']:.2f} s per run")


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("mode", nargs="?", choices=["speed", "calibration"], default="speed")
    parser.add_argument("--seconds", type=float, default=20.0, help="pyDVL's time budget")
    parser.add_argument("--permutations", type=int, default=400, help="bayesval's permutations")
    parser.add_argument("--pydvl-python", default="/work/venv-pydvl/bin/python")
    parser.add_argument("--keys", type=int, default=40, help="calibration: keys (runs)")
    parser.add_argument("--players", type=int, default=100, help="calibration: players of the mean-score game")
    args = parser.parse_args(argv)
    if args.mode == "calibration":
        return print_calibration(args.keys, args.players)
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
