"""Regression sampling (`RegressionSampler`, issue 60): unbiased batch estimates of the Shapley value, batch-means
standard errors, the efficiency constraint, resume, merge, save, control variates and what it refuses.

The big calibration (50 to 100 players, noise at 5 % and 50 % of the largest marginal, 20 keys a cell) is
benchmarks/bench_regression.py, its tables in docs/games.md, "Regression sampling"."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from game_examples import random_table, table_utility

import bayesval as bv
from bayesval.games import (
    ControlVariate,
    MaxEvaluations,
    Miner,
    RegressionSampler,
    Shoes,
    StandardError,
    SymmetricVoting,
    UnanimitySum,
    beta_shapley,
    exact_semivalue,
    semivalue,
)
from bayesval.games.regression import design_sizes, kernel_sizes, twin_spots

N = 8
TABLE = random_table(3, N)
EXACT = exact_semivalue(table_utility(TABLE), N, 0).values
BATCH = 2 * N  # coalitions a batch (pairs), plus the empty and the grand coalition
EVALUATIONS = 12 * (BATCH + 2)  # 12 batches: 11 degrees of freedom


def run(utility, key, evaluations=EVALUATIONS, **options):
    options = {"sampler": RegressionSampler(), "batch_size": BATCH} | options
    return semivalue(utility, N, key, stop=MaxEvaluations(evaluations), **options)


@pytest.mark.parametrize("design", ["sqrt", "kernel", "leverage"])
def test_batch_estimates_are_unbiased_and_their_spread_is_the_standard_error(design):
    """Over 30 keys on a noisy 8-player game: the mean error is within 4 standard errors of the mean of 0 for every
    player (unbiased), and z = error / reported stderr has RMS near that of a t with 11 degrees of freedom (1.1)."""
    utility = table_utility(TABLE, noise=0.3)
    runs = [run(utility, key, sampler=RegressionSampler(design)) for key in range(30)]
    errors = np.array([r.values for r in runs]) - EXACT
    z = errors / np.array([r.stderr for r in runs])
    assert np.all(np.abs(errors.mean(axis=0)) <= 4 * errors.std(axis=0, ddof=1) / np.sqrt(len(runs)))
    assert 0.85 <= np.sqrt(np.mean(z**2)) <= 1.3
    assert np.mean(np.abs(z) > 4) <= 0.01


def test_the_values_add_up_to_the_grand_coalition_exactly():
    """The efficiency constraint holds in every batch: sum phi = v(N) - v(empty), to rounding, without noise."""
    result = run(table_utility(TABLE), 0)
    assert result.values.sum() == pytest.approx(TABLE[-1] - TABLE[0], abs=1e-10)
    assert np.all(result.stderr > 0) and not np.allclose(result.values, EXACT, atol=1e-3)
    assert result.diagnostics["batches"] == 12 and np.all(result.counts == 11)  # the first batch, a pilot, uncounted


def test_the_values_add_up_to_rounding_at_a_large_scale():
    """30 players whose coalitions are worth about a million: the values add up to v(N) - v(empty) within rounding of
    that scale (each pair's weights sum to 0 in float64: their size share in float32 left 0.024 over, 5e-8 of it)."""
    weights = jnp.asarray(np.random.default_rng(0).normal(size=30))

    def utility(key, masks):
        return 1e6 * jnp.sin(masks.astype(jnp.float64) @ weights)

    ends = utility(None, jnp.array([[True] * 30, [False] * 30]))
    result = semivalue(utility, 30, 0, sampler=RegressionSampler(), batch_size=136, stop=MaxEvaluations(138 * 12))
    assert result.values.sum() == pytest.approx(float(ends[0] - ends[1]), rel=1e-13, abs=0)


def test_on_a_closed_form_game_of_forty_players_the_error_matches_the_standard_error():
    """A sum of unanimity games of 40 players, 20 keys: RMS z within [0.8, 1.25], no |z| above 6."""
    game = UnanimitySum.random(40, 30, 6, seed=2)
    exact = game.semivalue("shapley")
    options = {"sampler": RegressionSampler(), "batch_size": 80, "stop": MaxEvaluations(12 * 82)}
    runs = [semivalue(game.utility, 40, key, **options) for key in range(20)]
    z = (np.array([r.values for r in runs]) - exact) / np.array([r.stderr for r in runs])
    assert 0.8 <= np.sqrt(np.mean(z**2)) <= 1.25 and np.abs(z).max() <= 6


def test_a_stopped_and_resumed_run_is_the_uninterrupted_run(tmp_path):
    utility = table_utility(TABLE, noise=0.1)
    whole = run(utility, 5)
    first = run(utility, 5, evaluations=5 * (BATCH + 2))
    saved = bv.ValuationResult.load(first.save(tmp_path / "first.npz"))
    resumed = run(utility, 5, resume_from=saved)
    np.testing.assert_array_equal(resumed.values, whole.values)
    np.testing.assert_array_equal(resumed.stderr, whole.stderr)
    assert resumed.state.sampler == whole.state.sampler == "regression (sqrt sizes)"
    assert "regression (sqrt sizes)" in whole.method


def test_two_runs_merge_into_the_mean_of_their_batches():
    utility = table_utility(TABLE, noise=0.1)
    a, b = run(utility, 1), run(utility, 2)
    merged = a + b
    np.testing.assert_allclose(merged.values, (a.values + b.values) / 2, rtol=1e-12)
    assert np.all(merged.stderr < np.maximum(a.stderr, b.stderr))
    assert merged.state.evaluations == a.state.evaluations + b.state.evaluations


def test_a_control_variate_leaves_only_the_surrogates_error_to_sample():
    """With u = 0.7 v plus independent bumps as the control, the standard errors shrink and still cover the error."""
    utility = table_utility(TABLE, noise=0.05)
    bumps = np.random.default_rng(0).normal(0, 0.1, TABLE.shape)
    control = ControlVariate(0.7 * TABLE + bumps)
    plain = [run(utility, key) for key in range(20)]
    controlled = [run(utility, key, control=control) for key in range(20)]
    assert np.median([r.stderr for r in controlled]) < 0.6 * np.median([r.stderr for r in plain])
    z = (np.array([r.values for r in controlled]) - EXACT) / np.array([r.stderr for r in controlled])
    assert 0.7 <= np.sqrt(np.mean(z**2)) <= 1.4
    assert "as a control variate" in controlled[0].method


def test_a_standard_error_rule_stops_with_errors_within_twice_its_threshold():
    utility = table_utility(TABLE, noise=0.3)
    threshold = 0.08
    runs = [
        semivalue(
            utility,
            N,
            key,
            sampler=RegressionSampler(),
            batch_size=BATCH,
            stop=StandardError(threshold) | MaxEvaluations(100_000),
        )
        for key in range(15)
    ]
    converged = np.array([r.converged for r in runs])
    within = np.abs(np.array([r.values for r in runs]) - EXACT) <= 2 * threshold
    assert converged.mean() > 0.9 and within[converged].mean() >= 0.93


def test_the_design_of_least_noise_puts_sizes_in_proportion_to_one_over_their_root():
    sizes = np.arange(1, N)
    np.testing.assert_allclose(
        design_sizes(N, "sqrt"), 1 / np.sqrt(sizes * (N - sizes)) / np.sum(1 / np.sqrt(sizes * (N - sizes)))
    )
    np.testing.assert_allclose(design_sizes(N, "kernel"), kernel_sizes(N))
    np.testing.assert_allclose(design_sizes(N, "leverage"), np.full(N - 1, 1 / (N - 1)))


@pytest.mark.parametrize("pairs", [7, 8])
def test_every_size_of_a_batch_is_drawn_for_two_pairs_and_gets_its_share(pairs):
    """Neighbouring pairs share their spot, and an odd batch's last pair takes one of them again; over 4,000 keys
    every quantile interval of q holds pairs q(s) spots on average (each spot is uniform), within 4 standard errors:
    the sizes' weights p(s) / q(s) stay unbiased."""
    q = design_sizes(12, "sqrt")
    edges = np.concatenate([[0.0], np.cumsum(q)])
    keys = jax.random.split(jax.random.key(3), 4000)
    spots = np.array([twin_spots(k, jax.random.fold_in(k, 1), pairs) for k in keys])  # (keys, pairs)
    np.testing.assert_array_equal(spots[:, 0 : pairs - 1 : 2], spots[:, 1:pairs:2])
    if pairs % 2:
        assert np.all(np.any(spots[:, -1:] == spots[:, :-1:2], axis=1))
    counts = np.stack([((spots >= a) & (spots < b)).sum(axis=1) for a, b in zip(edges[:-1], edges[1:])], axis=1)
    error = counts.std(axis=0, ddof=1) / np.sqrt(len(keys))
    assert np.all(np.abs(counts.mean(axis=0) - pairs * q) <= 4 * np.maximum(error, 1e-3))


@pytest.mark.parametrize("game", [SymmetricVoting(21), Miner(21), Shoes(10, 10)], ids=lambda game: type(game).__name__)
def test_where_the_pair_difference_is_a_function_of_the_size_every_key_is_exact(game):
    """pyDVL's voting, miner and shoes games: g(z) = v(z) - v(N minus z) depends on the coalition's size alone, which
    the size control learns from another pair of the same size in each batch (leave-one-out), so every key's
    estimate is exact to rounding (with sizes drawn once, some keys' pilots missed a size and their estimates
    varied). All batch estimates
    are then equal: not converged, a floor standard error from the game's range, never 0."""
    exact = game.semivalue("shapley")
    options = {"sampler": RegressionSampler(), "batch_size": 2 * game.num_players}
    for key in range(12):
        result = semivalue(game.utility, game.num_players, jax.random.key(key), stop=MaxEvaluations(600), **options)
        np.testing.assert_allclose(result.values, exact, rtol=0, atol=1e-12)
        assert np.all(result.stderr > 0) and not np.any(result.converged)


def test_beta_one_one_is_shapley_and_is_served():
    result = run(table_utility(TABLE), 0, weights=beta_shapley(1, 1))
    assert result.values.sum() == pytest.approx(TABLE[-1] - TABLE[0], abs=1e-10)


@pytest.mark.parametrize(
    "options, message",
    [
        ({"weights": "banzhaf"}, "Shapley values only .* not the banzhaf semivalue; use PermutationSampler, Uniform"),
        ({"weights": beta_shapley(4, 1)}, "not the beta\\(4, 1\\) semivalue; use PermutationSampler"),
        ({"batch_size": 14}, "at least twice the 8 players, so the minimum is 16; got 14"),
        ({"batch_size": 17}, "an even number, .* the minimum is 16; got 17"),
    ],
)
def test_what_regression_sampling_cannot_serve_is_refused(options, message):
    with pytest.raises(ValueError, match=message):
        run(table_utility(TABLE), 0, **options)


def test_an_unknown_design_is_refused():
    with pytest.raises(ValueError, match="design must be one of \\('sqrt', 'kernel', 'leverage'\\), got 'pairs'"):
        RegressionSampler("pairs")


def test_a_utility_of_several_estimates_per_coalition_is_averaged_and_its_error_counted():
    """Two fresh estimates per coalition (values (2, B)): the batches see their mean, and the standard errors cover
    the error (the game layer adds the spread of the two estimates' semivalues to the batches'; RMS z 1.06)."""
    table = table_utility(TABLE)

    def utility(key, masks):
        values = table(key, masks)
        return values + 0.4 * jax.random.normal(key, (2, *values.shape))

    runs = [run(utility, key) for key in range(20)]
    z = (np.array([r.values for r in runs]) - EXACT) / np.array([r.stderr for r in runs])
    assert runs[0].state.num_repeats == 2 and 0.6 <= np.sqrt(np.mean(z**2)) <= 1.2
