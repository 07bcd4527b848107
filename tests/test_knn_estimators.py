"""The KNN-family estimators: fit / value API, chunking, and clear errors for bad input."""

from __future__ import annotations

import jax
import numpy as np
import pytest

import bayesval  # noqa: F401  (64-bit mode)
from bayesval.estimators import DPKNNShapley, KNNShapley, TKNNShapley
from bayesval.results.result import ValuationResult

rng = np.random.default_rng(0)
X, Y = rng.normal(size=(60, 4)), rng.integers(0, 3, 60)
X_VAL, Y_VAL = rng.normal(size=(9, 4)), rng.integers(0, 3, 9)


@pytest.mark.parametrize(
    "estimator",
    [
        KNNShapley(3),
        KNNShapley(3, variant="original", distance="euclidean"),
        TKNNShapley(-0.2),
        TKNNShapley(2.5, distance="euclidean"),
        TKNNShapley(-0.2, epsilon=1.0, delta=1e-4, classes=[0, 1, 2]),
        DPKNNShapley(3, epsilon=1.0, delta=1e-4, classes=[0, 1, 2]),
    ],
    ids=lambda e: f"{type(e).__name__}-{e.distance}",
)
def test_fit_value_returns_a_valuation_result(estimator):
    result = estimator.fit(X, Y).value(X_VAL, Y_VAL)
    assert isinstance(result, ValuationResult)
    assert result.values.shape == (60,) and np.isfinite(result.values).all()
    assert result.names == [str(i) for i in range(60)]
    assert result.diagnostics["n_train"] == 60 and result.diagnostics["n_val"] == 9
    assert (len(result.privacy) == 1) == result.method.startswith("dp_")


@pytest.mark.parametrize("estimator", [KNNShapley(4), TKNNShapley(-0.1)])
def test_chunk_size_does_not_change_values(estimator):
    whole = estimator.fit(X, Y).value(X_VAL, Y_VAL).values
    estimator.batch_size = 2
    np.testing.assert_allclose(estimator.fit(X, Y).value(X_VAL, Y_VAL).values, whole, atol=1e-12)


def test_tknn_diagnostics_count_neighbours():
    result = TKNNShapley(-0.999).fit(X, Y).value(X_VAL, Y_VAL)
    assert result.diagnostics["validation_points_without_neighbours"] == 9
    assert not result.values.any()  # no neighbours: every point is a null player


@pytest.mark.parametrize("k", [0, -1, 2.5, True, "5"])
def test_bad_k(k):
    with pytest.raises(ValueError, match="n_neighbors must be an integer >= 1"):
        KNNShapley(k)
    with pytest.raises(ValueError, match="n_neighbors"):
        DPKNNShapley(k, epsilon=1.0, delta=1e-5)


@pytest.mark.parametrize(
    ("tau", "distance", "match"),
    [
        (-1.5, "cosine", r"tau must lie in \[-1, 1\] for the cosine distance"),
        (1.01, "cosine", r"\[-1, 1\]"),
        (-0.1, "euclidean", r"tau must lie in \[0, inf\] for the euclidean distance"),
        (float("nan"), "cosine", "tau must lie"),
        (float("inf"), "euclidean", "tau must lie"),
    ],
)
def test_tau_outside_the_distances_range(tau, distance, match):
    with pytest.raises(ValueError, match=match):
        TKNNShapley(tau, distance=distance)


def test_bad_distance():
    with pytest.raises(ValueError, match="distance must be one of"):
        TKNNShapley(-0.5, distance="manhattan")


def test_single_class():
    with pytest.raises(ValueError, match="single class"):
        TKNNShapley().fit(X, np.zeros(60, dtype=int))


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_non_finite_features(bad):
    features = X.copy()
    features[3, 1] = bad
    with pytest.raises(ValueError, match=r"X has 1 non-finite entries \(first at index \[3, 1\]\)"):
        KNNShapley().fit(features, Y)
    with pytest.raises(ValueError, match="X_val has 1 non-finite"):
        KNNShapley().fit(X, Y).value(np.where(X_VAL == X_VAL[0, 0], bad, X_VAL), Y_VAL)


@pytest.mark.parametrize(
    ("epsilon", "delta", "match"),
    [
        (0.0, 1e-5, "epsilon must be a finite number > 0"),
        (-1.0, 1e-5, "epsilon must be a finite number > 0"),
        (float("inf"), 1e-5, "epsilon must be a finite number > 0"),
        (1.0, 0.0, r"delta must lie in \(0, 1\)"),
        (1.0, 1.0, r"delta must lie in \(0, 1\)"),
        (1.0, None, "epsilon and delta must be given together"),
        (None, 1e-5, "epsilon and delta must be given together"),
    ],
)
def test_invalid_epsilon_or_delta(epsilon, delta, match):
    with pytest.raises(ValueError, match=match):
        TKNNShapley(epsilon=epsilon, delta=delta)
    with pytest.raises(ValueError, match=match):
        DPKNNShapley(epsilon=epsilon, delta=delta)


@pytest.mark.parametrize("q", [0.0, 1.5, -0.1, 7.0])
def test_invalid_sampling_probability(q):
    with pytest.raises(ValueError, match=r"sampling_probability must lie in \(0, 1\]"):
        TKNNShapley(epsilon=1.0, delta=1e-5, sampling_probability=q)
    with pytest.raises(ValueError, match=r"sampling_probability must lie in \(0, 1\]"):  # unused, still refused
        TKNNShapley(-0.5, sampling_probability=q)


def test_mismatched_or_unknown_validation_data():
    estimator = TKNNShapley().fit(X, Y)
    with pytest.raises(ValueError, match="X_val has 3 features but X had 4"):
        estimator.value(X_VAL[:, :3], Y_VAL)
    with pytest.raises(ValueError, match="y_val must be 1-D with one label per row"):
        estimator.value(X_VAL, Y_VAL[:5])
    with pytest.raises(ValueError, match=r"y_val has labels not seen in y: \[7\]"):
        estimator.value(X_VAL, np.full(9, 7))
    with pytest.raises(ValueError, match="y must be 1-D with one label per row of X"):
        TKNNShapley().fit(X, Y[:10])


def test_cosine_needs_non_zero_rows():
    with pytest.raises(ValueError, match="all-zero rows"):
        TKNNShapley().fit(np.vstack([X, np.zeros(4)]), np.append(Y, 0))


def test_value_takes_no_key_and_needs_fit():
    """Privacy noise comes from the estimator's noise source, never from a key passed in."""
    with pytest.raises(TypeError, match="key"):
        TKNNShapley(epsilon=1.0, delta=1e-5, classes=[0, 1, 2]).fit(X, Y).value(X_VAL, Y_VAL, key=jax.random.key(0))
    with pytest.raises(RuntimeError, match=r"call TKNNShapley.fit\(X, y\) before"):
        TKNNShapley().value(X_VAL, Y_VAL)


@pytest.mark.parametrize(
    "estimator",
    [
        KNNShapley(3, distance="euclidean"),
        KNNShapley(3, variant="original", distance="euclidean"),
        TKNNShapley(2.0, distance="euclidean"),
    ],
    ids=lambda e: e.method,
)
def test_euclidean_values_ignore_a_large_common_offset(estimator):
    """A column offset by 1.7e9 (a unix time) leaves every euclidean distance, so every value, as it was; expanded
    as ||x||^2 - 2 x.v + ||v||^2 without centring, the distances of about 1 kept no significant digit. The column
    holds quarters, exact at 1.7e9, so the offset data are the same points."""
    generator = np.random.default_rng(7)
    features = np.column_stack([generator.normal(size=(69, 3)), 0.25 * generator.integers(0, 12, 69)])
    labels = generator.integers(0, 2, 69)
    offset = np.array([0.0, 0.0, 0.0, 1.7e9])
    plain = estimator.fit(features[:60], labels[:60]).value(features[60:], labels[60:])
    shifted = estimator.fit(features[:60] + offset, labels[:60]).value(features[60:] + offset, labels[60:])
    assert np.count_nonzero(plain.values) >= 10
    np.testing.assert_allclose(shifted.values, plain.values, rtol=0, atol=1e-12)
    if estimator.method == "tknn_shapley":
        assert shifted.diagnostics["mean_neighbours"] == plain.diagnostics["mean_neighbours"]


def test_cosine_ball_at_both_ends_of_tau():
    """tau = 1 (cosine) holds every point, the opposite of the validation row too; tau = -1 holds the rows of its
    direction, its exact copy too. Unclamped and compared exactly, rounding left the opposite row out at tau = 1 in
    23 of 200 random cases and the copy out at tau = -1 in 62 of 200."""
    generator = np.random.default_rng(3)
    labels = np.array([1, 1, 0, 1])
    for _ in range(100):
        row = generator.normal(size=(1, 7))
        others = generator.normal(size=(2, 7))
        everyone = TKNNShapley(1.0).fit(np.vstack([-2.5 * row, row, others]), labels).value(row, np.array([1]))
        assert everyone.diagnostics["mean_neighbours"] == 4
        same_direction = TKNNShapley(-1.0).fit(np.vstack([row, 3.0 * row, others]), labels).value(row, np.array([1]))
        assert same_direction.diagnostics["mean_neighbours"] == 2
        # Eq. 7 with m = 2 same-label members, C = 2: (1 - 1/2) / 2 + (1/2 - 1/2) (H_2 - 1) = 1/4 each
        np.testing.assert_allclose(same_direction.values, [0.25, 0.25, 0.0, 0.0], rtol=0, atol=1e-15)


def test_copies_of_a_row_with_other_labels_get_values_that_follow_the_rows_not_their_order():
    """Two copies of one row labelled 0 and 1 tie at every distance. Broken by row index, their values swapped when
    the rows swapped (K = 1: 0.708 and -0.292, then -0.792 and 0.208); valued in the tie-symmetric game, every
    point's value follows it through any reordering, the agreeing copy is worth more than the other, and the values
    still sum to v(N) - v({}) (efficiency), for both variants."""
    X = np.array([[0.0, 1.0], [0.0, 1.0], [1.0, 0.0], [2.0, 1.0], [2.0, 1.0]])
    y = np.array([0, 1, 0, 1, 1])
    X_val, y_val = np.array([[0.0, 1.1]]), np.array([0])
    order = np.array([1, 0, 4, 2, 3])
    for variant, empty in (("soft", 0.5), ("original", 0.0)):
        estimator = KNNShapley(1, variant=variant, distance="euclidean")
        values = estimator.fit(X, y).value(X_val, y_val).values
        reordered = estimator.fit(X[order], y[order]).value(X_val, y_val).values
        np.testing.assert_allclose(reordered, values[order], atol=1e-12)
        assert values[0] > values[1]
        assert values[3] == pytest.approx(values[4])
        assert values.sum() == pytest.approx(0.5 - empty, abs=1e-12)  # the nearest agrees in half the tie orders
