"""A late-position effect the control misses, under the party policy's prefixed permutations beyond 16 parties: the
calibration found by review on 2026-12-06, side by side with two other designs (docs/benchmarks.md, "Prefixed
permutations and an effect at late positions").

    python benchmarks/bench_prefixed_late.py [--keys 40] [--replayed-24]

The game: 18 parties, v(S) = log(1 + w.S) + 0.3 [S holds parties 0-5], exact Shapley values by enumeration of the
262,144 coalitions; the control's surrogate 1.05 log(1 + w.S) misses the bonus. A party of the six gets the bonus
only at the position that completes the six, never before position 5: a late-position effect, which in the prefixed
design (docs/games.md, "Prefixed permutations") only the whole permutations reach, two a batch. Replayed with noise
of sd 0.02 (`bayesval.parties.replay.ReplayedGame`, one coalition after another as importance sampling values them),
valued by the route's own policy (`bayesval.parties.valuation.shapley_values`: the estimated control, the default
rule at tolerance 0.03). Per design, over the keys: permutations spent, RMS z against the exact values (the six
parties apart), the largest |z|, how many |z| above 4 were flagged converged, and the three worst indices with the
draws of their late group. Designs: as shipped; the prefixed groups' variance guarded by the index's range (as plain
permutations' middle group is); each prefixed group guarded, beside its own priors, by its largest range over all the
parties, worth 0.5 or 1 draw (`stratum_guard`: the parties taken as exchangeable within a group of positions); Latin
blocks beyond 16 parties too. `--replayed-24` also values the replayed 24-party game of
`bench_shapley_policy.py --part samplers --parties 24 --keys 12 --noise 0.045 --surrogate measured` with 3 prefixes,
as shipped and under each guard: whether a guard that catches the late effect keeps the party game calibrated.
"""

from __future__ import annotations

import argparse
import contextlib
import time
import warnings

import jax
import numpy as np

import bayesval as bv
from bayesval.games import SHAPLEY, samplers
from bayesval.games.masks import coalition_masks
from bayesval.games.weights import semivalue_matrix
from bayesval.parties import valuation
from bayesval.parties.replay import ReplayedGame
from bayesval.results import variance

N, SIX, BONUS, TOLERANCE, NOISE = 18, 6, 0.3, 0.03, 0.02
WEIGHTS = np.random.default_rng(1).uniform(0.5, 1.5, N)


def value(masks) -> np.ndarray:
    masks = np.asarray(masks, bool)
    return np.log1p(masks @ WEIGHTS) + BONUS * masks[:, :SIX].all(axis=1)


def surrogate(masks) -> np.ndarray:
    return 1.05 * np.log1p(np.asarray(masks, bool) @ WEIGHTS)


def policy(label: str, keys: int, exact: np.ndarray) -> None:
    """Value the replayed game on `keys` keys as the route does and print its calibration."""
    settings = valuation.party_settings(bv.models.LinearRegression(), tolerance=TOLERANCE, progress_bar=False)
    settings = settings.for_parties(N)
    names = [f"p{i}" for i in range(N)]
    z, converged, permutations, worst = [], [], [], []
    start = time.perf_counter()
    for seed in range(keys):
        game = ReplayedGame(N, value, NOISE, seed=1300 + seed, surrogate=surrogate, vectorised=False)
        key = jax.random.key(seed)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            result = valuation.shapley_values(
                game, names, settings, key, None, game.surrogates(), jax.random.fold_in(key, 3)
            )
        scores = (result.values - exact) / result.stderr
        z.append(scores)
        converged.append(result.sampled.converged)
        state = result.sampled.state
        permutations.append(state.batch_draws)
        i = int(np.argmax(np.abs(scores)))
        late = 2  # the groups first, early, late, last
        draws = int(state.counts[late, i])
        worst.append((seed, scores[i], i, result.values[i] - exact[i], result.stderr[i], draws))
    z, converged = np.array(z), np.array(converged)
    print(
        f"{label}: {keys} keys, {state.sampler}, permutations median {int(np.median(permutations))}; RMS z "
        f"{np.sqrt(np.mean(z**2)):.2f} (parties 0-5 {np.sqrt(np.mean(z[:, :SIX] ** 2)):.2f}, the others "
        f"{np.sqrt(np.mean(z[:, SIX:] ** 2)):.2f}); largest |z| {np.abs(z).max():.1f}; |z| > 4: "
        f"{np.sum(np.abs(z) > 4)} of {z.size}, {np.sum((np.abs(z) > 4) & converged)} flagged converged "
        f"[{time.perf_counter() - start:.0f} s]"
    )
    for seed, score, i, error, stderr, draws in sorted(worst, key=lambda row: -abs(row[1]))[:3]:
        print(
            f"   key {seed}: party {i} z {score:+.1f} (error {error:+.4f}, stderr {stderr:.4f}; {draws} draws in its "
            "late group)"
        )


@contextlib.contextmanager
def stratum_guard(weight: float):
    """Each prefixed group (a stratum of positions, `state.layers`, in a state of at most 4 groups) of every index
    guarded by that group's largest range over all the indices, a prior of `weight` draws beside its own priors."""
    shrunk = variance._shrunk

    def guarded(state):
        variances, prior_weight, borrowed = shrunk(state)
        counts = state.counts.astype(np.float64)
        free = ((state.coefficients != 0) & ~state.exact)[:, None] & (counts >= 2)
        strata = state.layers[:, None] & free & (len(state.layers) <= 4)
        largest = np.where(strata, variance.spread(state.low, state.high), 0.0).max(axis=1, keepdims=True)
        with np.errstate(invalid="ignore", divide="ignore"):
            total = variances * (counts - 1 + prior_weight) + weight * (largest / 2) ** 2
            widened = total / (counts - 1 + prior_weight + weight)
        return np.where(strata, widened, variances), np.where(strata, prior_weight + weight, prior_weight), borrowed

    variance._shrunk = guarded
    try:
        yield
    finally:
        variance._shrunk = shrunk


def replayed_24() -> None:
    """The replayed 24-party game of bench_shapley_policy's samplers part, 3 prefixes, as shipped and guarded."""
    import bench_shapley_policy

    for weight in (0, 0.5, 1):
        print(f"replayed 24-party game, stratum guard worth {weight} draws:")
        with stratum_guard(weight) if weight else contextlib.nullcontext():
            bench_shapley_policy.samplers([24], 12, 0.045, "measured", ["prefixed permutations (3)"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keys", type=int, default=40)
    parser.add_argument("--replayed-24", action="store_true", help="also the replayed 24-party game (about 12 min)")
    args = parser.parse_args()
    jax.config.update("jax_enable_x64", True)
    exact = semivalue_matrix(N, SHAPLEY) @ value(coalition_masks(N, include_empty=True))
    policy("as shipped", args.keys, exact)
    plan = samplers.PermutationSampler._prefixed_plan
    samplers.PermutationSampler._prefixed_plan = lambda self, *a: plan(self, *a)._replace(layers=np.zeros(4, bool))
    policy("prefixed groups guarded by the index's range", args.keys, exact)
    samplers.PermutationSampler._prefixed_plan = plan
    for weight in (0.5, 1):
        with stratum_guard(weight):
            policy(f"each group guarded by its largest range over the parties, worth {weight} draws", args.keys, exact)
    if args.replayed_24:
        replayed_24()
    valuation.LATIN_UP_TO = 10**6
    policy("Latin blocks beyond 16 parties", args.keys, exact)


if __name__ == "__main__":
    main()
