"""What crosses the privacy boundary (Sim et al. 2023, Sec. 2): a released statistic, checked on arrival,
and its versioned release file, so that a party can release on its own machine and the mediator reads
only the file.

A release holds the perturbed statistic o_i = s_i + z_i, the record count c_i, the declared bounds,
which statistic it is, and the mechanism's `Release` record (noise scale, sensitivity, guarantee,
dp-accounting event). The count is public under the replace-one adjacency the sensitivity is derived
for (neighbouring datasets have the same size), as in Sim et al.; nothing else derived from raw data
is in it (not the number of clipped rows).
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from bayesval.privacy.ledger import Release
from bayesval.statistics import Bounds, LinearRegressionStatistic, LogisticRegressionStatistic
from bayesval.validation import check_finite_array, check_int

FORMAT = "bayesval.release"
VERSION = 1
BUILT_IN_STATISTICS = {
    "linear_regression": LinearRegressionStatistic,
    "logistic_regression": LogisticRegressionStatistic,
}


def describe_statistic(statistic) -> dict:
    """Which statistic a release holds: {'kind': 'linear_regression', 'num_features': w} for the built-in ones,
    {'kind': 'module.Class', 'size': P} for a user statistic."""
    for kind, cls in BUILT_IN_STATISTICS.items():
        if type(statistic) is cls:
            return {"kind": kind, "num_features": statistic.num_features}
    return {"kind": f"{type(statistic).__module__}.{type(statistic).__qualname__}", "size": int(statistic.size)}


def built_in_statistic(description: dict):
    """The built-in statistic a description names, or None for a user statistic."""
    cls = BUILT_IN_STATISTICS.get(description.get("kind"))
    if cls is None:
        return None
    return cls(check_int("statistic num_features", description.get("num_features"), minimum=1))


@dataclass(frozen=True, eq=False)
class PerturbedStatistic:
    """A released statistic: o_i = s_i + z_i (`perturbed`), the count c_i and the mechanism's release record.

    statistic: `describe_statistic` of what was released (None: unknown, e.g. built by hand);
    bounds: the declared bounds its sensitivity derives from (None: unknown). When both are known for a
    built-in statistic, the recorded sensitivity must be at least the one the bounds imply.
    """

    owner: str
    perturbed: np.ndarray
    count: int
    release: Release
    statistic: dict | None = None
    bounds: Bounds | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.release, Release):
            raise TypeError(f"{self.owner!r}: release must be a bayesval Release record, got {type(self.release)}")
        if self.owner != self.release.owner:
            raise ValueError(f"owner {self.owner!r} differs from its release record's owner {self.release.owner!r}")
        if self.release.noise not in ("gaussian", "discrete_gaussian"):
            raise ValueError(f"{self.owner}: noise-aware models need Gaussian noise, got {self.release.noise}")
        perturbed = check_finite_array(f"{self.owner}: perturbed statistic", self.perturbed, ndim=1).copy()
        perturbed.flags.writeable = False
        object.__setattr__(self, "perturbed", perturbed)
        object.__setattr__(self, "count", check_int(f"{self.owner}: count", self.count, minimum=1))
        if perturbed.size != self.release.dimension:
            raise ValueError(
                f"{self.owner}: the perturbed statistic has {perturbed.size} entries but its release record "
                f"says {self.release.dimension}"
            )
        if self.bounds is not None and not isinstance(self.bounds, Bounds):
            raise TypeError(f"{self.owner}: bounds must be bayesval.Bounds or None, got {self.bounds!r}")
        if self.statistic is not None:
            self._check_statistic()

    def _check_statistic(self) -> None:
        if not isinstance(self.statistic, dict) or not isinstance(self.statistic.get("kind"), str):
            raise ValueError(f"{self.owner}: statistic must be a description with a 'kind', got {self.statistic!r}")
        layout = built_in_statistic(self.statistic)
        size = layout.size if layout is not None else self.statistic.get("size")
        if size != self.perturbed.size:
            raise ValueError(
                f"{self.owner}: a {self.statistic['kind']} statistic of {self.statistic} has {size} entries, "
                f"the release has {self.perturbed.size}"
            )
        if layout is not None and self.bounds is not None:
            derived = layout.sensitivity(self.bounds)
            if self.release.sensitivity < derived * (1 - 1e-9):
                raise ValueError(
                    f"{self.owner}: the release claims sensitivity {self.release.sensitivity:.6g}, but "
                    f"{self.bounds} imply {derived:.6g} for this statistic: its noise is too small for its guarantee"
                )

    @property
    def noise_std(self) -> float:
        """sigma_z,i, the std of the DP noise of each entry."""
        return self.release.noise_std

    @property
    def num_features(self) -> int | None:
        return None if self.statistic is None else self.statistic.get("num_features")

    def to_record(self) -> dict:
        """The release file's content (JSON-ready), without its checksum."""
        return {
            "format": FORMAT,
            "version": VERSION,
            "owner": self.owner,
            "statistic": self.statistic,
            "bounds": None if self.bounds is None else {"x_norm": self.bounds.x_norm, "y_abs": self.bounds.y_abs},
            "count": self.count,
            "perturbed": self.perturbed.tolist(),
            "release": self.release.to_record(),
        }

    def save(self, path: str | Path) -> Path:
        """Write the versioned release file (JSON with a SHA-256 checksum of its content)."""
        path = Path(path)
        record = self.to_record()
        record["checksum"] = _checksum(record)
        path.write_text(json.dumps(record, indent=1) + "\n")
        return path

    @classmethod
    def load(cls, path: str | Path) -> PerturbedStatistic:
        """Read and check a release file written by `save` (or `bayesval release`)."""
        if not isinstance(path, (str, os.PathLike)):
            raise TypeError(f"PerturbedStatistic.load: path must be a file path (a str or a Path), got {path!r}")
        path = Path(path)
        try:
            record = json.loads(path.read_text())
        except FileNotFoundError:
            raise FileNotFoundError(f"release file {path} does not exist") from None
        except IsADirectoryError:
            raise ValueError(f"release file {path} is a directory, not a file written by `bayesval release`") from None
        except (json.JSONDecodeError, UnicodeDecodeError) as error:
            raise ValueError(f"release file {path} is not valid JSON (truncated or corrupted?): {error}") from None
        try:
            return cls.from_record(record)
        except (TypeError, ValueError, KeyError) as error:
            raise ValueError(f"release file {path}: {error}") from None

    @classmethod
    def from_record(cls, record: dict) -> PerturbedStatistic:
        if not isinstance(record, dict) or record.get("format") != FORMAT:
            raise ValueError(f"not a {FORMAT} file")
        if record.get("version") != VERSION:
            raise ValueError(f"release format version {record.get('version')!r} is not supported (expected {VERSION})")
        expected = set(_FIELDS) | {"checksum"}
        if set(record) != expected:
            raise ValueError(f"fields {sorted(set(record) ^ expected)} are missing or unknown")
        content = {k: v for k, v in record.items() if k != "checksum"}
        try:
            checksum = _checksum(content)
        except ValueError:  # json.loads reads NaN and Infinity, which no release holds
            raise ValueError("it holds a non-finite number (NaN or Infinity), which no release contains") from None
        if record["checksum"] != checksum:
            raise ValueError("checksum mismatch: the file was modified after it was released")
        bounds = record["bounds"]
        return cls(
            owner=record["owner"],
            perturbed=record["perturbed"],
            count=record["count"],
            release=Release.from_record(record["release"]),
            statistic=record["statistic"],
            bounds=None if bounds is None else Bounds(**bounds),
        )


_FIELDS = ("format", "version", "owner", "statistic", "bounds", "count", "perturbed", "release")


def _checksum(content: dict) -> str:
    canonical = json.dumps(content, sort_keys=True, separators=(",", ":"), allow_nan=False)
    return hashlib.sha256(canonical.encode()).hexdigest()


__all__ = ["PerturbedStatistic", "built_in_statistic", "describe_statistic"]
