"""How close each control variate is to the sampled surprise on the coalitions of a saved party valuation: the
coalitions' Laplace surprise (the control beyond 12 parties from 2026-11-29 to 2026-12-01, where a fit that failed
took the party product's value) and the party product alone (`LinearRegression.surrogate_game`, the control since),
side by side on the same coalitions.

    python benchmarks/bench_scale.py --end-to-end 24 --child members --tolerance 0.03 --control-variate \
        --max-permutations 40 --save /tmp/24.npz
    python benchmarks/bench_control_marginals.py /tmp/24.npz

For each control u, the sampled surprise v minus u of every coalition by size (its median and spread, and the
coalitions more than 0.5 nats from their size's median), then the marginals of v - u a permutation run averages: for
each party i and each sampled coalition S holding i whose S - {i} was sampled too, with 1 to n - 2 members in
S - {i} (the first and last positions are groups of their own, `bayesval.games.samplers`), (v - u)(S) - (v - u)(S -
{i}). Their standard deviation and kurtosis per party (median and largest over the parties) say how far the run's
standard errors spread and how far they can be trusted: a kurtosis of k leaves m marginals about 2 / (k / m - (m -
3) / (m (m - 1))) degrees of freedom (`bayesval.results.variance`), where the stopping rule asks for 10.
"""

from __future__ import annotations

import argparse
import time
import warnings

import numpy as np
from bench_scale import releases_of
from bench_surrogate_levels import surprise_levels

import bayesval as bv
from bayesval.games.masks import mask_codes
from bayesval.inference.data import NoiseAwareData

OUTLIER = 0.5  # nats from the size's median of v - u


def marginals(codes: np.ndarray, difference: np.ndarray, num_parties: int) -> list[np.ndarray]:
    """Per party, the marginals of `difference` (v - u of each coalition of `codes`) between sampled coalitions one
    member apart, at positions 1 to n - 2."""
    index = {int(code): j for j, code in enumerate(codes)}
    per_party = []
    for party in range(num_parties):
        bit, found = 1 << party, []
        for code in codes.tolist():
            smaller = code ^ bit
            if code & bit and smaller in index and 1 <= smaller.bit_count() <= num_parties - 2:
                found.append(difference[index[code]] - difference[index[smaller]])
        per_party.append(np.array(found))
    return per_party


def report(name: str, codes: np.ndarray, sizes: np.ndarray, difference: np.ndarray, num_parties: int) -> None:
    print(f"\n{name}: v - u by coalition size (median, standard deviation, coalitions > {OUTLIER} nats off)")
    for size in np.unique(sizes):
        chosen = difference[sizes == size]
        median = np.median(chosen)
        off = int((np.abs(chosen - median) > OUTLIER).sum())
        print(f"  {size:3d} members: {chosen.size:4d} coalitions, {median:+.2f}, {chosen.std():.2f}, {off}")
    spread, kurtosis = [], []
    for found in marginals(codes, difference, num_parties):
        centred = found - found.mean()
        spread.append(found.std(ddof=1))
        kurtosis.append(np.mean(centred**4) / np.mean(centred**2) ** 2)
    print(
        f"  marginals of v - u: standard deviation median {np.median(spread):.3f}, largest {max(spread):.3f}; "
        f"kurtosis median {np.median(kurtosis):.1f}, largest {max(kurtosis):.1f}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("result", help="a party valuation of bench_scale.py's Syn parties, saved by --save")
    args = parser.parse_args()
    warnings.simplefilter("ignore")
    result = bv.ValuationResult.load(args.result)
    masks = np.asarray(result.coalition_masks, bool)
    num_parties = masks.shape[1]
    codes, sampled = mask_codes(masks), np.asarray(result.coalition_values, float)
    data = NoiseAwareData.from_releases(releases_of(num_parties))
    levels = surprise_levels(data)
    start = time.perf_counter()
    product, laplace = (level(masks) for level in levels.levels)
    print(
        f"{len(codes)} coalitions of {num_parties} parties; their Laplace fits and party products in "
        f"{time.perf_counter() - start:.1f} s, {int((~laplace.usable).sum())} fits unconverged"
    )
    sizes = masks.sum(axis=1)
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
