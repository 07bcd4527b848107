"""Retraining utilities: the batched JAX logistic regression equals scikit-learn's fit on the same coalition,
unfittable coalitions get the defined fallback (counted), and bad input is refused."""

import math

import numpy as np
import pytest
from sklearn.linear_model import LogisticRegression

from bayesval.estimators import LogisticRegressionUtility, SklearnUtility


def _data(seed=0, n=40, d=5, n_val=60):
    rng = np.random.default_rng(seed)
    w = rng.normal(size=d)
    x = rng.normal(size=(n + n_val, d)) / np.sqrt(d)
    y = (rng.random(n + n_val) < 1 / (1 + np.exp(-3 * x @ w))).astype(int)
    return x[:n], y[:n], x[n:], y[n:]


def _sklearn_score(x, y, x_val, y_val, C, fit_intercept, metric):
    model = LogisticRegression(C=C, fit_intercept=fit_intercept, tol=1e-10, max_iter=10_000).fit(x, y)
    if metric == "accuracy":
        return np.mean(model.predict(x_val) == y_val)
    p = model.predict_proba(x_val)[:, 1]
    return np.mean(y_val * np.log(p) + (1 - y_val) * np.log1p(-p))


@pytest.mark.parametrize(
    "penalty, l2, fit_intercept, metric",
    [
        ("mean", 1.0, False, "log_loss"),
        ("sum", 1.0, True, "log_loss"),
        ("sum", 0.01, True, "log_loss"),
        ("mean", 0.05, True, "accuracy"),
    ],
)
def test_batched_fit_equals_sklearn_on_the_same_coalition(penalty, l2, fit_intercept, metric):
    x, y, x_val, y_val = _data()
    rng = np.random.default_rng(1)
    masks = rng.random((24, len(x))) < rng.uniform(0.05, 1.0, (24, 1))
    utility = LogisticRegressionUtility(
        x, y, x_val, y_val, l2=l2, penalty=penalty, fit_intercept=fit_intercept, metric=metric
    )
    values = np.asarray(utility(None, masks))
    compared = 0
    for mask, value in zip(masks, values):
        if np.unique(y[mask]).size < 2:
            continue
        C = 1 / (2 * l2 * mask.sum()) if penalty == "mean" else 1 / l2
        expected = _sklearn_score(x[mask], y[mask], x_val, y_val, C, fit_intercept, metric)
        assert value == pytest.approx(expected, abs=1e-4)
        compared += 1
    assert compared >= 15


def test_unfittable_coalitions_get_the_fallback_and_are_counted():
    x, y, x_val, y_val = _data()
    ones, zeros = np.flatnonzero(y == 1)[:3], np.flatnonzero(y == 0)[:2]
    masks = np.zeros((4, len(x)), bool)
    masks[1, ones] = True  # one class only
    masks[2, zeros] = True
    masks[3, np.r_[ones, zeros]] = True
    with_intercept = LogisticRegressionUtility(x, y, x_val, y_val, fit_intercept=True, metric="accuracy")
    values = np.asarray(with_intercept(None, masks))
    majority = max(y_val.mean(), 1 - y_val.mean())
    np.testing.assert_allclose(values[:3], majority)
    assert with_intercept.fallbacks == 3
    assert values[3] == pytest.approx(
        _sklearn_score(x[masks[3]], y[masks[3]], x_val, y_val, 1 / (2 * 5), True, "accuracy")
    )
    penalised = LogisticRegressionUtility(x, y, x_val, y_val)  # no intercept: a single class has an optimum
    values = np.asarray(penalised(None, masks))
    assert values[0] == pytest.approx(-math.log(2)) and penalised.fallbacks == 1
    assert np.all(values[1:] != -math.log(2)) and np.all(np.isfinite(values))


def test_sklearn_adapter_matches_the_batched_utility_and_counts_failed_fits():
    x, y, x_val, y_val = _data(seed=2)
    rng = np.random.default_rng(3)
    masks = rng.random((12, len(x))) < 0.5
    masks[0] = False
    masks[1] = y == 1  # one class: scikit-learn refuses to fit
    slow = SklearnUtility(LogisticRegression(C=1.0, tol=1e-12, max_iter=10_000), x, y, x_val, y_val, metric="log_loss")
    fast = LogisticRegressionUtility(x, y, x_val, y_val, l2=1.0, penalty="sum", fit_intercept=True)
    np.testing.assert_allclose(slow(None, masks), np.asarray(fast(None, masks)), atol=1e-4)
    assert slow.fallbacks == 2 and fast.fallbacks == 2


def test_norm_bound_scales_rows_down_to_kappa():
    x, y, x_val, y_val = _data()
    x = 10 * x
    bounded = LogisticRegressionUtility(x, y, x_val, y_val, norm_bound=0.5)
    assert bounded.stability() == (1.0, 0.5, 1.0)
    norms = np.linalg.norm(x, axis=1)
    scaled = x * np.minimum(1, 0.5 / norms)[:, None]
    mask = np.ones((1, len(x)), bool)
    assert float(bounded(None, mask)[0]) == pytest.approx(
        _sklearn_score(
            scaled,
            y,
            x_val * np.minimum(1, 0.5 / np.linalg.norm(x_val, axis=1))[:, None],
            y_val,
            1 / (2 * len(x)),
            False,
            "log_loss",
        ),
        abs=1e-6,
    )


def test_bad_input_is_refused_with_the_argument_named():
    x, y, x_val, y_val = _data()
    with pytest.raises(ValueError, match="exactly 2 classes"):
        LogisticRegressionUtility(x, np.arange(len(x)) % 3, x_val, y_val)
    with pytest.raises(ValueError, match="X_val has 4 features"):
        LogisticRegressionUtility(x, y, x_val[:, :4], y_val)
    with pytest.raises(ValueError, match="l2 must be a finite number > 0"):
        LogisticRegressionUtility(x, y, x_val, y_val, l2=0.0)
    with pytest.raises(ValueError, match="metric must be one of"):
        LogisticRegressionUtility(x, y, x_val, y_val, metric="auc")
    with pytest.raises(ValueError, match="y_val has labels not seen in y"):
        LogisticRegressionUtility(x, y, x_val, y_val + 5)
    utility = LogisticRegressionUtility(x, y, x_val, y_val, metric="accuracy")
    with pytest.raises(ValueError, match="masks must be boolean of shape"):
        utility(None, np.ones((2, 3), bool))
    with pytest.raises(ValueError, match="metric='log_loss'.*norm_bound"):
        utility.stability()
    with pytest.raises(TypeError, match="scikit-learn classifier"):
        SklearnUtility(object(), x, y, x_val, y_val)


def test_small_coalitions_of_many_features_take_the_woodbury_solve_and_equal_sklearn():
    x, y, x_val, y_val = _data(seed=4, d=12)
    rng = np.random.default_rng(5)
    masks = np.zeros((16, len(x)), bool)
    for row, size in zip(masks, rng.integers(2, 7, 16)):  # at most 6 points < 12 features: K x K systems
        row[rng.choice(len(x), size, replace=False)] = True
    values = np.asarray(LogisticRegressionUtility(x, y, x_val, y_val, l2=0.5)(None, masks))
    for mask, value in zip(masks, values):
        if np.unique(y[mask]).size == 2:
            expected = _sklearn_score(x[mask], y[mask], x_val, y_val, 1 / (2 * 0.5 * mask.sum()), False, "log_loss")
            assert value == pytest.approx(expected, abs=1e-4)
