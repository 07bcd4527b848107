"""k-NN KL at m = 30,000, d = 8: bayesval vs a plain scipy cKDTree implementation vs the
`universal-divergence` package, same data, same run. Prints times and ratios.

    pip install -e ".[bench]" && python benchmarks/bench_kl.py
"""

from __future__ import annotations

import time

import numpy as np
from scipy.spatial import cKDTree

import bayesval  # noqa: F401
from bayesval.divergence import gaussian_kl, knn_kl


def plain_scipy_kl(posterior: np.ndarray, prior: np.ndarray, k: int = 4) -> float:
    """What a user writes by hand: two cKDTree queries (single-threaded), no whitening, no tie rule."""
    n, d = posterior.shape
    rho = cKDTree(posterior).query(posterior, k=k + 1)[0][:, k]
    nu = cKDTree(prior).query(posterior, k=k)[0][:, k - 1]
    return float(d * np.mean(np.log(nu / rho)) + np.log(len(prior) / (n - 1)))


def best_of(fn, repeats: int = 3) -> tuple[float, float]:
    times, value = [], None
    for _ in range(repeats):
        start = time.perf_counter()
        value = fn()
        times.append(time.perf_counter() - start)
    return min(times), value


def main(m: int = 30_000, d: int = 8) -> None:
    rng = np.random.default_rng(0)
    factor = rng.normal(size=(d, d))
    cov = factor @ factor.T / d * 0.05 + 0.01 * np.eye(d)
    mean = rng.normal(size=d) * 0.5
    posterior = rng.multivariate_normal(mean, cov, m)
    prior = rng.normal(size=(m, d))
    exact = gaussian_kl(mean, cov, np.zeros(d), np.eye(d))
    rows = [("bayesval knn_kl (KD-tree, all cores)", *best_of(lambda: knn_kl(posterior, prior)))]
    rows.append(("plain scipy cKDTree", *best_of(lambda: plain_scipy_kl(posterior, prior))))
    try:
        from universal_divergence import estimate

        rows.append(("universal-divergence", *best_of(lambda: estimate(posterior, prior, k=4), repeats=1)))
    except ImportError:
        print("universal-divergence not installed (pip install universal-divergence)")
    base = rows[0][1]
    print(f"m = {m}, d = {d}, exact KL = {exact:.4f}")
    for name, seconds, value in rows:
        print(f"{name:40s} {seconds:8.3f} s   KL {value:.4f}   time / bayesval = {seconds / base:6.2f}")


if __name__ == "__main__":
    main()
