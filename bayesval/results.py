"""ValuationResult: values with standard errors, coalition values, diagnostics and the privacy ledger."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from bayesval.privacy.accounting import PrivacySpent
from bayesval.privacy.ledger import PrivacyLedger


@dataclass
class ValuationResult:
    """What a valuation produced, carried forward instead of recomputed (DESIGN.md Sec. 2).

    values, stderr       one value per party (Shapley) or per data point, with its standard error
    names                party names / point indices, aligned with values
    coalition_masks      (num_coalitions, n) boolean masks, when coalitions were valued
    coalition_values     (num_coalitions,) mean value of each coalition, with coalition_stderr
    privacy              every DP release behind the values (a ledger: `privacy_spent()` composes it)
    diagnostics          sampler convergence (R-hat, ESS per coalition), counts, settings
    """

    method: str
    values: np.ndarray
    stderr: np.ndarray
    names: list[str]
    coalition_masks: np.ndarray | None = None
    coalition_values: np.ndarray | None = None
    coalition_stderr: np.ndarray | None = None
    privacy: PrivacyLedger = field(default_factory=PrivacyLedger)
    diagnostics: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.values = np.asarray(self.values, dtype=np.float64)
        self.stderr = np.asarray(self.stderr, dtype=np.float64)
        if self.values.shape != self.stderr.shape or len(self.names) != self.values.shape[0]:
            raise ValueError("values, stderr and names must have the same length")

    def coalition_value(self, members: list[str]) -> float:
        """Value of the coalition made of the named parties."""
        if self.coalition_masks is None:
            raise ValueError(f"the {self.method} valuation did not value coalitions")
        names = isinstance(members, (list, tuple, set, frozenset)) and all(isinstance(m, str) for m in members)
        if not names:
            raise TypeError(f"members must be a list of party names (e.g. {self.names[:2]}), got {members!r}")
        unknown = set(members) - set(self.names)
        if unknown:
            raise ValueError(f"members has unknown parties {sorted(unknown)}; known: {self.names}")
        mask = np.isin(self.names, list(members))
        if not mask.any():
            return 0.0  # the empty coalition
        row = np.flatnonzero((self.coalition_masks == mask).all(axis=1))
        if not row.size:
            raise ValueError(f"the coalition {sorted(members)} was not valued by {self.method}")
        return float(self.coalition_values[row[0]])

    def privacy_spent(self, *, delta: float | None = None) -> dict[str, PrivacySpent]:
        """Each owner's spend: dp-accounting's composition of its releases in `privacy`, as epsilon at `delta`
        (default: the owner's calibration delta, else 1e-5) and as RDP."""
        return self.privacy.spent_by_owner(delta=delta)

    def to_dataframe(self):
        """One row per party / point: value and standard error (pandas)."""
        import pandas as pd

        return pd.DataFrame({"value": self.values, "stderr": self.stderr}, index=self.names)

    def coalitions_dataframe(self):
        """One row per valued coalition: members, value and standard error (pandas)."""
        import pandas as pd

        if self.coalition_masks is None:
            raise ValueError(f"the {self.method} valuation did not value coalitions")
        members = ["{" + ", ".join(n for n, m in zip(self.names, row) if m) + "}" for row in self.coalition_masks]
        return pd.DataFrame({"value": self.coalition_values, "stderr": self.coalition_stderr}, index=members)

    def save(self, path: str | Path) -> Path:
        """Write the result to an .npz file (arrays) with its metadata as JSON inside."""
        path = Path(path)
        arrays = {
            name: getattr(self, name)
            for name in ("values", "stderr", "coalition_masks", "coalition_values", "coalition_stderr")
            if getattr(self, name) is not None
        }
        meta = {
            "method": self.method,
            "names": list(self.names),
            "privacy": self.privacy.to_records(),
            "diagnostics": _jsonable(self.diagnostics),
        }
        with path.open("wb") as handle:
            np.savez(handle, _meta=np.array(json.dumps(meta)), **arrays)
        return path

    @classmethod
    def load(cls, path: str | Path) -> ValuationResult:
        with np.load(Path(path), allow_pickle=False) as data:
            meta = json.loads(str(data["_meta"]))
            arrays = {k: data[k] for k in data.files if k != "_meta"}
        return cls(
            method=meta["method"],
            names=meta["names"],
            privacy=PrivacyLedger.from_records(meta["privacy"]),
            diagnostics=meta["diagnostics"],
            **arrays,
        )

    def __repr__(self) -> str:
        rows = "\n".join(
            f"  {name:>12}: {v: .4f} ± {s:.4f}" for name, v, s in zip(self.names, self.values, self.stderr)
        )
        return f"ValuationResult({self.method})\n{rows}"


def _jsonable(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    return value
