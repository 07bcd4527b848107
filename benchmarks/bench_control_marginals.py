"""How close each control variate is to the sampled surprise on the coalitions of a saved party valuation: the
coalitions' Laplace surprise (the control beyond 12 parties from 2026-11-29 to 2026-12-01, where a fit that failed
took the party product's value) and the party product alone (`LinearRegression.surrogate_game`, the control since),
side by side on the same coalitions.

    python benchmarks/bench_scale.py --end-to-end 24 --child members --tolerance 0.03 --control-variate \
        --max-permutations 40 --save /tmp/24.npz
    python benchmarks/bench_control_marginals.py /tmp/24.npz [--product-only [--chains]]

For each control u, the sampled surprise v minus u of every coalition by size (its median and spread, and the
coalitions more than 0.5 nats from their size's median), then the marginals of v - u a permutation run averages: for
each party i and each sampled coalition S holding i whose S - {i} was sampled too, with 1 to n - 2 members in
S - {i} (the first and last positions are groups of their own, `bayesval.games.samplers`), (v - u)(S) - (v - u)(S -
{i}), by position (their mean and spread in bins of 4 positions). Their standard deviation and kurtosis per party
(median and largest over the parties) say how far the run's standard errors spread and how far they can be trusted:
a kurtosis of k leaves m marginals about 2 / (k / m - (m - 3) / (m (m - 1))) degrees of freedom
(`bayesval.results.variance`), where the stopping rule asks for 10. `--chains` (with `--product-only`) draws the
most and least off coalitions of 3 to 7 members again by today's Gibbs chains: where the chains' v - u is as far
off as importance sampling's, the spread is the control's error, not the route's.
"""

from __future__ import annotations

import argparse
import dataclasses
import time
import warnings

import jax
import numpy as np
from bench_scale import releases_of
from bench_surrogate_levels import surprise_levels

import bayesval as bv
from bayesval.games.masks import mask_codes
from bayesval.inference.data import NoiseAwareData
from bayesval.parties.surprise import CoalitionSurprise

OUTLIER = 0.5  # nats from the size's median of v - u


def marginals(codes: np.ndarray, difference: np.ndarray, num_parties: int, noise=None) -> list[np.ndarray]:
    """Per party, the marginals of `difference` (v - u of each coalition of `codes`) between sampled coalitions one
    member apart, at positions 1 to n - 2: (marginal, position, its estimates' noise variance) (m, 3), the last from
    the coalitions' standard errors `noise` where given (else 0)."""
    index = {int(code): j for j, code in enumerate(codes)}
    noise = np.zeros(len(codes)) if noise is None else np.asarray(noise, float) ** 2
    per_party = []
    for party in range(num_parties):
        bit, found = 1 << party, []
        for code in codes.tolist():
            smaller = code ^ bit
            if code & bit and smaller in index and 1 <= smaller.bit_count() <= num_parties - 2:
                rows = index[code], index[smaller]
                gain = difference[rows[0]] - difference[rows[1]]
                found.append((gain, smaller.bit_count(), noise[rows[0]] + noise[rows[1]]))
        per_party.append(np.array(found).reshape(-1, 3))
    return per_party


def report(name: str, codes: np.ndarray, sizes: np.ndarray, difference: np.ndarray, num_parties: int, noise=None):
    print(f"\n{name}: v - u by coalition size (median, standard deviation, coalitions > {OUTLIER} nats off)")
    for size in np.unique(sizes):
        chosen = difference[sizes == size]
        median = np.median(chosen)
        off = int((np.abs(chosen - median) > OUTLIER).sum())
        print(f"  {size:3d} members: {chosen.size:4d} coalitions, {median:+.2f}, {chosen.std():.2f}, {off}")
    spread, kurtosis = [], []
    per_party = marginals(codes, difference, num_parties, noise)
    for found in per_party:
        centred = found[:, 0] - found[:, 0].mean()
        spread.append(found[:, 0].std(ddof=1))
        kurtosis.append(np.mean(centred**4) / np.mean(centred**2) ** 2)
    every = np.concatenate(per_party)
    bins = [(start, min(start + 3, num_parties - 2)) for start in range(1, num_parties - 1, 4)]
    by_position = [every[(every[:, 1] >= low) & (every[:, 1] <= high)] for low, high in bins]
    print(
        "  marginals of v - u by position (their mean, spread, the estimates' noise in it): "
        + ", ".join(
            f"{low}-{high}: {x[:, 0].mean():+.3f}, {x[:, 0].std():.3f}, {np.sqrt(x[:, 2].mean()):.3f}"
            for (low, high), x in zip(bins, by_position)
        )
    )
    print(
        f"  marginals of v - u: standard deviation median {np.median(spread):.3f}, largest {max(spread):.3f}; "
        f"kurtosis median {np.median(kurtosis):.1f}, largest {max(kurtosis):.1f}"
    )


def against_chains(masks: np.ndarray, sampled: np.ndarray, difference: np.ndarray, data: NoiseAwareData) -> None:
    """Whether the spread of v - u is the control's error or the route's: at each size 3 to 7, the coalitions whose
    v - u lies lowest, highest and at the median, drawn again by today's Gibbs chains (fast preset, 2 repeats, one
    vectorised call), v - u of both beside each other, from the size's median."""
    sizes = masks.sum(axis=1)
    chosen = []
    for size in range(3, 8):
        rows = np.flatnonzero(sizes == size)
        order = rows[np.argsort(difference[rows])]
        chosen += [order[0], order[-1], order[len(order) // 2]]
    config = dataclasses.replace(bv.SamplerConfig.preset("fast").for_sampled_game(), progress_bar=False)
    surprise = CoalitionSurprise(bv.models.LinearRegression(), data, config, 4, jax.random.key(7), 8, surprise="mcmc")
    start = time.perf_counter()
    chains = np.asarray(surprise(masks[chosen])).mean(axis=0)
    print(
        f"\n{len(chosen)} coalitions by Gibbs chains in {time.perf_counter() - start:.0f} s (size: v - u from the "
        "size's median, importance sampling's and the chains'; their v)"
    )
    for row, by_chains in zip(chosen, chains):
        median = np.median(difference[sizes == sizes[row]])
        ours, theirs = difference[row] - median, by_chains - (sampled[row] - difference[row]) - median
        print(f"  {sizes[row]}: {ours:+.3f} {theirs:+.3f}; {sampled[row]:.3f} {by_chains:.3f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("result", help="a party valuation of bench_scale.py's Syn parties, saved by --save")
    parser.add_argument("--product-only", action="store_true", help="the party product alone (no Laplace fits)")
    parser.add_argument(
        "--chains", action="store_true", help="with --product-only: the most and least off coalitions by Gibbs chains"
    )
    args = parser.parse_args()
    warnings.simplefilter("ignore")
    result = bv.ValuationResult.load(args.result)
    masks = np.asarray(result.coalition_masks, bool)
    num_parties = masks.shape[1]
    codes, sampled = mask_codes(masks), np.asarray(result.coalition_values, float)
    data = NoiseAwareData.from_releases(releases_of(num_parties))
    levels = surprise_levels(data)
    start = time.perf_counter()
    sizes = masks.sum(axis=1)
    if args.product_only:
        product = levels.levels[0](masks)
        seconds = time.perf_counter() - start
        print(f"{len(codes)} coalitions of {num_parties} parties; their party products in {seconds:.1f} s")
        noise = np.asarray(result.coalition_stderr, float).reshape(len(codes), -1)[:, 0]
        report("the party product", codes, sizes, sampled - product.values, num_parties, noise)
        if args.chains:
            against_chains(masks, sampled, sampled - product.values, data)
        return
    product, laplace = (level(masks) for level in levels.levels)
    print(
        f"{len(codes)} coalitions of {num_parties} parties; their Laplace fits and party products in "
        f"{time.perf_counter() - start:.1f} s, {int((~laplace.usable).sum())} fits unconverged"
    )
    laplace_or_product = np.where(laplace.usable, laplace.values, product.values)
    report(
        "the Laplace surprise (the party product where a fit failed)",
        codes,
        sizes,
        sampled - laplace_or_product,
        num_parties,
    )
    report("the party product alone", codes, sizes, sampled - product.values, num_parties)
    report("no control", codes, sizes, sampled, num_parties)


if __name__ == "__main__":
    main()
