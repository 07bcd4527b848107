"""Whole valuations, side by side in one run: today's presets against the budgets they replace.

    python benchmarks/bench_valuation.py syn     # Syn at the paper's precision (every phi stderr <= 0.005)
    python benchmarks/bench_valuation.py diab    # Diab (Pima), 3 parties at epsilon = 0.5, fast preset

syn: the `paper` preset (8 chains x 400 + 4,000 sweeps x 6 repeats, prior-density KL) against Sim et al.'s
sweep counts (16 chains x 10,000 + 30,000 sweeps thinned by 16 x 5 repeats, two-sample KL as printed), on the
same releases (fixed noise seeds). The baseline takes ~20 minutes on 2 cores; --no-baseline skips it.
diab: `LogisticRegression` at the NUTS `fast` preset (trees of depth <= 3, target acceptance 0.65, 4 chains x
250 + 700 x 3 repeats, prior-density KL) against the settings of 2026-11-23 (depth <= 10, target acceptance 0.8,
4 chains x 300 + 500 x 3 repeats, two-sample KL); benchmarks/bench_diab.py times the step of issue 30 alone.
Prints wall time (compilation included), phi +- stderr, max R-hat, min ESS and the ratio.
"""

from __future__ import annotations

import argparse
import time
import warnings

import numpy as np

import bayesval as bv
from bayesval.datasets.synthetic import make_syn


def syn_parties(epsilons: tuple[float, ...] = (0.2, 0.1, 0.2), noise_seed: int | None = 100):
    """Syn's three parties (data seed 0) at these epsilons, (2, epsilon)-Renyi DP, party i's noise from
    noise_seed + i (OS entropy where None)."""
    syn = make_syn(seed=0)
    return [
        bv.Party(
            X,
            y,
            epsilon=eps,
            rdp_order=2.0,
            bounds=syn.bounds,
            name=f"party {i + 1}",
            noise_seed=None if noise_seed is None else noise_seed + i,
        )
        for i, ((X, y), eps) in enumerate(zip(syn.parties, epsilons))
    ]


def diab_parties(fractions: tuple[float, ...] = (0.2, 0.3, 0.5)):
    """`LogisticRegression` and Diab's training rows split at random into parties of these `fractions` (the paper's
    three by default), each at epsilon 0.5 with a fixed noise seed (Sim et al. 2023, Sec. 6; `datasets.pima`)."""
    from bayesval.datasets.pima import load_pima
    from bayesval.models.logistic_regression import non_private_cap

    pima = load_pima(fractions=fractions)
    parties = [
        bv.Party(X, y, epsilon=0.5, bounds=pima.bounds, name=f"party {i + 1}", noise_seed=100 + i)
        for i, (X, y) in enumerate(pima.parties)
    ]
    return bv.models.LogisticRegression(max_sq_norm=non_private_cap(*pima.train)), parties


def timed(label: str, model, parties, **options) -> tuple[float, bv.ValuationResult]:
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # reused releases, convergence: both reported below
        result = bv.valuate(model, parties, key=0, progress_bar=False, **options)
    seconds = time.perf_counter() - start
    values = "  ".join(f"{v:.4f} ± {s:.4f}" for v, s in zip(result.values, result.stderr))
    print(
        f"{label:58s} {seconds:7.1f} s   phi {values}   max R-hat {max(result.diagnostics['r_hat']):.3f}   "
        f"min ESS {min(result.diagnostics['ess']):.0f}",
        flush=True,
    )
    return seconds, result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("setting", choices=("syn", "diab"))
    parser.add_argument("--no-baseline", action="store_true", help="time today's preset only")
    args = parser.parse_args()
    if args.setting == "syn":
        model, parties = bv.models.LinearRegression(), syn_parties()
        ours = timed("paper preset, prior-density KL", model, parties, config="paper")
        baseline_config = bv.SamplerConfig(
            num_chains=16, num_warmup=10_000, num_samples=30_000, thinning=16, num_repeats=5
        )
        baseline = ("Sim et al.'s sweep counts, two-sample KL", model, dict(config=baseline_config, kl="two-sample"))
    else:
        model, parties = diab_parties()
        ours = timed("fast preset, prior-density KL", model, parties, config="fast")
        baseline_config = bv.SamplerConfig(num_chains=4, num_warmup=300, num_samples=500, thinning=1, num_repeats=3)
        baseline = (
            "the earlier fast preset, depth 10, two-sample KL",
            bv.models.LogisticRegression(max_sq_norm=model.max_sq_norm, max_tree_depth=10, target_accept_prob=0.8),
            dict(config=baseline_config, kl="two-sample"),
        )
    if args.setting == "syn":
        print(f"every phi stderr <= 0.005: {bool(np.all(ours[1].stderr <= 0.005))}")
    if not args.no_baseline:
        label, baseline_model, options = baseline
        theirs = timed(label, baseline_model, parties, **options)
        print(f"time ratio (baseline / ours): {theirs[0] / ours[0]:.1f}x")


if __name__ == "__main__":
    main()
