"""The time of one DP-gradient valuation with i.i.d. noise against one with X* (noise shared across permutations),
whose standard error adds the shared noise's first-order covariance (`dp_noise_covariance`; docs/gradients.md,
"Standard errors"; docs/benchmarks.md). Usage: python benchmarks/bench_gradient_cost.py K N (k permutations, N
single-point parties of breast_cancer, logistic regression, (1, 5e-5)-DP, learning rate 0.003); prints each rule's
time and median standard error."""

import sys
import time

import numpy as np
from sklearn.datasets import load_breast_cancer

from bayesval.estimators import GradientSemivalues


def main() -> None:
    k, n = int(sys.argv[1]), int(sys.argv[2])
    features, labels = load_breast_cancer(return_X_y=True)
    features = (features - features.mean(0)) / features.std(0)
    for noise in ("iid", "correlated"):
        estimator = GradientSemivalues(
            "logistic", num_permutations=k, learning_rate=0.003, epsilon=1.0, delta=5e-5, noise=noise, key=0
        )
        start = time.perf_counter()
        result = estimator.fit(features[:n], labels[:n]).value(features[n:], labels[n:])
        print(noise, k, n, f"{time.perf_counter() - start:.1f} s", float(np.median(result.stderr)), flush=True)


if __name__ == "__main__":
    main()
