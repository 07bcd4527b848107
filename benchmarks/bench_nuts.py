"""Batched NUTS over all 8 coalitions of 3 parties in one program against 8 sequential NumPyro MCMC runs.

Same model (noise-aware logistic regression on Diab, epsilon = (0.2, 0.1, 0.2)), same chains, warm-up and
draws, same run. NumPyro's MCMC reuses its compiled sampler across the 8 runs (jit_model_args=True), so
the comparison is of the sampling, with each side's first-call compile time reported apart.

    python benchmarks/bench_nuts.py [--chains 4] [--warmup 300] [--samples 500]
"""

from __future__ import annotations

import argparse
import time
import warnings

import jax
import numpy as np
from numpyro.infer import MCMC, NUTS

import bayesval as bv
from bayesval.datasets.pima import load_pima
from bayesval.inference.data import NoiseAwareData
from bayesval.inference.diagnostics import chain_diagnostics
from bayesval.inference.nuts import sample_coalition_posteriors_nuts
from bayesval.models.logistic_regression import non_private_cap


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--chains", type=int, default=4)
    parser.add_argument("--warmup", type=int, default=300)
    parser.add_argument("--samples", type=int, default=500)
    args = parser.parse_args()
    warnings.simplefilter("ignore", UserWarning)
    pima = load_pima()
    model = bv.models.LogisticRegression(max_sq_norm=non_private_cap(*pima.train))
    parties = [
        bv.Party(X, y, epsilon=eps, bounds=pima.bounds, name=f"party {i + 1}", noise_seed=100 + i)
        for i, ((X, y), eps) in enumerate(zip(pima.parties, (0.2, 0.1, 0.2)))
    ]
    data = NoiseAwareData.from_releases([p.release(model.statistic(4)) for p in parties])
    masks = ((np.arange(8)[:, None] >> np.arange(3)) & 1).astype(bool)  # all 8 coalitions, the empty one too
    settings = dict(num_chains=args.chains, num_warmup=args.warmup, num_samples=args.samples, progress_bar=False)

    def batched(key):
        start = time.perf_counter()
        draws = sample_coalition_posteriors_nuts(key, model.model, data, masks, ("theta",), **settings).draws
        return time.perf_counter() - start, draws

    batched_cold, _ = batched(jax.random.key(0))
    batched_warm, draws = batched(jax.random.key(1))
    batched_ess = chain_diagnostics(draws)[1].min(axis=1)

    mcmc = MCMC(
        NUTS(model.model),
        num_warmup=args.warmup,
        num_samples=args.samples,
        num_chains=args.chains,
        chain_method="vectorized",
        progress_bar=False,
        jit_model_args=True,
    )
    times, sequential_ess = [], []
    for round_ in range(2):
        start = time.perf_counter()
        for index, mask in enumerate(masks):
            mcmc.run(jax.random.key(10 * round_ + index), data, mask)
            theta = np.asarray(mcmc.get_samples(group_by_chain=True)["theta"])
            if round_:
                sequential_ess.append(chain_diagnostics(theta[None])[1].min())
        times.append(time.perf_counter() - start)
    sequential_cold, sequential_warm = times

    print(
        f"Diab, 8 coalitions x {args.chains} chains, {args.warmup} warm-up + {args.samples} draws; {jax.devices()[0]}"
    )
    print(
        f"batched (one program):  {batched_warm:7.1f} s  (first call {batched_cold:.1f} s with compile)"
        f"  min ESS {batched_ess.min():.0f}, mean ESS {batched_ess.mean():.0f}"
    )
    print(
        f"8 sequential MCMC runs: {sequential_warm:7.1f} s  (first round {sequential_cold:.1f} s with compile)"
        f"  min ESS {min(sequential_ess):.0f}, mean ESS {np.mean(sequential_ess):.0f}"
    )
    print(
        f"speed-up: {sequential_warm / batched_warm:.2f}x warm, {sequential_cold / batched_cold:.2f}x cold; "
        f"ESS/s ratio {(batched_ess.mean() / batched_warm) / (np.mean(sequential_ess) / sequential_warm):.2f}x"
    )


if __name__ == "__main__":
    main()
