"""How much `bayesval demo`'s Shapley values move from one private release to the next, against the ± it prints.

    python benchmarks/bench_release_spread.py              # 6 releases at the fast preset (the demo's default)
    python benchmarks/bench_release_spread.py --releases 4

The demo's setting (Sim et al. 2023, Sec. 6, Syn: parties of 100 / 200 / 400 points at epsilon = (0.2, 0.1, 0.2),
(2, epsilon)-Renyi DP, data seed 0, sampler key 0) valued once per release, each release with its own noise seeds
(seed 1000 r + i for party i of release r; the demo itself draws its noise from OS entropy). The valuation is the
demo's (same model, preset and key) without the rewards, which do not change phi. Prints each release's phi with
its ± (the Monte Carlo standard error given that release), then per party: the mean, the standard deviation over
releases, the range, and the mean ±, so that the two sources of variation can be compared.
"""

from __future__ import annotations

import argparse
import time
import warnings

import numpy as np

import bayesval as bv
from bayesval.datasets.synthetic import make_syn

EPSILONS = (0.2, 0.1, 0.2)


def parties(release: int) -> list[bv.Party]:
    syn = make_syn(seed=0)
    names = [f"party {i + 1}" for i in range(len(EPSILONS))]
    return [
        bv.Party(X, y, epsilon=eps, rdp_order=2.0, bounds=syn.bounds, name=name, noise_seed=1000 * release + i)
        for i, ((X, y), eps, name) in enumerate(zip(syn.parties, EPSILONS, names))
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--releases", type=int, default=6, help="fresh releases to value (at least 2)")
    parser.add_argument("--preset", default="fast", choices=["fast", "paper"])
    args = parser.parse_args()
    if args.releases < 2:
        parser.error("--releases must be at least 2")
    values, stderrs = [], []
    for release in range(1, args.releases + 1):
        start = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            result = bv.valuate(
                bv.models.LinearRegression(), parties(release), key=0, config=args.preset, progress_bar=False
            )
        values.append(result.values)
        stderrs.append(result.stderr)
        shown = "  ".join(f"{v:.3f} ± {s:.3f}" for v, s in zip(result.values, result.stderr))
        print(f"release {release}: phi {shown}   ({time.perf_counter() - start:.1f} s)", flush=True)
    values, stderrs = np.array(values), np.array(stderrs)
    print(f"\nover {args.releases} releases ({args.preset} preset):")
    for i in range(values.shape[1]):
        column = values[:, i]
        print(
            f"  party {i + 1}: mean {column.mean():.3f}, sd {column.std(ddof=1):.3f}, range "
            f"{column.min():.3f}-{column.max():.3f}; mean ± {stderrs[:, i].mean():.3f}"
        )


if __name__ == "__main__":
    main()
