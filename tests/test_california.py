"""The CaliH loader (Sim et al. 2023, App. H.1): features from the raw block groups, the public network and scaler,
the public priors, the party split, and a valuation of the three CaliH parties."""

from __future__ import annotations

import gzip
import math
import warnings

import numpy as np
import pytest

import bayesval as bv
from bayesval.datasets import load_california
from bayesval.datasets.california import CALIFORNIA_FILE, read_california
from bayesval.datasets.paths import data_file
from bayesval.datasets.pima import party_sizes


@pytest.fixture(scope="module")
def raw():
    try:
        return read_california()
    except FileNotFoundError as error:
        pytest.skip(f"shared data file absent: {error}")


@pytest.fixture(scope="module")
def calih(raw):
    return load_california()


def r_squared(y, prediction):
    return 1.0 - np.mean((y - prediction) ** 2) / np.var(y)


def least_squares_prediction(X_fit, y_fit, X):
    coefficients, *_ = np.linalg.lstsq(np.column_stack([X_fit, np.ones(len(X_fit))]), y_fit, rcond=None)
    return np.column_stack([X, np.ones(len(X))]) @ coefficients


def test_features_by_hand(raw):
    features, target, _ = raw
    assert features.shape == (20640, 8) and target.shape == (20640,)
    # first and last block groups of the file, from its text
    with gzip.open(data_file(CALIFORNIA_FILE), "rt") as handle:
        lines = handle.read().splitlines()
    assert lines[0].startswith("b'longitude,latitude") and lines[-1] == "'"  # the bytes-literal wrapper
    first = [float(v) for v in lines[1].split(",")[:9]]
    assert first == [-122.23, 37.88, 41.0, 880.0, 129.0, 322.0, 126.0, 8.3252, 452600.0]
    expected = [8.3252, 41.0, 880 / 126, 129 / 126, 322.0, 322 / 126, 37.88, -122.23]
    np.testing.assert_allclose(features[0], expected, rtol=1e-12)
    np.testing.assert_allclose(features[0, 2:6], [6.984127, 1.023810, 322.0, 2.555556], atol=1e-6)  # scikit-learn's
    assert target[0] == pytest.approx(4.526)
    lon, lat, age, rooms, beds, pop, households, income, value = (float(v) for v in lines[-2].split(",")[:9])
    expected = [income, age, rooms / households, beds / households, pop, pop / households, lat, lon]
    np.testing.assert_allclose(features[-1], expected, rtol=1e-12)
    assert target[-1] == pytest.approx(value / 1e5)
    assert np.isnan(features[:, 3]).sum() == 207 and np.isfinite(np.delete(features, 3, axis=1)).all()
    assert target.min() > 0 and target.max() == pytest.approx(5.00001)


def imputed(raw, calih):
    """The raw features with the blank AveBedrms imputed from the public median bedroom share, by hand."""
    features, _, share = raw
    features = features.copy()
    blank = np.isnan(features[:, 3])
    features[blank, 3] = np.nanmedian(share[calih.public_rows]) * features[blank, 2]
    return features


def test_blank_bedrooms_imputed_or_dropped(raw, calih):
    assert calih.imputed_rows == 207
    assert len(calih.public_rows) == 12384 and len(calih.validation_rows) == 1652  # 60 % / 20 % of the other 40 %
    np.testing.assert_allclose(calih.public[0], calih.features.apply(imputed(raw, calih)[calih.public_rows]))
    dropped = load_california(missing="drop", epochs=2)
    assert dropped.imputed_rows == 0 and len(dropped.mlp_losses) == 3
    assert len(dropped.public_rows) == 20433 - math.ceil(0.4 * 20433)


def test_scaler_and_standardisation_fitted_on_public_rows_only(raw, calih):
    features = imputed(raw, calih)
    public = features[calih.public_rows]
    np.testing.assert_allclose(calih.features.median, np.median(public, axis=0), rtol=1e-12)
    q25, q75 = np.percentile(public, [25, 75], axis=0)
    np.testing.assert_allclose(calih.features.iqr, q75 - q25, rtol=1e-12)
    assert not np.allclose(calih.features.median, np.median(features, axis=0))  # not the whole file's
    X_public, _ = calih.public
    assert X_public.shape == (12384, 6)
    np.testing.assert_allclose(X_public.mean(axis=0), 0.0, atol=1e-10)
    np.testing.assert_allclose(X_public.std(axis=0), 1.0, atol=1e-10)
    X_validation, _ = calih.validation
    np.testing.assert_allclose(X_validation, calih.features.apply(features[calih.validation_rows]), rtol=1e-12)
    assert abs(X_validation.mean()) < 0.1 and 0.8 < X_validation.std() < 1.2  # the same map, on unseen rows


def test_network_trains_and_beats_linear_regression_on_held_out_rows(raw, calih):
    losses = calih.mlp_losses
    assert losses.shape == (61,) and np.isfinite(losses).all()
    assert losses[-1] < 0.05 * losses[0] and losses[-1] < losses[10] < losses[1]
    features, target = imputed(raw, calih), raw[1]
    public, validation = calih.public_rows, calih.validation_rows
    y_validation = calih.validation[1]
    network = r_squared(y_validation, calih.features.predict(features[validation]))
    transfer = r_squared(y_validation, least_squares_prediction(*calih.public, calih.validation[0]))
    raw_prediction = least_squares_prediction(features[public], target[public], features[validation])
    linear_raw = r_squared(y_validation, raw_prediction)
    # measured (seeds 0, 60 epochs): the network 0.797, least squares on the 6 learnt features 0.797, on the 8 raw 0.591
    assert network > 0.77 and transfer > 0.77, (network, transfer)
    assert linear_raw < 0.65 and transfer > linear_raw + 0.12, (linear_raw, transfer)


def test_private_rows_outliers_parties_and_bounds(calih):
    X_train, y_train = calih.train
    assert len(X_train) + calih.dropped_rows == 8256 - 1652
    assert 6400 <= len(X_train) <= 6604 and calih.dropped_rows < 200  # paper: 6581; here 6496 (108 dropped)
    assert np.abs(X_train).max() <= 4.0
    sizes = [len(y) for _, y in calih.parties]
    assert sizes == party_sizes(len(X_train), (0.2, 0.3, 0.5))
    np.testing.assert_allclose(np.array(sizes) / len(X_train), [0.2, 0.3, 0.5], atol=1e-3)
    np.testing.assert_array_equal(np.sort(np.concatenate(calih.party_indices)), np.arange(len(X_train)))
    for (X, y), rows in zip(calih.parties, calih.party_indices):
        np.testing.assert_array_equal(X, X_train[rows])
        np.testing.assert_array_equal(y, y_train[rows])
    assert calih.bounds == bv.Bounds(x_norm=4.0 * math.sqrt(6), y_abs=5.00001)
    assert np.linalg.norm(X_train, axis=1).max() <= calih.bounds.x_norm and np.abs(y_train).max() <= 5.00001
    parties = calih.make_parties(noise_seeds=(1, 2, 3))
    assert [p.guarantee.epsilon for p in parties] == [0.2, 0.1, 0.2] and all(p.rdp_order == 2.0 for p in parties)
    assert [p.clipped_rows for p in parties] == [0, 0, 0]


def test_priors_from_public_rows_by_hand(calih):
    X_public, y_public = calih.public
    x_tilde = np.column_stack([X_public, np.ones(len(X_public))])
    residual = y_public - least_squares_prediction(X_public, y_public, X_public)
    np.testing.assert_allclose(calih.prior.precision, 10.0 * x_tilde.T @ x_tilde / len(x_tilde), atol=1e-10)
    np.testing.assert_allclose(np.diag(calih.prior.precision), 10.0, rtol=1e-10)  # standardised inputs
    assert float(calih.prior.shape) == 5.0
    assert float(calih.prior.scale) == pytest.approx(5.0 * np.mean(residual**2), rel=1e-10)
    np.testing.assert_array_equal(calih.prior.mean, np.zeros(7))
    assert float(calih.data_prior.dof) == 8.0 and float(calih.data_prior.kappa) == 1.0
    np.testing.assert_allclose(calih.data_prior.scale, np.cov(X_public, rowvar=False, bias=True), atol=1e-10)
    model = calih.model()
    assert model.shared_data_model and model.prior is calih.prior and model.data_prior is calih.data_prior


def test_determinism_and_seeds(calih):
    again = load_california()
    np.testing.assert_array_equal(again.train[0], calih.train[0])
    np.testing.assert_array_equal(again.validation[0], calih.validation[0])
    for (X, _), (X_again, _) in zip(calih.parties, again.parties):
        np.testing.assert_array_equal(X, X_again)
    reshuffled = load_california(seed=1)
    np.testing.assert_array_equal(reshuffled.train[0], calih.train[0])
    assert not np.array_equal(reshuffled.party_indices[0], calih.party_indices[0])
    other_network = load_california(network_seed=1)
    np.testing.assert_array_equal(other_network.validation[1], calih.validation[1])
    assert not np.allclose(other_network.validation[0], calih.validation[0])


def test_bad_input_is_refused_before_any_work(tmp_path):
    with pytest.raises(FileNotFoundError, match="california_housing.csv.gz"):
        load_california(tmp_path)
    with pytest.raises(FileNotFoundError, match="california_housing.csv.gz"):
        read_california(tmp_path)
    for bad, match in (
        ({"fractions": (0.5, 0.6)}, "sum to 1"),
        ({"fractions": (1.0,)}, "at least 2"),
        ({"fractions": (0.5, -0.5, 1.0)}, "> 0"),
        ({"public_fraction": 1.0}, "public_fraction"),
        ({"validation_fraction": 0.0}, "validation_fraction"),
        ({"max_abs_z": -1.0}, "max_abs_z"),
        ({"missing": "zero"}, "missing"),
        ({"n0": 0}, "n0"),
        ({"epochs": 0}, "epochs"),
        ({"seed": -1}, "seed"),
    ):
        with pytest.raises(ValueError, match=match):
            load_california(tmp_path, **bad)  # a ValueError, not the missing file: checked first


def test_bad_party_settings(calih):
    with pytest.raises(ValueError, match="epsilons has 2 entries for 3 parties"):
        calih.make_parties((0.2, 0.1))
    with pytest.raises(ValueError, match="noise_seeds has 1 entries"):
        calih.make_parties(noise_seeds=(1,))


def test_valuation_of_the_three_calih_parties(calih):
    parties = calih.make_parties((0.2, 0.1, 0.2), noise_seeds=(41, 42, 43))
    config = bv.SamplerConfig(num_chains=2, num_warmup=20, num_samples=40, num_repeats=2, progress_bar=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # a tiny budget does not converge
        result = bv.valuate(calih.model(), parties, key=0, config=config)
    v_n = result.coalition_value(result.names)
    assert np.isfinite(v_n) and v_n > 0
    assert np.isfinite(result.values).all() and result.values.sum() == pytest.approx(v_n, rel=1e-9)
    assert result.parameter_names == ["w1", "w2", "w3", "w4", "w5", "w6", "bias", "noise_var"]
