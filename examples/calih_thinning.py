"""Sim et al. (2023) Table 2 on CaliH: the grand coalition's surprise v_N against the Gibbs thinning factor t, with the
number of kept draws fixed. Correlated (unthinned) draws sit closer to their neighbours than independent ones, so
the k-NN KL estimate is too high at small t; the paper's v_N falls with t and levels off by t ~ 16.

    python examples/calih_thinning.py                # 8 chains x 100 kept draws, 3 repeats (~12 min on 2 busy cores)
    python examples/calih_thinning.py --num-chains 16 --num-samples 1875 --num-warmup 10000 --num-repeats 5  # paper
    python examples/calih_thinning.py --num-chains 2 --num-samples 40 --num-warmup 20 --num-repeats 2  # smoke

--num-samples is the number of draws kept per chain at every t (each chain runs t times as many sweeps), so every
t estimates v_N from num_chains * num_samples draws (the paper: 16 x 1875 = 30,000). Each repeat is fresh chains
and a fresh prior sample. The paper's protocol is followed: Algorithm 1 as printed (no collapsed moves) and the
two-sample k-NN estimator on the pooled draws, without the Theiler window `bv.valuate` keeps (which, with the
collapsed moves, is how bayesval avoids thinning); a second column keeps each draw's own-chain neighbours within
--window kept draws out, as `bv.valuate` does, and --collapsed-moves 8 runs bayesval's default sampler.
Only the grand coalition is sampled, so this script reaches past `valuate` to the model's own `posterior_draws`
with the stacked releases (`bv.NoiseAwareData`).
"""

from __future__ import annotations

import argparse
import time

import jax
import numpy as np

import bayesval as bv
from bayesval.datasets import load_california
from bayesval.divergence import batched_kl

PAPER = {1: 14.849, 2: 12.839, 4: 11.626, 8: 11.038, 16: 10.834, 20: 10.790, 30: 10.793}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--thinnings", default="1,2,4,8,16,20,30", help="comma-separated thinning factors")
    parser.add_argument("--k", type=int, default=4, help="neighbours in the KL estimator")
    parser.add_argument("--window", type=int, default=10, help="Theiler window of the second column (kept draws)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--collapsed-moves", type=int, default=0, help="collapsed moves per sweep (0: Algorithm 1 as printed)"
    )
    bv.SamplerConfig.add_arguments(parser)
    parser.set_defaults(num_chains=8, num_samples=100, num_warmup=200, num_repeats=3)
    args = parser.parse_args()
    thinnings = [int(t) for t in args.thinnings.split(",")]
    if args.thinning not in (None, 1) or min(thinnings) < 1:
        parser.error("set the thinning factors with --thinnings (each >= 1), not --thinning")
    base = bv.SamplerConfig.from_arguments(args, progress_bar=False)
    kept = base.num_samples

    calih = load_california(seed=args.seed)
    parties = calih.make_parties((0.2, 0.1, 0.2), noise_seeds=(1, 2, 3))
    data = bv.NoiseAwareData.from_releases([party.release() for party in parties])
    model = calih.model(collapsed_moves=args.collapsed_moves)
    grand = np.ones((base.num_repeats, len(parties)), bool)  # one row per repeat, each with its own chains
    print(
        f"CaliH: parties of {[len(p.X) for p in parties]} rows, epsilon (0.2, 0.1, 0.2), Renyi order 2; "
        f"{base.num_chains} chains x {kept} kept draws, {base.num_warmup} burn-in sweeps, {base.num_repeats} repeats, "
        f"{args.collapsed_moves} collapsed moves per sweep"
    )
    print(f"thin t   sweeps/chain   v_N (mean ± s.e.)   paper    | window {args.window} (as bv.valuate)   seconds")
    for t in thinnings:
        config = base.with_(num_samples=t * kept, thinning=t)
        key_posterior, key_prior = jax.random.split(jax.random.fold_in(jax.random.key(args.seed), t))
        start = time.perf_counter()
        draws = model.posterior_draws(key_posterior, data, grand, config).draws  # (repeats, chains, kept, 8)
        keys = jax.random.split(key_prior, base.num_repeats)
        priors = np.stack([model.prior_draws(key, data, base.draws_per_repeat) for key in keys])  # (repeats, m, 8)
        every_chain = np.ones(draws.shape[:2], bool)
        pooled, windowed = (
            np.asarray(batched_kl(draws, every_chain, args.k, prior=priors, window=window))
            for window in (0, args.window)
        )
        seconds = time.perf_counter() - start
        paper = f"{PAPER[t]:7.3f}" if t in PAPER else "      -"
        print(
            f"{t:6d}   {t * kept + base.num_warmup:12d}   {_mean_stderr(pooled)}    {paper}  |  "
            f"{_mean_stderr(windowed)}           {seconds:7.1f}"
        )


def _mean_stderr(estimates: np.ndarray) -> str:
    return f"{np.mean(estimates):8.3f} ± {np.std(estimates, ddof=1) / np.sqrt(len(estimates)):.3f}"


if __name__ == "__main__":
    main()
