"""The party route's Shapley policy on replayed games: today's stopping rule against the one that stops on time, and
what the policy spends against the number of parties (issue 61).

    python benchmarks/bench_shapley_policy.py --part calibration [--keys 200] [--tolerance 0.02] [--noise 0.05]
    python benchmarks/bench_shapley_policy.py --part cost [--parties 3 6 12 24 50] [--keys 5]
    python benchmarks/bench_shapley_policy.py --part samplers [--parties 12 16 24] [--keys 12] [--noise 0.04]

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
  (median and range over keys), RMS z against the exact values, the largest |z|, stderr / spread over keys (median
  and range over parties) and the largest stderr.
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


def samplers(parties: list[int], keys: int, noise: float) -> None:
    if max(parties) > 24:
        raise SystemExit("--part samplers enumerates every coalition for the exact values: at most 24 parties")
    for n in parties:
        tolerance = TOLERANCES.get(n, 0.03)
        truth = noise_free_game(n)
        surrogate = laplace_like_surrogate(n, truth)
        start = time.perf_counter()
        exact = bv.games.exact_semivalue(KeylessUtility(truth), n, jax.random.key(0), batch_size=1 << 18).values
        print(f"{n} parties: exact Shapley values by enumeration in {time.perf_counter() - start:.0f} s", flush=True)
        latin_up_to = valuation.LATIN_UP_TO
        for label, up_to in (("Latin blocks", n), ("plain permutations", n - 1)):
            valuation.LATIN_UP_TO = up_to
            chosen = settings(n, tolerance, False)
            rows = []
            for seed in range(keys):
                game = ReplayedGame(n, truth, noise, 2, seed=20_000 + seed, surrogate=surrogate, vectorised=False)
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    result = run(game, chosen, seed)
                rows.append((result.sampled.state.batch_draws, game.num_sampled, result.values, result.stderr))
            valuation.LATIN_UP_TO = latin_up_to
            permutations, coalitions, values, stderr = zip(*rows)
            values, stderr = np.array(values), np.array(stderr)
            z = (values - exact) / stderr
            ratio = stderr.mean(axis=0) / values.std(axis=0, ddof=1)
            print(
                f"  {label}, t = {tolerance}, noise {noise}: permutations {np.median(permutations):.0f} "
                f"({min(permutations)}-{max(permutations)}), coalitions {np.median(coalitions):.0f} "
                f"({min(coalitions)}-{max(coalitions)}); RMS z {np.sqrt(np.mean(z**2)):.3f}, largest |z| "
                f"{np.abs(z).max():.2f}; stderr / spread median {np.median(ratio):.2f} ({ratio.min():.2f}-"
                f"{ratio.max():.2f}); largest stderr {stderr.max():.4f}",
                flush=True,
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--part", choices=("calibration", "cost", "samplers"), default="calibration")
    parser.add_argument("--keys", type=int, default=None)
    parser.add_argument("--tolerance", type=float, default=0.02)
    parser.add_argument(
        "--noise", type=float, default=None, help="the sd of an estimate: calibration's the table's, samplers' 0.04"
    )
    parser.add_argument("--parties", type=int, nargs="+", default=[3, 6, 12, 24, 50])
    args = parser.parse_args()
    jax.config.update("jax_enable_x64", True)
    if args.part == "calibration":
        calibration(args.keys or 200, args.tolerance, args.noise)
    elif args.part == "cost":
        cost(args.parties, args.keys or 5)
    else:
        samplers(args.parties, args.keys or 12, 0.04 if args.noise is None else args.noise)


if __name__ == "__main__":
    main()
