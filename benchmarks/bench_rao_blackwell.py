"""Rao-Blackwellised KL (kl='rao-blackwell') vs the k-NN prior-density KL (kl='auto') on Syn's 7 coalitions, from
the same Gibbs chains (equal sampler budget): the spread of v_C over repeats, the error against the closed-form
KL of the exact-statistics posterior (meaningful at negligible noise), each estimator's time, and precision per
second (1 / (variance x seconds), the sampler's time included: RB's sampler also returns the conditionals) as a
ratio. At realistic noise the RB estimate is refused (NaN); the leave-one-out / own-included gap says why.

    python benchmarks/bench_rao_blackwell.py [--epsilons 1e7 0.5] [--repeats 3] [--chains 4] [--samples 1600]
"""

from __future__ import annotations

import argparse
import time

import jax
import numpy as np

import bayesval as bv
from bayesval.datasets.synthetic import make_syn
from bayesval.divergence import _mixture_kl, batched_mixture_kl, nig_kl
from bayesval.games.shapley import coalition_masks
from bayesval.inference.data import NoiseAwareData
from bayesval.parties import release_all
from bayesval.parties.execute import summarise


def timed(fn, compile_first=True):
    """fn's value and seconds (after one call to compile it, if compile_first)."""
    if compile_first:
        fn()
    start = time.perf_counter()
    value = jax.block_until_ready(fn())
    return value, time.perf_counter() - start


def closed_forms(model, parties, masks) -> np.ndarray:
    prior = model.priors(2).model
    values = []
    for mask in masks:
        members = [p for p, member in zip(parties, mask) if member]
        statistic, count = sum(p.exact_statistic() for p in members), sum(len(p.X) for p in members)
        values.append(nig_kl(model.exact_posterior(statistic, count, 2), prior))
    return np.array(values)


def one_epsilon(epsilon: float, seed: int, args) -> None:
    syn = make_syn(seed=0)
    parties = [
        bv.Party(X, y, epsilon=epsilon, bounds=syn.bounds, name=f"party {i + 1}", noise_seed=seed + i)
        for i, (X, y) in enumerate(syn.parties)
    ]
    model = bv.models.LinearRegression()
    data = NoiseAwareData.from_releases(release_all(model, parties))
    config = bv.SamplerConfig(
        num_chains=args.chains, num_warmup=args.warmup, num_samples=args.samples, num_repeats=2, progress_bar=False
    )
    masks = np.repeat(coalition_masks(3), args.repeats, axis=0)  # (coalition, repeat) rows
    keys = jax.random.split(jax.random.key(0), len(masks))

    def sample(conditionals):
        return lambda: model.posterior_draws(keys, data, masks, config, conditionals=conditionals)

    draws, sampler_rb = timed(sample(True), compile_first=False)  # one run each, compilation included
    density, prior = model.prior_log_density(data), model.conjugate_prior(data)
    knn, time_knn = timed(lambda: summarise(draws.draws, draws.kept_chains, 4, density)[0])
    point_keys = jax.random.split(jax.random.key(1), len(masks))
    rb, time_rb = timed(lambda: batched_mixture_kl(point_keys, draws.conditionals, draws.kept_chains, prior))
    flat = jax.tree.map(lambda a: a.reshape(len(masks), -1, *a.shape[3:]), draws.conditionals)
    lower, gap = jax.vmap(lambda k, c: _mixture_kl(k, c, np.ones(c.mean.shape[0], bool), prior, 1024))(point_keys, flat)

    by_coalition = (len(coalition_masks(3)), args.repeats)
    knn, rb = np.asarray(knn).reshape(by_coalition), np.asarray(rb).reshape(by_coalition)
    lower, gap = np.asarray(lower).reshape(by_coalition), np.asarray(gap).reshape(by_coalition)
    exact = closed_forms(model, parties, coalition_masks(3))
    print(f"\nepsilon = {epsilon:g}: {args.chains} chains x {args.samples} draws, {args.repeats} repeats per coalition")
    print(f"estimator on all rows: k-NN {time_knn:.2f} s, RB {time_rb:.2f} s")
    print("coalition  closed form   k-NN mean (sd)       RB mean (sd) or its LOO value   RB gap (max)")
    for mask, e, k, r, g, lo in zip(coalition_masks(3), exact, knn, rb, gap, lower):
        rb_text = f"{r.mean():8.4f} ({r.std(ddof=1):.4f})" if np.isfinite(r).all() else f"refused: LOO {lo.mean():.2f}"
        print(f"{mask.astype(int)}   {e:9.4f}   {k.mean():8.4f} ({k.std(ddof=1):.4f})   {rb_text:20s} {g.max():.2e}")
    print(f"max |k-NN / closed form - 1| = {np.max(np.abs(knn.mean(axis=1) / exact - 1)):.4f}")
    if np.isfinite(rb).all():
        _, sampler_knn = timed(sample(False), compile_first=False)
        print(f"sampler, 7 x {args.repeats} rows: {sampler_knn:.1f} s plain, {sampler_rb:.1f} s with the conditionals")
        var_knn, var_rb = knn.var(axis=1, ddof=1).mean(), rb.var(axis=1, ddof=1).mean()
        cost_knn, cost_rb = sampler_knn + time_knn, sampler_rb + time_rb
        print(f"max |RB / closed form - 1| = {np.max(np.abs(rb.mean(axis=1) / exact - 1)):.4f}")
        print(f"variance k-NN / RB (mean over coalitions) = {var_knn / var_rb:.1f}")
        print(f"time RB / k-NN: estimator {time_rb / time_knn:.2f}, sampler + estimator {cost_rb / cost_knn:.3f}")
        print(f"precision per second RB / k-NN = {(var_knn * cost_knn) / (var_rb * cost_rb):.1f}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--epsilons", type=float, nargs="+", default=[1e7, 0.5])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--chains", type=int, default=4)
    parser.add_argument("--warmup", type=int, default=800)
    parser.add_argument("--samples", type=int, default=1600)
    args = parser.parse_args()
    for index, epsilon in enumerate(args.epsilons):
        one_epsilon(epsilon, 2000 + 10 * index, args)  # a noise seed per release


if __name__ == "__main__":
    main()
