"""A noise-aware surrogate game as a control variate for permutation sampling, measured (issue 30): what
`valuate(..., control_variate=True)` does beyond `exact_up_to` (docs/games.md, "Control variates").

A control variate replaces the sampled game v by v - beta u, where u is a surrogate whose Shapley values are cheap
to compute exactly, and adds beta phi(u) back; it pays as far as the marginals of u track those of v. The identity
phi(v) = beta phi(u) + phi(v - beta u) holds for any u that is a fixed function of the coalition, so a poor
surrogate costs precision, never bias. The marginals of the noisy game follow the noise draws, which a surrogate of
the data alone (the exact statistics' posterior) cannot see. This one sees them: u_C is the KL from the prior of a
Laplace approximation to the coalition's posterior under the CLT-marginal model of the releases
(`bayesval.inference.laplace`: the statistics integrated out, each member's data model kept, arrow-structured Newton
steps, the KL in closed form).

Syn parties of 100 points at epsilon = 0.5 (`bench_scale.py`'s releases), key 0, the fast preset:

    python benchmarks/bench_control_variate.py [--parties 6]
        every coalition valued by `bv.valuate` (exact enumeration) and by the surrogate. Latin permutation blocks
        stratify by coalition size, so what is left of a marginal's variance is its spread within a size: printed
        per party for v, v - u and v - beta* u (beta* the slope of a party's marginal of v on that of u within a
        size, pooled over parties and sizes: the variance-minimising coefficient), with the share of v's variance
        each leaves (on the largest party's and on the mean)
    python benchmarks/bench_control_variate.py --parties 12 --sampled
        the default route's first batch of Latin permutations (`bv.valuate`, stopped after it), the surrogate of
        the coalitions it valued, and the same shares over the marginals whose two coalitions were both valued
    python benchmarks/bench_control_variate.py --parties 12 --surrogate-only
        the surrogate of every coalition (what phi(u) needs), timed
    python benchmarks/bench_control_variate.py --parties 12 --end-to-end 0.02
        the default route with `control_variate=True` to every stderr <= 0.02, timed, and beside it the estimate
        without the control variate from the same permutations and coalition estimates: the stderr each reaches and
        the permutations plain sampling would need
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from itertools import combinations
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

import bayesval as bv
from bayesval.games.masks import coalition_masks, mask_codes
from bayesval.games.stopping import MaxEvaluations
from bayesval.inference.data import NoiseAwareData
from bayesval.inference.laplace import surprise_table

sys.path.insert(0, str(Path(__file__).parent))
from bench_scale import releases_of  # noqa: E402


def laplace_surrogate(model, data: NoiseAwareData, masks: np.ndarray) -> np.ndarray:
    """u_C of each coalition mask, from the Laplace surprise of every coalition (`surprise_table`, the control up
    to 12 parties until 2026-12-01), timed."""
    start = time.perf_counter()
    priors, statistic = model.priors(2), model.statistic(2)
    table = surprise_table(data, priors.model, priors.data, statistic)
    print(
        f"  Laplace surrogate of all {len(table.values) - 1} coalitions: {time.perf_counter() - start:.1f} s "
        f"(compilation included), {len(table.unconverged)} fits unconverged"
    )
    return table.values[mask_codes(masks)]


def end_to_end(model, releases, tolerance: float) -> None:
    """The default route to every stderr <= tolerance with its control variate, and the plain estimate from the same
    permutations: the coalitions the run valued, looked up by a table utility and sampled again with the route's
    key, sampler and batches but no control (so both see the very same coalitions and surprise estimates)."""
    start = time.perf_counter()
    result = bv.valuate(
        model,
        releases,
        key=0,
        config="fast",
        exact_up_to=1,
        tolerance=tolerance,
        progress_bar=False,
        control_variate=True,
    )
    seconds = time.perf_counter() - start
    state = result.state
    ((batch_size, batches),) = state.streams.values()
    print(
        f"bv.valuate, {len(releases)} parties, tolerance {tolerance}, control variate: {seconds:.0f} s, "
        f"{state.batch_draws} permutations ({batches} batches), {len(result.coalition_values)} coalitions; "
        f"{result.method}"
    )
    print(f"  phi {np.round(result.values, 3).tolist()}\n  stderr {np.round(result.stderr, 4).tolist()}")
    print(
        f"  degrees of freedom {np.round(state.estimate().dof, 1).tolist()}; the utility's error: "
        + ("the per-repeat spread" if state.noise is None else f"from {state.noise.num_coalitions} cached coalitions")
    )
    estimates = result.coalition_estimates.estimates
    repeats = len(next(iter(estimates.values())))
    table = np.zeros((repeats, 2 ** len(releases)))
    for code, row in estimates.items():
        table[:, code] = row
    plain = bv.games.semivalue(
        bv.games.KeylessUtility(lambda masks: jnp.asarray(table)[:, mask_codes(masks)]),  # cached, as the route's
        len(releases),
        jax.random.split(jax.random.key(0))[1],  # the route's permutation key (bayesval.parties.valuation)
        sampler=bv.games.PermutationSampler(latin=True),
        stop=MaxEvaluations(state.evaluations),
        batch_size=batch_size,
        independent_estimates=state.noise is not None,  # the utility's error estimated as the route estimated it
    )
    assert plain.state.batch_draws == state.batch_draws
    ratio = (result.stderr / plain.stderr) ** 2
    needed = state.batch_draws * (plain.stderr.max() / tolerance) ** 2
    print(
        f"  same permutations, no control variate: stderr {np.round(plain.stderr, 4).tolist()}, degrees of freedom "
        f"{np.round(plain.diagnostics['indices']['dof'], 1).tolist()}\n"
        f"  variance ratio (control / plain) by party {np.round(ratio, 3).tolist()}; the largest stderr "
        f"{result.stderr.max():.4f} vs {plain.stderr.max():.4f}: plain sampling needs about {needed:.0f} permutations "
        f"for {tolerance}"
    )


def centred_marginals(game: dict[frozenset, float], num_parties: int) -> np.ndarray:
    """Each party's marginals v(S u i) - v(S) over the coalitions S of each size 1..n-2 (sizes 0 and n - 1 hold one
    coalition each), less their mean within the size: (n, sizes, coalitions of a size)."""
    centred = []
    for party in range(num_parties):
        others = [j for j in range(num_parties) if j != party]
        per_size = [
            [game[frozenset(s) | {party}] - game[frozenset(s)] for s in combinations(others, size)]
            for size in range(1, num_parties - 1)
        ]
        centred.append([np.asarray(row) - np.mean(row) for row in per_size])
    return centred


def nested_pair_spread(masks: np.ndarray, values: np.ndarray, surrogate: np.ndarray) -> None:
    """Prints each party's variance of its marginals within a coalition size for v, and how much of it v - u and
    v - beta* u leave, over the marginals v(S u i) - v(S), 1 <= |S| <= n - 2, whose two coalitions were both valued:
    those of the permutations sampled, and any others nested by chance."""
    num_parties = masks.shape[1]
    codes = mask_codes(masks)
    game = {int(c): (v, u) for c, v, u in zip(codes, values, surrogate)}
    groups: dict[tuple[int, int], list[tuple[float, float]]] = {}
    for code, (v, u) in game.items():
        size = code.bit_count()
        for party in range(num_parties):
            joined = code | 1 << party
            if joined != code and joined in game and size <= num_parties - 2:
                groups.setdefault((party, size), []).append((game[joined][0] - v, game[joined][1] - u))
    kept = [(party, np.asarray(rows) - np.mean(rows, axis=0)) for (party, _), rows in groups.items() if len(rows) > 1]
    stacked = np.concatenate([centred for _, centred in kept])
    owners = np.concatenate([np.full(len(centred), party) for party, centred in kept])
    dof = sum(len(centred) - 1 for _, centred in kept)
    beta = (stacked[:, 0] @ stacked[:, 1]) / (stacked[:, 1] @ stacked[:, 1])
    print(f"{len(stacked)} nested marginals in {len(kept)} (party, size) groups, {dof} degrees of freedom")
    variances = [
        (stacked[owners == party, 0] ** 2).sum() / sum(len(c) - 1 for p, c in kept if p == party)
        for party in range(num_parties)
    ]
    print(f"  v's variance within a size, by party (nats^2): {np.round(variances, 4).tolist()}")
    for label, coefficient in (("v - u", 1.0), (f"v - {beta:.2f} u", beta)):
        residual = stacked[:, 0] - coefficient * stacked[:, 1]
        shares = np.array(
            [
                (residual[owners == party] ** 2).sum() / (stacked[owners == party, 0] ** 2).sum()
                for party in range(num_parties)
            ]
        )
        print(
            f"  {label:>12}: leaves {(residual @ residual) / (stacked[:, 0] @ stacked[:, 0]):.2f} of v's variance "
            f"within a (party, size); by party {np.round(shares, 2).tolist()}; the largest variance left is "
            f"{np.max(shares * variances):.4f}, {np.max(shares * variances) / np.max(variances):.3f} of v's largest"
        )


def within_size_variances(centred) -> np.ndarray:
    """Each party's mean over the sizes of its marginals' variance within a size (n,)."""
    return np.array([np.mean([np.mean(row**2) for row in party]) for party in centred])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--parties", type=int, default=6)
    parser.add_argument("--surrogate-only", action="store_true", help="fit every coalition's surrogate, no sampling")
    parser.add_argument(
        "--sampled", action="store_true", help="one batch of Latin permutations (the default route's first batch)"
    )
    parser.add_argument("--save", help="with --sampled: an .npz file for the coalitions, their v and u, and phi")
    parser.add_argument(
        "--end-to-end", type=float, metavar="TOLERANCE", help="the default route to every stderr <= TOLERANCE"
    )
    args = parser.parse_args()
    if args.save and not args.sampled:
        parser.error("--save saves the coalitions of --sampled")
    jax.config.update("jax_enable_x64", True)
    warnings.simplefilter("ignore", UserWarning)
    model, releases = bv.models.LinearRegression(), releases_of(args.parties)
    data = NoiseAwareData.from_releases(releases)
    if args.end_to_end:
        end_to_end(model, releases, args.end_to_end)
        return
    if args.surrogate_only:
        masks = coalition_masks(args.parties)
        start = time.perf_counter()
        surrogate = laplace_surrogate(model, data, masks)
        print(
            f"Laplace surrogate of {len(masks)} coalitions: {time.perf_counter() - start:.0f} s; "
            f"u {surrogate.min():.3f} to {surrogate.max():.3f} nats"
        )
        return
    start = time.perf_counter()
    if args.sampled:  # stops after the first batch: the default route's Latin blocks, sampled repeats and budget
        stop = MaxEvaluations(1)
        result = bv.valuate(
            model, releases, key=0, config="fast", exact_up_to=1, stop=stop, progress_bar=False, control_variate=False
        )
        print(f"bv.valuate, {args.parties} parties, one batch ({result.method}): {time.perf_counter() - start:.0f} s")
    else:
        result = bv.valuate(model, releases, key=0, config="fast", exact_up_to=args.parties, progress_bar=False)
        print(f"bv.valuate, {args.parties} parties, every coalition: {time.perf_counter() - start:.0f} s")
    masks, values = np.asarray(result.coalition_masks, bool), np.asarray(result.coalition_values)
    start = time.perf_counter()
    surrogate = laplace_surrogate(model, data, masks)
    print(f"Laplace surrogate of {len(masks)} coalitions: {time.perf_counter() - start:.0f} s")
    if args.sampled:
        if args.save:
            phi, stderr = result.values, result.stderr
            np.savez(args.save, masks=masks, values=values, surrogate=surrogate, phi=phi, stderr=stderr)
        nested_pair_spread(masks, values, surrogate)
        return
    slope = np.polyfit(surrogate, values, 1)[0]
    print(
        f"v: {values.min():.3f} to {values.max():.3f} nats; u: {surrogate.min():.3f} to {surrogate.max():.3f}; "
        f"correlation {np.corrcoef(values, surrogate)[0, 1]:.4f}; slope beta {slope:.3f}"
    )
    keys = [frozenset(np.flatnonzero(mask).tolist()) for mask in masks]
    marginals_v, marginals_u = (centred_marginals(dict(zip(keys, game)), args.parties) for game in (values, surrogate))
    pairs = [(dv, du) for party_v, party_u in zip(marginals_v, marginals_u) for dv, du in zip(party_v, party_u)]
    best = sum((dv * du).sum() for dv, du in pairs) / sum((du**2).sum() for dv, du in pairs)
    print(f"beta* (pooled within-size slope of v's marginals on u's): {best:.3f}")
    base = within_size_variances(marginals_v)
    for label, beta in (("v", 0.0), ("v - u", 1.0), (f"v - {slope:.2f} u", slope), (f"v - {best:.2f} u", best)):
        game = values - beta * surrogate
        variances = within_size_variances(centred_marginals(dict(zip(keys, game)), args.parties))
        largest, mean = variances.max() / base.max(), variances.mean() / base.mean()
        print(
            f"  {label:>12}: spread within a size, by party {np.round(np.sqrt(variances), 3).tolist()}; of v's "
            f"variance it leaves {largest:.2f} on the largest, {mean:.2f} on the mean"
        )


if __name__ == "__main__":
    main()
