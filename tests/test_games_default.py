"""The default sampler (`bayesval.games.choice`, issue 60): regression sampling for a noisy utility, permutations for
an exact one, found out by probing the utility, and said in the result's diagnostics; utilities that return their
own variances (`NoisyValues`); what the default refuses.

The acceptance table (the default against Latin permutations at equal evaluations, 12 and 50 players, noise 5 % and
50 %) is benchmarks/bench_regression.py's, in docs/games.md, "The default sampler"."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from game_examples import random_table, table_utility

from bayesval.games import MaxEvaluations, NoisyValues, PermutationSampler, RegressionSampler, semivalue
from bayesval.games.analytic import MinimumSpanningTree, UnanimitySum, WeightedVoting
from bayesval.games.choice import default_regression_batch
from bayesval.games.fingerprint import PROBES
from bayesval.games.semivalues import exact_semivalue

N = 8
TABLE = random_table(3, N)
EXACT = exact_semivalue(table_utility(TABLE), N, 0).values
LOOKUP = table_utility(TABLE)
BATCH = default_regression_batch(N)  # 36 coalitions: 4.5 n


def cached_estimates(key, masks):
    """Two estimates of each coalition that differ, the same under every key (a utility that caches them)."""
    values = LOOKUP(key, masks)
    return jnp.stack([values - 0.05, values + 0.05])


def told_variances(key, masks):
    """Exact values, with the variances a Monte Carlo utility would report beside them."""
    values = LOOKUP(key, masks)
    return NoisyValues(values, jnp.full(values.shape, 0.01))


def test_an_exact_utility_gets_permutations_and_the_result_says_why():
    result = semivalue(LOOKUP, N, 0, stop=MaxEvaluations(900))
    explicit = semivalue(LOOKUP, N, 0, stop=MaxEvaluations(900), sampler=PermutationSampler())
    assert result.method == "shapley by permutation sampling"
    assert result.diagnostics["sampler"].startswith("permutations: the utility is exact (the same values on 4 probe")
    assert explicit.diagnostics["sampler"] == "given by the caller"
    # the probe under a second key is counted in the budget; the batches are the explicit run's
    assert result.state.evaluations == explicit.state.evaluations + PROBES
    np.testing.assert_array_equal(result.values, explicit.values)


@pytest.mark.parametrize(
    "utility, reason",
    [
        (table_utility(TABLE, noise=0.1), "its values on 4 probe coalitions differ under two keys, by up to"),
        (cached_estimates, "its 2 estimates of a coalition differ, by up to 0.1"),
        (told_variances, "it returned variances with its values, up to 0.01"),
    ],
    ids=["fresh noise", "cached estimates", "told variances"],
)
def test_a_noisy_utility_gets_regression_sampling_at_four_and_a_half_n_coalitions_a_batch(utility, reason):
    result = semivalue(utility, N, 0, stop=MaxEvaluations(12 * (BATCH + 2)))
    assert result.method == "shapley by regression (sqrt sizes) sampling"
    assert result.diagnostics["sampler"].startswith(f"regression: the utility is noisy ({reason}")
    assert result.diagnostics["batch_size"] == BATCH
    assert result.state.evaluations == PROBES + 12 * (BATCH + 2)


def test_a_named_game_is_probed_under_both_keys_and_counts_both():
    budget = 2 * PROBES + 12 * (BATCH + 2)
    result = semivalue(table_utility(TABLE, noise=0.1), N, 0, stop=MaxEvaluations(budget), game_id="my game")
    assert "regression" in result.method and result.state.evaluations == budget


def test_other_semivalues_keep_their_own_default():
    result = semivalue(table_utility(TABLE, noise=0.1), N, 0, weights="banzhaf", stop=MaxEvaluations(640))
    assert result.method == "banzhaf by uniform sampling"
    assert result.diagnostics["sampler"] == "the default for the banzhaf semivalue"
    assert result.state.evaluations == 640  # nothing probed


def test_a_run_resumed_without_a_sampler_goes_on_with_its_own():
    utility = table_utility(TABLE, noise=0.1)
    first = semivalue(utility, N, 1, stop=MaxEvaluations(5 * (BATCH + 2)))
    resumed = semivalue(utility, N, 1, stop=MaxEvaluations(12 * (BATCH + 2)), resume_from=first)
    whole = semivalue(utility, N, 1, stop=MaxEvaluations(12 * (BATCH + 2)))
    assert resumed.diagnostics["sampler"] == "the sampler of resume_from (regression (sqrt sizes))"
    np.testing.assert_array_equal(resumed.values, whole.values)
    np.testing.assert_array_equal(resumed.stderr, whole.stderr)


def test_at_fifty_percent_noise_the_default_beats_latin_permutations_at_equal_evaluations():
    """12 players, a sum of unanimity games, noise sd half the largest marginal, 676 evaluations (about 50 Latin
    permutations): over 12 keys the default's mean squared error is at least twice below Latin blocks' (3.3 times
    in the benchmark's 20 keys, docs/games.md)."""
    game = UnanimitySum.random(12, 15, 5, seed=0)
    exact = game.semivalue("shapley")
    sd = 0.5 * float((game._membership().T.astype(float) @ np.abs(np.array(game.coefficients))).max())

    def noisy(key, masks):
        values = game.utility(key, masks)
        return values + sd * jax.random.normal(key, values.shape)

    budget = MaxEvaluations(48 * 13 + 2 * 26)
    default = [semivalue(noisy, 12, key, stop=budget).values for key in range(12)]
    latin = [
        semivalue(noisy, 12, key, stop=budget, sampler=PermutationSampler(latin=True), batch_size=48).values
        for key in range(12)
    ]
    mse = {name: np.mean((np.array(runs) - exact) ** 2) for name, runs in (("default", default), ("latin", latin))}
    assert mse["latin"] >= 2 * mse["default"]


def test_standard_errors_hold_where_the_noise_differs_twentyfold_between_coalitions():
    """Noise of sd 0.05 on coalitions without player 0 and 1.0 on those with it, told with the values: over 30 keys of
    12 batches the errors are unbiased (each player's mean error within 4 of its standard errors) and z = error /
    stderr has RMS in [0.8, 1.25] (a t with 11 degrees of freedom: 1.1), none above 6."""

    def utility(key, masks):
        values = LOOKUP(key, masks)
        sd = jnp.where(masks[:, 0], 1.0, 0.05)
        return NoisyValues(values + sd * jax.random.normal(key, values.shape), sd**2)

    runs = [semivalue(utility, N, key, stop=MaxEvaluations(PROBES + 12 * (BATCH + 2))) for key in range(30)]
    assert all("regression" in r.method for r in runs)
    errors = np.array([r.values for r in runs]) - EXACT
    z = errors / np.array([r.stderr for r in runs])
    assert np.all(np.abs(errors.mean(axis=0)) <= 4 * errors.std(axis=0, ddof=1) / np.sqrt(len(runs)))
    assert 0.8 <= np.sqrt(np.mean(z**2)) <= 1.25 and np.abs(z).max() <= 6


@pytest.mark.parametrize(
    "options, message",
    [
        (
            {"batch_size": 9},
            r"the default sampler here is RegressionSampler \(regression: the utility is noisy .*"
            r"an even number, at least twice the 8 players, so the minimum is 16; got batch_size=9. Pass batch_size=36",
        ),
        (
            {"stop": MaxEvaluations(50)},
            r"stop caps the run at MaxEvaluations\(50\), below what RegressionSampler "
            r"\(the default here: .*PermutationSampler\(\) needs no pilot\) needs .* two batches of 36 \+ 2 "
            r"coalitions .*"
            r"after the 4 evaluations that probed the utility, so the minimum is 80",
        ),
        (
            {"stop": MaxEvaluations(15), "sampler": RegressionSampler(), "batch_size": 16},
            r"stop caps the run at MaxEvaluations\(15\), below what RegressionSampler needs for a first value: two "
            r"batches of 16 \+ 2 coalitions .*so the minimum is 36",
        ),
    ],
    ids=["odd batch", "budget below two batches (default)", "budget below two batches (given)"],
)
def test_what_regression_sampling_cannot_fit_is_refused_naming_the_minimum(options, message):
    options = {"stop": MaxEvaluations(1000)} | options
    with pytest.raises(ValueError, match=message):
        semivalue(table_utility(TABLE, noise=0.1), N, 0, **options)


@pytest.mark.parametrize(
    "variances, message",
    [
        (lambda v: jnp.zeros((2, *v.shape)), r"NoisyValues.variances must have the shape of its values, \(1, 4\)"),
        (lambda v: -jnp.ones(v.shape), "variances that are negative, NaN or inf for .* coalitions"),
        (lambda v: jnp.full(v.shape, jnp.nan), "variances that are negative, NaN or inf"),
    ],
    ids=["shape", "negative", "nan"],
)
def test_bad_variances_are_refused_naming_the_coalitions(variances, message):
    def utility(key, masks):
        values = LOOKUP(key, masks)
        return NoisyValues(values, variances(values))

    with pytest.raises(ValueError, match=message):
        semivalue(utility, N, 0, stop=MaxEvaluations(1000))


@pytest.mark.parametrize(
    "game, sd",
    [
        (MinimumSpanningTree(50), 0.5 * 101),  # noise sd half the largest marginal (a player joined to the source)
        (WeightedVoting(tuple(np.random.default_rng(0).integers(1, 20, 51)), quota=250.5), 0.05),
    ],
    ids=["minimum spanning tree, 50 players, 50 % noise", "weighted voting, 51 players, 5 % noise"],
)
def test_on_pydvls_games_the_defaults_standard_errors_hold(game, sd):
    """pyDVL's analytic games, noisy, so the default runs regression sampling: 20 keys of 16 batches of 4.5n coalitions;
    on the players worth at least 1 % of the largest value, RMS z in [0.8, 1.2], at most 1 % of |z| above 4 and none
    above 8, median stderr / spread over keys in [0.85, 1.15] (benchmarks/bench_regression.py measures more)."""
    n, exact = game.num_players, game.semivalue("shapley")

    def noisy(key, masks):
        values = game.utility(key, masks)
        return values + sd * np.random.default_rng(np.asarray(jax.random.key_data(key)).tolist()).normal(
            size=len(values)
        )

    runs = [
        semivalue(noisy, n, key, stop=MaxEvaluations(PROBES + 16 * (default_regression_batch(n) + 2)))
        for key in range(20)
    ]
    assert all("regression" in r.method for r in runs)
    worth = np.abs(exact) >= 0.01 * np.abs(exact).max()
    estimates, stderr = np.array([r.values for r in runs])[:, worth], np.array([r.stderr for r in runs])[:, worth]
    z = (estimates - exact[worth]) / stderr
    ratio = np.median(stderr.mean(axis=0) / estimates.std(axis=0, ddof=1))
    assert 0.8 <= np.sqrt(np.mean(z**2)) <= 1.2 and np.mean(np.abs(z) > 4) <= 0.01 and np.abs(z).max() <= 8
    assert 0.85 <= ratio <= 1.15


def test_exact_semivalues_carry_the_error_of_the_variances_a_utility_returns():
    """Enumerating every coalition of a utility that tells its variances: the standard error is sqrt(sum_c C_c^2
    sigma_c^2), here with sigma_c^2 = 0.01 (1 + |c|), checked against the error over 200 noise draws."""
    from bayesval.games.masks import code_masks
    from bayesval.games.weights import SHAPLEY, coalition_coefficients

    def utility(key, masks):
        values, variances = LOOKUP(key, masks), 0.01 * (1 + masks.sum(axis=1))
        return NoisyValues(values + jnp.sqrt(variances) * jax.random.normal(key, values.shape), variances)

    result = exact_semivalue(utility, N, 0)
    masks = np.asarray(code_masks(np.arange(2**N), N))
    expected = np.sqrt(0.01 * (1 + masks.sum(axis=1)) @ coalition_coefficients(masks, SHAPLEY) ** 2)
    np.testing.assert_allclose(result.stderr, expected, rtol=1e-12)
    spread = np.array([exact_semivalue(utility, N, key).values for key in range(200)]).std(axis=0, ddof=1)
    np.testing.assert_allclose(spread, expected, rtol=0.2)


@pytest.mark.parametrize(
    "sampler", [RegressionSampler("kernel"), PermutationSampler(latin=True)], ids=lambda sampler: sampler.name
)
def test_a_run_of_another_shapley_sampler_resumes_with_it_when_none_is_given(sampler):
    utility = table_utility(TABLE, noise=0.1)
    batch = 16 if isinstance(sampler, RegressionSampler) else 2 * N
    first = semivalue(utility, N, 2, sampler=sampler, batch_size=batch, stop=MaxEvaluations(100))
    resumed = semivalue(utility, N, 2, stop=MaxEvaluations(400), resume_from=first)
    whole = semivalue(utility, N, 2, sampler=sampler, batch_size=batch, stop=MaxEvaluations(400))
    assert resumed.state.sampler == sampler.name and resumed.diagnostics["batch_size"] == batch
    np.testing.assert_array_equal(resumed.values, whole.values)
