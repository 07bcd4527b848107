"""The privacy ledger: one record per release, carried into every result (DESIGN.md Sec. 7)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from bayesval.privacy.accounting import rdp_to_approx_dp


@dataclass(frozen=True)
class Release:
    """One output of a DP mechanism: who released what, under which guarantee and noise scale."""

    owner: str
    what: str
    mechanism: str
    sensitivity: float
    noise_std: float
    dimension: int
    epsilon: float
    delta: float | None = None
    rdp_order: float | None = None
    compositions: int = 1
    sampling_probability: float = 1.0
    clipped_rows: int = 0

    def approx_dp_epsilon(self, delta: float) -> float:
        """epsilon of (epsilon, delta)-DP for this release (RDP releases are converted)."""
        if self.rdp_order is None:
            if self.delta is not None and self.delta > delta:
                raise ValueError(f"release was calibrated at delta={self.delta} > {delta}")
            return self.epsilon
        return rdp_to_approx_dp(self.rdp_order, self.epsilon, delta)


@dataclass
class PrivacyLedger:
    """Every release made for one valuation, in order."""

    releases: list[Release] = field(default_factory=list)

    def record(self, release: Release) -> Release:
        self.releases.append(release)
        return release

    def spent(self, owner: str) -> list[Release]:
        return [r for r in self.releases if r.owner == owner]

    def to_records(self) -> list[dict]:
        return [asdict(r) for r in self.releases]

    @classmethod
    def from_records(cls, records: list[dict]) -> PrivacyLedger:
        return cls([Release(**r) for r in records])

    def __len__(self) -> int:
        return len(self.releases)
