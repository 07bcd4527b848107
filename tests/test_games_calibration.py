"""Standard errors and convergence flags on games too large to enumerate, where sampling is needed (issue 27).

Closed-form games of 60 and 100 players (`bayesval.games.analytic`): z = (estimate - exact) / stderr over 20 keys on
the indices worth at least 1 % of the largest value, one case for each default sampler (permutations for Shapley,
uniform coalitions for Banzhaf, semivalue sampling for the Beta Shapley values, its heaviest-tailed weights) and
semivalue sampling asked for the Shapley value. The full sweep (every semivalue x sampler, more keys; Banzhaf on the
unanimity game and Beta(4, 1) on both games among them) is `benchmarks/bench_calibration.py`, its table in
docs/games.md."""

from __future__ import annotations

import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from game_examples import assert_flags_agree

from bayesval.games import (
    BANZHAF,
    LEAVE_ONE_OUT,
    SHAPLEY,
    Airport,
    MaxEvaluations,
    PermutationSampler,
    SemivalueSampler,
    StandardError,
    StratifiedSampler,
    UnanimitySum,
    UniformSampler,
    beta_shapley,
    semivalue,
)
from bayesval.games.samplers import file_draws
from bayesval.results.state import SemivalueState
from bayesval.results.variance import TRUSTED_DOF, variances_and_dof

KEYS = 20
UNANIMITY = UnanimitySum.random(60, 40, 8, seed=0)
AIRPORT = Airport.random(100, seed=0)


def calibration(game, weights, sampler, evaluations: int, batch_size: int):
    """RMS z, the share of |z| > 4, max |z|, the median of stderr / spread over keys, and the (index, key) pairs with
    stderr 0 and a wrong value, over KEYS runs."""
    exact = game.semivalue(weights)
    runs = [
        semivalue(
            game.utility,
            game.num_players,
            key,
            weights=weights,
            sampler=sampler,
            stop=MaxEvaluations(evaluations),
            batch_size=batch_size,
        )
        for key in range(KEYS)
    ]
    values, stderr = np.array([r.values for r in runs]), np.array([r.stderr for r in runs])
    worth = np.abs(exact) >= 0.01 * np.abs(exact).max()
    wrong_zero = int(((stderr == 0) & ~np.isclose(values, exact, rtol=0, atol=1e-12 * np.abs(exact).max())).sum())
    z = ((values - exact) / stderr)[:, worth]
    ratio = np.median(stderr[:, worth].mean(axis=0) / values[:, worth].std(axis=0, ddof=1))
    return np.sqrt(np.mean(z**2)), np.mean(np.abs(z) > 4), np.abs(z).max(), ratio, wrong_zero


@pytest.mark.parametrize(
    "game, weights, sampler, evaluations, batch_size",
    [
        (UNANIMITY, SHAPLEY, None, 40_000, 64),
        (UNANIMITY, SHAPLEY, SemivalueSampler(), 40_000, 32),
        (AIRPORT, SHAPLEY, None, 60_000, 64),
        (AIRPORT, BANZHAF, None, 60_000, 1024),
        (AIRPORT, beta_shapley(16, 1), None, 60_000, 32),
    ],
    ids=lambda x: getattr(x, "name", type(x).__name__) if not isinstance(x, int) else str(x),
)
def test_standard_errors_are_calibrated_on_large_games(game, weights, sampler, evaluations, batch_size):
    """RMS z in [0.8, 1.2], at most 1 % of |z| above 4 and none above 8, the median stderr / spread in [0.85, 1.15],
    no stderr 0 on an inexact value, and no warning."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        rms, beyond_4, worst, ratio, wrong_zero = calibration(game, weights, sampler, evaluations, batch_size)
    print(f"RMS z {rms:.2f}, |z| > 4: {beyond_4:.2%}, max |z| {worst:.1f}, stderr / spread {ratio:.2f}")
    assert 0.8 <= rms <= 1.2 and beyond_4 <= 0.01 and worst <= 8 and 0.85 <= ratio <= 1.15 and wrong_zero == 0


@pytest.mark.parametrize(
    "weights, sampler, better",
    [
        (BANZHAF, PermutationSampler(), "UniformSampler"),
        (beta_shapley(4, 1), PermutationSampler(), "SemivalueSampler"),
        (beta_shapley(16, 1), PermutationSampler(antithetic=True), "SemivalueSampler"),
        (SHAPLEY, UniformSampler(), "PermutationSampler"),
        (LEAVE_ONE_OUT, UniformSampler(), "SemivalueSampler"),
        (SHAPLEY, StratifiedSampler(), "PermutationSampler"),
    ],
)
def test_an_unreliable_sampler_is_warned_with_the_better_one_named(weights, sampler, better):
    with pytest.warns(UserWarning, match=f"not reliable; use {better}"):
        semivalue(UNANIMITY.utility, 60, 0, weights=weights, sampler=sampler, stop=MaxEvaluations(1), batch_size=128)


def test_the_default_samplers_are_not_warned_at_any_size():
    for weights in (SHAPLEY, BANZHAF, beta_shapley(4, 1), beta_shapley(16, 1), beta_shapley(1, 16), LEAVE_ONE_OUT):
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            semivalue(UNANIMITY.utility, 60, 0, weights=weights, stop=MaxEvaluations(1), batch_size=64)


def test_an_index_whose_draws_are_all_equal_does_not_converge():
    """v(S) = |S|: every marginal is 1, so the draws never vary. Nothing tells the sampler the value is exact (the
    middle sizes are sampled), so StandardError never holds; the run stops at its cap and says why."""

    def size(key, masks):
        return masks.sum(axis=1).astype(jnp.float64)

    result = semivalue(size, 8, 0, stop=StandardError(0.1) | MaxEvaluations(2_000), batch_size=16)
    assert not result.converged.any() and result.diagnostics["evaluations"] >= 2_000
    np.testing.assert_allclose(result.values, 1.0)
    assert result.diagnostics["indices"]["range"] == [0.0] * 8
    assert all("all draws equal" in verdict for verdict in result.diagnostics["indices"]["verdict"])
    assert_flags_agree(result)


def test_an_exact_value_has_stderr_zero_and_converges_at_once():
    """Leave-one-out is one coalition per index: its draws are all equal and exact, stderr exactly 0 (the squared
    deviations are combined without cancellation), converged after the first batch."""
    result = semivalue(UNANIMITY.utility, 60, 0, weights=LEAVE_ONE_OUT, stop=StandardError(0.0), batch_size=8)
    np.testing.assert_allclose(result.values, UNANIMITY.semivalue(LEAVE_ONE_OUT), rtol=1e-12, atol=1e-12)
    assert np.all(result.stderr == 0) and result.converged.all() and result.diagnostics["batches"] == 1
    assert set(result.diagnostics["indices"]["verdict"]) == {"exact"}
    assert_flags_agree(result)


def test_a_coalition_noisier_than_the_rest_leaves_its_index_calibrated():
    """Leave-one-out of 6 players over 100 keys, fresh noise of sd 1 on the coalition of everyone but player 0 and
    0.05 on every other: each single coalition of this keyed utility is sampled as a group of its own variance, so
    every player's z-scores have RMS in [0.8, 1.2] (measured 0.98-1.11; a noise variance pooled over every such group
    gave player 0 2.4)."""
    weights = jnp.array([4.0, 3.0, 2.0, 2.0, 1.0, 1.0])

    def clean(key, masks):
        return jnp.sqrt(masks.astype(jnp.float64) @ weights)

    def noisy(key, masks):
        everyone_but_0 = ~masks[:, 0] & (masks.sum(axis=1) == 5)
        return clean(key, masks) + jnp.where(everyone_but_0, 1.0, 0.05) * jax.random.normal(key, (len(masks),))

    exact = semivalue(clean, 6, 0, weights=LEAVE_ONE_OUT, stop=MaxEvaluations(64), batch_size=32).values
    runs = [
        semivalue(noisy, 6, key, weights=LEAVE_ONE_OUT, sampler=SemivalueSampler(), stop=MaxEvaluations(800))
        for key in range(100)
    ]
    z = np.array([(run.values - exact) / run.stderr for run in runs])
    rms = np.sqrt(np.mean(z**2, axis=0))
    assert np.all((0.8 <= rms) & (rms <= 1.2)), rms


def test_a_rare_marginal_never_seen_still_has_an_error():
    """Airport game: an index whose sampled (middle) draws missed every rare positive marginal has a standard
    error above 0 (from its own range), and the estimate is within 4 of them of the exact value."""
    exact = AIRPORT.semivalue(SHAPLEY)
    result = semivalue(AIRPORT.utility, 100, 0, stop=MaxEvaluations(2_000), batch_size=8)
    assert np.all(result.stderr > 0)
    assert np.all(np.abs(result.values - exact) <= 4 * result.stderr)


def test_a_standard_error_rule_stops_within_twice_its_threshold():
    """StandardError(t) on a 60-player unanimity game where every player is in some term (a null player's draws are
    all equal, so it would never converge): |error| <= 2 t on at least 93 % of the indices over 8 keys (a calibrated
    stderr at t gives |error| <= 2 t on 95 %)."""
    game = UnanimitySum.random(60, 80, 8, seed=0)
    exact = game.semivalue(SHAPLEY)
    threshold = 0.02 * np.abs(exact).max()
    within = []
    for key in range(8):
        result = semivalue(game.utility, 60, key, stop=StandardError(threshold) | MaxEvaluations(400_000))
        assert result.converged.all()
        within.append(np.abs(result.values - exact) <= 2 * threshold)
    assert np.mean(within) >= 0.93


def test_a_run_goes_on_until_every_group_has_a_draw():
    """Two uniform coalitions a batch cannot hold every index both in and out: a run capped at one evaluation goes
    on until every index has a draw with and without itself, so every value is defined."""
    result = semivalue(UNANIMITY.utility, 60, 0, weights=BANZHAF, stop=MaxEvaluations(1), batch_size=2)
    assert result.diagnostics["batches"] > 1 and np.isfinite(result.values).all()
    assert (result.state.counts > 0).all()


def test_moments_combined_batch_by_batch_equal_those_of_all_draws():
    """The central moment sums m2, m3, m4 kept batch by batch (Chan et al. 1983; Pebay 2008) equal those of all the
    draws at once, for skewed draws in batches of unequal sizes."""
    rng = np.random.default_rng(0)
    batches = [rng.exponential(size=(size, 3)) ** 2 for size in (5, 17, 2, 40)]  # (D, n) draws of 3 indices
    state = SemivalueState.empty("shapley", "semivalue", SemivalueSampler().plan(3, 8, SHAPLEY), 1, 3)
    for draws in batches:
        group = np.ones_like(draws, dtype=np.int64)  # every draw in the middle group (1 of 3)
        state.add(file_draws(jnp.asarray(draws)[None], jnp.asarray(group), 3), jnp.asarray(draws.ravel())[None])
    every = np.concatenate(batches)
    deviations = every - every.mean(axis=0)
    for power, moment in ((2, state.m2), (3, state.m3), (4, state.m4)):
        np.testing.assert_allclose(moment[1], (deviations**power).sum(axis=0), rtol=1e-10)
    assert np.all(state.counts[1] == len(every)) and np.all(state.m4[[0, 2]] == 0)


def test_degrees_of_freedom_count_the_hits_of_a_rare_event_not_the_draws():
    """Normal draws give a variance of about m - 1 degrees of freedom; k hits of a rare event among m draws give
    about 2 k however large m is (the kurtosis of Bernoulli(k / m) draws is about m / k): Cramer's Var(s^2)."""
    rng = np.random.default_rng(1)
    m = 4_000
    normal = rng.normal(size=m)
    rare = np.zeros(m)
    rare[rng.choice(m, 3, replace=False)] = 1.0  # 3 hits
    draws = np.stack([normal, rare], axis=1)  # (m, 2 indices)
    state = SemivalueState.empty("shapley", "semivalue", SemivalueSampler().plan(2, 8, SHAPLEY), 1, 2)
    state.add(file_draws(jnp.asarray(draws)[None], jnp.ones((m, 2), jnp.int64), 3), jnp.asarray(draws.ravel())[None])
    dof = variances_and_dof(state)[1][1]
    assert 0.85 * (m - 1) <= dof[0] <= 1.15 * (m - 1)
    assert 6.0 <= dof[1] <= 6.0 + 2.0  # 2 k, plus at most the priors' two draws


@pytest.mark.parametrize("m", [3, 8])
def test_a_few_normal_draws_give_no_more_than_m_minus_1_degrees_of_freedom(m):
    """400 indices, each with m normal draws in one group: each variance's degrees of freedom are at most m - 1 plus
    the priors' two draws, m - 1 for most. The sample kurtosis of a few draws is biased low (at most 1.5 at m = 3), so
    Cramer's Var(s^2) read with it gave about 4 degrees of freedom at m = 3 and a median of 11 at m = 8, where 59 %
    of such groups alone reached the 10 that `StandardError` trusts."""
    draws = np.random.default_rng(m).normal(size=(m, 400))
    state = SemivalueState.empty("shapley", "semivalue", SemivalueSampler().plan(400, 8, SHAPLEY), 1, 400)
    state.add(
        file_draws(jnp.asarray(draws)[None], jnp.ones(draws.shape, jnp.int64), 3), jnp.asarray(draws.ravel())[None]
    )
    dof = variances_and_dof(state)[1][1]
    assert np.all(dof <= m - 1 + 2.0) and np.median(dof) >= m - 1
    assert np.all(dof < TRUSTED_DOF)


def test_an_index_of_many_small_groups_has_no_more_degrees_of_freedom_than_its_draws_hold():
    """Stratified sampling of 8 players, 2 normal draws in each of the 6 sampled sizes of an index (the end sizes are
    one coalition each, exact): its variance holds 6 degrees of freedom, plus the guard prior's one draw. Each group's
    pooled prior is the index's other groups' draws again; counted in every group, it gave a median of 11 and 78 % of
    the indices reached the 10 that `StandardError` trusts (over 100 such states)."""
    rng = np.random.default_rng(8)
    plan = StratifiedSampler().plan(8, 16, SHAPLEY)
    sizes = np.repeat(np.arange(8), 2)[:, None].repeat(8, axis=1)  # (16 draws, 8 indices): 2 a size
    dofs = []
    for _ in range(100):
        draws = np.where((sizes == 0) | (sizes == 7), 0.3, rng.normal(size=sizes.shape))  # end sizes: exact
        state = SemivalueState.empty("shapley", "stratified", plan, 1, 8)
        state.add(file_draws(jnp.asarray(draws)[None], jnp.asarray(sizes), 8), jnp.asarray(draws.ravel())[None])
        dofs.append(state.estimate().dof)
    dofs = np.concatenate(dofs)
    assert np.all(dofs <= 6 + 1.0 + 1e-9) and np.median(dofs) >= 6
    assert np.all(dofs < TRUSTED_DOF)


def test_an_index_whose_draws_varied_rarely_is_not_converged_until_they_vary_often():
    """A unanimity game of 12 of 40 players: a member adds value only when it completes the coalition, once in 12
    permutations. After 12 permutations its one or two hits give a standard error of few degrees of freedom: however
    loose the threshold, it is not converged, and the verdict says why; with enough permutations it is."""
    game = UnanimitySum((tuple(range(12)),), (1.0,), 40)
    few = semivalue(game.utility, 40, 0, stop=StandardError(1e9) | MaxEvaluations(1), batch_size=12)
    members = np.arange(12)
    assert not few.converged[members].any()
    assert np.all(np.array(few.diagnostics["indices"]["dof"])[members] < 10)
    assert all("varied too rarely" in few.diagnostics["indices"]["verdict"][i] for i in members)
    assert_flags_agree(few)
    many = semivalue(game.utility, 40, 0, stop=StandardError(0.05) | MaxEvaluations(100_000), batch_size=256)
    assert many.converged[members].all() and np.all(np.array(many.diagnostics["indices"]["dof"])[members] >= 10)
    assert not many.converged[12:].any()  # non-members: every draw 0, never seen to vary
    np.testing.assert_allclose(many.values, game.semivalue(SHAPLEY), atol=4 * many.stderr.max())
