"""The party route's Shapley policy (`bayesval.parties.valuation.shapley_values`) on replayed games whose exact
Shapley values are known (`bayesval.parties.replay.ReplayedGame`): calibrated standard errors through the route's own
permutations, control variate and stopping rule, a rule that stops once its standard errors are trusted instead of
after 64 permutations, and beyond 12 parties the multi-fidelity control (issue 61; the full calibration is
benchmarks/bench_shapley_policy.py, docs/benchmarks.md, "The Shapley policy on a replayed game")."""

from pathlib import Path

import jax
import numpy as np
import pytest

import bayesval as bv
from bayesval.games import SHAPLEY
from bayesval.games.control import SurrogateLevels
from bayesval.games.masks import coalition_masks
from bayesval.games.stopping import MaxEvaluations, StandardError
from bayesval.games.weights import semivalue_matrix
from bayesval.parties import valuation
from bayesval.parties.replay import ReplayedGame

TABLE = np.load(Path(__file__).parent / "data" / "replayed_party_game_12.npz")  # tests/make_replayed_game.py
N = 12
EXACT = semivalue_matrix(N, SHAPLEY) @ TABLE["values"]
TOLERANCE = 0.02
MODEL = bv.models.LinearRegression()


def settings(n: int = N, tolerance: float = TOLERANCE, **options) -> valuation.PartyValuationSettings:
    return valuation.party_settings(MODEL, tolerance=tolerance, progress_bar=False, **options).for_parties(n)


def valued(game: ReplayedGame, chosen, seed: int) -> valuation.ShapleyValues:
    names = [f"p{i}" for i in range(game.num_parties)]
    key = jax.random.key(seed)
    return valuation.shapley_values(game, names, chosen, key, None, game.surrogates(), jax.random.fold_in(key, 3))


def replayed(seed: int, vectorised: bool = True) -> ReplayedGame:
    return ReplayedGame(
        N, TABLE["values"], TABLE["noise"], seed=seed, surrogate=TABLE["surrogate"], vectorised=vectorised
    )


@pytest.mark.parametrize("vectorised", [True, False], ids=["batches-for-the-chains", "one-block-a-batch"])
def test_the_policy_is_calibrated_on_a_replayed_twelve_party_game(vectorised):
    """20 keys of the saved 12-party game (each coalition's two estimates its value plus N(0, 0.02^2)), valued by the
    route's Latin permutations against the saved Laplace surrogate until the default rule holds: RMS z within [0.8, 1.2]
    over the 240 z-scores, at most 1 % above 4, the standard errors' root mean square within [0.85, 1.15] of the values'
    spread over keys, and |error| <= 2t on at least 93 % of the converged indices; in batches of 36 permutations as
    the chains take them, and of one block (12) as importance sampling does, whose rule is checked after each."""
    values, stderr, converged = [], [], []
    for seed in range(20):
        result = valued(replayed(500 + seed, vectorised), settings(), seed)
        assert result.sampled.state.batch_draws % (36 if vectorised else 12) == 0
        assert "the replayed surrogate as a control variate" in result.method
        values.append(result.values)
        stderr.append(result.stderr)
        converged.append(result.sampled.converged)
    values, stderr, converged = np.array(values), np.array(stderr), np.array(converged)
    z = (values - EXACT) / stderr
    assert 0.8 <= np.sqrt(np.mean(z**2)) <= 1.2 and np.mean(np.abs(z) > 4) <= 0.01
    ratio = np.sqrt(np.mean(stderr**2) / np.mean(values.var(axis=0, ddof=1)))
    assert 0.85 <= ratio <= 1.15
    assert converged.mean() >= 0.9 and np.mean(np.abs(values - EXACT)[converged] <= 2 * TOLERANCE) >= 0.93


@pytest.mark.parametrize("seed, batches", [(1, 1), (7, 2)])
def test_the_default_rule_stops_once_its_standard_errors_are_trusted_not_after_64_permutations(seed, batches):
    """The same game: the default rule stops after the first batch of 36 Latin permutations whose every standard
    error is within t and has 10 degrees of freedom, one batch on key 1; on key 7 an index's 36 permutations give
    fewer (3 draws a group, 2 degrees of freedom each), and it takes a second. The floor it replaced (`StandardError(t,
    min_count=64)`) takes two batches on both, with every stderr <= t."""
    new = valued(replayed(seed), settings(), seed)
    old_rule = StandardError(TOLERANCE, min_count=64) | MaxEvaluations(10_000 * (N + 1))
    old = valued(replayed(seed), settings(stop=old_rule), seed)
    assert new.sampled.state.batch_draws == 36 * batches and old.sampled.state.batch_draws == 72
    assert new.stderr.max() <= TOLERANCE and old.stderr.max() <= TOLERANCE and new.sampled.converged.all()
    assert (np.asarray(new.sampled.diagnostics["indices"]["dof"]) >= 10).all()
    if batches == 2:  # the first batch alone: an index short of 10 degrees of freedom, not trusted
        first = valued(replayed(seed), settings(stop=StandardError(TOLERANCE) | MaxEvaluations(36 * (N + 1))), seed)
        assert first.sampled.state.batch_draws == 36 and not first.sampled.converged.all()
        assert (np.asarray(first.sampled.diagnostics["indices"]["dof"]) < 10).any()
    assert repr(settings().stopping_rule(N)) == repr(StandardError(TOLERANCE) | MaxEvaluations(10_000 * 13))


def concave_game(n: int, seed: int = 0):
    """v(S) = log(1 + w . S) + 0.1 sqrt(j . S / n), a smooth concave game of n players, and a surrogate that misses
    it by a scale and is not finite on every coalition holding players 0, 1 and 2 (a fit that failed)."""
    weights = np.random.default_rng(seed).uniform(0.5, 1.5, n)

    def value(masks):
        masks = np.asarray(masks, np.float64)
        return np.log1p(masks @ weights) + 0.1 * np.sqrt(masks @ np.arange(n) / n)

    def surrogate(masks):
        masks = np.asarray(masks, bool)
        return np.where(masks[:, :3].all(axis=1), np.nan, 1.05 * np.log1p(masks @ weights))

    return value, surrogate


@pytest.mark.parametrize("levelled", [False, True])
def test_beyond_twelve_parties_the_policy_estimates_the_surrogates_values_and_stays_calibrated(levelled):
    """14 parties (exact Shapley values by enumeration of 16,384 coalitions): the control is the surrogate of the
    coalitions sampled with its Shapley values estimated by the regression estimator; over 10 keys the z-scores
    against the exact values keep RMS within [0.7, 1.3], none above 4, although the surrogate fails on every
    coalition holding players 0, 1 and 2 (it falls back to 0 there; `levelled`: to a cheaper surrogate beneath it,
    20 % too large, against whose estimate its own is sampled)."""
    n = 14
    value, surrogate = concave_game(n)
    if levelled:
        weights = np.random.default_rng(0).uniform(0.5, 1.5, n)  # the game's (`concave_game`, seed 0)
        surrogate = SurrogateLevels((lambda masks: 1.2 * np.log1p(np.asarray(masks, bool) @ weights), surrogate))
    exact = semivalue_matrix(n, SHAPLEY) @ value(coalition_masks(n, include_empty=True))
    z = []
    for seed in range(10):
        game = ReplayedGame(n, value, 0.02, seed=900 + seed, surrogate=surrogate)
        result = valued(game, settings(n, 0.03), seed)
        assert "its Shapley values from" in result.method
        assert ("of a cheaper surrogate" in result.method) == levelled
        assert result.sampled.state.control_name.endswith(", over 1 cheaper level") == levelled  # a resume checks it
        control_variance = result.sampled.state.control_variance
        assert result.sampled.state.control_table is None and (result.stderr**2 > control_variance).all()
        z.append((result.values - exact) / result.stderr)
    z = np.concatenate(z)
    assert 0.7 <= np.sqrt(np.mean(z**2)) <= 1.3 and np.abs(z).max() <= 4


def test_a_surrogate_estimate_short_of_the_tolerance_is_left_out_with_a_warning(monkeypatch):
    """Beyond twelve parties, a control whose estimate stopped at its cap of evaluations with a standard error not
    below the tolerance would keep the values' own above it (its variance is part of theirs): the values are sampled
    without it, and a warning says why."""
    n = 14
    value, surrogate = concave_game(n)
    monkeypatch.setattr(valuation, "MAX_SURROGATE_EVALUATIONS", 60)  # the pilot and one batch: no trusted error yet
    game = ReplayedGame(n, value, 0.02, seed=900, surrogate=surrogate)
    with pytest.warns(UserWarning, match=r"sampled without a control variate: .* not below the tolerance 0\.03"):
        result = valued(game, settings(n, 0.03), 0)
    assert result.sampled.state.control_name is None and "surrogate" not in result.method
    assert result.sampled.converged.all() and (result.stderr <= 0.03).all()


def test_a_stop_rule_given_without_a_tolerance_holds_the_estimated_control_to_its_threshold():
    """Beyond twelve parties the surrogate's Shapley values are estimated to a share of the tolerance, their variance
    part of every value's. A `stop` given without `tolerance=` held that estimate to the default tolerance (0.05), its
    standard error (about 0.017) then above the rule's own 0.01, which could never hold: the run spent its cap. The
    rule's smallest threshold is now the tolerance; and a run resumed asking for less than its saved estimate's
    standard error is told so."""
    from bayesval.games.stopping import smallest_threshold

    cap = MaxEvaluations(10_000)
    assert smallest_threshold(StandardError(0.05) & (StandardError(0.01) | cap)) == 0.01
    assert smallest_threshold(cap) is None and smallest_threshold(StandardError(0.0) | cap) is None
    assert valuation.party_settings(MODEL, stop=StandardError(0.01) | cap).tolerance == 0.01
    assert valuation.party_settings(MODEL, stop=StandardError(0.01) | cap, tolerance=0.03).tolerance == 0.03
    assert valuation.party_settings(MODEL, stop=cap).tolerance == valuation.DEFAULT_TOLERANCE
    n = 14
    weights = np.random.default_rng(0).uniform(0.5, 1.5, n)

    def rough(masks):  # a deterministic, rough function of the coalition, in both: phi(u) is costly to estimate
        codes = np.asarray(masks, bool) @ (2 ** np.arange(n))
        return ((codes * 2654435761) % 2**32) / 2**32 - 0.5

    def value(masks):
        masks = np.asarray(masks, float)
        return np.log1p(masks @ weights) + 0.1 * np.sqrt(masks @ np.arange(n) / n) + rough(masks)

    def surrogate(masks):
        return 1.05 * np.log1p(np.asarray(masks, bool) @ weights) + rough(masks)

    game = ReplayedGame(n, value, 0.0, seed=1, surrogate=surrogate)  # no noise: the sampling's error alone
    chosen = valuation.party_settings(MODEL, stop=StandardError(0.01) | cap, progress_bar=False).for_parties(n)
    result = valued(game, chosen, 0)
    assert np.sqrt(result.sampled.state.control_variance).max() < 0.01
    assert result.sampled.converged.all() and (result.stderr <= 0.01).all()
    tighter = settings(n, 0.004, stop=MaxEvaluations(result.sampled.state.evaluations + 1))
    names = [f"p{i}" for i in range(n)]
    with pytest.warns(UserWarning, match=r"resume_from was sampled against an estimate .* not below the tolerance"):
        valuation.shapley_values(game, names, tighter, jax.random.key(0), result.sampled, game.surrogates())


def test_beyond_sixteen_parties_prefixed_permutations_stop_before_two_latin_blocks_would():
    """18 parties valued one coalition after another (importance sampling's game) against the control: prefixed
    permutations in batches of 8 (2 whole, 6 cut after a third of the parties), each run stopping before the 36
    permutations that two Latin blocks (the fewest that give a position a variance) would have cost, with z-scores
    against the exact values (enumeration of 262,144 coalitions) of RMS within [0.7, 1.3] and none above 4 over 6 keys.
    Up to 16 parties the policy keeps Latin blocks, and a resumed run goes on with the sampler and batches it was
    sampled in, whatever its size (plain permutations, as runs beyond 16 parties took before prefixes)."""
    n = 18
    value, _ = concave_game(n, seed=1)
    weights = np.random.default_rng(1).uniform(0.5, 1.5, n)  # the game's (`concave_game`, seed 1)

    def surrogate(masks):  # `concave_game`'s surrogate with no failed fit: a scale off, finite on every coalition
        return 1.05 * np.log1p(np.asarray(masks, bool) @ weights)

    exact = semivalue_matrix(n, SHAPLEY) @ value(coalition_masks(n, include_empty=True))
    plain, latin = bv.games.PermutationSampler(), bv.games.PermutationSampler(latin=True)
    prefixed = bv.games.PermutationSampler(prefixes=valuation.PREFIXES)
    z = []
    for seed in range(6):
        game = ReplayedGame(n, value, 0.02, seed=1_300 + seed, surrogate=surrogate, vectorised=False)
        result = valued(game, settings(n, 0.03), seed)
        assert result.sampled.state.sampler == prefixed.name
        assert result.sampled.diagnostics["batch_size"] * (1 + valuation.PREFIXES) == 8
        whole = result.sampled.state.batch_draws
        assert whole < 2 * n and result.sampled.converged.all()
        assert f"({whole} permutations and {whole * valuation.PREFIXES} prefixes, " in result.method
        z.append((result.values - exact) / result.stderr)
    z = np.concatenate(z)
    assert 0.7 <= np.sqrt(np.mean(z**2)) <= 1.3 and np.abs(z).max() <= 4
    assert valuation.permutation_sampler(16, None, vectorised=False) == (latin, 16)
    assert valuation.permutation_sampler(24, latin.name, vectorised=False) == (latin, None)
    assert valuation.permutation_sampler(24, plain.name, vectorised=False) == (plain, None)
    assert valuation.permutation_sampler(24, prefixed.name, vectorised=False) == (prefixed, None)


def test_a_replayed_game_caches_each_coalitions_estimates_whatever_the_order():
    game, other = replayed(1), replayed(1)
    masks = coalition_masks(N)[[5, 700, 4000]]
    first = game(masks)
    assert first.shape == (2, 3) and game.num_sampled == 3
    np.testing.assert_array_equal(other(masks[::-1])[:, ::-1], first)  # drawn per coalition, not per call
    np.testing.assert_array_equal(game(masks), first)
    assert abs(first.mean() - TABLE["values"][[6, 701, 4001]].mean()) < 0.1  # codes 6, 701, 4001: rows + 1
    assert game.fingerprint == other.fingerprint != replayed(2).fingerprint
    pairs = TABLE["values"].copy()
    pairs[np.arange(len(pairs)) == 2**N - 1] += 0.5  # another grand coalition, the same singletons
    assert ReplayedGame(N, pairs, 0.02).fingerprint != ReplayedGame(N, TABLE["values"], 0.02).fingerprint
    assert ReplayedGame(N, TABLE["values"], 0.03).fingerprint != ReplayedGame(N, TABLE["values"], 0.02).fingerprint
    with pytest.raises(ValueError, match=r"truth must hold one value per coalition of 12 parties, shape \(4096,\)"):
        ReplayedGame(N, TABLE["values"][:100], 0.02)
