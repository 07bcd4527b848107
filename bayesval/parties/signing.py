"""Signed release files: a party's Ed25519 key pair, the mediator's keyring of the parties' public keys, and the
signature of a release file's content (Ed25519: Bernstein, Duif, Lange, Schwabe & Yang 2012, "High-speed
high-security signatures"; RFC 8032), computed by the `cryptography` package. How a consortium uses them:
docs/privacy.md, "Signed releases".

A release file's SHA-256 checksum is unkeyed: it catches accidental damage (a truncated copy, a flipped bit), but
anyone who edits the file can recompute it. A signature is made with the party's private key, which never leaves
the party's machine, so the mediator, holding the party's public key, can check that a file came from that party
and that no byte of its content changed since (an edit, a copy renamed to another party, a version-1 relabelling).

Key files:

- private key, `NAME.key`: the PEM PKCS#8 encoding of an Ed25519 private key, unencrypted, written with mode 0600
  (the form `openssl genpkey -algorithm ed25519` writes too). It stays with the party.
- public key, `NAME.pub`: one line `bayesval-ed25519 KEY OWNER`, KEY the base64 of the 32-byte public key and
  OWNER the party's name as its release files give it (the rest of the line, spaces allowed).
- keyring: a text file of such lines, one per party (`cat *.pub > consortium.keys`), or a folder of `.pub` files.
  Blank lines and lines starting with '#' are ignored. A party has one key and a key one party.

A key's fingerprint, `SHA256:` and the unpadded base64 of the SHA-256 of its 32 bytes, is what a party and the
mediator compare over a second channel when the public key is handed over.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import os
import stat
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

from cryptography.exceptions import InvalidSignature, UnsupportedAlgorithm
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from bayesval.validation import user_stacklevel

ALGORITHM = "ed25519"
PUBLIC_KEY_TAG = "bayesval-ed25519"
PRIVATE_SUFFIX = ".key"
PUBLIC_SUFFIX = ".pub"
# What is signed: this prefix, then the canonical JSON of the release file's content (every field but `checksum` and
# `signature`), so that a signature over a release can never be taken for a signature over anything else.
SIGNED_PREFIX = b"bayesval.release signature, version 1\n"
_PUBLIC_KEY_BYTES = 32
_SIGNATURE_BYTES = 64


def fingerprint(public_key: bytes) -> str:
    """'SHA256:' and the unpadded base64 of the SHA-256 of a 32-byte public key (the form OpenSSH prints)."""
    digest = base64.b64encode(hashlib.sha256(public_key).digest()).decode().rstrip("=")
    return f"SHA256:{digest}"


def _decode(text, size: int, what: str) -> bytes:
    """The `size` bytes base64 `text` encodes, or a ValueError naming `what`."""
    try:
        raw = base64.b64decode(text, validate=True) if isinstance(text, str) else None
    except (binascii.Error, ValueError):
        raw = None
    if raw is None or len(raw) != size:
        raise ValueError(f"{what} must be the base64 of {size} bytes, got {str(text)[:60]!r}")
    return raw


class ReleaseSignature(NamedTuple):
    """A release file's `signature` field: {"algorithm": "ed25519", "public_key": base64 of the signer's 32-byte
    public key, "value": base64 of the 64-byte signature of SIGNED_PREFIX + the canonical content}."""

    algorithm: str
    public_key: str
    value: str

    @property
    def fingerprint(self) -> str:
        """The signer's key fingerprint (`fingerprint`)."""
        return fingerprint(_decode(self.public_key, _PUBLIC_KEY_BYTES, "signature public_key"))

    def to_record(self) -> dict:
        return {"algorithm": self.algorithm, "public_key": self.public_key, "value": self.value}

    @classmethod
    def from_record(cls, record) -> ReleaseSignature:
        """Read and check the field's shape (not the signature itself: `check`)."""
        if not isinstance(record, dict) or set(record) != {"algorithm", "public_key", "value"}:
            raise ValueError(
                f"signature must be {{'algorithm': 'ed25519', 'public_key': ..., 'value': ...}}, got {record!r}"
            )
        if record["algorithm"] != ALGORITHM:
            raise ValueError(
                f"signature algorithm {record['algorithm']!r} is not supported (this bayesval reads {ALGORITHM!r})"
            )
        _decode(record["public_key"], _PUBLIC_KEY_BYTES, "signature public_key")
        _decode(record["value"], _SIGNATURE_BYTES, "signature value")
        return cls(**record)

    def check(self, content: bytes) -> None:
        """A ValueError unless this is a valid signature of SIGNED_PREFIX + `content` under its own public key."""
        key = Ed25519PublicKey.from_public_bytes(_decode(self.public_key, _PUBLIC_KEY_BYTES, "signature public_key"))
        try:
            key.verify(_decode(self.value, _SIGNATURE_BYTES, "signature value"), SIGNED_PREFIX + content)
        except InvalidSignature:
            raise ValueError(
                "its signature does not match its content: the file was edited after it was signed (a changed "
                "count, statistic, owner, release_id, version or mark), so it is not what its party released"
            ) from None


def sign(content: bytes, signing_key: str | os.PathLike | Ed25519PrivateKey) -> ReleaseSignature:
    """The Ed25519 signature of SIGNED_PREFIX + `content` by `signing_key` (a private key file or key object)."""
    key = load_signing_key(signing_key)
    public = key.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    value = key.sign(SIGNED_PREFIX + content)
    return ReleaseSignature(ALGORITHM, base64.b64encode(public).decode(), base64.b64encode(value).decode())


def load_signing_key(signing_key: str | os.PathLike | Ed25519PrivateKey) -> Ed25519PrivateKey:
    """The Ed25519 private key of a key file written by `generate_keys` (`bayesval keygen`), or the key itself.
    Warns when the file can be read by other users (it should have mode 0600)."""
    if isinstance(signing_key, Ed25519PrivateKey):
        return signing_key
    if isinstance(signing_key, bool) or not isinstance(signing_key, (str, os.PathLike)):
        raise TypeError(
            "signing_key must be the path of a private key file written by `bayesval keygen` (or an Ed25519PrivateKey),"
            f" got {type(signing_key).__name__}"
        )
    path = Path(signing_key)
    data = _read_key_file(path, "signing key file")
    if data.lstrip().startswith(PUBLIC_KEY_TAG.encode()):
        raise ValueError(
            f"signing key file {path} is a public key (a .pub file): signing takes the private key, {path.stem}.key"
        )
    try:
        key = serialization.load_pem_private_key(data, password=None)
    except TypeError:
        raise ValueError(
            f"signing key file {path} is encrypted with a password; bayesval reads unencrypted keys (kept with mode "
            "0600): write one with `bayesval keygen NAME`"
        ) from None
    except (ValueError, UnsupportedAlgorithm):
        raise ValueError(
            f"signing key file {path} is not a PEM private key (garbled or another format): write one with "
            "`bayesval keygen NAME`"
        ) from None
    if not isinstance(key, Ed25519PrivateKey):
        raise ValueError(f"signing key file {path} holds a {type(key).__name__}, not an Ed25519 private key")
    _warn_if_readable_by_others(path)
    return key


def _read_key_file(path: Path, what: str) -> bytes:
    try:
        return path.read_bytes()
    except FileNotFoundError:
        raise FileNotFoundError(f"{what} {path} does not exist (`bayesval keygen NAME` writes a key pair)") from None
    except IsADirectoryError:
        raise ValueError(f"{what} {path} is a folder, not a key file") from None
    except PermissionError:
        raise ValueError(f"{what} {path} cannot be read (permission denied)") from None


def _warn_if_readable_by_others(path: Path) -> None:
    mode = stat.S_IMODE(path.stat().st_mode)
    if os.name == "posix" and mode & 0o077:
        warnings.warn(
            f"signing key file {path} can be read by other users (mode {mode:04o}): anyone who reads it can sign "
            f"releases as its party; restrict it with `chmod 600 {path}`",
            stacklevel=user_stacklevel(),
        )


class KeyFiles(NamedTuple):
    """What `generate_keys` wrote: the private key file (mode 0600, stays with the party), the public key file (for
    the mediator's keyring), the party it names and the key's fingerprint."""

    private: Path
    public: Path
    owner: str
    fingerprint: str


def generate_keys(path: str | os.PathLike, owner: str | None = None) -> KeyFiles:
    """Make a new Ed25519 key pair for a party: PATH.key, the private key (PEM PKCS#8, mode 0600), and PATH.pub, the
    public key line `bayesval-ed25519 KEY OWNER` for the mediator's keyring. `owner` is the party's name as its
    release files give it (default: the file name of PATH). Existing key files are never overwritten."""
    if isinstance(path, bool) or not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"path must be a file path (a str or a Path), got {type(path).__name__}")
    base = Path(path)
    if base.suffix in (PRIVATE_SUFFIX, PUBLIC_SUFFIX):
        base = base.with_suffix("")
    owner = base.name if owner is None else owner
    _check_owner(owner, "owner")
    private, public = base.with_name(base.name + PRIVATE_SUFFIX), base.with_name(base.name + PUBLIC_SUFFIX)
    if not base.parent.is_dir():
        raise ValueError(f"cannot write the key pair {base}: folder {base.parent} does not exist")
    existing = [str(p) for p in (private, public) if p.exists()]
    if existing:
        raise ValueError(
            f"key file(s) {existing} exist already; bayesval never overwrites a key (a lost private key cannot sign "
            "again): choose another path, or remove them first"
        )
    key = Ed25519PrivateKey.generate()
    pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    raw = key.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    descriptor = os.open(private, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(descriptor, "wb") as file:
        file.write(pem)
    public.write_text(f"{PUBLIC_KEY_TAG} {base64.b64encode(raw).decode()} {owner}\n")
    return KeyFiles(private, public, owner, fingerprint(raw))


def _check_owner(owner, what: str) -> str:
    if not isinstance(owner, str) or not owner.strip() or owner != owner.strip() or not owner.isprintable():
        raise ValueError(f"{what} must be a party's name (non-empty, one line, no surrounding spaces), got {owner!r}")
    return owner


@dataclass(frozen=True)
class Keyring:
    """The mediator's public keys of the parties: party name -> base64 of its 32-byte Ed25519 public key, and where
    each was read (`sources`). `Keyring.load(paths)` reads public key files and keyring files or folders (this
    module's docstring); `check(owner, signature)` refuses a signature not made by `owner`'s key."""

    keys: Mapping[str, str]
    sources: Mapping[str, str]

    @classmethod
    def of(cls, keys: Keyring | str | os.PathLike | Sequence[str | os.PathLike]) -> Keyring:
        """`keys` as a Keyring: a Keyring, or the path(s) of public key files, keyring files or folders of .pub
        files."""
        if isinstance(keys, Keyring):
            return keys
        if isinstance(keys, (str, os.PathLike)):
            return cls.load([keys])
        if isinstance(keys, Sequence) and keys and all(isinstance(k, (str, os.PathLike)) for k in keys):
            return cls.load(list(keys))
        raise TypeError(
            "verify_with must be a Keyring, or the path(s) of public key files (`bayesval keygen` writes NAME.pub), "
            f"keyring files or folders of .pub files, got {keys!r}"
        )

    @classmethod
    def load(cls, paths: Sequence[str | os.PathLike]) -> Keyring:
        """Read public key lines from each path: a file (one line or many) or a folder (its .pub files)."""
        keys: dict[str, str] = {}
        sources: dict[str, str] = {}
        for path in map(Path, paths):
            for file in _key_files(path):
                for number, line in enumerate(_key_lines(file), start=1):
                    entry = _parse_key_line(line, f"{file} line {number}")
                    if entry is not None:
                        _add_key(keys, sources, *entry, f"{file} line {number}")
        if not keys:
            raise ValueError(
                f"no public keys in {[str(p) for p in paths]}: each party's NAME.pub from `bayesval keygen`"
            )
        return cls(keys, sources)

    def check(self, owner: str, signature: ReleaseSignature | None) -> None:
        """A ValueError unless `signature` (already checked against its content) was made with `owner`'s key."""
        if not isinstance(owner, str) or owner not in self.keys:
            raise ValueError(
                f"the keyring has no public key for party {owner!r} (it has keys for {sorted(self.keys)}): add "
                f"{owner}'s .pub file, checked with {owner} by its fingerprint"
            )
        expected = self.keys[owner]
        if signature is None:
            raise ValueError(
                f"it is unsigned, but the keyring holds {owner}'s key: verifying asks every release to be signed by "
                "its party (`bayesval release --sign KEY`, `save(path, signing_key=KEY)`)"
            )
        if base64.b64decode(signature.public_key) != base64.b64decode(expected):  # the key, however it is written
            raise ValueError(
                f"it is signed with key {signature.fingerprint}, which is not {owner}'s key "
                f"({fingerprint(base64.b64decode(expected))}, {self.sources[owner]}): a release copied under "
                f"{owner}'s name, or signed with another party's key"
            )

    def fingerprint_of(self, owner: str) -> str:
        return fingerprint(base64.b64decode(self.keys[owner]))


def _key_files(path: Path) -> list[Path]:
    if path.is_dir():
        files = sorted(path.glob(f"*{PUBLIC_SUFFIX}"))
        if not files:
            raise ValueError(f"keyring folder {path} holds no {PUBLIC_SUFFIX} files")
        return files
    if not path.exists():
        raise FileNotFoundError(f"public key file or keyring {path} does not exist")
    return [path]


def _key_lines(file: Path) -> list[str]:
    data = _read_key_file(file, "public key file")
    if b"PRIVATE KEY" in data:
        raise ValueError(
            f"{file} is a private key: the mediator's keyring takes public keys ({file.stem}{PUBLIC_SUFFIX}); a "
            "private key never leaves its party"
        )
    try:
        return data.decode("utf-8").splitlines()
    except UnicodeDecodeError:
        raise ValueError(
            f"public key file {file} is not text (garbled?): expected '{PUBLIC_KEY_TAG} KEY OWNER' lines"
        ) from None


def _parse_key_line(line: str, where: str) -> tuple[str, str] | None:
    """(owner, base64 key) of a line `bayesval-ed25519 KEY OWNER`, None for a blank or comment line."""
    text = line.strip()
    if not text or text.startswith("#"):
        return None
    parts = text.split(maxsplit=2)
    if len(parts) != 3 or parts[0] != PUBLIC_KEY_TAG:
        raise ValueError(
            f"{where}: expected '{PUBLIC_KEY_TAG} KEY OWNER' (a public key line written by `bayesval keygen`), got "
            f"{text[:80]!r}"
        )
    key = _decode(parts[1], _PUBLIC_KEY_BYTES, f"{where}: the key")
    # the key in its one standard base64 form: base64 lets the unused low bits of its last character vary, so two
    # spellings of one key must not pass for two keys (`_add_key` compares them)
    return _check_owner(parts[2], f"{where}: the owner"), base64.b64encode(key).decode("ascii")


def _add_key(keys: dict, sources: dict, owner: str, key: str, where: str) -> None:
    """Add a key, refusing a party with two keys or a key for two parties (naming both places)."""
    if owner in keys and keys[owner] != key:
        raise ValueError(f"party {owner!r} has two different public keys, in {sources[owner]} and {where}")
    holder = next((name for name, known in keys.items() if known == key and name != owner), None)
    if holder is not None:
        raise ValueError(
            f"one public key is given for two parties, {holder!r} ({sources[holder]}) and {owner!r} ({where}): each "
            "party signs with a key of its own"
        )
    keys[owner] = key
    sources.setdefault(owner, where)


__all__ = ["KeyFiles", "Keyring", "ReleaseSignature", "generate_keys", "load_signing_key", "sign"]
