"""Releases that leave the process: what they cost, and what a precision attack learns from them.

    python benchmarks/bench_release.py               # both parts
    python benchmarks/bench_release.py --part cost   # release wall time only
    python benchmarks/bench_release.py --part attack --releases 10000
    python benchmarks/bench_release.py --part parties --parties 3 12 50

cost: `Party.release` wall time with the discrete Gaussian (the default) and the float Gaussian, for statistics of
the shapes and declared bounds of Syn, Diab and CaliH (Sim et al. 2023, Sec. 6), data drawn inside the bounds. The
first release includes the sensitivity check (a neighbour search); later ones (`fresh=True`) do not.
attack: the precision attack of tests/precision_attack.py on one-entry releases of two neighbouring sums (0.3 and
1.3, sensitivity 1) at (0.5, 1e-5)-DP, each release with fresh OS noise: its success rate on each path against the
(e^eps + delta) / (1 + e^eps) that the ledger's epsilon allows: the float Gaussian, the discrete Gaussian, and the
Gaussian rounded to a grid (`Mechanism.gaussian_on_grid`, the DP-gradient semivalues' since 2026-12-06); and on the
two Laplace paths at 0.5-DP: float (`Mechanism.laplace`, DP Layered Shapley's before 2026-12-06) and on a grid
(`Mechanism.laplace_on_grid`, its now).
parties: the first releases of n Syn parties (100 records each, epsilon 0.5, `release_all`), each party's claim
checked by one shared search (today) against a search of its own (the path before): wall times and their ratio.
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
import time
import warnings
from pathlib import Path

import numpy as np

import bayesval as bv
from bayesval.datasets.synthetic import make_syn
from bayesval.parties import release_all
from bayesval.privacy import DPGuarantee, Mechanism, NoiseSource, sensitivity
from bayesval.privacy.accounting import epsilon_at
from bayesval.statistics import LinearRegressionStatistic, LogisticRegressionStatistic

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from precision_attack import guess, success_bound  # noqa: E402

SETTINGS = {  # name: (statistic, bounds, records)
    "Syn (linear, w=2)": (LinearRegressionStatistic(2), bv.Bounds(1.0, 2.25), 400),
    "Diab (logistic PASS-GLM, w=4)": (LogisticRegressionStatistic(4), bv.Bounds(4.4, 1.0), 300),
    "CaliH (linear, w=6)": (LinearRegressionStatistic(6), bv.Bounds(4.0 * math.sqrt(6), 5.00001), 5000),
}


def data_inside(statistic, bounds: bv.Bounds, records: int, rng: np.random.Generator):
    d = statistic.num_features
    X = rng.normal(size=(records, d))
    X *= bounds.x_norm * rng.uniform(size=(records, 1)) ** (1 / d) / np.linalg.norm(X, axis=1, keepdims=True)
    if isinstance(statistic, LogisticRegressionStatistic):
        return X, np.where(rng.uniform(size=records) < 0.5, 1.0, -1.0)
    return X, rng.uniform(-bounds.y_abs, bounds.y_abs, records)


def cost(repeats: int) -> None:
    rng = np.random.default_rng(0)
    print(
        "| statistic | entries | mechanism | first release (incl. sensitivity search) | later release, median "
        f"of {repeats} | noise std |"
    )
    print("|---|---|---|---|---|---|")
    for name, (statistic, bounds, records) in SETTINGS.items():
        X, y = data_inside(statistic, bounds, records, rng)
        for mechanism in ("discrete_gaussian", "gaussian"):
            party = bv.Party(X, y, epsilon=0.2, bounds=bounds, name="p", mechanism=mechanism)
            sensitivity._SEARCHED.clear()  # the first release searches, as a fresh process's does
            start = time.perf_counter()
            released = party.release(statistic)
            first = time.perf_counter() - start
            times = []
            for _ in range(repeats):
                start = time.perf_counter()
                party.release(statistic, fresh=True)
                times.append(time.perf_counter() - start)
            print(
                f"| {name} | {statistic.size} | {mechanism} | {first:.3f} s | {1e3 * statistics.median(times):.2f} ms "
                f"| {released.noise_std:.4g} |"
            )


def attack(releases: int) -> None:
    guarantee = DPGuarantee(0.5, 1e-5)
    first, second = 0.3, 1.3
    print("| path | releases | attack success | allowed by the ledger's epsilon | release time |")
    print("|---|---|---|---|---|")
    for path, mechanism in (
        ("float Gaussian", Mechanism.gaussian(guarantee, 1.0)),
        ("discrete Gaussian", Mechanism.discrete_gaussian(guarantee, 1.0, 1)),
        ("Gaussian rounded to a grid (the DP-gradient semivalues')", Mechanism.gaussian_on_grid(guarantee, 1.0, 1)),
        ("float Laplace", Mechanism.laplace(guarantee.epsilon, 1.0)),
        ("Laplace on a grid (DP Layered Shapley's)", Mechanism.laplace_on_grid(guarantee.epsilon, 1.0, 1)),
    ):
        secret = np.random.default_rng(2).integers(0, 2, releases)
        start = time.perf_counter()
        outputs = np.asarray(
            [
                mechanism.perturb(np.array([second if bit else first]), noise=NoiseSource(), owner="o", what="sum")[0][
                    0
                ]
                for bit in secret
            ]
        )
        elapsed = time.perf_counter() - start
        noise = "laplace" if "laplace" in mechanism.noise else "gaussian"  # a grid's path: attacked as its float one
        success = float(np.mean(guess(outputs, first, second, mechanism.noise_scale, noise) == secret))
        error = math.sqrt(success * (1 - success) / releases)
        delta = mechanism.guarantee.delta
        bound = success_bound(epsilon_at(mechanism.event, delta)[0], delta)
        print(
            f"| {path} | {releases} | {success:.4f} ± {error:.4f} | {bound:.4f} | {1e3 * elapsed / releases:.2f} ms |"
        )


def each_party_searching(statistic, bounds, num_features, seed, base_records, owner):
    """The sensitivity check before its search was shared: every party's first release searches."""
    return sensitivity.find_furthest_neighbours(
        statistic, bounds, num_features, seed=seed, base_records=base_records, owner=owner
    )


def parties(counts: list[int]) -> None:
    print("| parties | one search shared (today) | a search a party (before) | ratio |")
    print("|---|---|---|---|")
    model, shared = bv.models.LinearRegression(), sensitivity._searched_once
    for count in counts:
        syn = make_syn(seed=0, sizes=(100,) * count)
        times = []
        for search in (shared, each_party_searching):
            group = [
                bv.Party(X, y, epsilon=0.5, bounds=syn.bounds, name=f"p{i}", noise_seed=10 + i)
                for i, (X, y) in enumerate(syn.parties)
            ]
            sensitivity._searched_once = search
            sensitivity._SEARCHED.clear()
            start = time.perf_counter()
            release_all(model, group)
            times.append(time.perf_counter() - start)
        sensitivity._searched_once = shared
        print(f"| {count} | {times[0]:.3f} s | {times[1]:.3f} s | {times[1] / times[0]:.1f}x |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--part", choices=("cost", "attack", "parties", "both"), default="both")
    parser.add_argument("--parties", type=int, nargs="+", default=[3, 12, 50], help="party counts (--part parties)")
    parser.add_argument("--releases", type=int, default=10_000, help="releases per path in the attack")
    parser.add_argument("--repeats", type=int, default=20, help="fresh releases timed per statistic")
    args = parser.parse_args()
    warnings.simplefilter("ignore", UserWarning)
    if args.part in ("cost", "both"):
        cost(args.repeats)
    if args.part in ("attack", "both"):
        attack(args.releases)
    if args.part == "parties":
        parties(args.parties)


if __name__ == "__main__":
    main()
