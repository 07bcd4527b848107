"""Layered Shapley against exact enumeration, its (alpha, beta) guarantee over 200 seeds, its standard errors against
the spread over keys on a 100-player game with a closed form, the spec's worked numbers, DP Layered Shapley's
calibration and noise scale, the Monte Carlo baseline, the front door and bad input."""

import itertools
import math
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from game_examples import averaging_shapley, averaging_utility
from sklearn.linear_model import LogisticRegression

import bayesval as bv
from bayesval.estimators import LayeredShapley, LogisticRegressionUtility, MonteCarloShapley, SklearnUtility
from bayesval.estimators.layered.estimators import (
    _layer_statistics,
    expected_coalitions_with,
    layer_counts,
    layer_sample_sizes,
    layered_sensitivity,
    layered_shapley,
)
from bayesval.games import exact_semivalue
from bayesval.games.samplers import ENUMERATION_LIMIT, StratifiedSampler, samples_without_replacement


def _data(seed=0, n=10, d=3, n_val=80):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n + n_val, d))
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    y = (rng.random(n + n_val) < 1 / (1 + np.exp(-4 * x[:, 0]))).astype(int)
    y[:2] = [0, 1]
    return x[:n], y[:n], x[n:], y[n:]


def test_worked_numbers_of_the_spec():
    sizes = layer_sample_sizes(100, 0.05, 0.05, 0.5)
    assert sizes[1] == pytest.approx(414.7025, abs=1e-4) and sizes[2] == pytest.approx(103.6756, abs=1e-4)
    assert sizes.sum() == pytest.approx(678.0, abs=0.05)
    assert np.flatnonzero(sizes >= 1).max() == 20
    counts = layer_counts(bv.games.semivalues.check_key("key", 0), 100, 0.05, 0.05, 0.5)
    assert counts[0, 1] == 99 and counts[0, 2] == 104 and counts[0, 20] == 2  # layer 1 enumerated, ceil(m_k)
    assert set(np.unique(counts[:, 21:])) <= {0, 1}
    assert layered_sensitivity(100, 1.0, 1.0, 1.0, "add-or-remove-one") == pytest.approx(0.0517738, abs=1e-6)
    assert layered_sensitivity(100, 1.0, 1.0, 1.0, "replace-one") == pytest.approx(2 * 0.0517738, abs=1e-6)
    per_layer = [0.0] + [min(math.comb(99, k), m) for k, m in enumerate(sizes[1:], 1)]
    assert expected_coalitions_with(per_layer) == pytest.approx(18.50, abs=0.01)  # spec Sec. 5, exact p


def test_no_amplification_by_subsampling_from_a_public_key():
    """n = 10, c = 0.03: layer 1 draws 2 of its 9 coalitions and nothing is enumerated, so the realised p of
    Appendix D's amplification was 0.44 and the old code calibrated to epsilon_0 = ln(1 + (e - 1) / 0.44) = 1.58
    per value (15.8 in the ledger). The coalitions follow from the public key and the counts are published, so
    the subsample is not secret: each value gets the unamplified Laplace scale Delta / epsilon and the ledger
    n epsilon, epsilon per value."""
    x, y, x_val, y_val = _data()
    private = LayeredShapley(0.05, 0.05, c=0.03, epsilon=1.0, noise_seed=21)
    result = private.fit(x, y).value(x_val, y_val)
    assert result.diagnostics["enumerated_layers"] == [] and result.diagnostics["coalitions_per_layer"][1] == 2
    assert expected_coalitions_with(result.diagnostics["coalitions_per_layer"]) < 1  # where App. D would amplify
    unamplified = layered_sensitivity(10, 1.0, 1.0, 1.0, "replace-one") / 1.0  # the default utility's (L, kappa, l2)
    [release] = result.privacy.releases
    # Delta / epsilon, the rounding to the grid adding at most 0.1 % to Delta and one grid step to the scale
    assert unamplified <= release.noise_scale <= unamplified * (1 + 1e-3) + release.grid
    assert result.diagnostics["noise_scale"] == release.noise_scale
    assert release.guarantee.epsilon == pytest.approx(10 * 1.0)  # ten values, each at most 1-DP
    assert release.guarantee.epsilon / 10 <= 1.0
    spent = result.privacy.spent(release.owner).epsilon  # dp-accounting's composition, at delta = 1e-5
    assert 0.99 * 10 <= spent <= 10 * 1.0  # the old calibration spent 15.8


def test_exhaustive_layers_give_the_exact_shapley_value_of_a_logistic_regression():
    """By default (layer 0 valued) every layer enumerated gives the Shapley value of Eq. 1 with standard error 0, as
    the estimator and the result claim; Alg. 1 as printed (include_empty_layer=False) misses (v({i}) - v({})) / n,
    which its result names as its target."""
    x, y, x_val, y_val = _data(n=8)
    utility = LogisticRegressionUtility(x, y, x_val, y_val, norm_bound=1.0)
    exact = exact_semivalue(utility, 8, 0).values
    layered = layered_shapley(utility, 8, 0, alpha=1e-3, beta=0.05, c=0.5)
    assert layered.diagnostics["enumerated_layers"] == list(range(1, 8))
    np.testing.assert_allclose(layered.values, exact, atol=1e-12)
    assert layered.diagnostics["target"] == "shapley value"
    assert np.all(layered.stderr == 0)  # every layer enumerated: exact
    assert layered.values.sum() == pytest.approx(float(utility(None, np.ones((1, 8), bool))[0]) + math.log(2))
    without_empty = layered_shapley(utility, 8, 0, alpha=1e-3, beta=0.05, c=0.5, include_empty_layer=False)
    empty_layer = (np.asarray(utility(None, np.eye(8, dtype=bool))) + math.log(2)) / 8
    assert np.abs(empty_layer).min() > 1e-3  # the term is not negligible here
    np.testing.assert_allclose(without_empty.values, exact - empty_layer, atol=1e-12)
    assert without_empty.diagnostics["target"] == "shapley value less its layer-0 term (v({i}) - v({})) / n"
    estimator = LayeredShapley(alpha=1e-3).fit(x, y).value(x_val, y_val)  # the estimator's defaults, c = 0.5
    np.testing.assert_allclose(estimator.values, exact, atol=1e-12)
    assert np.all(estimator.stderr == 0) and estimator.diagnostics["target"] == "shapley value"


def test_the_mean_score_game_has_its_closed_form_shapley_values():
    for n in (2, 5, 8):
        scores = np.random.default_rng(n).random(n)
        exact = exact_semivalue(averaging_utility(scores, 0.7), n, 0).values
        np.testing.assert_allclose(averaging_shapley(scores, 0.7), exact, atol=1e-12)


def test_the_alpha_beta_guarantee_holds_over_200_seeds():
    n, c, alpha, beta = 10, 1.0, 0.1, 0.1
    a = np.random.default_rng(4).random(n)
    game = averaging_utility(a, c)
    target = averaging_shapley(a, c)  # the Shapley value: layer 0, v({i}) - v({}) = c a_i, valued by default
    runs = [layered_shapley(game, n, seed, alpha=alpha, beta=beta, c=c) for seed in range(200)]
    errors = np.array([run.values for run in runs]) - target
    assert len(errors) == 200 and runs[0].diagnostics["enumerated_layers"] == [1, 2, 9]  # the others are sampled
    assert (np.abs(errors) > alpha).mean(axis=0).max() <= beta
    reported = np.array([run.stderr for run in runs]).mean(axis=0)  # and the standard errors are calibrated
    np.testing.assert_allclose(errors.std(axis=0) / reported, 1.0, atol=0.25)
    np.testing.assert_allclose(errors.mean(axis=0), 0.0, atol=3 * errors.std(axis=0).max() / np.sqrt(200) + 1e-12)


def test_standard_errors_match_the_spread_over_keys_on_100_players():
    """Default alpha = beta = 0.05, c = 0.5: layers 2-20 sampled, 21-99 rare (drawn with probability m_k), whose
    random inclusion is most of the spread of the points far from the mean score."""
    n, keys = 100, 20
    a = np.random.default_rng(0).random(n)
    game = averaging_utility(a, 0.5)
    runs = [layered_shapley(game, n, key) for key in range(keys)]
    values, stderr = np.array([run.values for run in runs]), np.array([run.stderr for run in runs])
    ratio = stderr.mean(axis=0) / values.std(axis=0, ddof=1)
    assert 0.85 <= np.median(ratio) <= 1.15
    errors = values - averaging_shapley(a, 0.5)
    assert (np.abs(errors) <= 0.05).mean() >= 1 - 0.05  # the (alpha, beta) guarantee


def test_no_standard_error_is_zero_unless_exact():
    """A rounded utility leaves many few-draw layers with all draws equal; each point still gets a positive
    standard error, shrunk from its neighbouring layers."""
    n = 100
    rounded = averaging_utility(np.random.default_rng(1).random(n), 0.5, step=0.005)
    assert np.all(layered_shapley(rounded, n, 3).stderr > 0)


def test_a_few_equal_draws_borrow_the_variance_of_the_neighbouring_layers():
    """Five players, layer 1 enumerated (4 coalitions), layer 2 sampled (3 of 6), layer 3 sampled (2 of 4), layer 4
    a single coalition; no rare layer. Point 0 varies only in layer 1, point 1 nowhere."""
    sizes = np.array([0.0, 4.0, 3.0, 2.0, 1.0])
    counts = np.array([[0, 4, 3, 2, 1]] * 2 + [[0] * 5] * 3)
    layers = np.tile(np.repeat(np.arange(5), counts[0]), 2)
    owners = np.repeat([0, 1], counts[0].sum())
    gains = np.array([0.1, 0.2, 0.3, 0.4, 0.05, 0.05, 0.05, 0.02, 0.02, 0.01] + [0.1] * 10)
    means, variance = _layer_statistics(gains, owners, layers, counts, sizes, c=1.0)
    np.testing.assert_allclose(means[0, 1:], [0.25, 0.05, 0.02, 0.01])
    spread = np.var([0.1, 0.2, 0.3, 0.4], ddof=1)  # layer 1's, scaled by 1^2; the pool of layers 1-4 has 6 dof
    # layer 2: window [1, 4], prior spread / 2 / 2^2, shrunk (2 dof * 0 + 1 * prior) / 3, over 3 draws, FPC 1 - 3/6;
    # layer 3: window [2, 4] holds no spread, so the point's pool: spread / 2 / 3^2, shrunk / 2, over 2 draws, 1 - 2/4
    assert variance[0] == pytest.approx(spread / 8 / 3 / 3 / 2 + spread / 18 / 2 / 2 / 2)
    assert variance[1] == 0  # no spread in any layer: constant marginals, as in an additive game


def _one_large_layer(key, count, n=30, k=4):
    """Point 0's layer k of n players drawn `count` times by the stratified sampler, on the non-additive game
    v(S) = (sum_S a)^2 / |S|: the draws' marginals, the layer statistics, and the number of distinct coalitions."""
    a = np.random.default_rng(0).random(n)
    counts = np.zeros((n, n), np.int64)
    counts[0, k] = count
    without, owners, layers = StratifiedSampler.fixed_draws(jax.random.key(key), counts)
    with_point = without.copy()
    with_point[:, 0] = True

    def v(masks):
        return (masks * a).sum(axis=1) ** 2 / np.maximum(masks.sum(axis=1), 1)

    gains = v(with_point) - v(without)
    sizes = np.where(np.arange(n) == k, float(count), 0.0)
    means, variance = _layer_statistics(gains, owners, layers, counts, sizes, 1.0)
    return gains, means[0, k], variance[0], len(np.unique(np.packbits(without, axis=1), axis=0))


def test_a_layer_is_exact_only_where_it_is_enumerated():
    """n = 30, k = 4: binom(29, 4) = 23,751 coalitions, more than the sampler lists (20,000). A count of all of them
    (layer_counts' cap) is enumerated, each coalition once, so the layer mean is exact under every key and its
    variance 0; the old sampler drew them independently (about 15,000 distinct, an estimate that moved with the key,
    reported exact). A count of 20,001 is drawn independently, with replacement: its variance is s^2 / m, with no
    finite-population correction (the old code multiplied it by 1 - 20,001 / 23,751 = 0.16)."""
    n, k = 30, 4
    total = math.comb(n - 1, k)
    assert total > ENUMERATION_LIMIT
    a = np.random.default_rng(0).random(n)
    exact = []
    for members in itertools.combinations(range(1, n), k):
        inside = a[list(members)].sum()
        exact.append((inside + a[0]) ** 2 / (k + 1) - inside**2 / k)
    for key in (0, 1):
        _, mean, variance, distinct = _one_large_layer(key, total)
        assert distinct == total
        assert mean == pytest.approx(np.mean(exact), rel=1e-12) and variance == 0
    gains, _, variance, distinct = _one_large_layer(0, 20_001)
    assert len(gains) == 20_001 and distinct < 20_001  # independent draws repeat
    assert variance == pytest.approx(np.var(gains, ddof=1) / 20_001, rel=1e-9, abs=0)
    assert not samples_without_replacement(n, np.full((n, n), 20_001))[0, k]


def test_dp_layered_noise_is_laplace_of_the_calibrated_scale_on_a_grid_and_is_recorded():
    x, y, x_val, y_val = _data()
    utility = partial(LogisticRegressionUtility, norm_bound=1.0, l2=2.0)
    exact = LayeredShapley(0.2, 0.2, utility=utility).fit(x, y).value(x_val, y_val)
    noise, scales = [], []
    for seed in range(30):
        private = LayeredShapley(0.2, 0.2, epsilon=0.5, utility=utility, noise_seed=1000 + seed)
        result = private.fit(x, y).value(x_val, y_val)
        noise.append(result.values - exact.values)
        scales.append(result.diagnostics["noise_scale"])
        [release] = result.privacy.releases
    expected = layered_sensitivity(10, 1.0, 1.0, 2.0, "replace-one") / 0.5
    np.testing.assert_allclose(scales, release.noise_scale, rtol=0)  # one calibration
    assert expected <= release.noise_scale <= expected * (1 + 1e-3) + release.grid  # the grid's rounding: docs/layered
    assert release.noise == "laplace_on_grid" and release.floating_point_safe
    assert np.all(result.values / release.grid == np.round(result.values / release.grid))  # exact multiples
    assert release.guarantee.epsilon == pytest.approx(10 * 0.5)  # ten values, each 0.5-DP
    assert result.privacy.spent(release.owner).epsilon <= 10 * 0.5  # dp-accounting's composition, at delta = 1e-5
    # nothing un-noised is published: the noise's std, sqrt(2) b up to the grid's rounding
    np.testing.assert_allclose(result.stderr, release.noise_std, rtol=0)
    np.testing.assert_allclose(result.stderr, np.sqrt(2) * release.noise_scale, rtol=1e-6)
    assert "fallback_coalitions" not in result.diagnostics
    noise = np.concatenate(noise)
    assert np.mean(np.abs(noise)) == pytest.approx(expected, rel=0.2)  # E|Laplace(b)| = b
    assert np.mean(noise**2) == pytest.approx(2 * expected**2, rel=0.35)


def test_monte_carlo_baseline_converges_to_the_exact_value():
    x, y, x_val, y_val = _data(n=6)
    utility = partial(LogisticRegressionUtility, metric="accuracy")
    exact = exact_semivalue(utility(x, y, x_val, y_val), 6, 0).values
    baseline = MonteCarloShapley(num_permutations=2000, utility=utility, permutations_per_batch=500)
    result = baseline.fit(x, y).value(x_val, y_val)
    assert result.diagnostics["permutations"] == 2000
    assert np.all(np.abs(result.values - exact) <= 4 * result.stderr + 1e-9)
    assert MonteCarloShapley(c=0.5).num_permutations == 185 and MonteCarloShapley(c=1.0).num_permutations == 738


def test_valuate_front_door_and_the_sklearn_fallback():
    x, y, x_val, y_val = _data()
    result = bv.valuate(LayeredShapley(0.3, 0.3), (x, y), validation=(x_val, y_val))
    assert result.method == "layered shapley" and len(result) == 10 and np.all(np.isfinite(result.values))
    assert result.diagnostics["fallback_coalitions"] == 1  # no intercept: only the empty coalition, of layer 0
    slow = partial(SklearnUtility, LogisticRegression())  # single-class coalitions cannot be fitted
    fallback = bv.valuate(LayeredShapley(0.3, 0.3, c=1.0, utility=slow), (x, y), validation=(x_val, y_val))
    assert fallback.diagnostics["fallback_coalitions"] > 0


@pytest.mark.parametrize(
    "arguments, error, message",
    [
        ({"alpha": 0.0}, ValueError, "alpha must lie in"),
        ({"alpha": 1.0}, ValueError, "alpha must lie in"),
        ({"beta": 1.5}, ValueError, "beta must lie in"),
        ({"beta": -0.1}, ValueError, "beta must lie in"),
        ({"epsilon": 0.0}, ValueError, "epsilon must be a finite number > 0"),
        ({"epsilon": -1.0}, ValueError, "epsilon must be a finite number > 0"),
        ({"c": 0.0}, ValueError, "c must be a finite number > 0"),
        ({"adjacency": "swap"}, ValueError, "adjacency must be one of"),
        ({"noise_seed": 3}, ValueError, "set epsilon too"),
        ({"utility": 3}, TypeError, "utility must be callable"),
    ],
)
def test_bad_arguments_are_refused_before_any_work(arguments, error, message):
    with pytest.raises(error, match=message):
        LayeredShapley(**arguments)


def test_settings_where_every_layer_is_rare_are_refused():
    """n = 10, alpha = beta = 0.05, c = 0.002: m_1 = c^2 ln(2n / beta) / (2 alpha^2) = 0.00479, so every layer would be
    drawn with probability m_k only; keys 1 and 2 drew nothing and the old code crashed ('need at least one array
    to concatenate'), key 0 returned values resting on a few coin flips. Refused before any fit, naming what to
    change; the smallest c / alpha that gives m_1 >= 1 runs."""
    x, y, x_val, y_val = _data()
    sizes = layer_sample_sizes(10, 0.05, 0.05, 0.002)
    assert sizes[1:].max() == sizes[1] == pytest.approx(0.002**2 * math.log(400) / (2 * 0.05**2))
    assert sizes[1] < 1
    said = r"m_1 = 0\.00479, for n=10, alpha=0\.05, beta=0\.05, c=0\.002.*Lower alpha or beta, or raise c"
    for key in (0, 1, 2):
        with pytest.raises(ValueError, match=said):
            LayeredShapley(0.05, 0.05, c=0.002, epsilon=1.0, key=key).fit(x, y).value(x_val, y_val)
    for empty in (True, False):
        with pytest.raises(ValueError, match=said):
            layered_shapley(averaging_utility(np.ones(10), 1.0), 10, 1, c=0.002, include_empty_layer=empty)
    enough = 0.05 * math.sqrt(2 / math.log(400)) * (1 + 1e-9)  # m_1 just above 1
    assert layer_sample_sizes(10, 0.05, 0.05, enough)[1] >= 1
    assert len(layered_shapley(averaging_utility(np.ones(10), 1.0), 10, 1, c=enough).values) == 10


def test_bad_data_and_utilities_are_refused():
    x, y, x_val, y_val = _data()
    with pytest.raises(ValueError, match="X has 1 rows; valuing data points needs at least 2"):
        LayeredShapley().fit(x[:1], y[:1])
    with pytest.raises(RuntimeError, match="before .value"):
        LayeredShapley().value(x_val, y_val)

    class NaNUtility:
        num_players = 10

        def __init__(self, *data):
            pass

        def __call__(self, key, masks):
            return jnp.where(jnp.asarray(masks).sum(axis=1) == 3, jnp.nan, 0.0)

    with pytest.raises(ValueError, match="utility returned NaN or inf for"):
        LayeredShapley(c=1.0, utility=NaNUtility).fit(x, y).value(x_val, y_val)
    with pytest.raises(ValueError, match="declares no stability bound"):
        LayeredShapley(utility=NaNUtility).fit(x, y).value(x_val, y_val)
    accuracy = partial(LogisticRegressionUtility, metric="accuracy", norm_bound=1.0)
    with pytest.raises(ValueError, match="metric='log_loss'"):
        LayeredShapley(epsilon=1.0, utility=accuracy).fit(x, y).value(x_val, y_val)


def test_removal_curves_with_oracle_values_lie_below_random_and_refit_the_kept_points():
    rng = np.random.default_rng(5)
    x = rng.normal(size=(640, 2))
    y = (x[:, 0] > 0).astype(int)
    flipped = np.zeros(40, bool)
    flipped[:12] = True
    y_train = np.where(flipped, 1 - y[:40], y[:40])
    oracle = np.where(flipped, -1.0, 1.0) + 0.01 * rng.random(40)  # clean points help, flipped ones hurt
    curves = bv.experiments.removal_curves(oracle, x[:40], y_train, x[40:], y[40:], key=1)
    assert list(curves.removed) == list(range(0, 30, 2))
    assert curves.high_first.mean() < curves.random.mean() < curves.low_first.mean()
    kept = np.argsort(-oracle)[4:]  # the point at 4 removed: a refit on the kept rows, sklearn's C = 1
    model = LogisticRegression(tol=1e-10, max_iter=10_000).fit(x[:40][kept], y_train[kept])
    assert curves.high_first[2] == pytest.approx(model.score(x[40:], y[40:]))
    with pytest.raises(ValueError, match="values must have one entry per row of X"):
        bv.experiments.removal_curves(oracle[:5], x[:40], y_train, x[40:], y[40:])


def test_watson_splits_are_disjoint_scaled_and_sized():
    from bayesval.datasets.pima import read_pima
    from bayesval.datasets.watson import make_ghorbani_synthetic, watson_split

    try:
        split = watson_split("pima", seed=3)
    except FileNotFoundError as error:
        pytest.skip(f"shared data file absent: {error}")
    assert [len(part[1]) for part in split] == [100, 334, 334]
    rows = np.vstack([part[0] for part in split])
    raw, _, _ = read_pima()
    assert len(np.unique(raw, axis=0)) == len(raw) and len(np.unique(rows, axis=0)) == len(rows)  # disjoint rows
    assert np.linalg.norm(rows, axis=1).max() <= 1 + 1e-12 and rows.min() >= 0
    x, y = make_ghorbani_synthetic(seed=1, num_points=600, num_train=100)
    assert x.shape == (600, 50) and set(np.unique(y)) == {0, 1}
    with pytest.raises(ValueError, match="name must be one of"):
        watson_split("iris")
