"""Noise calibration for the Gaussian mechanism.

Renyi DP has a closed form (Mironov 2017, Prop. 7: the Gaussian mechanism with l2 sensitivity
Delta and noise std sigma is (lambda, lambda Delta^2 / (2 sigma^2))-RDP), which is what Sim et al.
(2023, Sec. 2) use: sigma^2 = 0.5 (lambda / epsilon) Delta^2. (epsilon, delta)-DP calibration,
with composition and Poisson subsampling, is delegated to dp-accounting's PLD accountant.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import dp_accounting
from dp_accounting.pld import PLDAccountant

from bayesval.validation import check_positive, check_probability

# The PLD of a Gaussian with a tiny noise multiplier needs a huge grid; below this multiplier
# (epsilon in the tens) the search stops with an error instead of exhausting memory.
_SMALLEST_NOISE_MULTIPLIER = 0.25


@dataclass(frozen=True)
class DPGuarantee:
    """A privacy level a party asks for: (rdp_order, epsilon)-RDP, or (epsilon, delta)-DP if delta is set."""

    epsilon: float
    delta: float | None = None
    rdp_order: float = 2.0

    def __post_init__(self) -> None:
        check_positive("epsilon", self.epsilon)
        if self.delta is not None:
            check_probability("delta", self.delta)
        elif not (self.rdp_order > 1 and math.isfinite(self.rdp_order)):
            raise ValueError(f"rdp_order must be a finite number > 1, got {self.rdp_order!r}")

    def gaussian_sigma(self, sensitivity: float) -> float:
        """Noise std of the Gaussian mechanism with this guarantee for one release."""
        if self.delta is None:
            return gaussian_sigma_for_rdp(self.epsilon, sensitivity, self.rdp_order)
        return gaussian_sigma_for_approx_dp(self.epsilon, self.delta, sensitivity)

    def describe(self) -> str:
        if self.delta is None:
            return f"({self.rdp_order:g}, {self.epsilon:g})-RDP"
        return f"({self.epsilon:g}, {self.delta:g})-DP"


def gaussian_sigma_for_rdp(epsilon: float, sensitivity: float, rdp_order: float = 2.0) -> float:
    """sigma with which the Gaussian mechanism is (rdp_order, epsilon)-RDP: Delta sqrt(lambda / (2 eps))."""
    check_positive("epsilon", epsilon)
    check_positive("sensitivity", sensitivity)
    return sensitivity * math.sqrt(rdp_order / (2.0 * epsilon))


def _gaussian_event(noise_multiplier: float, num_compositions: int, sampling_probability: float):
    """The dp-accounting event of `num_compositions` Gaussian releases, each optionally on a Poisson
    subsample. Without subsampling, n releases with multiplier s compose exactly into one with
    multiplier s / sqrt(n) (Dong, Roth & Su 2019, Cor. 3.3), which the accountant handles in
    milliseconds instead of composing n distributions."""
    if sampling_probability == 1:
        return dp_accounting.GaussianDpEvent(noise_multiplier / math.sqrt(num_compositions))
    single = dp_accounting.PoissonSampledDpEvent(sampling_probability, dp_accounting.GaussianDpEvent(noise_multiplier))
    return dp_accounting.SelfComposedDpEvent(single, num_compositions)


def _check_composition(num_compositions: int, sampling_probability: float) -> None:
    if num_compositions < 1:
        raise ValueError(f"num_compositions must be >= 1, got {num_compositions}")
    if not 0 < sampling_probability <= 1:
        raise ValueError(f"sampling_probability must lie in (0, 1], got {sampling_probability}")


def gaussian_sigma_for_approx_dp(
    epsilon: float,
    delta: float,
    sensitivity: float = 1.0,
    *,
    num_compositions: int = 1,
    sampling_probability: float = 1.0,
    value_discretization_interval: float = 1e-4,
) -> float:
    """Smallest sigma for (epsilon, delta)-DP of `num_compositions` Gaussian releases.

    Each release optionally runs on a Poisson subsample of rate `sampling_probability`.
    Calibrated with dp-accounting's privacy-loss-distribution accountant, which is tight for
    the Gaussian mechanism (and agrees with the analytic Gaussian mechanism of Balle & Wang 2018
    for one release).
    """
    check_positive("epsilon", epsilon)
    check_probability("delta", delta)
    check_positive("sensitivity", sensitivity)
    _check_composition(num_compositions, sampling_probability)
    multiplier = dp_accounting.calibrate_dp_mechanism(
        lambda: PLDAccountant(value_discretization_interval=value_discretization_interval),
        lambda noise_multiplier: _gaussian_event(noise_multiplier, num_compositions, sampling_probability),
        epsilon,
        delta,
        dp_accounting.LowerEndpointAndGuess(_SMALLEST_NOISE_MULTIPLIER, 1.0),
        tol=1e-4,
    )
    return float(multiplier) * sensitivity


def gaussian_epsilon_spent(
    noise_multiplier: float,
    delta: float,
    *,
    num_compositions: int = 1,
    sampling_probability: float = 1.0,
    value_discretization_interval: float = 1e-4,
) -> float:
    """epsilon that the PLD accountant certifies at `delta` for these (subsampled) Gaussian releases."""
    check_positive("noise_multiplier", noise_multiplier)
    check_probability("delta", delta)
    _check_composition(num_compositions, sampling_probability)
    accountant = PLDAccountant(value_discretization_interval=value_discretization_interval)
    event = _gaussian_event(noise_multiplier, num_compositions, sampling_probability)
    return float(accountant.compose(event).get_epsilon(delta))


def rdp_to_approx_dp(rdp_order: float, rdp_epsilon: float, delta: float) -> float:
    """epsilon of (epsilon, delta)-DP implied by (rdp_order, rdp_epsilon)-RDP (dp-accounting's conversion)."""
    check_probability("delta", delta)
    return float(dp_accounting.rdp.compute_epsilon([rdp_order], [rdp_epsilon], delta)[0])


__all__ = [
    "DPGuarantee",
    "gaussian_epsilon_spent",
    "gaussian_sigma_for_approx_dp",
    "gaussian_sigma_for_rdp",
    "rdp_to_approx_dp",
]
