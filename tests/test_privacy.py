"""Calibration, mechanism noise scale and sensitivity bounds (DESIGN.md Sec. 7)."""

import math

import dp_accounting
import numpy as np
import pytest
from scipy.optimize import brentq
from scipy.stats import norm

import bayesval as bv
from bayesval.privacy import (
    DPGuarantee,
    Mechanism,
    NoiseSource,
    PrivacyLedger,
    gaussian_epsilon_spent,
    gaussian_sigma_for_approx_dp,
    gaussian_sigma_for_rdp,
    rdp_to_approx_dp,
)
from bayesval.privacy.accounting import epsilon_at
from bayesval.statistics import Bounds, LinearRegressionStatistic


def analytic_gaussian_sigma(epsilon, delta, sensitivity):
    """Balle & Wang (2018), Thm 8: the exact delta(epsilon) of the Gaussian mechanism, solved for sigma."""

    def delta_of(sigma):
        a = sensitivity / (2 * sigma)
        b = epsilon * sigma / sensitivity
        return norm.cdf(a - b) - math.exp(epsilon) * norm.cdf(-a - b) - delta

    return brentq(delta_of, 1e-3, 1e3, xtol=1e-10)


def test_rdp_sigma_matches_sim_et_al_formula():
    # sigma^2 = 0.5 (lambda / eps) Delta^2 (Sim et al. 2023, Sec. 2)
    assert gaussian_sigma_for_rdp(0.1, 3.0, 2.0) == pytest.approx(math.sqrt(0.5 * 2 / 0.1 * 9))
    # and the mechanism at that sigma is (lambda, eps)-RDP: lambda Delta^2 / (2 sigma^2) = eps
    sigma = gaussian_sigma_for_rdp(0.37, 2.5, 10.0)
    assert 10.0 * 2.5**2 / (2 * sigma**2) == pytest.approx(0.37)


@pytest.mark.parametrize("epsilon,delta", [(0.5, 1e-5), (1.0, 1e-6), (3.0, 1e-3)])
def test_approx_dp_calibration_agrees_with_analytic_gaussian(epsilon, delta):
    ours = gaussian_sigma_for_approx_dp(epsilon, delta, sensitivity=2.0)
    exact = analytic_gaussian_sigma(epsilon, delta, 2.0)
    assert ours == pytest.approx(exact, rel=2e-3)


def test_rdp_to_approx_dp_is_dp_accounting_conversion():
    # RDP of order 2 at eps=0.2 converts (Canonne-Kamath-Steinke bound) to an eps below the classic
    # eps + log(1/delta)/(lambda-1) and above the RDP eps itself
    converted = rdp_to_approx_dp(2.0, 0.2, 1e-5)
    assert 0.2 < converted < 0.2 + math.log(1e5)


def test_mechanism_noise_has_calibrated_std_and_is_recorded():
    guarantee = DPGuarantee(epsilon=0.5, rdp_order=2.0)
    ledger = PrivacyLedger()
    value = np.zeros(200_000)
    mechanism = Mechanism.gaussian(guarantee, 4.0)
    released, record = mechanism.perturb(value, noise=NoiseSource(), owner="alice", what="test", ledger=ledger)
    sigma = gaussian_sigma_for_rdp(0.5, 4.0, 2.0)
    assert record.noise_std == pytest.approx(sigma)
    assert np.std(released) == pytest.approx(sigma, rel=0.01)
    assert abs(np.mean(released)) < 4 * sigma / math.sqrt(value.size)
    assert ledger.releases == [record] and record.owner == "alice" and record.dimension == value.size


def test_laplace_mechanism_noise_scale_and_event():
    mechanism = Mechanism.laplace(0.5, 2.0)
    released, record = mechanism.perturb(np.zeros(200_000), noise=NoiseSource(), owner="a", what="test")
    assert record.noise_scale == pytest.approx(4.0)  # b = sensitivity / epsilon
    assert np.mean(np.abs(released)) == pytest.approx(4.0, rel=0.01)  # E|Laplace(b)| = b
    assert isinstance(record.event, dp_accounting.LaplaceDpEvent) and record.event.noise_multiplier == 2.0


def test_laplace_on_a_grid_is_calibrated_to_the_rounded_sensitivity_and_refuses_what_it_cannot_draw():
    """Ten values of sensitivity 0.1 at 10-DP in all (1 each): grid 2^-14 (0.1 % of 0.1), t = ceil(0.1 / 2^-14 + 1)
    steps, the LaplaceDpEvent's multiplier t / (0.1 / 2^-14 + 1), pure epsilon at most 10; the noise has the
    Laplace's spread; a split that is not even, a coarse grid and a scale beyond exact doubles are refused."""
    mechanism = Mechanism.laplace_on_grid(10.0, 0.1, 10, num_compositions=10)
    steps = math.ceil(0.1 / 2**-14 + 1)
    assert mechanism.grid == 2**-14 and mechanism.noise_scale == steps * 2**-14
    assert mechanism.event == dp_accounting.SelfComposedDpEvent(
        dp_accounting.LaplaceDpEvent(steps / (0.1 * 2**14 + 1)), 10
    )
    assert 10.0 * (1 - 1 / steps) <= epsilon_at(mechanism.event, 0.0)[0] <= 10.0  # t rounded up to whole steps
    released, record = Mechanism.laplace_on_grid(0.5, 2.0, 200_000).perturb(
        np.zeros(200_000), noise=NoiseSource(), owner="a", what="test"
    )
    assert record.floating_point_safe and record.noise_std == pytest.approx(np.sqrt(2) * record.noise_scale)
    assert np.mean(np.abs(released)) == pytest.approx(record.noise_scale, rel=0.01)  # E|Laplace(b)| = b
    with pytest.raises(ValueError, match="do not split into num_compositions=3 equal releases"):
        Mechanism.laplace_on_grid(1.0, 1.0, 10, num_compositions=3)
    with pytest.raises(ValueError, match="too coarse for a statistic of l1 sensitivity 1 in 1 entries"):
        Mechanism.laplace_on_grid(1.0, 1.0, 2, num_compositions=2, grid=0.5)
    with pytest.raises(ValueError, match="too wide to draw as exact doubles"):
        Mechanism.laplace_on_grid(1e-310, 1.0, 1)


def test_explicitly_reused_seed_gives_nested_noise_across_epsilon():
    """The fixed-seed epsilon sweep of Sim et al. (2023, Sec. 6): same draw, scaled, when reuse is allowed."""
    a, _ = Mechanism.gaussian(DPGuarantee(0.1), 1.0).perturb(
        np.zeros(5), noise=NoiseSource(7, allow_reuse=True), owner="p", what="s"
    )
    b, _ = Mechanism.gaussian(DPGuarantee(0.4), 1.0).perturb(
        np.zeros(5), noise=NoiseSource(7, allow_reuse=True), owner="p", what="s"
    )
    np.testing.assert_allclose(a, 2.0 * b)


def test_sensitivity_bound_holds_on_worst_case_neighbours(rng):
    """Search bounded records for the largest ||t(d) - t(d')||: it must stay below Delta_2 and come close to it (the
    derived bound is tight: tests/test_tight_sensitivity.py checks it against brute force on grids)."""
    bounds = Bounds(x_norm=1.5, y_abs=2.0)
    statistic = LinearRegressionStatistic(3)
    delta = statistic.sensitivity(bounds)

    def record(direction, radius, y):
        x = direction / np.linalg.norm(direction) * radius
        return statistic.compute(x[None, :], np.array([y]))

    candidates = []
    for axis in range(3):
        for axis_sign in [1, -1]:
            for y in np.linspace(-bounds.y_abs, bounds.y_abs, 9):
                candidates.append(record(axis_sign * np.eye(3)[axis], bounds.x_norm, y))
    for _ in range(3000):
        candidates.append(
            record(rng.normal(size=3), bounds.x_norm * rng.uniform() ** 0.3, rng.uniform(-1, 1) * bounds.y_abs)
        )
    candidates = np.array(candidates)
    differences = np.linalg.norm(candidates[:, None, :] - candidates[None, :300, :], axis=2)
    assert differences.max() <= delta
    assert differences.max() > 0.95 * delta  # the neighbour search finds 0.965 Delta here: the bound is near tight
    # the earlier bound, twice the largest per-record norm, is attained per record but 1.2x the replace-one distance
    assert np.linalg.norm(candidates, axis=1).max() * 2 > 1.15 * delta


def test_party_release_uses_declared_bounds_and_ledger(syn):
    statistic = LinearRegressionStatistic(2)
    for mechanism in ("gaussian", "discrete_gaussian"):
        party = bv.Party(*syn.parties[0], epsilon=0.2, bounds=syn.bounds, name="p", mechanism=mechanism)
        released = party.release()
        assert released.release.sensitivity == pytest.approx(statistic.sensitivity(syn.bounds))
        sigma = gaussian_sigma_for_rdp(0.2, released.release.sensitivity, 2.0)
        if mechanism == "gaussian":
            assert released.noise_std == pytest.approx(sigma)
        else:  # calibrated to the rounded statistic's sensitivity, Delta + sqrt(d) grid <= 1.001 Delta
            assert sigma < released.noise_std <= 1.001 * sigma
        assert released.count == len(syn.parties[0][0])


def test_party_with_delta_uses_pld_calibration(syn):
    party = bv.Party(*syn.parties[0], epsilon=1.0, delta=1e-5, bounds=syn.bounds, name="p", mechanism="gaussian")
    released = party.release()
    expected = analytic_gaussian_sigma(1.0, 1e-5, released.release.sensitivity)
    assert released.noise_std == pytest.approx(expected, rel=2e-3)
    assert released.release.guarantee == DPGuarantee(1.0, 1e-5)
    # the discrete Gaussian is calibrated by its zCDP bound, which needs more noise than the exact PLD (~9 % here)
    discrete = bv.Party(*syn.parties[0], epsilon=1.0, delta=1e-5, bounds=syn.bounds, name="p").release()
    assert 1.05 * expected < discrete.noise_std < 1.15 * expected


@pytest.mark.parametrize("bad", [0, -1.0, float("nan"), float("inf")])
def test_invalid_epsilon_is_a_clear_error(bad):
    with pytest.raises(ValueError, match="epsilon"):
        DPGuarantee(epsilon=bad)


@pytest.mark.parametrize("bad", [0.0, 1.0, -0.1, 2.0])
def test_invalid_delta_is_a_clear_error(bad):
    with pytest.raises(ValueError, match="delta"):
        gaussian_sigma_for_approx_dp(1.0, bad)


def test_composed_gaussian_calibration_is_exact_composition():
    """n unsubsampled Gaussian releases need sqrt(n) times one release's noise (Dong, Roth & Su 2019)."""
    single = gaussian_sigma_for_approx_dp(1.0, 1e-5)
    assert gaussian_sigma_for_approx_dp(1.0, 1e-5, num_compositions=25) == pytest.approx(5 * single, rel=5e-4)
    spent = gaussian_epsilon_spent(5 * single, 1e-5, num_compositions=25)
    assert spent == pytest.approx(1.0, abs=2e-3)
