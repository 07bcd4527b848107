"""The party route's Shapley policy on replayed games: today's stopping rule against the one that stops on time, and
what the policy spends against the number of parties (issue 61).

    python benchmarks/bench_shapley_policy.py --part calibration [--keys 200] [--tolerance 0.02] [--noise 0.05]
    python benchmarks/bench_shapley_policy.py --part cost [--parties 3 6 12 24 50] [--keys 5]
    python benchmarks/bench_shapley_policy.py --part samplers [--parties 12 16 24] [--keys 12] [--noise 0.04]
    python benchmarks/bench_shapley_policy.py --part samplers --parties 24 --noise 0.045 --surrogate measured \
        --designs "plain permutations" "prefixed permutations (1)" "prefixed permutations (2)" \
        "prefixed permutations (3)"

A replayed game (`bayesval.parties.replay.ReplayedGame`) gives each coalition asked for two estimates (the repeats a
sampled coalition gets at the fast preset; three where every coalition is valued), its known value plus N(0, 0.02^2)
noise, drawn once per key and cached as the surprise caches them, and is valued by
`bayesval.parties.valuation.shapley_values`, the policy `valuate` runs: exact up to `exact_up_to` parties, else Latin
permutations against the control variate until the stopping rule holds.

* calibration: the 12-party table `tests/data/replayed_party_game_12.npz` (v the closed-form surprise of Syn parties'
  exact statistics, u the package's Laplace surprise of their releases at epsilon = 1e7; `tests/make_replayed_game.py`)
  whose exact Shapley values are known by enumeration, over `--keys` keys, with today's rule (every stderr <= t after
  64 permutations: `StandardError(t, min_count=64)`) and the new default (every stderr <= t and trusted: the game
  layer's degrees-of-freedom rule), the latter in batches of 36 permutations (as the chains take them) and of one
  Latin block (as importance sampling does, the rule checked after each block). Per rule: the permutations and
  coalitions spent, RMS z, the share of |z| above 4, stderr / spread over keys (per party, then the median and range
  over parties), and the share of converged indices with |error| <= 2t (the promise of `StandardError(t)`: at least
  93 %).
* cost: Syn parties of 100 points, v the closed-form surprise of their exact statistics (any number of parties), u
  v times (1 + e_C), e_C the Laplace surrogate's relative error on the 12-party table (a quadratic in the coalition's
  share of the parties, fitted there, plus its residual spread, 0.005, drawn once per coalition), to the issue's
  tolerances (0.02 up to 12 parties, 0.03 at 24, 0.05 at 50). Today's policy (the 64-permutation floor, no control
  variate beyond 12 parties) and the new one (no floor; beyond 12 the multi-fidelity control: phi(u) by the
  regression estimator), per key: permutations, coalitions valued (the expensive evaluations), the largest stderr and
  the largest |z| against the exact values where they are known (up to 12 parties), and the method (with the
  surrogate evaluations an estimated phi(u) spent).
* samplers: Latin blocks against plain permutations (in batches of 8, the rule's step where coalitions are valued
  one after another) on the replayed games of `cost` valued as importance sampling values them, at each `--parties`
  (at most 24) with the tolerance of `cost` (0.03 where it names none), `--noise` an estimate (default 0.04, a
  repeat's spread by importance sampling) and the policy's control; exact Shapley values by enumerating the 2^n
  coalitions of the closed form (16.8 million at 24 parties). Per sampler: permutations and coalitions spent
  (median and range over keys), what those coalitions would cost as importance sampling's rows at 24 parties
  (`ROW_SECONDS` by the width of their program), RMS z against the exact values, the largest |z|, the share of |z|
  above 4, stderr / spread over keys (median and range over parties) and the largest stderr. `--designs` picks the
  samplers (`DESIGNS`: Latin blocks, plain permutations, prefixed permutations with 1 to 3 prefixes; the first two by
  default); `--surrogate measured` takes a control that errs as the party product did on a 24-party valuation
  (`measured_surrogate`: its spread by size, nested coalitions erring alike, Student-t tails), whose marginals'
  spread by position is printed first, beside the valuation's.
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from pathlib import Path

import jax
import numpy as np

import bayesval as bv
from bayesval.games import SHAPLEY, KeylessUtility
from bayesval.games.stopping import MaxEvaluations, StandardError
from bayesval.games.weights import semivalue_matrix
from bayesval.parties import valuation
from bayesval.parties.replay import ReplayedGame

sys.path.insert(0, str(Path(__file__).parent))
from bench_permutations_needed import noise_free_game  # noqa: E402

TABLE = Path(__file__).parent.parent / "tests" / "data" / "replayed_party_game_12.npz"
NOISE = 0.02
TOLERANCES = {3: 0.02, 6: 0.02, 12: 0.02, 24: 0.03, 50: 0.05}
MODEL = bv.models.LinearRegression()


def settings(n: int, tolerance: float, today: bool) -> valuation.PartyValuationSettings:
    """The party route's settings at `tolerance`: today's rule (the 64-permutation floor; no control variate beyond
    12 parties, where today's route had none) or the new default."""
    stop = StandardError(tolerance, min_count=64) | MaxEvaluations(10_000 * (n + 1)) if today else None
    control = False if today and n > valuation.MAX_CONTROL_PARTIES else None
    chosen = valuation.party_settings(
        MODEL, tolerance=tolerance, stop=stop, progress_bar=False, control_variate=control
    )
    return chosen.for_parties(n)


def run(game: ReplayedGame, chosen, seed: int):
    names = [f"p{i}" for i in range(game.num_parties)]
    key = jax.random.key(seed)
    return valuation.shapley_values(game, names, chosen, key, None, game.surrogates(), jax.random.fold_in(key, 3))


def calibration(keys: int, tolerance: float, noise: float | None = None) -> None:
    saved = np.load(TABLE)
    n = 12
    exact = semivalue_matrix(n, SHAPLEY) @ saved["values"]
    sd = saved["noise"] if noise is None else noise
    print(
        f"12-party replayed game ({TABLE.name}), noise {NOISE if noise is None else noise} per estimate, 2 estimates "
        f"a coalition, t = {tolerance}"
    )
    rules = (
        ("today (64-permutation floor)", True, True),
        ("new (trusted stderr, no floor), batches of 36 as for the chains", False, True),
        ("new, one Latin block (12) a batch as for importance sampling", False, False),
    )
    for label, today, vectorised in rules:
        chosen = settings(n, tolerance, today)
        values, stderr, converged, permutations, coalitions = [], [], [], [], []
        start = time.perf_counter()
        for seed in range(keys):
            game = ReplayedGame(
                n, saved["values"], sd, seed=10_000 + seed, surrogate=saved["surrogate"], vectorised=vectorised
            )
            result = run(game, chosen, seed)
            values.append(result.values)
            stderr.append(result.stderr)
            converged.append(result.sampled.converged)
            permutations.append(result.sampled.state.batch_draws)
            coalitions.append(game.num_sampled)
        seconds = time.perf_counter() - start
        values, stderr, converged = np.array(values), np.array(stderr), np.array(converged)
        z = (values - exact) / stderr
        ratio = stderr.mean(axis=0) / values.std(axis=0, ddof=1)
        within = np.abs(values - exact)[converged] <= 2 * tolerance
        print(
            f"  {label}: permutations {np.median(permutations):.0f} (median; {min(permutations)}-"
            f"{max(permutations)}), coalitions {np.median(coalitions):.0f}; RMS z {np.sqrt(np.mean(z**2)):.3f}, "
            f"|z| > 4 in {np.mean(np.abs(z) > 4):.4f}, max |z| {np.abs(z).max():.2f}; stderr / spread median "
            f"{np.median(ratio):.3f} ({ratio.min():.3f}-{ratio.max():.3f}); converged {converged.mean():.3f}, "
            f"|error| <= 2t on {within.mean():.4f} of them; largest stderr {stderr.max():.4f}; {seconds:.1f} s for "
            f"{keys} keys"
        )


def laplace_like_surrogate(n: int, truth):
    """u(masks) = v (1 + e_C): e_C the Laplace surrogate's relative error on the 12-party table, as a quadratic in
    the coalition's share of the parties fitted there plus a residual of its spread drawn once per coalition (a fixed
    function of the coalition), for any number of parties, where fitting the Laplace surprise of every coalition
    sampled would take hours of this benchmark."""
    from bayesval.games.masks import coalition_masks, mask_codes

    saved = np.load(TABLE)
    masks = coalition_masks(12)
    share = masks.mean(axis=1)
    relative = saved["surrogate"][1:] / saved["values"][1:] - 1
    design = np.stack([np.ones_like(share), share, share**2], axis=1)
    coefficients = np.linalg.lstsq(design, relative, rcond=None)[0]
    spread = np.std(relative - design @ coefficients)

    def value(masks):
        masks = np.asarray(masks, bool)
        share = masks.mean(axis=1)
        draws = [np.random.default_rng((7, int(code))).standard_normal() for code in mask_codes(masks)]
        error = np.stack([np.ones_like(share), share, share**2], axis=1) @ coefficients + spread * np.array(draws)
        return truth(masks) * (1 + error)

    return value


# The spread over coalitions of the sampled surprise minus the party product (v - u) at each size of 24 Syn parties
# (1,379 coalitions of a valuation, 2026-12-01; docs/benchmarks.md, "Prefixed permutations"), sizes 1 to 24
MEASURED_SPREAD = (
    0.081, 0.166, 0.254, 0.275, 0.266, 0.270, 0.259, 0.235, 0.209, 0.213, 0.196, 0.158,
    0.159, 0.148, 0.131, 0.129, 0.107, 0.095, 0.084, 0.083, 0.074, 0.060, 0.048, 0.0,
)  # fmt: skip
# The share of an error's variance that a coalition's members carry with them, so that nested coalitions err alike:
# 0.7 up to 3 of 24 parties' share, 0.97 from 10 of 24 (between, linear), which puts the spread of the marginals of
# v - u at each position where the 24-party valuation's were (0.22 at positions 1-4 falling to 0.06 at 17-23, the
# estimates' noise included; `marginal_spreads` prints the replay's)
SHARED = ((3 / 24, 0.7), (10 / 24, 0.97))


def measured_surrogate(n: int, truth):
    """u(masks) = v - e_C, e_C with the spread by size of the party product's error at 24 parties (MEASURED_SPREAD,
    at the coalition's share of the parties), a share (SHARED) of its variance from its members (the mean of a
    standard normal per party, scaled to unit variance) and the rest its own, drawn once per coalition from a Student
    t of 4 degrees of freedom (unit variance: the heavy tails of the measured marginals)."""
    from bayesval.games.masks import mask_codes

    shares = np.arange(1, 25) / 24
    parties = np.random.default_rng(11).standard_normal(n)
    (low, shared_low), (high, shared_high) = SHARED

    def value(masks):
        masks = np.asarray(masks, bool)
        size = masks.sum(axis=1)
        spread = np.interp(size / n, shares, MEASURED_SPREAD)
        shared = np.interp(size / n, [low, high], [shared_low, shared_high])
        members = masks @ parties / np.sqrt(np.maximum(size, 1))
        own = np.array([np.random.default_rng((13, int(code))).standard_t(4) for code in mask_codes(masks)])
        error = spread * (np.sqrt(shared) * members + np.sqrt((1 - shared) / 2) * own)
        return truth(masks) - np.where(size > 0, error, 0.0)

    return value


def marginal_spreads(n: int, truth, surrogate, noise: float, permutations: int = 200) -> str:
    """The spread of the replay's marginals of v - u (each a mean of 2 estimates of noise `noise`) by position, in
    bins of 4 positions from 1, over `permutations` random permutations: to set beside the measured ones."""
    rng = np.random.default_rng(5)
    gains = []
    for _ in range(permutations):
        order = rng.permutation(n)
        masks = np.zeros((n + 1, n), bool)
        for k in range(1, n + 1):
            masks[k, order[:k]] = True
        estimates = truth(masks) - surrogate(masks) + noise / np.sqrt(2) * rng.standard_normal(n + 1)
        gains.append(np.diff(np.where(masks.any(axis=1), estimates, 0.0)))
    gains = np.array(gains)
    return ", ".join(
        f"{start}-{min(start + 3, n - 2)}: {gains[:, start : start + 4].std():.3f}" for start in range(1, n - 1, 4)
    )


def cost(parties: list[int], keys: int) -> None:
    for n in parties:
        tolerance = TOLERANCES.get(n, 0.05)
        truth = noise_free_game(n)
        surrogate = laplace_like_surrogate(n, truth)
        exact = None
        if n <= 12:
            from bayesval.games.masks import coalition_masks

            exact = semivalue_matrix(n, SHAPLEY) @ truth(coalition_masks(n, include_empty=True))
        for label, today in (("today", True), ("new", False)):
            chosen = settings(n, tolerance, today)
            rows = []
            for seed in range(keys):
                repeats = chosen.config.num_repeats  # 3 where every coalition is valued, 2 where they are sampled
                game = ReplayedGame(n, truth, NOISE, repeats, seed=20_000 + seed, surrogate=surrogate)
                start = time.perf_counter()
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    result = run(game, chosen, seed)
                seconds = time.perf_counter() - start
                sampled = result.sampled
                permutations = 0 if sampled is None else sampled.state.batch_draws
                worst = np.nan if exact is None else np.abs((result.values - exact) / result.stderr).max()
                rows.append((permutations, game.num_sampled, result.stderr.max(), worst, seconds, result.method))
            permutations, coalitions, stderr, worst, seconds, methods = zip(*rows)
            print(
                f"{n} parties, t = {tolerance}, {label}: permutations {np.median(permutations):.0f} "
                f"({min(permutations)}-{max(permutations)}), coalitions {np.median(coalitions):.0f} "
                f"({min(coalitions)}-{max(coalitions)}), largest stderr {max(stderr):.4f}, largest |z| "
                f"{np.nanmax(worst) if exact is not None else float('nan'):.2f}, policy time median "
                f"{np.median(seconds):.1f} s; {methods[-1]}"
            )


# Seconds a row of importance sampling at 24 parties, by the width of its program (a third of the parties at a time:
# docs/benchmarks.md, "Fewer inner draws from a closer data-model proposal"), to weigh the coalitions a design spends
ROW_SECONDS = {8: 0.13, 16: 0.28, 24: 0.45}
DESIGNS = {  # label: (Latin blocks up to, prefixes a permutation beyond)
    "Latin blocks": (None, 0),
    "plain permutations": (0, 0),
    "prefixed permutations (1)": (0, 1),
    "prefixed permutations (2)": (0, 2),
    "prefixed permutations (3)": (0, 3),
}


def samplers(parties: list[int], keys: int, noise: float, surrogate_kind: str, designs: list[str]) -> None:
    if max(parties) > 24:
        raise SystemExit("--part samplers enumerates every coalition for the exact values: at most 24 parties")
    for n in parties:
        tolerance = TOLERANCES.get(n, 0.03)
        truth = noise_free_game(n)
        surrogate = (measured_surrogate if surrogate_kind == "measured" else laplace_like_surrogate)(n, truth)
        start = time.perf_counter()
        exact = bv.games.exact_semivalue(KeylessUtility(truth), n, jax.random.key(0), batch_size=1 << 18).values
        print(f"{n} parties: exact Shapley values by enumeration in {time.perf_counter() - start:.0f} s", flush=True)
        print(f"  marginals of v - u by position: {marginal_spreads(n, truth, surrogate, noise)}", flush=True)
        before = valuation.LATIN_UP_TO, valuation.PREFIXES
        for label in designs:
            latin_up_to, prefixes = DESIGNS[label]
            valuation.LATIN_UP_TO, valuation.PREFIXES = n if latin_up_to is None else n - 1, prefixes
            chosen = settings(n, tolerance, False)
            rows = []
            for seed in range(keys):
                game = ReplayedGame(n, truth, noise, 2, seed=20_000 + seed, surrogate=surrogate, vectorised=False)
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    result = run(game, chosen, seed)
                rows.append(
                    (result.sampled.state.batch_draws, game.num_sampled, result.values, result.stderr, rows_cost(game))
                )
            valuation.LATIN_UP_TO, valuation.PREFIXES = before
            permutations, coalitions, values, stderr, seconds = zip(*rows)
            values, stderr = np.array(values), np.array(stderr)
            z = (values - exact) / stderr
            ratio = stderr.mean(axis=0) / values.std(axis=0, ddof=1)
            print(
                f"  {label}, t = {tolerance}, noise {noise}: permutations {np.median(permutations):.0f} "
                f"({min(permutations)}-{max(permutations)}), coalitions {np.median(coalitions):.0f} "
                f"({min(coalitions)}-{max(coalitions)}), rows' seconds {np.median(seconds):.0f} ({min(seconds):.0f}-"
                f"{max(seconds):.0f}); RMS z {np.sqrt(np.mean(z**2)):.3f}, largest |z| {np.abs(z).max():.2f}, "
                f"|z| > 4: {np.mean(np.abs(z) > 4):.1%}; stderr / spread median {np.median(ratio):.2f} "
                f"({ratio.min():.2f}-{ratio.max():.2f}); largest stderr {stderr.max():.4f}",
                flush=True,
            )


def rows_cost(game: ReplayedGame) -> float:
    """What the game's coalitions would cost as importance sampling's rows at 24 parties (ROW_SECONDS, 2 repeats),
    each packed to a program a third of the parties wide."""
    from bayesval.parties.plan import member_width

    sizes = [int(code).bit_count() for code in game.values if code]
    widths = [member_width(size, game.num_parties) * 24 // game.num_parties for size in sizes]
    return sum(2 * ROW_SECONDS[min(ROW_SECONDS, key=lambda w: abs(w - width))] for width in widths)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--part", choices=("calibration", "cost", "samplers"), default="calibration")
    parser.add_argument("--keys", type=int, default=None)
    parser.add_argument("--tolerance", type=float, default=0.02)
    parser.add_argument(
        "--noise", type=float, default=None, help="the sd of an estimate: calibration's the table's, samplers' 0.04"
    )
    parser.add_argument("--parties", type=int, nargs="+", default=[3, 6, 12, 24, 50])
    parser.add_argument(
        "--surrogate", choices=("laplace-like", "measured"), default="laplace-like", help="samplers: the control"
    )
    parser.add_argument("--designs", nargs="+", choices=list(DESIGNS), help="samplers: the designs compared")
    args = parser.parse_args()
    jax.config.update("jax_enable_x64", True)
    if args.part == "calibration":
        calibration(args.keys or 200, args.tolerance, args.noise)
    elif args.part == "cost":
        cost(args.parties, args.keys or 5)
    else:
        noise = 0.04 if args.noise is None else args.noise
        samplers(args.parties, args.keys or 12, noise, args.surrogate, args.designs or list(DESIGNS)[:2])


if __name__ == "__main__":
    main()
