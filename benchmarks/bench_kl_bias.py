"""The prior-density k-NN KL estimate's finite-sample bias by the draws a repeat holds, in three settings, one run:

1. **Gaussian reference**: standard-normal draws of each sampler layout (chains x kept draws, the Theiler window
   the valuation uses) scored against their own density, whose KL is 0. The estimator whitens the draws first, so
   this is its bias on every Gaussian posterior of that dimension. Beside it, on the same draws as one i.i.d.
   sample, the bias-reduced estimate that weights the first K neighbours (Berrett, Samworth & Yuan 2019, Sec. 2:
   weights of least norm with sum 1 and sum w_j Gamma(j + 2/d) / Gamma(j) = 0, which cancels the leading n^(-2/d)
   term), and each estimate's standard deviation.
2. **Negligible noise**: i.i.d. draws of Syn's exact-statistics NIG posteriors (epsilon = 1e7) against the closed
   form (`bayesval.divergence.nig_kl`), for the coalitions {1}, {2}, {1, 2} and all three.
3. **Realistic noise** (`--chains`): Syn at the demo's epsilon = (0.2, 0.1, 0.2) on fixed-seed releases, every
   coalition by the fast preset's Gibbs chains (4 x 1,600 kept draws a repeat) and by the same chains kept five
   times as long (4 x 8,000), `--repeats` each, side by side with the shift the Gaussian reference predicts.

    python benchmarks/bench_kl_bias.py [--reps 16] [--chains --repeats 6 --noise-seed 900 --key 7]

Where the posterior is close to Gaussian (2) the bias is the reference's (1); where the DP noise shapes it (3) it is
not, so a correction read off the reference would be wrong there (docs/benchmarks.md, "The k-NN estimate's bias by
draws a repeat").
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
from scipy.spatial import cKDTree
from scipy.special import digamma, gammaln

import bayesval as bv
from bayesval.divergence import batched_kl, nig_kl, theiler_window
from bayesval.games.shapley import coalition_masks
from bayesval.inference.conjugate import nig_draws, nig_log_density
from bayesval.inference.data import NoiseAwareData
from bayesval.parties import release_all
from bayesval.parties.surprise import CoalitionSurprise

sys.path.insert(0, str(Path(__file__).parent))
from bench_valuation import syn_parties  # noqa: E402

DIMENSION = 4  # Syn's theta = (w, sigma^2): two features and an intercept, and the noise variance
K = 4  # the valuation's k (Sim et al. 2023, App. C.3)
LAYOUTS = ((4, 400), (4, 1600), (1, 2048), (4, 8000), (8, 4000))  # chains x kept draws a chain


def standard_normal_bias(chains: int, kept: int, reps: int) -> tuple[np.ndarray, np.ndarray]:
    """The estimate on `reps` keys of standard-normal draws (chains, kept, d), and on the same draws as one i.i.d.
    sample the bias-reduced estimate (`weighted_kl_of_standard_normal`)."""
    draws = np.asarray(jax.random.normal(jax.random.key(0), (reps, chains, kept, DIMENSION)))
    log_density = -0.5 * (draws**2).sum(-1) - DIMENSION / 2 * np.log(2 * np.pi)
    window = theiler_window(kept) if chains > 1 else 0
    kl = np.asarray(batched_kl(draws, np.ones((reps, chains), bool), K, log_prior=log_density, window=window))
    weighted = np.array([weighted_kl_of_standard_normal(sample.reshape(-1, DIMENSION)) for sample in draws])
    return kl, weighted


def weighted_kl_of_standard_normal(points: np.ndarray) -> float:
    """KL(N(0, I) || N(0, I)) = 0 estimated from i.i.d. `points` (n, d) as -H - E[log p], H the weighted
    Kozachenko-Leonenko entropy over neighbours 1..K of the whitened points (Berrett, Samworth & Yuan 2019)."""
    n, d = points.shape
    centred = points - points.mean(axis=0)
    lower = np.linalg.cholesky(np.cov(centred.T))
    white = np.linalg.solve(lower, centred.T).T
    rho = cKDTree(white).query(white, k=K + 1, workers=-1)[0][:, 1:]  # (n, K), itself left out
    log_ball = d / 2 * np.log(np.pi) - gammaln(d / 2 + 1) + np.log(np.diag(lower)).sum()
    ranks = np.arange(1, K + 1)
    entropies = log_ball + digamma(n) - digamma(ranks) + d * np.log(rho).mean(axis=0)
    constraints = np.vstack([np.ones(K), np.exp(gammaln(ranks + 2 / d) - gammaln(ranks))])
    weights = constraints.T @ np.linalg.solve(constraints @ constraints.T, np.array([1.0, 0.0]))
    log_density = -0.5 * (points**2).sum(axis=1) - d / 2 * np.log(2 * np.pi)
    return float(-(weights @ entropies) - log_density.mean())


def negligible_noise(reps: int) -> None:
    model = bv.models.LinearRegression()
    parties, prior = syn_parties((1e7,) * 3, None), model.priors(2).model
    log_prior = jax.jit(jax.vmap(lambda theta: nig_log_density(prior, theta[:-1], theta[-1])))
    print("\n2. Syn's exact-statistics NIG posteriors, i.i.d. draws, estimate - closed form (mean +- s.e.):")
    print("   coalition | closed form | " + " | ".join(f"n = {n:,}" for n in (1600, 6400, 25600)))
    for mask in ((1, 0, 0), (0, 1, 0), (1, 1, 0), (1, 1, 1)):
        members = [party for party, member in zip(parties, mask) if member]
        statistic, count = sum(p.exact_statistic() for p in members), sum(len(p.X) for p in members)
        posterior = model.exact_posterior(statistic, count, 2)
        closed = float(nig_kl(posterior, prior))
        cells = []
        for n in (1600, 6400, 25600):
            errors = []
            for rep in range(reps):
                theta = nig_draws(jax.random.key(1000 * n + rep), posterior, n)
                density = np.asarray(log_prior(jnp.asarray(theta)))
                estimate = batched_kl(
                    np.asarray(theta)[None, None], np.ones((1, 1), bool), K, log_prior=density[None, None]
                )
                errors.append(float(estimate[0]) - closed)
            cells.append(f"{np.mean(errors):+.4f} +- {np.std(errors, ddof=1) / np.sqrt(reps):.4f}")
        print(f"   {str(mask):9} | {closed:11.4f} | " + " | ".join(cells), flush=True)


def realistic_noise(noise_seed: int, repeats: int, key: int, reference: dict) -> None:
    model = bv.models.LinearRegression()
    data = NoiseAwareData.from_releases(release_all(model, syn_parties((0.2, 0.1, 0.2), noise_seed)))
    masks = coalition_masks(3)
    values = {}
    for name, samples in (("fast", 1600), ("long", 8000)):
        config = bv.SamplerConfig(num_samples=samples, num_repeats=repeats, progress_bar=False)
        started = time.perf_counter()
        game = CoalitionSurprise(model, data, config, K, jax.random.key(key), len(masks))
        values[name] = np.asarray(game(masks))
        print(
            f"   {name} chains (4 x {samples:,} kept draws a repeat): {time.perf_counter() - started:.0f} s", flush=True
        )
    predicted = reference[(4, 1600)][0] - reference[(4, 8000)][0]
    print(
        f"\n3. Syn at epsilon = (0.2, 0.1, 0.2), releases of noise seed {noise_seed}: fast - long chains by coalition"
    )
    print(f"   (the Gaussian reference predicts {predicted:+.4f} for every coalition)")
    for mask, fast, long in zip(masks, values["fast"].T, values["long"].T):
        members = "{" + ", ".join(str(i + 1) for i in np.flatnonzero(mask)) + "}"
        error = np.sqrt(fast.var(ddof=1) / len(fast) + long.var(ddof=1) / len(long))
        difference = f"{fast.mean() - long.mean():+.4f} +- {error:.4f}"
        print(f"   {members:10} fast {fast.mean():.4f}  long {long.mean():.4f}  difference {difference}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--reps", type=int, default=16, help="keys a cell of parts 1 and 2")
    parser.add_argument("--chains", action="store_true", help="also part 3 (about 30 s a repeat on 2 cores)")
    parser.add_argument("--noise-seed", type=int, default=900, help="part 3's releases")
    parser.add_argument("--repeats", type=int, default=6, help="part 3's repeats of each coalition, each route")
    parser.add_argument("--key", type=int, default=7, help="part 3's sampler key")
    args = parser.parse_args()
    print(f"1. Gaussian reference, d = {DIMENSION}, k = {K}: the estimate on standard-normal draws (true KL 0),")
    print(
        f"   mean +- s.e. and standard deviation over {args.reps} keys; beside it the weighted estimate over k = 1..{K}"
    )
    reference = {}
    for chains, kept in LAYOUTS:
        kl, weighted = standard_normal_bias(chains, kept, args.reps)
        reference[(chains, kept)] = (float(kl.mean()), float(kl.std(ddof=1) / np.sqrt(args.reps)))
        cells = [
            f"{v.mean():+.4f} +- {v.std(ddof=1) / np.sqrt(args.reps):.4f} (sd {v.std(ddof=1):.4f})"
            for v in (kl, weighted)
        ]
        print(
            f"   {chains} x {kept:5,} = {chains * kept:6,} draws: k = {K} {cells[0]}; weighted {cells[1]}", flush=True
        )
    negligible_noise(args.reps)
    if args.chains:
        realistic_noise(args.noise_seed, args.repeats, args.key, reference)


if __name__ == "__main__":
    main()
