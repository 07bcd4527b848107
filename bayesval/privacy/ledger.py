"""The privacy ledger: one record per release with its dp-accounting event, composed per owner (docs/architecture.md,
"The privacy boundary")."""

from __future__ import annotations

import math
import uuid
from dataclasses import dataclass, field

import attr

import bayesval.privacy.dp_library as dp
from bayesval.privacy.accounting import DPGuarantee, PrivacySpent, meets, privacy_spent
from bayesval.privacy.discrete import (
    discrete_gaussian_variance,
    grid_sensitivity,
    rounded_laplace_variance,
    sigma_squared_from,
)
from bayesval.privacy.rounded_gaussian import rounded_gaussian_variance
from bayesval.results.serialisation import register
from bayesval.validation import check_int, check_positive

# "discrete_gaussian", "gaussian_on_grid" and "laplace_on_grid": exact integer noise on a grid, floating-point safe;
# "gaussian" and "laplace": float noise, for in-process experiments (their low-order bits can reveal the exact input).
NOISES = ("discrete_gaussian", "gaussian_on_grid", "laplace_on_grid", "gaussian", "laplace")
ON_GRID = {  # noise: its name
    "discrete_gaussian": "discrete Gaussian",
    "gaussian_on_grid": "Gaussian rounded to a grid",
    "laplace_on_grid": "Laplace on a grid",
}
ADJACENCIES = ("replace-one", "add-or-remove-one")
_EVENT_TYPE_NAMES = (
    "GaussianDpEvent",
    "LaplaceDpEvent",
    "PoissonSampledDpEvent",
    "SelfComposedDpEvent",
    "ComposedDpEvent",
    "ZCDpEvent",
)  # the dp-accounting events a release record may hold


def entry_noise_std(noise: str, noise_scale: float, grid: float | None, integer_statistic: bool = False) -> float:
    """Standard deviation of the noise of each coordinate a mechanism releases.

    For the discrete Gaussian: grid * sqrt(Var N_Z(0, sigma_grid^2) + 1/12), its exact variance (below sigma^2)
    plus the rounding to the grid, at most half a step per entry, counted as uniform noise of variance
    grid^2 / 12 (it is of order 1e-7 of the noise variance at the default grid). For the Gaussian or the
    Laplace rounded to a grid: grid * sqrt(Var round(X) + 1/12), X of noise_scale / grid steps, the rounding
    likewise, unless the statistic was whole numbers (`integer_statistic`: nothing rounded). Float noise: the
    Gaussian's std, or sqrt(2) b for the Laplace."""
    if noise == "discrete_gaussian":
        return grid * math.sqrt(discrete_gaussian_variance(sigma_squared_from(noise_scale, grid)) + 1 / 12)
    if noise == "gaussian_on_grid":
        return grid * math.sqrt(rounded_gaussian_variance(noise_scale / grid) + (0 if integer_statistic else 1 / 12))
    if noise == "laplace_on_grid":
        return grid * math.sqrt(rounded_laplace_variance(round(noise_scale / grid)) + 1 / 12)
    return noise_scale if noise == "gaussian" else math.sqrt(2.0) * noise_scale


@dataclass(frozen=True)
class Release:
    """One output of the mechanism: who released what, with which noise, and its dp-accounting event.

    noise_scale is the Gaussian std, the Laplace scale b, or the discrete Gaussian's sigma (statistic units);
    `event` describes the whole release (subsampling, compositions over validation points, ...) and must meet
    `guarantee` with a noise multiplier equal to noise_scale / sensitivity (for the discrete Gaussian: a
    `ZCDpEvent` with rho = (sensitivity / grid + sqrt(dimension))^2 / (2 (noise_scale / grid)^2)): a record
    whose noise disagrees with its calibration is refused, whoever built it. `grid` is the grid step of noise on a
    grid (None for float noise); for "gaussian_on_grid" the event is the Gaussian's, its multiplier noise_scale
    over the rounded entries' l2 sensitivity, sensitivity + grid sqrt(dimension) (dimension: the entries of one
    composition; sensitivity alone where `integer_statistic`: whole numbers, such as counts, lie on the grid and
    are not rounded), and noise_scale a whole number of grid steps; for "laplace_on_grid"
    the event's multiplier is noise_scale over the rounded entries' l1 sensitivity, sensitivity + grid * (entries
    a composition).
    """

    owner: str
    what: str
    noise: str
    sensitivity: float
    noise_scale: float
    dimension: int
    guarantee: DPGuarantee
    event: dp.DpEvent
    adjacency: str = "replace-one"
    release_id: str = field(default_factory=lambda: uuid.uuid4().hex)
    grid: float | None = None
    integer_statistic: bool = False

    def __post_init__(self) -> None:
        for name in ("owner", "what", "release_id"):  # printed, and keys of tables: one printable line each
            value = getattr(self, name)
            if not isinstance(value, str) or not value or not value.isprintable():
                raise TypeError(f"Release.{name} must be a non-empty string of printable characters, got {value!r}")
        if self.noise not in NOISES:
            raise ValueError(f"Release.noise must be one of {NOISES}, got {self.noise!r}")
        if self.adjacency not in ADJACENCIES:
            raise ValueError(f"Release.adjacency must be one of {ADJACENCIES}, got {self.adjacency!r}")
        if not isinstance(self.guarantee, DPGuarantee):
            raise TypeError(f"Release.guarantee must be a DPGuarantee, got {self.guarantee!r}")
        check_positive("Release.sensitivity", self.sensitivity)
        check_positive("Release.noise_scale", self.noise_scale)
        check_int("Release.dimension", self.dimension, minimum=1)
        if not isinstance(self.integer_statistic, bool) or (
            self.integer_statistic and self.noise != "gaussian_on_grid"
        ):
            raise ValueError(
                f"{self.owner}: integer_statistic is True only for a Gaussian rounded to a grid, got "
                f"{self.integer_statistic!r} for {self.noise} noise"
            )
        if self.noise in ON_GRID:
            self._check_grid()
        elif self.grid is not None:
            raise ValueError(f"{self.owner}: a {self.noise} release has no grid, got grid={self.grid!r}")
        if self.noise == "discrete_gaussian":
            self._check_discrete_event()
        else:
            base = _base_mechanism(self.event)
            expected = dp.LaplaceDpEvent if self.noise in ("laplace", "laplace_on_grid") else dp.GaussianDpEvent
            if not isinstance(base, expected):
                raise ValueError(f"{self.owner}: a {self.noise} release cannot carry the event {self.event}")
            multiplier = self.noise_scale / self.calibrated_sensitivity
            if not math.isclose(base.noise_multiplier, multiplier, rel_tol=1e-9):
                raise ValueError(
                    f"{self.owner}: noise {self.noise_scale!r} / sensitivity {self.sensitivity!r} = {multiplier:.6g} "
                    f"disagrees with the noise multiplier {base.noise_multiplier:.6g} of its event"
                )
        if not meets(self.event, self.guarantee):
            raise ValueError(
                f"{self.owner}: noise of scale {self.noise_scale:.6g} at sensitivity {self.sensitivity:.6g} does not "
                f"give the recorded guarantee {self.guarantee.describe()} (dp-accounting, event {self.event})"
            )

    def _check_grid(self) -> None:
        grid, name = self.grid, ON_GRID[self.noise]
        if isinstance(grid, bool) or not isinstance(grid, (int, float)) or not math.isfinite(grid) or grid <= 0:
            raise ValueError(f"{self.owner}: a {name} release needs its grid step > 0, got grid={grid!r}")
        if math.frexp(grid)[0] != 0.5:
            raise ValueError(f"{self.owner}: a {name}'s grid is a power of two, got grid={grid!r}")
        if self.noise == "gaussian_on_grid" and not float(self.noise_scale / grid).is_integer():
            raise ValueError(
                f"{self.owner}: a {name}'s noise is a whole number of grid steps, got {self.noise_scale!r} on grid "
                f"{grid!r}"
            )
        if self.noise == "laplace_on_grid" and self.dimension % _compositions(self.event):
            raise ValueError(
                f"{self.owner}: {self.dimension} entries do not split into the {_compositions(self.event)} "
                f"releases of its event {self.event}"
            )

    def _check_discrete_event(self) -> None:
        grid = self.grid
        if not isinstance(self.event, dp.ZCDpEvent) or self.event.xi != 0:
            raise ValueError(f"{self.owner}: a discrete Gaussian release carries a ZCDpEvent(rho), got {self.event}")
        sigma_squared = sigma_squared_from(self.noise_scale, grid)
        rho = grid_sensitivity(self.sensitivity, grid, self.dimension) ** 2 / (2 * float(sigma_squared))
        if not math.isclose(self.event.rho, rho, rel_tol=1e-9):
            raise ValueError(
                f"{self.owner}: noise {self.noise_scale!r} on grid {grid!r} at sensitivity {self.sensitivity!r} over "
                f"{self.dimension} entries is rho = {rho:.6g}-zCDP, which disagrees with its event's rho "
                f"{self.event.rho:.6g}"
            )

    @property
    def calibrated_sensitivity(self) -> float:
        """The sensitivity, in the statistic's units, the noise is calibrated to: `sensitivity` for float noise;
        for the discrete Gaussian and the Gaussian rounded to a grid that of the statistic rounded to the grid,
        sensitivity + grid sqrt(dimension) (l2); for the Laplace on a grid, sensitivity + grid entries (l1)."""
        if self.integer_statistic:  # nothing rounded
            return self.sensitivity
        if self.noise in ("discrete_gaussian", "gaussian_on_grid"):
            return self.grid * grid_sensitivity(self.sensitivity, self.grid, self.dimension)
        if self.noise == "laplace_on_grid":  # l1: each of a composition's entries moves by at most a grid step
            return self.sensitivity + self.grid * (self.dimension // _compositions(self.event))
        return self.sensitivity

    @property
    def floating_point_safe(self) -> bool:
        """Whether the output is safe against a reader of its low-order bits (integer noise on a grid: the discrete
        Gaussian, or the rounded Laplace); float noise is for in-process experiments."""
        return self.noise in ON_GRID

    @property
    def mechanism_label(self) -> str:
        """How the release was perturbed, in words, for the ledger and the result."""
        if self.noise == "discrete_gaussian":
            return f"discrete Gaussian on grid {self.grid:g} (floating-point safe)"
        if self.noise in ("gaussian_on_grid", "laplace_on_grid"):
            return f"{self.noise.split('_')[0].capitalize()} rounded to grid {self.grid:g} (floating-point safe)"
        return f"floating-point {self.noise} (in-process experiment: not safe to publish)"

    @property
    def noise_std(self) -> float:
        """Standard deviation of the noise of each released coordinate (`entry_noise_std`)."""
        return entry_noise_std(self.noise, self.noise_scale, self.grid, self.integer_statistic)

    def to_record(self) -> dict:
        """A JSON-ready dict (the event as nested dicts of dp-accounting's fields)."""
        return {
            "owner": self.owner,
            "what": self.what,
            "noise": self.noise,
            "sensitivity": self.sensitivity,
            "noise_scale": self.noise_scale,
            "dimension": self.dimension,
            "guarantee": self.guarantee.to_record(),
            "event": event_to_record(self.event),
            "adjacency": self.adjacency,
            "release_id": self.release_id,
            "grid": self.grid,
            **({"integer_statistic": True} if self.integer_statistic else {}),
        }

    @classmethod
    def from_record(cls, record: dict) -> Release:
        """Rebuild (and re-check) a release from `to_record`'s dict."""
        if not isinstance(record, dict):
            raise TypeError(f"a release record must be a dict, got {type(record).__name__}")
        fields = {"owner", "what", "noise", "sensitivity", "noise_scale", "dimension", "guarantee", "event"}
        missing = fields - set(record)
        if missing:
            raise ValueError(f"release record lacks {sorted(missing)}")
        unknown = set(record) - fields - {"adjacency", "release_id", "grid", "integer_statistic"}
        if unknown:
            raise ValueError(f"release record has unknown fields {sorted(unknown)}")
        guarantee = DPGuarantee.from_record(record["guarantee"])
        return cls(**{**record, "guarantee": guarantee, "event": event_from_record(record["event"])})


def _compositions(event: dp.DpEvent) -> int:
    """How many releases a (self-composed) event is: its count, or 1."""
    return event.count if isinstance(event, dp.SelfComposedDpEvent) else 1


def _base_mechanism(event: dp.DpEvent) -> dp.DpEvent:
    """The Gaussian / Laplace event inside subsampling and self-composition wrappers."""
    while isinstance(event, (dp.PoissonSampledDpEvent, dp.SelfComposedDpEvent)):
        event = event.event
    return event


def event_to_record(event: dp.DpEvent) -> dict:
    """A dp-accounting event as nested plain dicts: {'type': 'GaussianDpEvent', 'noise_multiplier': ...}; nested
    events (composed, self-composed, subsampled) become nested records, read from the event's own attributes."""
    if type(event).__name__ not in _EVENT_TYPE_NAMES:
        raise TypeError(f"unsupported privacy event {event!r}")
    record = {"type": type(event).__name__}
    for attribute in attr.fields(type(event)):
        value = getattr(event, attribute.name)
        if isinstance(value, dp.DpEvent):
            value = event_to_record(value)
        elif isinstance(value, (list, tuple)):
            value = [event_to_record(e) if isinstance(e, dp.DpEvent) else e for e in value]
        record[attribute.name] = value
    return record


def event_from_record(record: dict) -> dp.DpEvent:
    """Inverse of `event_to_record`, for the supported event types only."""
    if not isinstance(record, dict) or record.get("type") not in _EVENT_TYPE_NAMES:
        raise ValueError(f"unsupported privacy event record {record!r}; known types: {sorted(_EVENT_TYPE_NAMES)}")
    fields = {k: v for k, v in record.items() if k != "type"}
    for name, value in fields.items():
        if isinstance(value, dict):
            fields[name] = event_from_record(value)
        elif isinstance(value, list):
            fields[name] = [event_from_record(e) for e in value]
    try:
        return getattr(dp, record["type"])(**fields)
    except (TypeError, ValueError) as error:
        raise ValueError(f"invalid privacy event record {record!r}: {error}") from None


@register("bayesval.privacy_ledger")
@dataclass
class PrivacyLedger:
    """Every release an owner made, in order: an accountant per owner. A release is recorded once, so a
    ledger carried across valuations shows each release once and composes fresh ones.

    A ledger is a record of `bayesval.results.serialisation` (kind "bayesval.privacy_ledger", version 1: meta
    {"releases": [each release's `Release.to_record()`]}, no arrays), so a saved `ValuationResult` holds it
    without the results layer importing this one."""

    releases: list[Release] = field(default_factory=list)
    version = 1  # of its record; the kind is set by `register`

    def __post_init__(self) -> None:
        if not isinstance(self.releases, (list, tuple)):
            raise TypeError(f"PrivacyLedger.releases must be a list of Release records, got {self.releases!r}")
        releases, self.releases = self.releases, []
        for release in releases:
            self.record(release)

    def record(self, release: Release) -> Release:
        if not isinstance(release, Release):
            raise TypeError(f"a ledger records Release objects, got {type(release).__name__}")
        if all(r.release_id != release.release_id for r in self.releases):
            self.releases.append(release)
        return release

    def merge(self, other: PrivacyLedger) -> PrivacyLedger:
        """Record every release of `other` (each once)."""
        if not isinstance(other, PrivacyLedger):
            raise TypeError(f"merge takes a PrivacyLedger, got {type(other).__name__}")
        for release in other.releases:
            self.record(release)
        return self

    @property
    def owners(self) -> list[str]:
        return list(dict.fromkeys(r.owner for r in self.releases))

    def releases_of(self, owner: str) -> list[Release]:
        return [r for r in self.releases if r.owner == owner]

    def spent(self, owner: str, *, delta: float | None = None, rdp_order: float | None = None) -> PrivacySpent:
        """dp-accounting's composition of `owner`'s releases: epsilon at `delta` (default: the largest delta
        the owner's releases were calibrated for, else 1e-5) and RDP at `rdp_order` (default: the order of
        its RDP releases, else 2)."""
        if not isinstance(owner, str):
            raise TypeError(f"owner must be a string (a party's name), got {owner!r} ({type(owner).__name__})")
        releases = self.releases_of(owner)
        if not releases:
            raise ValueError(f"no releases by {owner!r}; owners in this ledger: {self.owners}")
        guarantees = [r.guarantee for r in releases]
        if delta is None:
            delta = max((g.delta for g in guarantees if g.delta), default=1e-5)
        if rdp_order is None:
            rdp_order = next((g.rdp_order for g in guarantees if g.is_rdp), 2.0)
        return privacy_spent(owner, [r.event for r in releases], delta=delta, rdp_order=rdp_order)

    def spent_by_owner(self, **kwargs) -> dict[str, PrivacySpent]:
        return {owner: self.spent(owner, **kwargs) for owner in self.owners}

    def to_records(self) -> list[dict]:
        """Each release's JSON record, in order."""
        return [r.to_record() for r in self.releases]

    @classmethod
    def from_records(cls, records: list[dict]) -> PrivacyLedger:
        """The ledger of `to_records`' list (each release re-checked)."""
        if not isinstance(records, list):
            raise ValueError(f"a ledger's records must be a list of release records, got {type(records).__name__}")
        return cls([Release.from_record(r) for r in records])

    def to_record(self) -> tuple[dict, dict]:
        """The ledger as a record (meta {"releases": `to_records()`}, no arrays)."""
        return {"releases": self.to_records()}, {}

    @classmethod
    def from_record(cls, meta: dict, arrays: dict, *, version: int = 1) -> PrivacyLedger:
        """The ledger `to_record` wrote."""
        if set(meta) != {"releases"} or arrays:
            raise ValueError(
                f"a privacy ledger record holds only its releases, got {sorted(meta)} and {sorted(arrays)}"
            )
        return cls.from_records(meta["releases"])

    def __len__(self) -> int:
        return len(self.releases)
