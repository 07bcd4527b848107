"""Diab's valuation at the NUTS `fast` preset (issue 30): today's path against the one it replaces, each in a fresh
process (so each pays its own compilation, with no JAX compilation cache), alternating, in one run.

    python benchmarks/bench_diab.py [--rounds 2] [--key 0]

Diab: Pima Indians diabetes in 3 parties at epsilon = 0.5 (Sim et al. 2023, Sec. 6), `LogisticRegression` with
Sim et al.'s cap on ||theta||^2, prior-density KL, exact Shapley values. The data file is read from $BAYESVAL_DATA
(default ../shared/data).

before: the likelihood's Gaussian by NumPyro's `MultivariateNormal` (its gradient by autodiff through the Cholesky
    factor), theta's prior density found by probing the whole model, the start program compiled with XLA's default
    settings, target acceptance 0.8 and the `fast` preset of 2026-11-24 passed explicitly (4 chains x 300 warm-up
    + 800 draws x 3 repeats, trees of depth <= 3).
now: `LogisticRegression()` as it is (`CovarianceGaussian`, theta's prior density read off, target acceptance 0.65,
    depth <= 3, the start program compiled with XLA's cheapest settings) at `config="fast"` (4 chains x 250
    warm-up + 700 draws x 3 repeats).

Prints, per run, the wall and CPU time of `bv.valuate` (compilation included; the process's start and imports
not), phi +- stderr, max R-hat and min bulk ESS over the coalitions, then the ratio of the mean wall times.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
import warnings

import numpy as np

PATHS = ("before", "now")
TODAYS_FAST = dict(num_chains=4, num_warmup=300, num_samples=800, thinning=1, num_repeats=3)


def model_and_config(path: str):
    """The model and sampler config of a path."""
    from functools import partial

    import numpyro.distributions as dist

    import bayesval as bv
    from bayesval.datasets.pima import load_pima
    from bayesval.models.logistic_regression import noise_aware_logistic_regression, non_private_cap

    cap = non_private_cap(*load_pima().train)
    if path == "now":
        return bv.models.LogisticRegression(max_sq_norm=cap), "fast"

    class Before(bv.models.LogisticRegression):
        """The model as it was: NumPyro's MultivariateNormal, and the generic prior-density probe."""

        def _model_fn(self, data, mask):
            from bayesval.models.logistic_regression import num_features_statistic

            likelihood = partial(noise_aware_logistic_regression, gaussian=dist.MultivariateNormal)
            likelihood(data, mask, statistic=num_features_statistic(data), max_sq_norm=self.max_sq_norm)

        prior_log_density = bv.models.NumPyroModel.prior_log_density

    from bayesval.inference import nuts

    nuts.RUN_ONCE_OPTIONS = None  # the start program compiled with XLA's default settings, as before
    return Before(max_sq_norm=cap, max_tree_depth=3, target_accept_prob=0.8), bv.SamplerConfig(**TODAYS_FAST)


def one_run(path: str, key: int) -> dict:
    """One valuation of `path` in this process: its times, values and diagnostics."""
    import jax

    import bayesval as bv
    from bayesval.datasets.pima import load_pima

    pima = load_pima()
    parties = [
        bv.Party(X, y, epsilon=0.5, bounds=pima.bounds, name=f"party {i + 1}", noise_seed=100 + i)
        for i, (X, y) in enumerate(pima.parties)
    ]
    model, config = model_and_config(path)
    cpu = resource.getrusage(resource.RUSAGE_SELF)
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # fixed-seed releases; convergence is reported below
        result = bv.valuate(model, parties, key=key, config=config, progress_bar=False)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_SELF)
    return {
        "path": path,
        "wall": wall,
        "cpu": after.ru_utime + after.ru_stime - cpu.ru_utime - cpu.ru_stime,
        "values": np.asarray(result.values).tolist(),
        "stderr": np.asarray(result.stderr).tolist(),
        "r_hat": float(max(result.diagnostics["r_hat"])),
        "ess": float(min(result.diagnostics["ess"])),
        "compilation_cache": jax.config.jax_compilation_cache_dir,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=2, help="runs of each path, alternating")
    parser.add_argument("--key", type=int, default=0, help="the sampling key of every run")
    parser.add_argument("--child", choices=PATHS, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(one_run(args.child, args.key)))
        return
    runs = {path: [] for path in PATHS}
    for _ in range(args.rounds):
        for path in PATHS:
            child = [sys.executable, __file__, "--child", path, "--key", str(args.key)]
            output = subprocess.run(child, capture_output=True, text=True, check=True).stdout
            run = json.loads(output.strip().splitlines()[-1])
            runs[path].append(run)
            values = "  ".join(f"{v:.3f} ± {s:.3f}" for v, s in zip(run["values"], run["stderr"]))
            print(
                f"{path:6s} {run['wall']:6.1f} s (CPU {run['cpu']:6.1f} s)   phi {values}   max R-hat "
                f"{run['r_hat']:.4f}   min ESS {run['ess']:.0f}   compilation cache: {run['compilation_cache']}",
                flush=True,
            )
    before, now = (np.mean([run["wall"] for run in runs[path]]) for path in PATHS)
    print(f"mean wall time: before {before:.1f} s, now {now:.1f} s, ratio (before / now) {before / now:.2f}x")


if __name__ == "__main__":
    main()
