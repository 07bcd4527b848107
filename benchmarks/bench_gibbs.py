"""Batched noise-aware Gibbs over all 7 coalitions of Syn vs what a NumPyro user would otherwise
write: NUTS on the same noise-aware model (statistics integrated out), one coalition after another.
Compared at equal effective sample size: seconds per effective draw (minimum bulk ESS over the
parameters of each coalition), summed over coalitions. Compilation is included for both.

    python benchmarks/bench_gibbs.py [--gibbs-samples 20000] [--nuts-samples 500] [--paper]
"""

from __future__ import annotations

import argparse
import time
import warnings

import jax
import numpy as np
from numpyro.infer import MCMC, NUTS

import bayesval as bv
from bayesval.datasets.synthetic import make_syn
from bayesval.games.shapley import coalition_masks
from bayesval.inference.data import NoiseAwareData
from bayesval.inference.diagnostics import chain_diagnostics
from bayesval.parties import release_all


def syn_data(model):
    syn = make_syn(seed=0)
    parties = [
        bv.Party(X, y, epsilon=eps, bounds=syn.bounds, name=f"party {i + 1}", noise_seed=1000 + i)
        for i, ((X, y), eps) in enumerate(zip(syn.parties, (0.2, 0.1, 0.2)))
    ]
    return parties, NoiseAwareData.from_releases(release_all(model, parties))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--chains", type=int, default=4)
    parser.add_argument("--gibbs-warmup", type=int, default=2000)
    parser.add_argument("--gibbs-samples", type=int, default=20_000)
    parser.add_argument("--nuts-warmup", type=int, default=300)
    parser.add_argument("--nuts-samples", type=int, default=500)
    parser.add_argument("--interweaving-moves", type=int, default=0, help="ancillary-parameterisation theta moves")
    parser.add_argument("--collapsed-moves", type=int, default=8, help="theta, omega moves given o (0, 0: Alg. 1)")
    parser.add_argument("--paper", action="store_true", help="also time the default paper-preset valuation end to end")
    args = parser.parse_args()
    model = bv.models.LinearRegression(interweaving_moves=args.interweaving_moves, collapsed_moves=args.collapsed_moves)
    parties, data = syn_data(model)
    masks = coalition_masks(3)

    config = bv.SamplerConfig(
        num_chains=args.chains,
        num_warmup=args.gibbs_warmup,
        num_samples=args.gibbs_samples,
        thinning=1,
        progress_bar=False,
    )
    start = time.perf_counter()
    draws = model.posterior_draws(jax.random.key(0), data, masks, config).draws
    gibbs_seconds = time.perf_counter() - start
    gibbs_ess = chain_diagnostics(draws)[1].min(axis=1)

    nuts_seconds, nuts_ess = [], []
    for mask in masks:
        mcmc = MCMC(
            NUTS(model.model),
            num_warmup=args.nuts_warmup,
            num_samples=args.nuts_samples,
            num_chains=args.chains,
            chain_method="vectorized",
            progress_bar=False,
        )
        start = time.perf_counter()
        mcmc.run(jax.random.key(1), data, mask)
        samples = mcmc.get_samples(group_by_chain=True)
        theta = np.concatenate([np.asarray(samples["weights"]), np.asarray(samples["noise_var"])[..., None]], -1)
        nuts_seconds.append(time.perf_counter() - start)
        nuts_ess.append(chain_diagnostics(theta[None])[1].min())
    nuts_seconds, nuts_ess = np.array(nuts_seconds), np.array(nuts_ess)

    print(f"Syn, 3 parties, epsilon = (0.2, 0.1, 0.2); {args.chains} chains per coalition; {jax.devices()[0]}")
    print(
        f"Gibbs, all 7 coalitions in one program: {gibbs_seconds:.1f} s for "
        f"{args.gibbs_warmup} + {args.gibbs_samples} sweeps; min ESS per coalition {np.round(gibbs_ess)}"
    )
    print(
        f"NUTS, coalition by coalition: {nuts_seconds.sum():.1f} s for {args.nuts_warmup} + {args.nuts_samples} "
        f"iterations; min ESS per coalition {np.round(nuts_ess)}"
    )
    # seconds per effective draw, the batched Gibbs time shared equally by its coalitions
    gibbs_cost = (gibbs_seconds / len(masks) / gibbs_ess).sum()
    nuts_cost = (nuts_seconds / nuts_ess).sum()
    print(
        f"seconds per effective draw, summed over coalitions: Gibbs {gibbs_cost:.4f}, NUTS {nuts_cost:.4f}; "
        f"speed-up at equal ESS = {nuts_cost / gibbs_cost:.2f}x"
    )

    if args.paper:
        start = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            result = bv.valuate(bv.models.LinearRegression(), parties, key=0, config="paper", progress_bar=False)
        print(
            f"paper preset valuation end to end (7 coalitions x 5 repeats x 16 chains x 40,000 sweeps, "
            f"KL, Shapley): {time.perf_counter() - start:.0f} s; values {np.round(result.values, 3)} "
            f"± {np.round(result.stderr, 3)}; max R-hat {max(result.diagnostics['r_hat']):.3f}"
        )


if __name__ == "__main__":
    main()
