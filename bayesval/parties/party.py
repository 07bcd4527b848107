"""Party side of the privacy boundary (Sim et al. 2023, Sec. 2): clip to declared bounds, compute the exact
sufficient statistic, perturb it with the calibrated Gaussian mechanism, release (o_i, c_i, sigma_i) once.

The noise is the floating-point-safe discrete Gaussian on a grid by default (Canonne, Kamath & Steinke 2020;
`bayesval.privacy.discrete`); `mechanism="gaussian"` keeps the fast float noise for in-process experiments."""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field

import numpy as np

from bayesval.parties.boundary import PerturbedStatistic, describe_statistic
from bayesval.parties.signal import SignalReport, signal_report
from bayesval.privacy import DPGuarantee, Mechanism, NoiseSource, PrivacyLedger
from bayesval.privacy.accounting import zcdp_multiplier_for
from bayesval.privacy.sensitivity import check_sensitivity_claim
from bayesval.statistics import Bounds, LinearRegressionStatistic
from bayesval.validation import check_bool, check_finite_array, row_norms, user_stacklevel

# "discrete_gaussian": floating-point safe, the default; "gaussian": float noise for in-process experiments.
MECHANISMS = ("discrete_gaussian", "gaussian")


def clip_records(X: np.ndarray, y: np.ndarray, bounds: Bounds) -> tuple[np.ndarray, np.ndarray, int]:
    """Scale rows with ||x|| > x_norm onto the ball and clip |y| to y_abs (when declared); also return how
    many rows changed (party-side only: the count is not private, so it is never released)."""
    norms = row_norms(X)
    over_x = norms > bounds.x_norm
    scale = np.where(over_x, bounds.x_norm / np.where(over_x, norms, 1.0), 1.0)
    X = X * scale[:, None]
    if bounds.y_abs is None:
        return X, y, int(np.sum(over_x))
    over_y = np.abs(y) > bounds.y_abs
    return X, np.clip(y, -bounds.y_abs, bounds.y_abs), int(np.sum(over_x | over_y))


@dataclass(frozen=True, eq=False)
class Party:
    """A data owner: raw (X, y) that never leave it, its privacy level and the declared bounds.

    epsilon (with rdp_order, default 2 as in Sim et al.) asks for (rdp_order, epsilon)-Renyi DP per
    release; with delta set, (epsilon, delta)-DP. A party is frozen: its guarantee cannot go stale.
    At each release it warns when the release carries almost no information, naming the likely cause, and
    `signal_report` gives the signal-to-noise of each block of the statistic (for the party's eyes only).
    It releases each statistic once (`release`); asking again returns the same release, and a new one
    must be asked for with `fresh=True`, which spends privacy again and composes in `ledger`.
    Privacy noise comes from OS entropy, or from `noise_seed` for reproducible experiments only (the
    seed removes the noise; a seed that would perturb a second, different release is refused unless
    `allow_seed_reuse=True`).

    mechanism: "discrete_gaussian" (default): the statistic is rounded to a power-of-two `grid` (default: chosen
    from the sensitivity, see `Mechanism.discrete_gaussian`) and exact discrete Gaussian noise is added, safe to
    publish; "gaussian": float noise, fast, for in-process experiments only (its release cannot be saved to a
    file without the experiment flag).
    """

    X: np.ndarray
    y: np.ndarray
    epsilon: float
    bounds: Bounds
    name: str | None = None
    delta: float | None = None
    rdp_order: float = 2.0
    noise_seed: int | None = None
    allow_seed_reuse: bool = False
    mechanism: str = "discrete_gaussian"
    grid: float | None = None
    guarantee: DPGuarantee = field(init=False, repr=False)
    ledger: PrivacyLedger = field(init=False, repr=False)

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name.strip():
            raise TypeError(
                f"Party needs a name (a non-empty string that identifies the owner in the ledger and the results), "
                f"got name={self.name!r}"
            )
        label = self.name
        X = check_finite_array(f"{label}: X", self.X, ndim=2).copy()
        y = check_finite_array(f"{label}: y", self.y, ndim=1).copy()
        if len(X) == 0:
            raise ValueError(f"{label} has no data: X has 0 rows")
        if X.shape[1] == 0:
            raise ValueError(f"{label}: X has 0 columns")
        if len(X) != len(y):
            raise ValueError(f"{label}: X has {len(X)} rows but y has {len(y)} entries")
        if not isinstance(self.bounds, Bounds):
            raise TypeError(f"{label}: bounds must be bayesval.Bounds(x_norm=..., y_abs=...), got {self.bounds!r}")
        try:
            guarantee = DPGuarantee(self.epsilon, self.delta, self.rdp_order)
            noise = NoiseSource(self.noise_seed, allow_reuse=check_bool("allow_seed_reuse", self.allow_seed_reuse))
        except (TypeError, ValueError) as error:
            raise type(error)(f"{label}: {error}") from None
        if guarantee.delta == 0:
            raise ValueError(f"{label}: delta=0 (pure DP) needs the Laplace mechanism; parties release by Gaussian")
        if self.mechanism not in MECHANISMS:
            raise ValueError(f"{label}: mechanism must be one of {MECHANISMS}, got {self.mechanism!r}")
        if self.grid is not None and self.mechanism != "discrete_gaussian":
            raise ValueError(f"{label}: grid applies to mechanism='discrete_gaussian' only")
        for array in (X, y):
            array.flags.writeable = False
        for name, value in (("X", X), ("y", y), ("guarantee", guarantee), ("ledger", PrivacyLedger())):
            object.__setattr__(self, name, value)
        object.__setattr__(self, "_noise", noise)
        object.__setattr__(self, "_current", {})
        object.__setattr__(self, "_mechanisms", {})
        object.__setattr__(self, "_signal", {})

    @property
    def num_features(self) -> int:
        return self.X.shape[1]

    @property
    def clipped_rows(self) -> int:
        """How many rows lie outside the declared bounds (seen by the party only, never released)."""
        return clip_records(self.X, self.y, self.bounds)[2]

    def current_release(self, statistic=None) -> PerturbedStatistic | None:
        """The release of `statistic` this party made last, or None."""
        statistic = statistic or LinearRegressionStatistic(self.num_features)
        return self._current.get(_statistic_key(statistic, self.name, self.num_features))

    def release(self, statistic=None, *, fresh: bool = False) -> PerturbedStatistic:
        """Release o_i = s_i + N(0, sigma_i^2 I) of the clipped data, once per statistic.

        statistic: anything with size, compute(X, y) and sensitivity(bounds); linear regression's by default.
        Its claimed sensitivity is checked by a search over neighbouring datasets within the bounds before
        the first release. fresh=True makes a new release even if one exists (privacy is spent again).
        """
        fresh = check_bool("fresh", fresh)
        statistic = statistic or LinearRegressionStatistic(self.num_features)
        key = _statistic_key(statistic, self.name, self.num_features)
        if key in self._current and not fresh:
            return self._current[key]
        if key not in self._mechanisms:
            # calibrate first: a guarantee no noise can meet fails before the (slower) sensitivity search
            try:
                calibrated = Mechanism.gaussian(self.guarantee, 1.0) if self.mechanism == "gaussian" else None
                if calibrated is None:
                    zcdp_multiplier_for(self.guarantee)
            except ValueError as error:  # a guarantee no noise can be calibrated for
                raise type(error)(f"{self.name}: {error}") from None
            sensitivity = self._checked_sensitivity(statistic)
            try:
                if calibrated is not None:
                    self._mechanisms[key] = calibrated.at_sensitivity(sensitivity)
                else:
                    size = int(statistic.size)
                    self._mechanisms[key] = Mechanism.discrete_gaussian(
                        self.guarantee, sensitivity, size, grid=self.grid
                    )
            except ValueError as error:  # e.g. a grid too coarse for the statistic's sensitivity
                raise type(error)(f"{self.name}: {error}") from None
        X, y, clipped = clip_records(self.X, self.y, self.bounds)
        try:
            exact = np.asarray(statistic.compute(X, y), dtype=np.float64)
        except ValueError as error:
            raise ValueError(f"{self.name}: {error}") from None
        if clipped:
            warnings.warn(
                f"{self.name}: {clipped} of {len(X)} rows lie outside the declared bounds and were clipped before "
                "release (this count stays with the party)",
                stacklevel=user_stacklevel(),
            )
        description = describe_statistic(statistic)
        perturbed, record = self._mechanisms[key].perturb(
            exact, noise=self._noise, owner=self.name, what=f"{description['kind']} statistic", ledger=self.ledger
        )
        released = PerturbedStatistic(
            self.name, perturbed, len(X), record, description, self.bounds, seeded=self._noise.is_seeded
        )
        self._current[key] = released
        self._signal[key] = signal_report(
            self.name, statistic, exact, released.noise_std, self.X, self.y, self.bounds, self.guarantee
        )
        if self._signal[key] is not None and self._signal[key].warning:
            warnings.warn(self._signal[key].warning, stacklevel=user_stacklevel())
        return released

    def signal_report(self, statistic=None) -> SignalReport | None:
        """How much of the last release of `statistic` survives its noise, per block (`bayesval.parties.signal`):
        computed from the party's exact statistic, for the party's eyes only (never released); None before a release
        or for a user statistic."""
        statistic = statistic or LinearRegressionStatistic(self.num_features)
        return self._signal.get(_statistic_key(statistic, self.name, self.num_features))

    def _checked_sensitivity(self, statistic) -> float:
        try:
            claimed = statistic.sensitivity(self.bounds)
            return check_sensitivity_claim(statistic, self.bounds, self.num_features, claimed, owner=self.name)
        except (TypeError, ValueError) as error:
            message = str(error) if str(error).startswith(self.name) else f"{self.name}: {error}"
            raise type(error)(message) from None

    def exact_statistic(self, statistic=None) -> np.ndarray:
        """s_i of the clipped data, for experiments that compare against the non-private setting."""
        statistic = statistic or LinearRegressionStatistic(self.num_features)
        return statistic.compute(*clip_records(self.X, self.y, self.bounds)[:2])


def _statistic_key(statistic, owner: str, num_features: int) -> tuple[str, int]:
    """Which release a statistic asks for: its class and size. A statistic that states its number of features
    must state the party's."""
    if isinstance(statistic, type):
        raise TypeError(
            f"{owner}: statistic must be an instance, e.g. {statistic.__name__}({num_features}), "
            f"got the class {statistic.__name__}"
        )
    for attribute in ("size", "compute", "sensitivity"):
        if not hasattr(statistic, attribute):
            raise TypeError(
                f"{owner}: a statistic needs size, compute(X, y) and sensitivity(bounds); {statistic!r} has no "
                f"{attribute}"
            )
    stated = getattr(statistic, "num_features", num_features)
    if stated != num_features:
        raise ValueError(f"{owner}: the statistic {statistic!r} is for {stated} features, but X has {num_features}")
    return f"{type(statistic).__module__}.{type(statistic).__qualname__}", int(statistic.size)
