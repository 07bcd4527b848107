"""What crosses the privacy boundary (Sim et al. 2023, Sec. 2): a released statistic, checked on arrival,
and its versioned release file, so that a party can release on its own machine and the mediator reads
only the file.

A release holds the perturbed statistic o_i = s_i + z_i, the record count c_i, the declared bounds,
which statistic it is, and the mechanism's `Release` record (noise scale, sensitivity, guarantee,
dp-accounting event, grid). The count is public under the replace-one adjacency the sensitivity is derived
for (neighbouring datasets have the same size), as in Sim et al.; nothing else derived from raw data
is in it (not the number of clipped rows).

The release file, format `bayesval.release`, version 2: the stability contract
------------------------------------------------------------------------------
A release file is written once by a party and read later by a mediator, on another machine and perhaps another
version of bayesval. What follows is what any reader may rely on, for every file with `"version": 2`.

The file is one JSON object. Its fields:

- `format` (str): always "bayesval.release".
- `version` (int): 2. A change that breaks anything below gets a new version number; version 2 then keeps meaning
  exactly this.
- `required` (list of str): the fields a reader must understand to read the release correctly. A reader refuses
  a file whose `required` names a field it does not know. Every field listed here is required in version 2.
- `owner` (str): the party's name, as in the ledger.
- `statistic` (object or null): which statistic `perturbed` holds: {"kind": "linear_regression" or
  "logistic_regression", "num_features": w} for the built-in ones (entry order: docs/sensitivity.md, "Linear
  regression" and "Logistic regression"), {"kind": "module.Class", "size": P} for a user statistic, null when
  unknown.
- `bounds` (object or null): the declared bounds {"x_norm": float, "y_abs": float or null} every record was clipped
  to before the statistic was computed; the sensitivity derives from them.
- `count` (int >= 1): the number of records c_i.
- `perturbed` (list of float): o_i = s_i + z_i, in the statistic's units, one entry per statistic entry. For
  discrete Gaussian noise every entry is an exact multiple of the release's grid.
- `release` (object): the mechanism's record: owner, what, noise ("discrete_gaussian", "gaussian"; the ledger also
  knows "laplace_on_grid" and "laplace", which no party release uses),
  sensitivity (l2, replace-one, statistic units), noise_scale (sigma; for the discrete Gaussian in statistic
  units, sigma_grid * grid), dimension, guarantee {epsilon, delta, rdp_order}, event (the dp-accounting
  `DpEvent` of the release as nested {"type": class name, field: value}), adjacency, release_id, grid (the
  discrete Gaussian's power-of-two grid step; null for float noise). The noise std a noise-aware model uses is
  computed from these fields (`Release.noise_std`), never stored.
- `noise_source` (str): "os-entropy" (the default: the operating system's cryptographic source) or "seeded" (a
  `noise_seed`: anyone with the seed can remove the noise).
- `experiment` (bool): true when the party marked the release as an experiment, which a seeded release or one
  with floating-point noise must be to be written at all. Readers report it (`bayesval valuate` prints it).
- `checksum` (str): the SHA-256 hex digest of the canonical JSON (sorted keys, no spaces, no NaN) of every other
  field. A file whose checksum does not match is refused. The checksum is unkeyed: it catches accidental damage
  (a truncated copy, a changed byte), not a deliberate edit, since whoever edits the file can recompute it.

Two optional fields (older version 2 readers ignore them, and the checksum covers them):

- `columns` (object): the table columns the statistic was computed from, {"target": name, "features": [names, in
  the statistic's order]}, written by `bayesval release`. Releases valued together that name their columns must
  name the same ones in the same order (`check_same_columns`): two parties' statistics of columns in another order
  would be added entry by entry as if they were one feature.

- `signature` (object): the party's Ed25519 signature, {"algorithm": "ed25519", "public_key": base64 of the
  signer's 32-byte public key, "value": base64 of the 64-byte signature} of `bayesval.parties.signing.SIGNED_PREFIX`
  followed by the canonical JSON of every field but `checksum` and `signature` (owner, release_id, count, the
  statistic, version, `noise_source`, `experiment` and any added field alike). A signature that does not match the
  content is refused; checked against the mediator's keyring of the parties' public keys (`load(path,
  verify_with=...)`, `bayesval valuate --verify`), it shows the file came unchanged from the party it names.

What may be added: new optional fields (a reader that does not know them ignores them, and they are covered by the
checksum); new values of `noise`, `noise_source` and event types (a reader refuses values it does not know); new
statistic kinds. A new field that a reader must understand is listed in `required`, so older readers refuse the
file instead of misreading it.

What never changes in version 2: the names, types and meanings of the fields above, the units of `perturbed` and
`sensitivity`, the entry order of the built-in statistics, and the checksum rule.

On load a release is checked, besides its checksum and fields: its recorded sensitivity against the bounds
(never below what the bounds imply for a built-in statistic), its noise against its guarantee (dp-accounting), and
its plausibility: each entry of a built-in statistic must lie within what `count` records inside the bounds can
produce, widened by `PLAUSIBLE_NOISE_STDS` noise standard deviations.

Version 1 files (written before version 2) still load: they hold float Gaussian noise, which is not
floating-point safe, and a loaded version 1 release says so in `caveats`. A version 1 file has exactly the fields
format, version, owner, statistic, bounds, count, perturbed, release and checksum, and its release record says
noise "gaussian" without a grid: a file that says version 1 but carries a version 2 field (`required`,
`noise_source`, `experiment`, `signature`) or a discrete Gaussian release is refused, since relabelling a version 2
release as version 1 would drop its seeded and experiment marks. Version 1 files cannot be signed; a mediator that
verifies signatures refuses them.

Two releases valued together must be different releases: two parties with the same `release_id`, or with the
same perturbed statistic bit for bit, are refused (`check_distinct_releases`), naming both files: one is a copy.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

import numpy as np

from bayesval.outputs import check_output_path, write_whole
from bayesval.parties.signing import Keyring, ReleaseSignature, sign
from bayesval.privacy.ledger import Release
from bayesval.statistics import Bounds, LinearRegressionStatistic, LogisticRegressionStatistic
from bayesval.validation import check_bool, check_finite_array, check_int

if TYPE_CHECKING:
    from collections.abc import Sequence

    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

FORMAT = "bayesval.release"
VERSION = 2
READABLE_VERSIONS = (1, 2)
NOISE_SOURCES = ("os-entropy", "seeded")
# A release entry further than this many noise standard deviations outside the range `count` records within the
# bounds can reach is refused (a genuine release is that far out with probability below 1e-22 per entry).
PLAUSIBLE_NOISE_STDS = 10.0
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


class Columns(NamedTuple):
    """The table columns a statistic was computed from: the target's name and the features' names, in the
    statistic's order (a release file's optional `columns` field)."""

    target: str
    features: tuple[str, ...]

    @classmethod
    def from_record(cls, record) -> Columns:
        """The `columns` field {"target": name, "features": [names]} of a release file, checked."""
        if not isinstance(record, dict) or set(record) != {"target", "features"}:
            raise ValueError(f"columns must be {{'target': name, 'features': [names]}}, got {record!r}")
        target, features = record["target"], record["features"]
        if not isinstance(features, list):
            raise ValueError(f"columns' features must be a list of names, got {features!r}")
        return cls(target, tuple(features))

    def check(self, owner: str, num_features: int | None) -> None:
        """Non-empty names, distinct, `num_features` features where the statistic says how many."""
        names = (self.target, *self.features)
        if not all(isinstance(name, str) and name for name in names) or len(set(names)) < len(names):
            raise ValueError(f"{owner}: columns must be distinct non-empty names, got {self}")
        if num_features is not None and len(self.features) != num_features:
            raise ValueError(
                f"{owner}: columns name {len(self.features)} features, but its statistic is of {num_features}"
            )

    def to_record(self) -> dict:
        return {"target": self.target, "features": list(self.features)}


class ReleaseFile(NamedTuple):
    """Where a release read from a file came from: the file (None when its content was read by `from_record`
    directly), its signature (None: unsigned) and, when it was checked against a keyring, the fingerprint of its
    party's public key there (None: not verified)."""

    path: str | None
    signature: ReleaseSignature | None = None
    verified_key: str | None = None

    @property
    def status(self) -> str:
        """'verified', 'signed, not verified' or 'unsigned'."""
        if self.verified_key is not None:
            return "verified"
        return "unsigned" if self.signature is None else "signed, not verified"

    @property
    def integrity(self) -> str:
        """What the file's integrity rests on, in words (docs/privacy.md, "Signed releases")."""
        if self.verified_key is not None:
            return f"signed by its party's key {self.verified_key}, verified against the keyring"
        if self.signature is not None:
            return (
                f"signed with key {self.signature.fingerprint}, not checked against its party's public key "
                "(verify_with=, bayesval valuate --verify)"
            )
        return (
            "unsigned: its checksum catches accidental damage, not a deliberate edit (sign it with "
            "save(path, signing_key=...), bayesval release --sign)"
        )


@dataclass(frozen=True, eq=False)
class PerturbedStatistic:
    """A released statistic: o_i = s_i + z_i (`perturbed`), the count c_i and the mechanism's release record.

    statistic: `describe_statistic` of what was released (None: unknown, e.g. built by hand);
    bounds: the declared bounds its sensitivity derives from (None: unknown). When both are known for a
    built-in statistic, the recorded sensitivity must be at least the one the bounds imply, and each entry
    must be plausible: within what `count` records in the bounds can produce, plus PLAUSIBLE_NOISE_STDS noise stds.
    seeded: the noise came from a `noise_seed` (an experiment: anyone with the seed can remove it).
    experiment: the release is marked as an experiment, which lets a seeded or floating-point release be saved.
    file_version: the release file version it was read from (the current VERSION when made in this process).
    columns: the table columns the statistic was computed from (`Columns`; None: not recorded, as for a release
    of arrays).
    source_file: for a release read from a file, the file, its signature and whether it was verified against the
    parties' keyring (`ReleaseFile`); None for a release made in this process.

    Its file follows the naming of `bayesval.results.serialisation` (`kind`, `version`, `to_record`,
    `from_record`) but is a JSON-only record with a contract of its own (this module's docstring): `to_record()`
    is the file's content without its checksum and `from_record(record)` reads a whole file's content, so the bytes
    a party writes stay exactly as published.
    """

    kind = FORMAT  # the release file's `format` and current `version` (class attributes, not fields)
    version = VERSION

    owner: str
    perturbed: np.ndarray
    count: int
    release: Release
    statistic: dict | None = None
    bounds: Bounds | None = None
    seeded: bool = False
    experiment: bool = False
    file_version: int = VERSION
    columns: Columns | None = None
    source_file: ReleaseFile | None = None

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
        for flag in ("seeded", "experiment"):
            if not isinstance(getattr(self, flag), bool):
                raise TypeError(f"{self.owner}: {flag} must be True or False, got {getattr(self, flag)!r}")
        if self.file_version not in READABLE_VERSIONS:
            raise ValueError(
                f"{self.owner}: file_version must be one of {READABLE_VERSIONS}, got {self.file_version!r}"
            )
        if self.source_file is not None and not isinstance(self.source_file, ReleaseFile):
            raise TypeError(f"{self.owner}: source_file must be a ReleaseFile or None, got {self.source_file!r}")
        if self.statistic is not None:
            self._check_statistic()
        if self.columns is not None:
            if not isinstance(self.columns, Columns):
                raise TypeError(f"{self.owner}: columns must be a Columns record or None, got {self.columns!r}")
            self.columns.check(self.owner, self.num_features)

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
            self._check_plausible(layout)

    def _check_plausible(self, layout) -> None:
        """Each entry within [count lo - k std, count hi + k std], [lo, hi] one record's range inside the bounds."""
        low, high = layout.entry_ranges(self.bounds)
        margin = PLAUSIBLE_NOISE_STDS * self.noise_std
        with np.errstate(over="ignore"):
            outside = (self.perturbed < self.count * low - margin) | (self.perturbed > self.count * high + margin)
        if outside.any():
            i = int(np.argmax(outside))
            raise ValueError(
                f"{self.owner}: implausible release: entry {i} of the {self.statistic['kind']} statistic is "
                f"{self.perturbed[i]:.6g}, but {self.count} records within {self.bounds} give values in "
                f"[{self.count * low[i]:.6g}, {self.count * high[i]:.6g}] and its noise (std {self.noise_std:.4g}) "
                f"moves them by far less than {PLAUSIBLE_NOISE_STDS:g} stds; {int(outside.sum())} of "
                f"{outside.size} entries are this far out. The release was not made from such data"
            )

    @property
    def caveats(self) -> list[str]:
        """What a reader of this release should know, in words: seeded or floating-point noise, an old file format,
        the experiment mark. Empty for a floating-point-safe release from OS entropy."""
        return self._unsafe_to_publish() + (["marked as an experiment by its party"] if self.experiment else [])

    def _unsafe_to_publish(self) -> list[str]:
        """Why this release must not leave the process unmarked: floating-point noise (version 1 files too), a seed."""
        reasons = []
        if self.file_version == 1:
            reasons.append(
                "release file version 1: its noise is floating-point Gaussian, not floating-point safe, and the "
                "file does not record whether it was seeded"
            )
        elif not self.release.floating_point_safe:
            reasons.append(f"floating-point {self.release.noise} noise: not floating-point safe")
        if self.seeded:
            reasons.append("seeded noise (noise_seed): anyone with the seed can remove it")
        return reasons

    @property
    def integrity(self) -> str:
        """What this release's integrity rests on, in words: made in this process, or its file's signature
        (`ReleaseFile.integrity`)."""
        return "released in this process" if self.source_file is None else self.source_file.integrity

    @property
    def noise_std(self) -> float:
        """sigma_z,i, the std of the DP noise of each entry."""
        return self.release.noise_std

    @property
    def num_features(self) -> int | None:
        return None if self.statistic is None else self.statistic.get("num_features")

    def to_record(self, *, experiment: bool = False) -> dict:
        """The release file's content (JSON-ready), without its checksum; `experiment` marks it as an experiment."""
        return {
            "format": FORMAT,
            "version": VERSION,
            "required": list(_FIELDS),
            "owner": self.owner,
            "statistic": self.statistic,
            "bounds": None if self.bounds is None else {"x_norm": self.bounds.x_norm, "y_abs": self.bounds.y_abs},
            "count": self.count,
            "perturbed": self.perturbed.tolist(),
            "release": self.release.to_record(),
            "noise_source": "seeded" if self.seeded else "os-entropy",
            "experiment": bool(self.experiment or experiment),
        } | ({} if self.columns is None else {"columns": self.columns.to_record()})

    def save(
        self,
        path: str | Path,
        *,
        experiment: bool = False,
        signing_key: str | os.PathLike | Ed25519PrivateKey | None = None,
    ) -> Path:
        """Write the versioned release file (JSON with a SHA-256 checksum of its content; the contract is in this
        module's docstring).

        A release that is not safe to publish (seeded noise, or floating-point noise) is refused unless
        `experiment=True`, which the file records and `valuate` reports. `signing_key`, the party's private key file
        (`bayesval keygen`, `bayesval.parties.signing.generate_keys`) or an Ed25519 private key, signs the file's
        content, so that a mediator holding the party's public key can check it came unchanged from the party
        (docs/privacy.md, "Signed releases"); without it the file is unsigned (a signed release that was loaded is
        saved unsigned too: only its party's key can sign it again)."""
        experiment = check_bool("experiment", experiment)
        unsafe = self._unsafe_to_publish()
        if unsafe and not (experiment or self.experiment):
            raise ValueError(
                f"{self.owner}: this release is not safe to send out of the process ({'; '.join(unsafe)}). Release "
                "again without noise_seed and with the default discrete Gaussian mechanism, or save it with "
                "experiment=True (`bayesval release --experiment`), which the file records"
            )
        path = check_output_path("path", path)
        record = self.to_record(experiment=experiment)
        if signing_key is not None:
            record["signature"] = sign(_canonical(record), signing_key).to_record()
        record["checksum"] = _checksum(record)
        return write_whole(path, lambda partial: partial.write_text(json.dumps(record, indent=1) + "\n"))

    @classmethod
    def load(
        cls, path: str | Path, *, verify_with: Keyring | str | os.PathLike | Sequence[str | os.PathLike] | None = None
    ) -> PerturbedStatistic:
        """Read and check a release file written by `save` (or `bayesval release`); version 1 and 2 files.

        verify_with: the parties' public keys (a `bayesval.parties.signing.Keyring`, or the path(s) of `.pub`
        files, keyring files or folders of `.pub` files): the file must then be signed with the key of the party
        it names, else it is refused. Without it a signed file's signature is still checked against its content,
        and `source_file.integrity` says the release was not verified (or is unsigned)."""
        if not isinstance(path, (str, os.PathLike)):
            raise TypeError(f"PerturbedStatistic.load: path must be a file path (a str or a Path), got {path!r}")
        keyring = None if verify_with is None else Keyring.of(verify_with)
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
            return cls.from_record(record, verify_with=keyring, path=str(path))
        except (TypeError, ValueError, KeyError, OverflowError) as error:
            raise ValueError(f"release file {path}: {error}") from None

    @classmethod
    def from_record(
        cls, record: dict, *, verify_with: Keyring | None = None, path: str | None = None
    ) -> PerturbedStatistic:
        """Check and read a release file's content (version 1 or 2, with its checksum and any signature);
        `verify_with` is the parties' `Keyring` (`load`), `path` the file it came from."""
        if not isinstance(record, dict) or record.get("format") != FORMAT:
            raise ValueError(f"not a {FORMAT} file")
        version = record.get("version")
        if isinstance(version, bool) or version not in READABLE_VERSIONS:
            raise ValueError(
                f"release format version {version!r} is not supported (this bayesval reads {READABLE_VERSIONS})"
            )
        if version == 1:
            _check_v1_fields(record)
        else:
            _check_v2_fields(record)
        content = {k: v for k, v in record.items() if k != "checksum"}
        try:
            checksum = _checksum(content)
        except ValueError:  # json.loads reads NaN and Infinity, which no release holds
            raise ValueError("it holds a non-finite number (NaN or Infinity), which no release contains") from None
        if record["checksum"] != checksum:
            raise ValueError("checksum mismatch: the file was modified after it was released")
        signature, verified_key = _check_signature(record, verify_with)
        bounds = record["bounds"]
        if bounds is not None and (not isinstance(bounds, dict) or set(bounds) != {"x_norm", "y_abs"}):
            raise ValueError(f"bounds must be {{'x_norm': ..., 'y_abs': ...}} or null, got {bounds!r}")
        seeded = version == 2 and record["noise_source"] == "seeded"
        return cls(
            owner=record["owner"],
            perturbed=record["perturbed"],
            count=record["count"],
            release=Release.from_record(record["release"]),
            statistic=record["statistic"],
            bounds=None if bounds is None else Bounds(**bounds),
            seeded=seeded,
            experiment=version == 2 and record["experiment"],
            file_version=version,
            columns=None if version == 1 or "columns" not in record else Columns.from_record(record["columns"]),
            source_file=ReleaseFile(path, signature, verified_key),
        )


def _check_v2_fields(record: dict) -> None:
    """A version 2 file names what a reader must understand (`required`); every field this reader needs is there,
    and a seeded or floating-point release is marked as an experiment."""
    required = record.get("required")
    if not isinstance(required, list) or not all(isinstance(name, str) for name in required):
        raise ValueError(f"'required' must be a list of field names, got {required!r}")
    unknown = sorted(set(required) - {*_FIELDS, _SIGNATURE})
    if unknown:
        raise ValueError(
            f"it requires field(s) {unknown} that this version of bayesval does not know (a newer writer?): "
            "reading it without them could misread the release; upgrade bayesval"
        )
    missing = sorted((set(_FIELDS) | {"checksum"} | set(required)) - set(record))
    if missing:
        raise ValueError(f"fields {missing} are missing")
    if record["noise_source"] not in NOISE_SOURCES:
        raise ValueError(f"noise_source must be one of {NOISE_SOURCES}, got {record['noise_source']!r}")
    if not isinstance(record["experiment"], bool):
        raise ValueError(f"experiment must be true or false, got {record['experiment']!r}")
    release = record["release"]
    float_noise = isinstance(release, dict) and release.get("noise") != "discrete_gaussian"
    if (record["noise_source"] == "seeded" or float_noise) and not record["experiment"]:
        raise ValueError(
            "it holds a seeded or floating-point release that is not marked as an experiment: no bayesval writes "
            "such a file"
        )


def _check_v1_fields(record: dict) -> None:
    """A version 1 file holds its eight fields and a checksum, and a float Gaussian release without a grid: a file
    relabelled from version 2 (which would lose its seeded and experiment marks) is refused."""
    later = sorted(set(record) & {*_FIELDS, _SIGNATURE} - set(_V1_FIELDS))
    if later:
        raise ValueError(
            f"it says version 1 but carries the version 2 field(s) {later}: a version 2 release relabelled as version "
            "1 would lose its seeded and experiment marks, so it is refused"
        )
    expected = set(_V1_FIELDS) | {"checksum"}
    if set(record) != expected:
        raise ValueError(f"fields {sorted(set(record) ^ expected)} are missing or unknown")
    release = record["release"]
    if isinstance(release, dict) and (release.get("noise") != "gaussian" or release.get("grid") is not None):
        raise ValueError(
            f"it says version 1, whose releases hold float Gaussian noise without a grid, but its release record says "
            f"noise {release.get('noise')!r}, grid {release.get('grid')!r}: a version 2 release relabelled as version "
            "1 is refused"
        )


def _check_signature(record: dict, keyring: Keyring | None) -> tuple[ReleaseSignature | None, str | None]:
    """The file's signature, checked against its content (always) and against its party's key in `keyring` (when
    given), and the fingerprint of that key (None when not verified)."""
    signature = None
    if _SIGNATURE in record:
        signature = ReleaseSignature.from_record(record[_SIGNATURE])
        signature.check(_canonical({k: v for k, v in record.items() if k not in ("checksum", _SIGNATURE)}))
    if keyring is None:
        return signature, None
    keyring.check(record["owner"], signature)
    return signature, keyring.fingerprint_of(record["owner"])


def check_distinct_releases(releases: Sequence[PerturbedStatistic]) -> None:
    """Refuse two releases that are one: the same `release_id`, or the same perturbed statistic bit for bit (a copy,
    perhaps under another party's name, which would be paid twice while the ledger counts its privacy once). The
    message names both parties and their files."""
    by_id: dict = {}
    by_statistic: dict = {}
    for released in releases:
        bits = (released.perturbed.dtype.str, released.perturbed.tobytes())
        for seen, key, what in (
            (by_id, released.release.release_id, f"the same release_id {released.release.release_id!r}"),
            (by_statistic, bits, "the same perturbed statistic bit for bit"),
        ):
            first = seen.setdefault(key, released)
            if first is not released:
                raise ValueError(
                    f"{_described(first)} and {_described(released)} hold {what}: one is a copy of the other, which "
                    "would be valued (and paid) twice while its privacy is counted once; value each release once"
                )


def check_same_columns(releases: Sequence[PerturbedStatistic]) -> None:
    """Refuse releases that name their table columns (`columns`) and name different ones, or the same in another
    order: their statistics' entries would be pooled as if they were one feature. The message names both parties,
    their files and their columns."""
    named = [released for released in releases if released.columns is not None]
    for released in named[1:]:
        if released.columns != named[0].columns:
            first, other = named[0].columns, released.columns
            raise ValueError(
                f"{_described(named[0])} and {_described(released)} were released from other columns (target "
                f"{first.target!r}, features {list(first.features)} against {other.target!r}, "
                f"{list(other.features)}): their statistics' entries would be pooled as if they were the same "
                "features; release every party's table with the same columns in the same order (--target, "
                "--features)"
            )


def _described(released: PerturbedStatistic) -> str:
    path = None if released.source_file is None else released.source_file.path
    return f"party {released.owner!r}" + ("" if path is None else f" (release file {path})")


_V1_FIELDS = ("format", "version", "owner", "statistic", "bounds", "count", "perturbed", "release")
_FIELDS = (*_V1_FIELDS, "required", "noise_source", "experiment")
_SIGNATURE = "signature"  # optional in version 2: `bayesval.parties.signing`


def _canonical(content: dict) -> bytes:
    """The canonical JSON of a file's content (sorted keys, no spaces, no NaN): what is checksummed and signed."""
    return json.dumps(content, sort_keys=True, separators=(",", ":"), allow_nan=False).encode()


def _checksum(content: dict) -> str:
    return hashlib.sha256(_canonical(content)).hexdigest()


__all__ = ["PerturbedStatistic", "ReleaseFile", "built_in_statistic", "check_distinct_releases", "describe_statistic"]
