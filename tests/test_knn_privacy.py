"""DP-TKNN and naive DP-KNN: noise calibration, the noise actually added, and the privacy ledger."""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import bayesval  # noqa: F401  (64-bit mode)
from bayesval.estimators import DPKNNShapley, TKNNShapley
from bayesval.estimators.knn_values import noisy_tknn_counts
from bayesval.estimators.noise import calibrate_noise
from bayesval.privacy.accounting import gaussian_sigma_for_approx_dp

REFERENCE_SIGMA = 3.795  # prv_accountant.find_noise_multiplier at these settings (spec Sec. 2.6)


def test_sigma_matches_reference_prv_accountant_within_five_percent():
    sigma = gaussian_sigma_for_approx_dp(0.1, 1e-4, num_compositions=201, sampling_probability=0.01)
    assert sigma == pytest.approx(REFERENCE_SIGMA, rel=0.05)
    assert sigma < REFERENCE_SIGMA  # PLD is tighter than the PRV bound (about 4.4 %)
    calibration = calibrate_noise(0.1, 1e-4, math.sqrt(3.0), 201, 0.01)  # coarser grid: 1 % more noise
    assert sigma <= calibration.noise_multiplier <= 1.01 * sigma
    assert calibration.noise_std == pytest.approx(calibration.noise_multiplier * math.sqrt(3.0))
    assert 0.095 <= calibration.epsilon_spent <= 0.1 + 1e-6


def test_unsubsampled_calibration_uses_exact_gaussian_composition():
    """Without subsampling, n releases with multiplier s are one with s / sqrt(n) (spec: 349.18 at q=1)."""
    calibration = calibrate_noise(0.1, 1e-4, 1.0, 200, 1.0)
    assert calibration.noise_multiplier == pytest.approx(349.18, rel=0.01)
    assert 0.099 <= calibration.epsilon_spent <= 0.1 + 1e-6


def test_released_counts_have_the_calibrated_noise_std():
    counts = jnp.array([10_000.0, 5_000.0, 2_000.0])
    released = jax.vmap(lambda k: noisy_tknn_counts(k, counts, 6.27))(jax.random.split(jax.random.PRNGKey(0), 40_000))
    noise = np.asarray(released - counts)
    assert np.all(noise == np.round(noise))  # rounded to integers
    expected = math.sqrt(6.27**2 + 1 / 12)  # rounding adds a uniform(-1/2, 1/2) error
    np.testing.assert_allclose(noise.std(axis=0), expected, rtol=0.02)
    np.testing.assert_allclose(noise.mean(axis=0), 0.0, atol=0.1)


def test_released_counts_are_clamped():
    released = jax.vmap(lambda k: noisy_tknn_counts(k, jnp.array([1.0, 1.0, 1.0]), 5.0))(
        jax.random.split(jax.random.PRNGKey(1), 2_000)
    )
    assert float(released.min()) == 0.0
    assert bool(jnp.all(released[:, 2] <= released[:, 1]))


def test_dp_tknn_adds_the_calibrated_noise_to_each_validation_points_counts():
    """End to end with q = 1 and tau = 1 (every point a neighbour): released c_x - N ~ N(0, sigma^2)."""
    from bayesval.estimators.knn_values import private_tknn_shapley_values

    rng = np.random.default_rng(0)
    n_train, n_val = 20_000, 1_000
    x_train, y_train = rng.normal(size=(n_train, 4)), rng.integers(0, 2, n_train)
    x_val, y_val = rng.normal(size=(n_val, 4)), rng.integers(0, 2, n_val)
    estimator = TKNNShapley(1.0, epsilon=5.0, delta=1e-4, sampling_probability=1.0).fit(x_train, y_train)
    sigma = estimator.value(x_val, y_val, key=jax.random.PRNGKey(2)).diagnostics["noise_std"]
    _, released = private_tknn_shapley_values(
        jax.random.PRNGKey(2),
        estimator.x_train_,
        estimator.y_train_,
        x_val / np.linalg.norm(x_val, axis=1, keepdims=True),
        y_val,
        1.0,
        0.5,
        1.0,
        sigma,
        distance="cosine",
        batch_size=100,
    )
    same = (y_train[None, :] == y_val[:, None]).sum(axis=1)
    noise = np.asarray(released) - np.stack([np.full(n_val, n_train), np.full(n_val, n_train), same], axis=1)
    assert 20 < sigma < n_train / 100  # far from the clamps
    np.testing.assert_allclose(noise.std(axis=0), math.sqrt(sigma**2 + 1 / 12), rtol=0.08)


def test_dp_tknn_ledger_records_the_release():
    rng = np.random.default_rng(3)
    x, y = rng.normal(size=(120, 3)), rng.integers(0, 3, 120)
    result = TKNNShapley(-0.2, epsilon=0.5, delta=1e-5).fit(x, y).value(x[:40], y[:40], key=jax.random.PRNGKey(0))
    (release,) = result.privacy.releases
    assert release.sensitivity == pytest.approx(math.sqrt(3.0))
    assert (release.dimension, release.compositions, release.sampling_probability) == (3, 40, 0.01)
    assert release.delta == 1e-5 and 0.45 < release.epsilon <= 0.5 + 1e-6
    assert release.noise_std == pytest.approx(result.diagnostics["noise_std"])
    assert result.method == "dp_tknn_shapley"
    assert result.privacy_spent() == {"each training point": f"({release.epsilon:g}, 1e-05)-DP"}


def test_dp_tknn_is_reproducible_from_its_key_and_independent_of_chunking():
    rng = np.random.default_rng(4)
    x, y = rng.normal(size=(150, 3)), rng.integers(0, 2, 150)
    key = jax.random.PRNGKey(7)
    values = [
        TKNNShapley(-0.3, epsilon=1.0, delta=1e-4, batch_size=b).fit(x, y).value(x[:30], y[:30], key=key).values
        for b in (30, 7)
    ]
    np.testing.assert_allclose(values[0], values[1], atol=1e-12)
    other = TKNNShapley(-0.3, epsilon=1.0, delta=1e-4).fit(x, y).value(x[:30], y[:30], key=jax.random.PRNGKey(8))
    assert not np.allclose(values[0], other.values)


@pytest.mark.parametrize("q", [1.0, 0.01])
def test_naive_dp_knn_adds_calibrated_noise_per_owner_and_validation_point(q):
    from bayesval.estimators.knn_values import noisy_knn_shapley_values

    rng = np.random.default_rng(5)
    x, y = rng.normal(size=(400, 3)), rng.integers(0, 2, 400)
    estimator = DPKNNShapley(5, epsilon=1.0, delta=1e-4, sampling_probability=q).fit(x, y)
    key = jax.random.PRNGKey(0)
    result = estimator.value(x[:50], y[:50], key=key)
    (release,) = result.privacy.releases
    assert release.sensitivity == pytest.approx(1 / 30)
    assert release.compositions == 50 and release.sampling_probability == q
    assert release.noise_std == pytest.approx(release.sensitivity * result.diagnostics["noise_multiplier"])
    noiseless = noisy_knn_shapley_values(
        key,
        estimator.x_train_,
        estimator.y_train_,
        estimator.x_train_[:50],
        estimator.y_train_[:50],
        q,
        0.0,
        k=5,
        subsample=q < 1,
        distance="cosine",
        batch_size=50,
    )
    # independent N(0, sigma^2) per (owner, validation point): the sum has std sqrt(n_val) sigma
    noise = result.values - np.asarray(noiseless)
    assert noise.std() == pytest.approx(math.sqrt(50) * release.noise_std, rel=0.1)
