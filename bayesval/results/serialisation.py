"""One way to write down what a valuation produced: records, the registry of their kinds, and the result archive.

A *record* is an object that serialises as a pair `(meta, arrays)`: `meta` a dict of JSON values (str, int, float,
bool, None, lists and dicts of them), `arrays` a dict of NumPy arrays by name. Its class has a `kind` (a dotted name,
unique in the registry) and a `version` (an int >= 1), and two methods:

    to_record(self) -> (meta, arrays)
    from_record(cls, meta, arrays, *, version) -> instance    (a classmethod; `version`: the one it was written at)

A record may hold other records: it encodes each with `encode(record, prefix)`, puts the returned *envelope*
{"kind", "version", "meta"} into its own meta and the returned arrays (each name prefixed with `prefix`) beside its
own, and `decode`s them back. The lower layer never imports the upper one: `register(kind)` files a class under its
kind when its module is imported, `decode` finds it by the kind written in the envelope, and a kind not yet
registered makes `registered` ask the package to import the modules that register kinds (`set_kind_loader`). So a
`ValuationResult` (this layer) holds the privacy ledger (`bayesval.privacy`) and the model rewards
(`bayesval.parties.rewards`) without importing either. The kinds bayesval registers:

    bayesval.valuation_result   ValuationResult (version 2; version 1 is the file layout before this module)
    bayesval.semivalue_state    SemivalueState, a sampled semivalue's running sums (version 6)
    bayesval.privacy_ledger     PrivacyLedger, every DP release behind a result (version 1)
    bayesval.rewards            Rewards, the model rewards of Sim et al. (2023), Sec. 4 (version 1)

JSON-only objects inside a record (a DP guarantee, a release's ledger entry, a release file) follow the same naming
with `to_record() -> dict` and `from_record(dict)`; they are fields of a record, not records of their own.

The archive: the stability contract
-----------------------------------
A result is written once and read later, perhaps by another version of bayesval. What any reader may rely on, for
every archive whose metadata has `"format": "bayesval.archive"` and `"format_version": 1`:

- The file is a NumPy .npz (a zip of .npy members, no pickled objects). The member `_meta` is a 0-d unicode array
  holding one JSON object (written by `json.dumps`, so non-finite floats appear as `Infinity` / `NaN`); every
  other member is an array of the archived record.
- `_meta` holds `format` ("bayesval.archive"), `format_version` (1), and the envelope of the one record the file
  archives: `kind`, `version` and `meta`. Nested records appear inside `meta` as envelopes; their arrays are
  members named with their prefix (the field's name and "_": "state_sums", "rewards_draws").
- A record's `version` changes whenever its meta or arrays change meaning; its class keeps reading every earlier
  version (`from_record(..., version=v)`), and a reader refuses a version newer than its own with an error that
  says so, as it refuses a `format_version` newer than 1 and a kind it has not registered.
- What may be added within a version: new optional meta keys and new optional arrays, which older readers of that
  version must not need.
- Files written before the archive had envelopes (bayesval up to the package redesign: `_meta` without `format`)
  are read as version 1 of the kind the reader expects (`read_archive(path, kind)`).
"""

from __future__ import annotations

import json
import warnings
import zipfile
from pathlib import Path
from typing import Any, ClassVar, Protocol, runtime_checkable

import numpy as np

from bayesval.outputs import write_whole

ARCHIVE_FORMAT = "bayesval.archive"
ARCHIVE_VERSION = 1
META_ENTRY = "_meta"  # the archive member holding the JSON metadata

Meta = dict[str, Any]
Arrays = dict[str, np.ndarray]


@runtime_checkable
class Record(Protocol):
    """What serialises as `(meta, arrays)` (see the module docstring): a registered kind, a version, and the pair of
    methods that write and read it."""

    kind: ClassVar[str]
    version: ClassVar[int]

    def to_record(self) -> tuple[Meta, Arrays]: ...

    @classmethod
    def from_record(cls, meta: Meta, arrays: Arrays, *, version: int = ...) -> Record: ...


class OldJsonMethods:
    """The deprecated `to_json` / `from_json` of a record class that had them before `to_record` / `from_record`:
    each warns with a `DeprecationWarning` and gives what the record methods give."""

    def to_json(self) -> Meta:
        """Deprecated: the meta of `to_record`."""
        warnings.warn(f"{type(self).__name__}.to_json is deprecated: use to_record", DeprecationWarning, stacklevel=2)
        return self.to_record()[0]

    @classmethod
    def from_json(cls, meta: Meta, arrays: Arrays):
        """Deprecated: `from_record`."""
        warnings.warn(f"{cls.__name__}.from_json is deprecated: use from_record", DeprecationWarning, stacklevel=2)
        return cls.from_record(meta, arrays)


_REGISTRY: dict[str, type] = {}


def register(kind: str):
    """Class decorator: file a record class under `kind` (sets `cls.kind`). The class defines `version` (an int >=
    1), `to_record` and the classmethod `from_record`. A kind names one class: registering another class under a
    taken kind is refused (the same class, re-imported, may register again)."""
    if not isinstance(kind, str) or not kind:
        raise TypeError(f"a record kind must be a non-empty string, got {kind!r}")

    def decorate(cls: type) -> type:
        version = getattr(cls, "version", None)
        if isinstance(version, bool) or not isinstance(version, int) or version < 1:
            raise TypeError(f"record class {cls.__qualname__} must define an int version >= 1, got {version!r}")
        for method in ("to_record", "from_record"):
            if not callable(getattr(cls, method, None)):
                raise TypeError(f"record class {cls.__qualname__} must define {method}")
        taken = _REGISTRY.get(kind)
        if taken is not None and _qualified(taken) != _qualified(cls):
            raise ValueError(f"record kind {kind!r} is taken by {_qualified(taken)}; {_qualified(cls)} needs another")
        cls.kind = kind
        _REGISTRY[kind] = cls
        return cls

    return decorate


_kind_loader = None  # imports the modules that register the upper layers' kinds, set by the package


def set_kind_loader(loader) -> None:
    """`loader()` imports the modules whose records this layer does not know until they are imported: `registered`
    calls it once for a kind not yet registered. The package sets it (`bayesval/__init__.py` loads its public names
    on first use), so a file that holds a privacy ledger reads in a process that never imported `bayesval.privacy`,
    and this layer still imports nothing above it."""
    global _kind_loader
    _kind_loader = loader


def registered(kind: str) -> type:
    """The class registered under `kind`, or a ValueError that names the kinds this bayesval knows."""
    if isinstance(kind, str) and kind not in _REGISTRY and _kind_loader is not None:
        _kind_loader()
    try:
        return _REGISTRY[kind]
    except (KeyError, TypeError):
        raise ValueError(
            f"it holds a record of unknown kind {kind!r} (written by a newer bayesval, or by a package not imported); "
            f"known kinds: {sorted(_REGISTRY)}"
        ) from None


def encode(record, prefix: str = "") -> tuple[Meta, Arrays]:
    """A registered record's envelope {"kind", "version", "meta"} (meta made JSON-ready) and its arrays, each name
    prefixed with `prefix`."""
    cls = type(record)
    if _REGISTRY.get(getattr(cls, "kind", None)) is not cls:
        raise TypeError(f"{cls.__qualname__} is not a registered record class (bayesval.results.serialisation)")
    meta, arrays = record.to_record()
    envelope = {"kind": cls.kind, "version": cls.version, "meta": jsonable(meta)}
    return envelope, {prefix + name: np.asarray(array) for name, array in arrays.items()}


def decode(envelope: Meta, arrays: Arrays, prefix: str = ""):
    """The record an `encode` envelope describes, built by its registered class from its meta and the arrays whose
    names begin with `prefix` (taken out of `arrays`, with the prefix removed). A version newer than the class
    reads is refused."""
    if not isinstance(envelope, dict) or set(envelope) != {"kind", "version", "meta"}:
        raise ValueError(f"a nested record must be {{'kind', 'version', 'meta'}}, got {_shown(envelope)}")
    cls = registered(envelope["kind"])
    version = check_version(envelope["kind"], envelope["version"], cls.version)
    if not isinstance(envelope["meta"], dict):
        raise ValueError(f"the meta of a {envelope['kind']} record must be a JSON object, got {_shown(envelope)}")
    mine = {name[len(prefix) :]: arrays.pop(name) for name in [n for n in arrays if n.startswith(prefix)]}
    return cls.from_record(envelope["meta"], mine, version=version)


def check_version(kind: str, version, newest: int) -> int:
    """`version` as an int in 1..newest, or an error naming the kind (a newer one: upgrade bayesval)."""
    if isinstance(version, bool) or not isinstance(version, int) or version < 1:
        raise ValueError(f"a {kind} record's version must be an int >= 1, got {version!r}")
    if version > newest:
        raise ValueError(
            f"it holds a {kind} record of version {version}, newer than this bayesval reads (up to {newest}): "
            "upgrade bayesval"
        )
    return version


def jsonable(value: Any) -> Any:
    """`value` with NumPy arrays and scalars as Python lists and numbers, and dict keys as strings (for JSON)."""
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    return value


def write_archive(path: Path, record) -> Path:
    """Write a registered record to `path` as an archive (an .npz with its envelope in `_meta`; see the contract),
    whole or not at all (`bayesval.outputs.write_whole`)."""
    envelope, arrays = encode(record)
    meta = {"format": ARCHIVE_FORMAT, "format_version": ARCHIVE_VERSION} | envelope
    if META_ENTRY in arrays:
        raise ValueError(f"a record may not hold an array named {META_ENTRY!r}")

    def write(partial: Path) -> None:
        with partial.open("wb") as handle:
            np.savez(handle, **{META_ENTRY: np.array(json.dumps(meta))}, **arrays)

    return write_whole(path, write)


def read_archive(path: Path, kind: str, *, noun: str, writer: str) -> tuple[int, Any, Arrays]:
    """(version, meta, arrays) of the `kind` record archived at `path`; a file written before archives had envelopes
    is version 1 with its whole `_meta` as meta (which need not even be a dict: the caller checks it). A path that
    is not such an archive is an error naming it and `noun` (what the file should hold) and `writer` (what writes
    one): FileNotFoundError if missing, else ValueError."""
    meta, arrays = _read_npz(path, noun, writer)
    if not (isinstance(meta, dict) and "format" in meta):
        return 1, meta, arrays
    not_a = f"{path} is not a bayesval {noun} (an .npz file written by {writer})"
    if meta["format"] != ARCHIVE_FORMAT:
        raise ValueError(f"{not_a}: its metadata's format is {_shown(meta['format'])}, not {ARCHIVE_FORMAT!r}")
    expected = {"format", "format_version", "kind", "version", "meta"}
    if set(meta) != expected:
        raise ValueError(f"{not_a}: its metadata has {sorted(meta)}, an archive's has {sorted(expected)}")
    if meta["format_version"] != ARCHIVE_VERSION:
        raise ValueError(
            f"{path}: archive format_version {_shown(meta['format_version'])} is not one this bayesval reads "
            f"({ARCHIVE_VERSION}): upgrade bayesval"
        )
    if meta["kind"] != kind:
        raise ValueError(f"{not_a}: it holds a {_shown(meta['kind'])} record, not a {kind!r}")
    try:
        version = check_version(kind, meta["version"], registered(kind).version)
    except ValueError as error:
        raise ValueError(f"{path}: {error}") from None
    return version, meta["meta"], arrays


def _read_npz(path: Path, noun: str, writer: str) -> tuple[Any, Arrays]:
    """The decoded `_meta` and the arrays of an .npz at `path`, or an error of our own naming `path`."""
    if not path.exists():
        raise FileNotFoundError(f"{noun} file {path} does not exist")
    if path.is_dir():
        raise ValueError(f"{path} is a directory, not a bayesval {noun} file (an .npz written by {writer})")
    not_a = f"{path} is not a bayesval {noun} (an .npz file written by {writer})"
    if not zipfile.is_zipfile(path):
        raise ValueError(f"{not_a}: it is not an .npz archive (another kind of file, or one cut short)")
    names: list[str] = []
    try:
        with np.load(path, allow_pickle=False) as data:
            names = list(data.files)
            if META_ENTRY not in names:
                raise KeyError(META_ENTRY)
            text = str(data[META_ENTRY])
            arrays = {name: data[name] for name in names if name != META_ENTRY}
        return json.loads(text), arrays
    except KeyError:
        raise ValueError(f"{not_a}: it has no {noun} metadata ({META_ENTRY}); its arrays are {names[:5]}") from None
    except json.JSONDecodeError as error:
        raise ValueError(f"{not_a}: its metadata is not valid JSON ({error})") from None
    except (ValueError, OSError, EOFError, zipfile.BadZipFile):  # corrupted members, pickled objects
        raise ValueError(
            f"{not_a}: its arrays cannot be read (corrupted, or pickled Python objects, which no {noun} holds)"
        ) from None


def _qualified(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


def _shown(value: Any, limit: int = 80) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."
