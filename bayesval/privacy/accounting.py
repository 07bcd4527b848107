"""Privacy accounting: guarantees, calibration and composition, as a thin layer over dp-accounting.

A release is described by its dp-accounting `DpEvent` (Gaussian or Laplace, optionally
Poisson-subsampled and self-composed). Calibration finds the noise that makes an event meet a
`DPGuarantee`; `privacy_spent` composes an owner's events with dp-accounting's accountants. Renyi
DP of the Gaussian mechanism has a closed form (Mironov 2017, Prop. 7: (lambda, lambda Delta^2 /
(2 sigma^2))-RDP), which is what Sim et al. (2023, Sec. 2) calibrate with: sigma^2 = 0.5 (lambda /
epsilon) Delta^2. (epsilon, delta)-DP is calibrated and reported with the privacy-loss-distribution
(PLD) accountant, which is tight for the Gaussian mechanism.

Noise multipliers are noise scale / sensitivity, with the sensitivity taken under the release's own
adjacency: without subsampling the Gaussian and Laplace mechanisms' privacy depends only on that
ratio, so the accountants' add-or-remove conventions give the same epsilon for replace-one releases.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass

import bayesval.privacy.dp_library as dp
from bayesval.validation import check_count, check_positive, check_probability, check_real

# The PLD of a Gaussian with a small noise multiplier needs a large grid (seconds at 0.1, minutes
# below): calibration searches no lower, and reports use the RDP accountant below it.
SMALLEST_PLD_MULTIPLIER = 0.25
# Width of the privacy-loss grid. 1e-3 instead of dp-accounting's 1e-4 is ~10x faster and changes
# epsilon by < 1e-6 relative for one Gaussian (1.9930918 vs 1.9930914 at multiplier 2, delta 1e-5);
# the pessimistic PLD stays an upper bound on epsilon either way.
PLD_GRID = 1e-3
# Orders the RDP accountant optimises over when it converts to (epsilon, delta): those up to 64 it has always had, and
# a geometric run (ratio 1.2) from 24 up to about 25,000. A zCDP curve (alpha, alpha rho) converts best near alpha =
# sqrt(log(1 / delta) / rho), which passes 64 below epsilon = 0.1 at delta = 1e-5: with orders up to 64 the accountant
# certified nothing smaller, and calibration ran to its bracket's end (2,300 times the noise needed at epsilon 0.1).
# With these, epsilon at delta is within 1 % of the conversion minimised over every real order from epsilon 2 down to
# 0.002.
_RDP_ORDERS = tuple(
    sorted(
        {1.25, 1.5, 1.75, 2.0, 2.5, 3.0, 4.0, 5.0, 6.0, 8.0, 10.0, 12.0, 16.0, 20.0, 32.0, 64.0}
        | {round(20 * 1.2**k, 3) for k in range(1, 40)}
    )
)


class CalibrationError(ValueError):
    """No noise scale the accountant can certify meets the requested guarantee."""


@dataclass(frozen=True)
class DPGuarantee:
    """A privacy level an owner asks for per release.

    delta=None: (rdp_order, epsilon)-Renyi DP (Sim et al. 2023's setting, rdp_order 2 by default);
    delta in (0, 1): (epsilon, delta)-DP; delta=0: pure epsilon-DP (the Laplace mechanism).
    """

    epsilon: float
    delta: float | None = None
    rdp_order: float = 2.0

    def __post_init__(self) -> None:
        object.__setattr__(self, "epsilon", check_positive("epsilon", self.epsilon))
        if self.delta is not None:
            delta = check_real("delta", self.delta)
            if delta != 0:
                delta = check_probability("delta", delta)
            object.__setattr__(self, "delta", delta)
        order = check_real("rdp_order", self.rdp_order)
        if not order > 1:
            raise ValueError(f"rdp_order must be a finite number > 1, got {self.rdp_order!r}")
        object.__setattr__(self, "rdp_order", order)

    @property
    def is_rdp(self) -> bool:
        return self.delta is None

    def describe(self) -> str:
        if self.delta is None:
            return f"({self.rdp_order:g}, {self.epsilon:g})-RDP"
        if self.delta == 0:
            return f"{self.epsilon:g}-DP"
        return f"({self.epsilon:g}, {self.delta:g})-DP"

    def to_record(self) -> dict:
        """The guarantee as a JSON record {epsilon, delta, rdp_order} (a field of a release's record)."""
        return {"epsilon": self.epsilon, "delta": self.delta, "rdp_order": self.rdp_order}

    @classmethod
    def from_record(cls, record: dict) -> DPGuarantee:
        """Rebuild (and re-check) a guarantee from `to_record`'s dict."""
        if not isinstance(record, dict) or set(record) != {"epsilon", "delta", "rdp_order"}:
            raise ValueError(f"release record's guarantee must hold epsilon, delta, rdp_order; got {record!r}")
        return cls(**record)


def gaussian_event(noise_multiplier: float, num_compositions: int = 1, sampling_probability: float = 1.0) -> dp.DpEvent:
    """The dp-accounting event of `num_compositions` Gaussian releases, each optionally on a Poisson subsample."""
    base = dp.GaussianDpEvent(noise_multiplier)
    if sampling_probability != 1:
        base = dp.PoissonSampledDpEvent(sampling_probability, base)
    return base if num_compositions == 1 else dp.SelfComposedDpEvent(base, num_compositions)


def laplace_event(noise_multiplier: float, num_compositions: int = 1) -> dp.DpEvent:
    """The dp-accounting event of `num_compositions` Laplace releases."""
    base = dp.LaplaceDpEvent(noise_multiplier)
    return base if num_compositions == 1 else dp.SelfComposedDpEvent(base, num_compositions)


def check_composition(num_compositions: int, sampling_probability: float) -> tuple[int, float]:
    count = check_count("num_compositions", num_compositions, minimum=1)
    rate = check_real("sampling_probability", sampling_probability)
    if not 0 < rate <= 1:
        raise ValueError(f"sampling_probability must lie in (0, 1], got {sampling_probability!r}")
    return count, rate


def _pld_accountant_for(event: dp.DpEvent) -> bool:
    """Whether the PLD accountant can compose `event` quickly (every Gaussian multiplier >= the smallest) and
    soundly: a zCDP event (the discrete Gaussian) is only a bound on a Renyi curve, which the RDP accountant uses."""
    if _holds_zcdp(event):
        return False
    return all(m >= SMALLEST_PLD_MULTIPLIER for m in _effective_gaussian_multipliers(event, 1))


def _holds_zcdp(event: dp.DpEvent) -> bool:
    if isinstance(event, dp.ZCDpEvent):
        return True
    if isinstance(event, (dp.SelfComposedDpEvent, dp.PoissonSampledDpEvent)):
        return _holds_zcdp(event.event)
    if isinstance(event, dp.ComposedDpEvent):
        return any(_holds_zcdp(e) for e in event.events)
    return False


def zcdp_event(noise_multiplier: float) -> dp.ZCDpEvent:
    """The event of one discrete Gaussian release with sigma / Delta = `noise_multiplier`: rho-zCDP with
    rho = 1 / (2 multiplier^2) (Canonne, Kamath & Steinke 2020, Thm. 14)."""
    return dp.ZCDpEvent(1.0 / (2.0 * noise_multiplier**2))


def zcdp_multiplier_for(guarantee: DPGuarantee) -> float:
    """sigma / Delta of the discrete Gaussian (calibrated by its zCDP bound) that meets `guarantee` in one release.

    (alpha, epsilon)-RDP: rho-zCDP is (alpha, alpha rho)-RDP, so rho = epsilon / alpha, the continuous Gaussian's
    multiplier sqrt(alpha / (2 epsilon)). (epsilon, delta)-DP: the smallest multiplier whose zCDP curve the RDP
    accountant converts to epsilon at delta (the conversion of Canonne, Kamath & Steinke 2020, Prop. 12, over
    the accountant's orders); a little more noise than the continuous Gaussian's tight PLD calibration needs.
    """
    if guarantee.delta == 0:
        raise CalibrationError(f"the discrete Gaussian cannot give pure {guarantee.describe()}: use Laplace noise")
    if guarantee.is_rdp:
        return gaussian_sigma_for_rdp(guarantee.epsilon, 1.0, guarantee.rdp_order)
    try:
        multiplier = float(
            dp.calibrate_dp_mechanism(
                lambda: dp.rdp.RdpAccountant(_RDP_ORDERS),
                zcdp_event,
                guarantee.epsilon,
                guarantee.delta,
                dp.LowerEndpointAndGuess(1e-3, 1.0),
                tol=1e-6,
            )
        )
    except dp.mechanism_calibration.NoBracketIntervalFoundError:
        raise CalibrationError(f"cannot calibrate discrete Gaussian noise for {guarantee.describe()}") from None
    certified = epsilon_at(zcdp_event(multiplier), guarantee.delta)[0]
    if certified < 0.99 * guarantee.epsilon:  # the accountant's orders cannot convert so small an epsilon
        raise CalibrationError(
            f"cannot calibrate discrete Gaussian noise for {guarantee.describe()}: the accountant certifies "
            f"epsilon {certified:.3g} at the bracket's end, below any order it converts at; ask for a larger epsilon"
        )
    return multiplier


def _effective_gaussian_multipliers(event: dp.DpEvent, count: int) -> list[float]:
    """Gaussian multipliers as the PLD accountant meets them (unsubsampled self-compositions merge)."""
    if isinstance(event, dp.GaussianDpEvent):
        return [event.noise_multiplier / math.sqrt(count)]
    if isinstance(event, dp.SelfComposedDpEvent):
        return _effective_gaussian_multipliers(event.event, count * event.count)
    if isinstance(event, dp.PoissonSampledDpEvent):
        return _effective_gaussian_multipliers(event.event, 1)
    if isinstance(event, dp.ComposedDpEvent):
        return [m for e in event.events for m in _effective_gaussian_multipliers(e, count)]
    return []


def pure_epsilon(event: dp.DpEvent) -> float:
    """epsilon of pure epsilon-DP: Laplace 1 / multiplier, composed by adding, Poisson sampling at rate q
    amplified to log(1 + q (e^eps - 1)); inf for anything with Gaussian noise."""
    if isinstance(event, dp.LaplaceDpEvent):
        return 1.0 / event.noise_multiplier
    if isinstance(event, dp.SelfComposedDpEvent):
        return event.count * pure_epsilon(event.event)
    if isinstance(event, dp.ComposedDpEvent):
        return sum(pure_epsilon(e) for e in event.events)
    if isinstance(event, dp.PoissonSampledDpEvent):
        return math.log1p(event.sampling_probability * math.expm1(pure_epsilon(event.event)))
    return math.inf


def epsilon_at(event: dp.DpEvent, delta: float) -> tuple[float, str]:
    """epsilon of (epsilon, delta)-DP that dp-accounting certifies for `event`, and the accountant used:
    PLD (tight) where it is fast, the RDP accountant where a multiplier is too small for the PLD grid.
    delta = 0 asks for pure DP (Laplace events only). Remembered per (event, delta) for hashable events: every
    release record is checked against its guarantee, and a run's releases share their event."""
    try:
        return _remembered_epsilon_at(event, delta)
    except TypeError:  # an event holding a list (ComposedDpEvent) has no hash
        return _epsilon_at(event, delta)


@functools.lru_cache(maxsize=256)
def _remembered_epsilon_at(event: dp.DpEvent, delta: float) -> tuple[float, str]:
    return _epsilon_at(event, delta)


def _epsilon_at(event: dp.DpEvent, delta: float) -> tuple[float, str]:
    if delta == 0:
        return pure_epsilon(event), "pure"
    if _pld_accountant_for(event):
        accountant = dp.pld.PLDAccountant(value_discretization_interval=PLD_GRID)
        return float(accountant.compose(event).get_epsilon(delta)), "PLD"
    return float(dp.rdp.RdpAccountant(_RDP_ORDERS).compose(event).get_epsilon(delta)), "RDP"


def rdp_epsilon_at(event: dp.DpEvent, order: float) -> float:
    """Renyi DP epsilon of `event` at one order (dp-accounting's RDP accountant)."""
    return float(dp.rdp.RdpAccountant([order]).compose(event).rdp[0])


def meets(event: dp.DpEvent, guarantee: DPGuarantee, rtol: float = 1e-3) -> bool:
    """Whether the accountant certifies `event` at `guarantee` (up to the calibration tolerance `rtol`)."""
    if guarantee.is_rdp:
        spent = rdp_epsilon_at(event, guarantee.rdp_order)
    else:
        spent = epsilon_at(event, guarantee.delta)[0]
    return spent <= guarantee.epsilon * (1 + rtol) + 1e-12


def gaussian_sigma_for_rdp(epsilon: float, sensitivity: float, rdp_order: float = 2.0) -> float:
    """sigma with which the Gaussian mechanism is (rdp_order, epsilon)-RDP: Delta sqrt(lambda / (2 eps))."""
    check_positive("epsilon", epsilon)
    check_positive("sensitivity", sensitivity)
    return sensitivity * math.sqrt(rdp_order / (2.0 * epsilon))


def gaussian_sigma_for_approx_dp(
    epsilon: float,
    delta: float,
    sensitivity: float = 1.0,
    *,
    num_compositions: int = 1,
    sampling_probability: float = 1.0,
) -> float:
    """Smallest sigma for (epsilon, delta)-DP of `num_compositions` Gaussian releases, each optionally on a
    Poisson subsample of rate `sampling_probability` (dp-accounting's PLD accountant; agrees with the
    analytic Gaussian mechanism of Balle & Wang 2018 for one release)."""
    check_positive("epsilon", epsilon)
    check_probability("delta", delta)
    check_positive("sensitivity", sensitivity)
    num_compositions, sampling_probability = check_composition(num_compositions, sampling_probability)
    # Unsubsampled, n releases with multiplier m are exactly one with m / sqrt(n) (Dong, Roth & Su 2019,
    # Cor. 3.3): calibrate that one, so the search never meets a tiny effective multiplier (slow PLD grids).
    merged = sampling_probability == 1
    scale = math.sqrt(num_compositions) if merged else 1.0
    try:
        multiplier = scale * dp.calibrate_dp_mechanism(
            lambda: dp.pld.PLDAccountant(value_discretization_interval=PLD_GRID),
            lambda m: gaussian_event(m) if merged else gaussian_event(m, num_compositions, sampling_probability),
            epsilon,
            delta,
            dp.LowerEndpointAndGuess(SMALLEST_PLD_MULTIPLIER, 1.0),
            tol=1e-4,
        )
    except dp.mechanism_calibration.NoBracketIntervalFoundError:
        raise CalibrationError(
            f"cannot calibrate Gaussian noise for ({epsilon:g}, {delta:g})-DP over {num_compositions} release(s): "
            f"it would need a noise multiplier below {SMALLEST_PLD_MULTIPLIER}, which the PLD accountant cannot "
            "certify here; ask for a smaller epsilon, or an RDP guarantee (delta=None)"
        ) from None
    except (ValueError, OverflowError) as error:  # e.g. more compositions than dp-accounting's arrays can hold
        raise CalibrationError(
            f"cannot calibrate Gaussian noise for ({epsilon:g}, {delta:g})-DP over {num_compositions} release(s): "
            f"dp-accounting failed ({type(error).__name__}: {error})"
        ) from None
    return float(multiplier) * sensitivity


def gaussian_multiplier_for(guarantee: DPGuarantee, num_compositions: int = 1, sampling_probability: float = 1.0):
    """Noise multiplier (sigma / sensitivity) of the Gaussian mechanism that meets `guarantee` over these releases."""
    num_compositions, sampling_probability = check_composition(num_compositions, sampling_probability)
    if guarantee.delta == 0:
        raise CalibrationError(f"the Gaussian mechanism cannot give pure {guarantee.describe()}: use Laplace noise")
    if not guarantee.is_rdp:
        return gaussian_sigma_for_approx_dp(
            guarantee.epsilon,
            guarantee.delta,
            num_compositions=num_compositions,
            sampling_probability=sampling_probability,
        )
    if sampling_probability != 1:
        raise CalibrationError(
            f"RDP calibration of Poisson-subsampled releases is not supported ({guarantee.describe()}); "
            "state the guarantee as (epsilon, delta)-DP"
        )
    return math.sqrt(num_compositions) * gaussian_sigma_for_rdp(guarantee.epsilon, 1.0, guarantee.rdp_order)


def gaussian_epsilon_spent(
    noise_multiplier: float, delta: float, *, num_compositions: int = 1, sampling_probability: float = 1.0
) -> float:
    """epsilon that the PLD accountant certifies at `delta` for these (subsampled) Gaussian releases."""
    check_positive("noise_multiplier", noise_multiplier)
    check_probability("delta", delta)
    num_compositions, sampling_probability = check_composition(num_compositions, sampling_probability)
    return epsilon_at(gaussian_event(noise_multiplier, num_compositions, sampling_probability), delta)[0]


def rdp_to_approx_dp(rdp_order: float, rdp_epsilon: float, delta: float) -> float:
    """epsilon of (epsilon, delta)-DP implied by (rdp_order, rdp_epsilon)-RDP (dp-accounting's conversion)."""
    check_probability("delta", delta)
    return float(dp.rdp.compute_epsilon([rdp_order], [rdp_epsilon], delta)[0])


@dataclass(frozen=True)
class PrivacySpent:
    """What an owner has spent over its releases: dp-accounting's composition of their events, as
    (epsilon, delta)-DP (by `accountant`) and as Renyi DP at `rdp_order`."""

    owner: str
    epsilon: float
    delta: float
    rdp_order: float
    rdp_epsilon: float
    releases: int
    accountant: str

    def __str__(self) -> str:
        plural = "s" if self.releases != 1 else ""
        return (
            f"({self.epsilon:.4g}, {self.delta:g})-DP by {self.accountant}; ({self.rdp_order:g}, "
            f"{self.rdp_epsilon:.4g})-RDP over {self.releases} release{plural}"
        )


def privacy_spent(owner: str, events: Sequence[dp.DpEvent], *, delta: float, rdp_order: float) -> PrivacySpent:
    """Compose `events` (one owner's releases) with dp-accounting and report the total."""
    if not events:
        raise ValueError(f"{owner!r} made no releases")
    delta = check_probability("delta", delta)
    rdp_order = check_real("rdp_order", rdp_order)
    if not rdp_order > 1:
        raise ValueError(f"rdp_order must be a finite number > 1, got {rdp_order!r}")
    composed = events[0] if len(events) == 1 else dp.ComposedDpEvent(list(events))
    epsilon, accountant = epsilon_at(composed, delta)
    return PrivacySpent(owner, epsilon, delta, rdp_order, rdp_epsilon_at(composed, rdp_order), len(events), accountant)


__all__ = [
    "CalibrationError",
    "DPGuarantee",
    "PrivacySpent",
    "epsilon_at",
    "gaussian_epsilon_spent",
    "gaussian_event",
    "gaussian_multiplier_for",
    "gaussian_sigma_for_approx_dp",
    "gaussian_sigma_for_rdp",
    "laplace_event",
    "meets",
    "privacy_spent",
    "rdp_epsilon_at",
    "rdp_to_approx_dp",
    "zcdp_event",
    "zcdp_multiplier_for",
]
