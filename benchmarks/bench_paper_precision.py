"""Syn at the paper's precision (every phi stderr <= 0.005), side by side on the same releases: the `paper` preset
(8 chains x (400 + 4,000) sweeps x 6 repeats, whatever precision they give) against the fast preset given
`tolerance=0.005` (4 chains x (800 + 1,600) sweeps a repeat, repeats added until every standard error meets the
tolerance from at least 11 repeats: `bayesval.parties.valuation.repeats_to_tolerance`), and with
`--routes ... paper-tolerance` the paper preset's chains given the tolerance.

    python benchmarks/bench_paper_precision.py [--releases 900 1000 1100] [--routes paper fast-tolerance]

Each release is Syn's three parties (Sim et al. 2023, Sec. 6: 100 / 200 / 400 points at epsilon = 0.2, 0.1, 0.2)
with the noise seeds RELEASE, RELEASE + 1, RELEASE + 2; each route runs in a fresh process (compilation included, no
compilation cache), one after another. Prints per release and route the process's wall time, phi +- stderr, the
repeats that ran, whether every stderr is within 0.005, each coalition's value by the paper preset and by the fast
preset given the tolerance (their difference and its z) where both ran, and the time ratio of the paper preset to
each other route.
The ± is Monte Carlo error only: the k-NN estimate's finite-sample bias shrinks with the draws a repeat holds (6,400 at
the fast preset, 32,000 at the paper preset), not with the repeats (docs/benchmarks.md, "Syn at the paper's precision
on any release").
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time

TOLERANCE = 0.005
ROUTES = {  # name: (label, the child's config:tolerance)
    "paper": ("paper preset", "paper:none"),
    "fast-tolerance": (f"fast, tolerance {TOLERANCE}", f"fast:{TOLERANCE}"),
    "paper-tolerance": (f"paper, tolerance {TOLERANCE}", f"paper:{TOLERANCE}"),
}

CHILD = """
import json, sys, warnings
import bayesval as bv
from bayesval.datasets.synthetic import make_syn

release, route = int(sys.argv[1]), sys.argv[2]
syn = make_syn(seed=0)
parties = [
    bv.Party(X, y, epsilon=eps, rdp_order=2.0, bounds=syn.bounds, name=f"party {i + 1}", noise_seed=release + i)
    for i, ((X, y), eps) in enumerate(zip(syn.parties, (0.2, 0.1, 0.2)))
]
config, tolerance = route.split(":")
options = {"config": config} | ({} if tolerance == "none" else {"tolerance": float(tolerance)})
with warnings.catch_warnings():
    warnings.simplefilter("ignore", UserWarning)  # seeded releases; convergence is reported below
    result = bv.valuate(bv.models.LinearRegression(), parties, key=0, progress_bar=False, **options)
print(json.dumps({
    "values": result.values.tolist(), "stderr": result.stderr.tolist(), "repeats": result.diagnostics["repeats"],
    "r_hat": max(result.diagnostics["r_hat"]), "ess": min(result.diagnostics["ess"]),
    "masks": result.coalition_masks.astype(int).tolist(), "coalitions": result.coalition_values.tolist(),
    "coalition_stderr": result.coalition_stderr.tolist(),
}))
"""


def run(release: int, route: str) -> dict:
    start = time.perf_counter()
    finished = subprocess.run(
        [sys.executable, "-c", CHILD, str(release), route], check=True, capture_output=True, text=True
    )
    return json.loads(finished.stdout.strip().splitlines()[-1]) | {"wall": time.perf_counter() - start}


def _coalition_differences(release: int, fast: dict, paper: dict) -> None:
    """Each coalition's value by the fast preset given the tolerance against the paper preset's: difference and z."""
    for mask, a, sa, b, sb in zip(
        fast["masks"], fast["coalitions"], fast["coalition_stderr"], paper["coalitions"], paper["coalition_stderr"]
    ):
        members = "{" + ", ".join(str(i + 1) for i, m in enumerate(mask) if m) + "}"
        z = (a - b) / (sa**2 + sb**2) ** 0.5
        print(
            f"{release:>8} coalition {members:<10} fast {a:.4f} ± {sa:.4f}  paper {b:.4f} ± {sb:.4f}  "
            f"difference {a - b:+.4f}  z {z:+.2f}",
            flush=True,
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--releases", type=int, nargs="+", default=[900, 1000, 1100])
    parser.add_argument("--routes", nargs="+", choices=sorted(ROUTES), default=["paper", "fast-tolerance"])
    args = parser.parse_args()
    print(f"{'release':>8} {'route':<22} {'wall s':>7}  {'phi +- stderr':<54} {'repeats':>7} {'<= 0.005':>8}")
    for release in args.releases:
        walls, found_by = {}, {}
        for route in args.routes:
            label, child = ROUTES[route]
            found = run(release, child)
            walls[route], found_by[route] = found["wall"], found
            phi = "  ".join(f"{v:.4f} ± {s:.4f}" for v, s in zip(found["values"], found["stderr"]))
            met = max(found["stderr"]) <= TOLERANCE
            print(
                f"{release:>8} {label:<22} {found['wall']:7.1f}  {phi:<54} {found['repeats']:>7} {str(met):>8}"
                f"   max R-hat {found['r_hat']:.4f}, min ESS {found['ess']:.0f}",
                flush=True,
            )
        if {"paper", "fast-tolerance"} <= set(found_by):
            _coalition_differences(release, found_by["fast-tolerance"], found_by["paper"])
        for route in [route for route in args.routes if route != "paper" and "paper" in walls]:
            print(
                f"{release:>8} ratio paper preset / {ROUTES[route][0]}: {walls['paper'] / walls[route]:.2f}", flush=True
            )


if __name__ == "__main__":
    main()
