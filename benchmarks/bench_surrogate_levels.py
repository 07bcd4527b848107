"""The estimated control of 2026-11-29 to 2026-12-01 beyond 12 parties: the Laplace surprise's Shapley values
estimated alone (the route before 2026-11-29) against the same estimate sampled against the product of the parties'
quadratic likelihoods beneath it (`SurrogateLevels`, with `LinearRegression.surrogate_game`, the party product, as the
cheaper level; since 2026-12-01 that product alone is the control there), side by side in one run on the same Syn
releases (100 points a party, epsilon 0.5, `bench_scale.releases_of`).

    python benchmarks/bench_surrogate_levels.py --parties 12 --keys 0 1 2 --tolerance 0.01 0.005
        # every coalition's Laplace surprise is fitted once (4,095 fits), so each estimate draws from the table: the
        # Laplace evaluations each spends, and its error against the exact Shapley values of the table
    ... --refitted   # the Laplace table (`bayesval.inference.laplace.surprise_table`): failed fits started again
    python benchmarks/bench_surrogate_levels.py --parties 24 --keys 0 --tolerance 0.01
        # the Laplace fits run as the valuation runs them: evaluations and seconds of each side
    ... --levels-only   # the levels' side alone (alone, 24 parties run to the 20,000-fit cap: about 25 minutes)

Printed: for each key and tolerance, the Laplace evaluations alone and with the level beneath and their ratio, the
largest standard error of each, (12 parties) the RMS z of each against the exact values, and the seconds each took
(with the levels: both levels).
"""

from __future__ import annotations

import argparse
import time
import warnings

import jax
import numpy as np
from bench_scale import releases_of

import bayesval as bv
from bayesval.games.control import SurrogateLevels, SurrogateValues, surrogate_values
from bayesval.games.masks import coalition_masks, mask_codes
from bayesval.games.multifidelity import estimated_control
from bayesval.games.weights import SHAPLEY, coalition_coefficients
from bayesval.inference.data import NoiseAwareData
from bayesval.inference.laplace import CONVERGED, laplace_surprises, surprise_table

MAX_FITS = 20_000  # the valuation's cap on the Laplace evaluations (MAX_SURROGATE_EVALUATIONS)
MODEL = bv.models.LinearRegression()


def surprise_levels(data: NoiseAwareData) -> SurrogateLevels:
    """The party product (`LinearRegression.surrogate_game`) beneath the Laplace surprise of each coalition (0 for the
    empty one, flagged where its fit did not converge), for Syn's 2 features."""
    priors, statistic = MODEL.priors(2), MODEL.statistic(2)

    def laplace(masks) -> SurrogateValues:
        masks = np.asarray(masks, bool)
        fit = laplace_surprises(data, masks, priors.model, priors.data, statistic)
        values, gradient = np.asarray(fit.surprise, np.float64), np.asarray(fit.gradient)
        empty = ~masks.any(axis=1)
        return SurrogateValues(np.where(empty, 0.0, values), empty | ((gradient <= CONVERGED) & np.isfinite(values)))

    return SurrogateLevels((MODEL.surrogate_game(data), laplace))


def tabled(levels: SurrogateLevels, num_parties: int, refitted: SurrogateValues | None = None):
    """The Laplace level replaced by a lookup in its table of every coalition (fitted once, with each fit's flag,
    or `refitted`), and the exact Shapley values of the surrogate each side estimates: the Laplace surprise with 0
    where its fit failed (alone), or with the cheaper level's value there (with the levels)."""
    masks = coalition_masks(num_parties, include_empty=True)
    table = levels.levels[-1](masks) if refitted is None else refitted

    def lookup(batch):
        codes = mask_codes(np.asarray(batch, bool))
        return SurrogateValues(table.values[codes], table.usable[codes])

    tabled_levels = SurrogateLevels((levels.levels[0], lookup))
    coefficients = coalition_coefficients(masks, SHAPLEY)
    exact = [surrogate_values(u, masks) @ coefficients for u in (lookup, tabled_levels)]
    print(f"fits failed: {np.sum(~table.usable)} of {len(masks) - 1} coalitions")
    return tabled_levels, exact


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--parties", type=int, default=12)
    parser.add_argument("--keys", type=int, nargs="+", default=[0])
    parser.add_argument("--tolerance", type=float, nargs="+", default=[0.01])
    parser.add_argument(
        "--levels-only", action="store_true", help="skip the estimate from the Laplace fits alone (24 parties: 25 min)"
    )
    parser.add_argument(
        "--refitted", action="store_true", help="12 parties: the control's own table, its failed fits started again"
    )
    args = parser.parse_args()
    warnings.simplefilter("ignore")
    n = args.parties
    data = NoiseAwareData.from_releases(releases_of(n))
    start = time.perf_counter()
    levels = surprise_levels(data)
    print(f"{n} parties: the parties' messages in {time.perf_counter() - start:.1f} s", flush=True)
    exact = None
    if n <= 12:
        start = time.perf_counter()
        refitted = None
        if args.refitted:
            priors = MODEL.priors(2)
            table = surprise_table(data, priors.model, priors.data, MODEL.statistic(2))
            refitted = SurrogateValues(table.values, np.ones(len(table.values), bool))
        levels, exact = tabled(levels, n, refitted)
        print(f"the Laplace table of {2**n - 1} coalitions in {time.perf_counter() - start:.1f} s", flush=True)
    print("key  tolerance  | alone: fits, max stderr, RMS z, s | levels: fits, cheap evaluations, max stderr, RMS z, s")
    print("                                                      (both levels) | fits alone / with levels")
    for tolerance in args.tolerance:
        for key in args.keys:
            row = []
            for side, surrogate in enumerate((levels.levels[-1], levels)):
                if side == 0 and args.levels_only:
                    row.append((None, np.nan, "-", np.nan))
                    continue
                start = time.perf_counter()
                control = estimated_control(
                    surrogate, n, jax.random.key(1000 + key), tolerance=tolerance, max_evaluations=MAX_FITS
                )
                seconds = time.perf_counter() - start
                stderr = np.sqrt(control.variances)
                z = (
                    "-"
                    if exact is None
                    else f"{np.sqrt(np.mean(((control.estimate - exact[side]) / stderr) ** 2)):.2f}"
                )
                row.append((control, stderr.max(), z, seconds))
            (alone, alone_sd, alone_z, alone_s), (stacked, sd, z, s) = row
            fits = np.nan if alone is None else alone.evaluations
            print(
                f"{key:3d}  {tolerance:9.4f}  | {fits:6} {alone_sd:.4f} {alone_z:>5} {alone_s:7.1f} | "
                f"{stacked.evaluations:6d} {stacked.below.evaluations:8d} {sd:.4f} {z:>5} {s:7.1f} "
                f"| {fits / stacked.evaluations:.2f}x",
                flush=True,
            )


if __name__ == "__main__":
    main()
