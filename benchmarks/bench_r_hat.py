"""R-hat of the demo's coalition posteriors over fresh releases: each repeat's chains apart, maximised over the
repeats (the statistic `valuate` reported before 2026-11-26), against every repeat's chains together (what it
reports now, Vehtari et al. 2021, Sec. 4), side by side from the same draws.

    python benchmarks/bench_r_hat.py                 # 14 releases at the fast preset (the demo's default)
    python benchmarks/bench_r_hat.py --releases 30
    python benchmarks/bench_r_hat.py --os-noise      # each release's noise from OS entropy, as the demo draws it

The demo's setting (Sim et al. 2023, Sec. 6, Syn: parties of 100 / 200 / 400 points at epsilon = (0.2, 0.1, 0.2),
(2, epsilon)-Renyi DP, sampler key 0), one valuation per release, release r with noise seeds 1000 r + i (or, with
--os-noise, OS entropy: not reproducible, but what the demo does). Prints per
release the largest R-hat over the 7 coalitions each way and the smallest bulk ESS of one repeat, then how many
releases passed the 1.01 threshold each way.
"""

from __future__ import annotations

import argparse
import warnings

import numpy as np

import bayesval as bv
from bayesval.datasets.synthetic import make_syn
from bayesval.inference.diagnostics import R_HAT_THRESHOLD, chain_diagnostics

EPSILONS = (0.2, 0.1, 0.2)


def largest_r_hats(release: int, os_noise: bool) -> tuple[float, float, float]:
    """(max per-repeat R-hat, max pooled R-hat, min per-repeat bulk ESS) over the coalitions of one release."""
    syn = make_syn()
    parties = [
        bv.Party(
            X,
            y,
            epsilon=eps,
            rdp_order=2.0,
            bounds=syn.bounds,
            name=f"party {i + 1}",
            noise_seed=None if os_noise else 1000 * release + i,
        )
        for i, ((X, y), eps) in enumerate(zip(syn.parties, EPSILONS))
    ]
    config = bv.SamplerConfig.preset("fast").with_(progress_bar=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # the convergence warning: both statistics are printed
        result = bv.valuate(bv.models.LinearRegression(), parties, key=0, config=config, keep_draws=True)
    draws = result.draws  # (coalitions, repeats, chains, draws, d)
    coalitions, repeats, chains, length, dim = draws.shape
    apart, ess = chain_diagnostics(draws.reshape(coalitions * repeats, chains, length, dim))
    pooled, _ = chain_diagnostics(draws.reshape(coalitions, repeats * chains, length, dim))
    return float(np.max(apart)), float(np.max(pooled)), float(np.min(ess))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--releases", type=int, default=14)
    parser.add_argument("--os-noise", action="store_true", help="draw each release's noise from OS entropy")
    args = parser.parse_args()
    print("release  max R-hat, repeats apart  max R-hat, repeats pooled  min ESS of a repeat")
    rows = []
    for release in range(args.releases):
        rows.append(largest_r_hats(release, args.os_noise))
        print(f"{release:7d}  {rows[-1][0]:24.4f}  {rows[-1][1]:25.4f}  {rows[-1][2]:19.0f}", flush=True)
    apart, pooled, _ = np.array(rows).T
    print(
        f"releases with max R-hat > {R_HAT_THRESHOLD}: {int((apart > R_HAT_THRESHOLD).sum())} of {len(rows)} with the "
        f"repeats apart ({apart.min():.4f}-{apart.max():.4f}), {int((pooled > R_HAT_THRESHOLD).sum())} pooled "
        f"({pooled.min():.4f}-{pooled.max():.4f})"
    )


if __name__ == "__main__":
    main()
