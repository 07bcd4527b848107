"""DP-TKNN and naive DP-KNN: noise calibration, the noise actually added, and the privacy ledger."""

from __future__ import annotations

import math

import dp_accounting
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import bayesval  # noqa: F401  (64-bit mode)
from bayesval.estimators import DPKNNShapley, TKNNShapley
from bayesval.estimators.knn.values import noisy_knn_shapley_values, noisy_tknn_counts, private_tknn_shapley_values
from bayesval.privacy import DPGuarantee, Mechanism
from bayesval.privacy.accounting import epsilon_at, gaussian_event, gaussian_sigma_for_approx_dp
from bayesval.privacy.rounded_gaussian import RandomWords, RoundedGaussianSampler

REFERENCE_SIGMA = 3.795  # prv_accountant.find_noise_multiplier at these settings (spec Sec. 2.6)


def test_sigma_matches_reference_prv_accountant_within_five_percent():
    sigma = gaussian_sigma_for_approx_dp(0.1, 1e-4, num_compositions=201, sampling_probability=0.01)
    assert sigma == pytest.approx(REFERENCE_SIGMA, rel=0.05)
    assert sigma < REFERENCE_SIGMA  # PLD is tighter than the PRV bound (about 4.4 %)
    mechanism = Mechanism.gaussian(
        DPGuarantee(0.1, 1e-4),
        math.sqrt(3.0),
        num_compositions=201,
        sampling_probability=0.01,
        adjacency="add-or-remove-one",
    )
    assert mechanism.noise_scale == pytest.approx(sigma * math.sqrt(3.0), rel=1e-12)
    assert 0.095 <= epsilon_at(mechanism.event, 1e-4)[0] <= 0.1 + 1e-6


def test_unsubsampled_calibration_uses_exact_gaussian_composition():
    """Without subsampling, n releases with multiplier s are one with s / sqrt(n) (spec: 349.18 at q=1)."""
    mechanism = Mechanism.gaussian(DPGuarantee(0.1, 1e-4), 1.0, num_compositions=200)
    assert mechanism.noise_scale == pytest.approx(349.18, rel=0.01)
    assert mechanism.event == dp_accounting.SelfComposedDpEvent(
        dp_accounting.GaussianDpEvent(mechanism.noise_scale), 200
    )
    assert 0.099 <= epsilon_at(mechanism.event, 1e-4)[0] <= 0.1 + 1e-6


def test_released_counts_are_the_counts_plus_their_exact_noise_rounded():
    """The released counts are round(c + noise), the noise whole steps of the grid (exact dyadic numbers), so the
    release before rounding is exact, and rounding to whole counts is post-processing."""
    counts = jnp.array([10_000.0, 5_000.0, 2_000.0])
    grid = 2.0**-10
    noise = RoundedGaussianSampler(RandomWords(b"counts")).sample(6420, 3 * 40_000).reshape(40_000, 3) * grid
    released = jax.vmap(lambda z: noisy_tknn_counts(counts, z))(jnp.asarray(noise))
    np.testing.assert_array_equal(np.asarray(released), np.round(np.asarray(counts) + noise))
    error = np.asarray(released - counts)
    expected = math.sqrt((6420 * grid) ** 2 + 1 / 12)  # rounding to whole counts adds a uniform(-1/2, 1/2) error
    np.testing.assert_allclose(error.std(axis=0), expected, rtol=0.02)
    np.testing.assert_allclose(error.mean(axis=0), 0.0, atol=0.1)


def test_released_counts_are_clamped():
    noise = np.random.default_rng(1).normal(0.0, 5.0, (2_000, 3))
    released = jax.vmap(lambda z: noisy_tknn_counts(jnp.array([1.0, 1.0, 1.0]), z))(jnp.asarray(noise))
    assert float(released.min()) == 0.0
    assert bool(jnp.all(released[:, 2] <= released[:, 1]))


def test_dp_tknn_adds_the_calibrated_noise_to_each_validation_points_counts():
    """End to end with q = 1 and tau = 1 (every point a neighbour): released c_x - N has the recorded noise std, and
    the release is floating-point safe (the Gaussian rounded to a grid, the counts whole numbers)."""
    rng = np.random.default_rng(0)
    n_train, n_val = 20_000, 1_000
    x_train, y_train = rng.normal(size=(n_train, 4)), rng.integers(0, 2, n_train)
    x_val, y_val = rng.normal(size=(n_val, 4)), rng.integers(0, 2, n_val)
    estimator = TKNNShapley(1.0, epsilon=5.0, delta=1e-4, sampling_probability=1.0, classes=[0, 1]).fit(
        x_train, y_train
    )
    result = estimator.value(x_val, y_val)
    (release,) = result.privacy.releases
    assert release.noise == "gaussian_on_grid" and release.integer_statistic and release.floating_point_safe
    assert release.calibrated_sensitivity == release.sensitivity  # counts: nothing rounded
    sigma = result.diagnostics["noise_std"]
    assert sigma == pytest.approx(release.noise_scale, rel=1e-9) and sigma / release.grid >= 1_000
    mechanism = Mechanism.gaussian_on_grid(
        DPGuarantee(5.0, 1e-4), math.sqrt(3.0), 3, num_compositions=n_val, adjacency="add-or-remove-one",
        integer_statistic=True,
    )  # fmt: skip
    assert mechanism.noise_scale == release.noise_scale
    steps = RoundedGaussianSampler(RandomWords(b"tknn")).sample(mechanism.grid_steps, n_val * 3).reshape(n_val, 3)
    _, released = private_tknn_shapley_values(
        jax.random.key(2),
        steps * mechanism.grid,
        estimator.x_train_,
        estimator.y_train_,
        x_val / np.linalg.norm(x_val, axis=1, keepdims=True),
        y_val,
        1.0,
        0.5,
        1.0,
        distance="cosine",
        batch_size=100,
    )
    same = (y_train[None, :] == y_val[:, None]).sum(axis=1)
    noise = np.asarray(released) - np.stack([np.full(n_val, n_train), np.full(n_val, n_train), same], axis=1)
    assert 20 < sigma < n_train / 100  # far from the clamps
    np.testing.assert_allclose(noise.std(axis=0), math.sqrt(sigma**2 + 1 / 12), rtol=0.08)
    np.testing.assert_array_equal(noise, np.round(steps * mechanism.grid + 0.0))


def test_dp_tknn_ledger_records_the_release():
    rng = np.random.default_rng(3)
    x, y = rng.normal(size=(120, 3)), rng.integers(0, 3, 120)
    result = TKNNShapley(-0.2, epsilon=0.5, delta=1e-5, classes=[0, 1, 2]).fit(x, y).value(x[:40], y[:40])
    (release,) = result.privacy.releases
    assert release.sensitivity == pytest.approx(math.sqrt(3.0))
    # the dp-accounting event: 40 compositions (one per validation point) of a Poisson-sampled Gaussian
    event = release.event
    assert isinstance(event, dp_accounting.SelfComposedDpEvent) and event.count == 40
    assert isinstance(event.event, dp_accounting.PoissonSampledDpEvent) and event.event.sampling_probability == 0.01
    assert event.event.event.noise_multiplier == pytest.approx(release.noise_scale / math.sqrt(3.0), rel=1e-12)
    assert release.noise == "gaussian_on_grid" and release.integer_statistic  # counts: nothing rounded
    assert release.dimension == 3 and release.guarantee == DPGuarantee(0.5, 1e-5)
    assert release.noise_std == pytest.approx(result.diagnostics["noise_std"])
    assert result.method == "dp_tknn_shapley"
    (spent,) = result.privacy_spent().values()
    assert spent.owner == "each training point" and spent.delta == 1e-5
    assert 0.5 * (1 - 1e-3) <= spent.epsilon <= 0.5 * (1 + 1e-3)  # the calibration tolerance of the target
    assert spent.epsilon == pytest.approx(result.diagnostics["epsilon_spent"], rel=1e-12)


def test_dp_tknn_is_reproducible_from_an_explicit_seed_and_independent_of_chunking():
    rng = np.random.default_rng(4)
    x, y = rng.normal(size=(150, 3)), rng.integers(0, 2, 150)
    values = [
        TKNNShapley(-0.3, epsilon=1.0, delta=1e-4, classes=[0, 1], batch_size=b, noise_seed=7)
        .fit(x, y)
        .value(x[:30], y[:30])
        .values
        for b in (30, 7)
    ]
    np.testing.assert_allclose(values[0], values[1], atol=1e-12)
    other = TKNNShapley(-0.3, epsilon=1.0, delta=1e-4, classes=[0, 1], noise_seed=8).fit(x, y).value(x[:30], y[:30])
    assert not np.allclose(values[0], other.values)


@pytest.mark.parametrize("q", [1.0, 0.01])
def test_naive_dp_knn_adds_calibrated_noise_per_owner_and_validation_point(q):
    rng = np.random.default_rng(5)
    x, y = rng.normal(size=(400, 3)), rng.integers(0, 2, 400)
    estimator = DPKNNShapley(5, epsilon=1.0, delta=1e-4, sampling_probability=q, classes=[0, 1], noise_seed=3).fit(x, y)
    result = estimator.value(x[:50], y[:50])
    (release,) = result.privacy.releases
    assert release.sensitivity == pytest.approx(1 / 30)
    assert release.noise == "gaussian_on_grid" and release.floating_point_safe
    assert release.event == gaussian_event(release.noise_scale / release.calibrated_sensitivity, 50, q)
    assert release.noise_std == pytest.approx(release.calibrated_sensitivity * result.diagnostics["noise_multiplier"])
    assert np.all(result.values / release.grid == np.round(result.values / release.grid))  # sums of grid steps
    noiseless = noisy_knn_shapley_values(
        jax.random.key(3),  # the seeded stream's first release key: the same subsamples
        np.zeros((50, 400), np.int64),
        estimator.x_train_,
        estimator.y_train_,
        estimator.x_train_[:50],
        estimator.y_train_[:50],
        q,
        release.grid,
        k=5,
        subsample=q < 1,
        distance="cosine",
        batch_size=50,
    )
    # independent noise of std sigma per (owner, validation point): the sum has std sqrt(n_val) sigma
    noise = result.values - np.asarray(noiseless)
    assert np.all(noise / release.grid == np.round(noise / release.grid))
    assert noise.std() == pytest.approx(math.sqrt(50) * release.noise_std, rel=0.1)


def _eq7(agree: int, m: int, p: int, n_classes: int) -> float:
    """Eq. 7 (Wang et al. 2023, Thm 13) at integer counts: ball size m with the point, p same-label others."""
    harmonic = sum(1.0 / j for j in range(1, m + 1))
    inside = (agree / m - p / (m * (m - 1))) * (harmonic - 1.0) if m >= 2 else 0.0
    return (agree - 1.0 / n_classes) / m + inside


def test_dp_tknn_values_do_not_reveal_the_lone_point_of_a_class():
    """D = D' + z, z the only point of class 2, far from the validation point. With the public classes [0, 1, 2]
    and the same noise (q = 1, one seed), every other owner's DP-TKNN value is the same on D and D', and lies on the
    Eq. 7 lattice of C = 3: C counted from the training labels (3 on D, 2 on D') told D from D' with certainty."""
    rng = np.random.default_rng(0)
    x, y = rng.normal(size=(40, 3)) + np.array([3.0, 0.0, 0.0]), rng.integers(0, 2, 40)
    x_lone, y_lone = np.array([[-3.0, 0.0, 0.0]]), np.array([2])
    x_val, y_val = np.array([[3.0, 0.0, 0.0]]), np.array([1])
    lattice = {
        (agree, n_classes): np.array([_eq7(agree, m, p, n_classes) for m in range(1, 60) for p in range(m)])
        for agree in (0, 1)
        for n_classes in (2, 3)
    }
    for seed in range(3):

        def release(features, labels, seed=seed):
            estimator = TKNNShapley(
                -0.5,
                epsilon=1.0,
                delta=1e-5,
                sampling_probability=1.0,
                classes=[0, 1, 2],
                noise_seed=seed,
                allow_seed_reuse=True,
            )
            return estimator.fit(features, labels).value(x_val, y_val)

        with_z = release(np.vstack([x, x_lone]), np.append(y, y_lone))
        without_z = release(x, y)
        np.testing.assert_array_equal(with_z.values[:40], without_z.values)
        assert with_z.diagnostics["n_classes"] == without_z.diagnostics["n_classes"] == 3
        assert not {"mean_neighbours", "validation_points_without_neighbours"} & with_z.diagnostics.keys()
        for owner in np.flatnonzero(without_z.values):  # the in-ball owners
            agree = int(y[owner] == y_val[0])
            assert np.abs(lattice[agree, 3] - without_z.values[owner]).min() < 1e-12
            assert np.abs(lattice[agree, 2] - without_z.values[owner]).min() > 1e-9


def test_private_estimators_need_the_public_classes():
    for build in (
        lambda: TKNNShapley(-0.5, epsilon=1.0, delta=1e-5),
        lambda: DPKNNShapley(5, epsilon=1.0, delta=1e-5),
    ):
        with pytest.raises(ValueError, match=r"needs classes=, the public list of class labels"):
            build()
    x, y = np.random.default_rng(1).normal(size=(20, 2)), np.arange(20) % 2
    estimator = TKNNShapley(-0.5, epsilon=1.0, delta=1e-5, classes=[0, 1, 2]).fit(x, y)  # class 2 absent: no error
    with pytest.raises(ValueError, match=r"y_val has labels outside classes: \[3\]; classes: \[0, 1, 2\]"):
        estimator.value(x[:3], np.array([0, 3, 1]))
    with pytest.raises(ValueError, match=r"y has labels outside classes: \[1\]; classes: \[0, 2\]"):
        TKNNShapley(-0.5, epsilon=1.0, delta=1e-5, classes=[0, 2]).fit(x, y)
    for bad, match in (([0], "at least 2 labels"), ([0, 1, 1], "each class once"), ("01", "1-D list")):
        with pytest.raises(ValueError, match=match):
            TKNNShapley(-0.5, classes=bad)
