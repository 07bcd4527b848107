"""Calibration of GradientSemivalues' standard errors under each release rule (docs/gradients.md, "Standard errors").

breast_cancer, 10 parties, logistic regression, k permutations, (1, 5e-5)-DP, learning rate 0.003: `runs` runs per
rule, each with its own sampling key and noise seed. Prints, per rule, the actual standard deviation of each party's
value over the runs divided by its mean reported standard error (median, min and max over parties), for the
reported error and for the Monte Carlo error over permutations alone. Calibrated: near 1.

    python benchmarks/bench_gradient_stderr.py [--runs 20] [--k 200]
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from sklearn.datasets import load_breast_cancer

from bayesval.experiments import standardise
from bayesval.experiments.gradients import stderr_calibration

RULES = [("iid", 0.0), ("correlated", 0.0), ("correlated", 0.5), ("correlated", 0.9), ("fl", 0.0)]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--k", type=int, default=200)
    args = parser.parse_args()
    features, labels = load_breast_cancer(return_X_y=True)
    order = np.random.default_rng(0).permutation(len(labels))
    x_train, x_val = standardise(features[order[:10]], features[order[400:]])
    y_train, y_val = labels[order[:10]], labels[order[400:]]
    for rule, (noise, q) in enumerate(RULES):
        start = time.perf_counter()
        spread, reported, monte_carlo = stderr_calibration(
            (x_train, y_train),
            (x_val, y_val),
            noise=noise,
            burn_in=q,
            runs=args.runs,
            num_permutations=args.k,
            seed=1_000_000 + 1000 * rule,
            learning_rate=0.003,
            epsilon=1.0,
            delta=5e-5,
        )
        ratio, old = spread / reported, spread / monte_carlo
        print(
            f"{noise:10s} q={q}: sd / reported stderr median {np.median(ratio):.2f} "
            f"(min {ratio.min():.2f}, max {ratio.max():.2f}); sd / Monte Carlo stderr median {np.median(old):.2f}; "
            f"mean sd {spread.mean():.2e}, mean reported {np.mean(reported):.2e} ({time.perf_counter() - start:.0f} s)",
            flush=True,
        )


if __name__ == "__main__":
    main()
