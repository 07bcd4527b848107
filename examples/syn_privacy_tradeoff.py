"""Sim et al. (2023) Fig. 2a / Fig. 8 and Table 1 on Syn: party 2's value and Shapley value rise with
its epsilon (the privacy-valuation trade-off), and surprise grows with input coverage, perturbed
below exact.

    python examples/syn_privacy_tradeoff.py                     # small budget (about 3 minutes on 2 cores)
    python examples/syn_privacy_tradeoff.py --preset paper      # the paper's sampler settings
"""

from __future__ import annotations

import argparse
import warnings

import jax
import numpy as np

import bayesval as bv
from bayesval.datasets.synthetic import make_syn
from bayesval.divergence import nig_kl
from bayesval.games.surprise import CoalitionSurprise, per_repeat
from bayesval.inference.data import NoiseAwareData
from bayesval.valuate import release_all

SMALL = bv.SamplerConfig(num_chains=4, num_warmup=500, num_samples=3000, thinning=3, num_repeats=5)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--preset", default=None, choices=["fast", "paper"])
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    config = bv.SamplerConfig.preset(args.preset) if args.preset else SMALL
    config = config.with_(progress_bar=False)
    model = bv.models.LinearRegression()
    syn = make_syn(seed=args.seed)
    warnings.simplefilter("ignore", UserWarning)

    print("epsilon_2   v_2 (± s.e.)      phi_1    phi_2 (± s.e.)    phi_3    v_N     max R-hat")
    for epsilon_2 in (0.004, 0.02, 0.1, 0.5, 2.5, 12.5):
        parties = [
            bv.Party(
                X, y, epsilon=eps, bounds=syn.bounds, name=f"party {i + 1}", noise_seed=100 + i, allow_seed_reuse=True
            )  # the paper's fixed-seed sweep: nested noise across epsilon_2, an experiment, not a private release
            for i, ((X, y), eps) in enumerate(zip(syn.parties, (0.2, epsilon_2, 0.2)))
        ]
        result = bv.valuate(model, parties, key=1, config=config)
        row = result.coalitions_dataframe().loc["{party 2}"]
        print(
            f"{epsilon_2:9g}   {row.value:6.3f} ± {row.stderr:.3f}   {result.values[0]:6.3f}   "
            f"{result.values[1]:6.3f} ± {result.stderr[1]:.3f}   {result.values[2]:6.3f}   "
            f"{result.coalition_value(result.names):6.3f}  {max(result.diagnostics['r_hat']):.3f}"
        )

    print("\nTable 1 pattern at epsilon = 1: coverage = first feature <= percentile")
    print("coverage   surprise of s_N (closed form)   surprise of o_N (noise-aware, kNN)")
    pooled_first = np.concatenate([X[:, 0] for X, _ in syn.parties])
    for percentile in (25, 50, 75, 100):
        cut = np.percentile(pooled_first, percentile)
        parties = [
            bv.Party(
                X[X[:, 0] <= cut],
                y[X[:, 0] <= cut],
                epsilon=1.0,
                bounds=syn.bounds,
                name=f"party {i + 1}",
                noise_seed=200 + i,
            )
            for i, (X, y) in enumerate(syn.parties)
        ]
        exact = nig_kl(
            model.exact_posterior(sum(p.exact_statistic() for p in parties), sum(len(p.X) for p in parties), 2),
            model.priors(2).model,
        )
        data = NoiseAwareData.from_releases(release_all(model, parties))
        surprise, stderr = per_repeat(
            CoalitionSurprise(model, data, config, 4, jax.random.key(5), 1)(np.ones((1, 3), bool))
        )
        print(f"[0,{percentile:3d}]   {exact:8.3f}                        {surprise[0]:6.3f} ± {stderr[0]:.3f}")


if __name__ == "__main__":
    main()
