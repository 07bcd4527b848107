"""The Diab loader (Sim et al. 2023, App. H.1) and the MNLP metrics (App. H.2)."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.special import expit
from sklearn.decomposition import PCA
from sklearn.model_selection import train_test_split
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import RobustScaler, StandardScaler

from bayesval.datasets.pima import fit_preprocessing, load_pima, party_sizes, read_pima, train_validation_split
from bayesval.parties.rewards import base_rate_mnlp, mnlp_classification, mnlp_regression
from bayesval.statistics import Bounds


@pytest.fixture(scope="module")
def pima():
    try:
        return load_pima()
    except FileNotFoundError as error:
        pytest.skip(f"shared data file absent: {error}")


@pytest.fixture(scope="module")
def pima_raw():
    try:
        return read_pima()
    except FileNotFoundError as error:
        pytest.skip(f"shared data file absent: {error}")


def test_split_counts_match_the_paper(pima, pima_raw):
    X_train, y_train = pima.train
    X_val, y_val = pima.validation
    assert X_train.shape == (614, 4) and X_val.shape == (154, 4)
    assert set(np.unique(y_train)) == {-1.0, 1.0} and y_train.dtype == np.float64
    assert int((y_train > 0).sum()) == 219  # 35.67 %
    assert int((y_val > 0).sum()) == 49  # 31.82 %
    _, labels, names = pima_raw
    assert labels.sum() == 268 and len(names) == 8


def test_split_is_sklearn_train_test_split_seed_27():
    rows = np.arange(768)
    sk_train, sk_val = train_test_split(rows, test_size=0.2, random_state=27)
    train, val = train_validation_split(768, 154, 27)
    np.testing.assert_array_equal(train, sk_train)
    np.testing.assert_array_equal(val, sk_val)


def test_parties_partition_the_training_rows(pima):
    assert [len(y) for _, y in pima.parties] == [123, 184, 307]
    assert party_sizes(614, (0.2, 0.3, 0.5)) == [123, 184, 307]
    joined = np.sort(np.concatenate(pima.party_indices))
    np.testing.assert_array_equal(joined, np.arange(614))
    for (X, y), rows in zip(pima.parties, pima.party_indices):
        np.testing.assert_array_equal(X, pima.train[0][rows])
        np.testing.assert_array_equal(y, pima.train[1][rows])
    other = load_pima(seed=1)
    assert not np.array_equal(other.party_indices[0], pima.party_indices[0])
    np.testing.assert_array_equal(other.validation[0], pima.validation[0])


def test_bounds_and_clipping(pima):
    assert pima.bounds == Bounds(x_norm=2.2 * 2.0, y_abs=1.0)
    assert pima.feature_names == ("PC1", "PC2", "PC3", "PC4")
    for X in (pima.train[0], pima.validation[0]):
        assert np.abs(X).max() <= 2.2
        assert np.linalg.norm(X, axis=1).max() <= pima.bounds.x_norm
    # 84 of the 2456 training entries (3.4 %) sit at +-2.2, in 71 of the 614 rows.
    at_bound = np.isclose(np.abs(pima.train[0]), 2.2, rtol=0, atol=1e-12)
    assert pima.clipped_fraction == pytest.approx(at_bound.mean())
    assert pima.clipped_fraction == pytest.approx(84 / 2456)
    assert pima.clipped_rows == 71 == int(at_bound.any(axis=1).sum())


def test_preprocessing_equals_the_sklearn_pipeline(pima, pima_raw):
    raw, _, _ = pima_raw
    train_rows, val_rows = train_validation_split(768, 154, 27)
    pipeline = make_pipeline(RobustScaler(quantile_range=(25.0, 75.0)), PCA(4), StandardScaler())
    pipeline.fit(raw[train_rows])
    for rows, ours in ((train_rows, pima.train[0]), (val_rows, pima.validation[0])):
        theirs = np.clip(pipeline.transform(raw[rows]), -2.2, 2.2)
        signs = np.sign(np.sum(theirs * ours, axis=0))
        np.testing.assert_allclose(ours, theirs * signs, rtol=0, atol=1e-8)
    unclipped = fit_preprocessing(raw[train_rows]).standardise(raw[train_rows])
    np.testing.assert_allclose(unclipped.mean(axis=0), 0.0, atol=1e-12)
    np.testing.assert_allclose(unclipped.std(axis=0), 1.0, atol=1e-12)


def test_base_rate_mnlp_on_validation_is_0629(pima):
    value = base_rate_mnlp(pima.train[1], pima.validation[1])
    assert value == pytest.approx(0.629, abs=0.01)
    assert value == pytest.approx(-(49 / 154 * np.log(219 / 614) + 105 / 154 * np.log(395 / 614)), rel=1e-12)


def test_mnlp_classification_by_hand(rng):
    X = rng.normal(size=(5, 3))
    y = np.array([1.0, -1.0, -1.0, 1.0, 1.0])
    draws = rng.normal(size=(2, 4))
    p1 = 0.5 * (expit(X @ draws[0, :3] + draws[0, 3]) + expit(X @ draws[1, :3] + draws[1, 3]))
    expected = -np.mean(np.where(y > 0, np.log(p1), np.log(1 - p1)))
    assert mnlp_classification(draws, X, y) == pytest.approx(expected, rel=1e-12)
    assert mnlp_classification(draws, X, (y > 0).astype(int)) == pytest.approx(expected, rel=1e-12)


def test_mnlp_classification_is_stable_for_huge_logits():
    X = np.array([[1.0], [-1.0]])
    draws = np.array([[800.0, 0.0], [900.0, 0.0]])  # p(y=1 | x=-1) ~ e^-800
    value = mnlp_classification(draws, X, np.array([1.0, 1.0]))
    assert np.isfinite(value)
    assert value == pytest.approx(0.5 * (800 - np.log(1 + np.exp(-100)) + np.log(2)), rel=1e-12)


def test_constant_predictor_equals_base_rate(rng):
    y_train = np.where(rng.random(300) < 0.35, 1.0, -1.0)
    X_test = rng.normal(size=(40, 4))
    y_test = np.where(rng.random(40) < 0.3, 1.0, -1.0)
    rate = np.mean(y_train > 0)
    draws = np.zeros((7, 5))
    draws[:, -1] = np.log(rate / (1 - rate))
    assert mnlp_classification(draws, X_test, y_test) == pytest.approx(base_rate_mnlp(y_train, y_test), rel=1e-12)


def test_mnlp_regression_by_hand(rng):
    X = rng.normal(size=(6, 2))
    y = rng.normal(size=6)
    draws = np.column_stack([rng.normal(size=(3, 3)), rng.uniform(0.1, 1.0, size=3)])
    means = np.stack([X @ d[:2] + d[2] for d in draws])  # (m, n)
    mu = means.sum(axis=0) / 3
    var = draws[:, 3].sum() / 3 + (means**2).sum(axis=0) / 3 - mu**2
    expected = np.mean(0.5 * np.log(2 * np.pi * var) + 0.5 * (mu - y) ** 2 / var)
    assert mnlp_regression(draws, X, y) == pytest.approx(expected, rel=1e-12)
    # one draw: the plain Gaussian negative log density
    one = draws[:1]
    m1, v1 = X @ one[0, :2] + one[0, 2], one[0, 3]
    assert mnlp_regression(one, X, y) == pytest.approx(np.mean(0.5 * np.log(2 * np.pi * v1) + (m1 - y) ** 2 / (2 * v1)))


@pytest.mark.parametrize("labels", [[0.0, 1.0, 2.0], [-1.0, 0.0, 1.0], [0.5, 1.0, 1.0]])
def test_bad_labels_raise(labels):
    X, draws = np.zeros((3, 2)), np.zeros((2, 3))
    with pytest.raises(ValueError, match="labels"):
        mnlp_classification(draws, X, np.array(labels))
    with pytest.raises(ValueError, match="y_test"):
        base_rate_mnlp(np.array([1.0, -1.0]), np.array(labels))


def test_shape_and_value_errors():
    X = np.zeros((3, 2))
    with pytest.raises(ValueError, match="3 columns"):
        mnlp_classification(np.zeros((2, 4)), X, np.ones(3))
    with pytest.raises(ValueError, match="noise variance"):
        mnlp_regression(np.zeros((2, 4)), X, np.ones(3))
    with pytest.raises(ValueError, match="single class"):
        base_rate_mnlp(np.ones(4), np.array([1.0, -1.0]))
    with pytest.raises(ValueError, match="sum to 1"):
        party_sizes(614, (0.2, 0.3))


def test_missing_file_names_it(tmp_path):
    with pytest.raises(FileNotFoundError, match="pima_indians_diabetes.csv"):
        load_pima(tmp_path)
