"""Signed release files (bayesval.parties.signing, the `signature` field of the contract in
bayesval/parties/boundary.py): a signed release verifies against its party's public key; an edited byte, a
re-checksummed edit, a copy under another name, a wrong key, a duplicate release_id or statistic and a version 1
relabelling are refused, each naming the file; unsigned files still load with a note; broken key files give clear
errors."""

import base64
import importlib
import json
import os
import re
import shutil
import warnings

import numpy as np
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

import bayesval as bv
from bayesval.cli import main
from bayesval.parties.boundary import _canonical, _checksum
from bayesval.parties.signing import Keyring, generate_keys, load_signing_key, sign

party_path = importlib.import_module("bayesval.parties.valuation")  # where valuate releases parties
cli = importlib.import_module("bayesval.cli")
TINY = bv.SamplerConfig(num_chains=2, num_warmup=10, num_samples=40, thinning=2, num_repeats=2, progress_bar=False)
NAMES = ("p", "q", "r")


class _Stopped(Exception):
    pass


def _stop(*args, **kwargs):
    raise _Stopped


@pytest.fixture(scope="module")
def consortium(syn, tmp_path_factory):
    """Three parties' releases (in process), a key pair each in keys/, and p and q's releases saved signed, r's
    unsigned, in signed/."""
    root = tmp_path_factory.mktemp("consortium")
    (root / "keys").mkdir()
    (root / "signed").mkdir()
    keys = {name: generate_keys(root / "keys" / name) for name in NAMES}
    released = {
        name: bv.Party(X, y, epsilon=0.5, bounds=syn.bounds, name=name).release()
        for name, (X, y) in zip(NAMES, syn.parties)
    }
    for name in NAMES:
        signing_key = keys[name].private if name != "r" else None
        released[name].save(root / "signed" / f"{name}.release.json", signing_key=signing_key)
    return {"root": root, "keys": keys, "released": released}


@pytest.fixture()
def files(consortium, tmp_path):
    """A fresh copy of the release files for a test to edit."""
    for name in NAMES:
        shutil.copy(consortium["root"] / "signed" / f"{name}.release.json", tmp_path / f"{name}.release.json")
    return {name: tmp_path / f"{name}.release.json" for name in NAMES}


def rewrite(path, change, *, checksum=True, target=None):
    """Edit a release file's JSON (recomputing its checksum, as an attacker would) and write it to `target`."""
    record = json.loads(path.read_text())
    change(record)
    if checksum:
        record["checksum"] = _checksum({k: v for k, v in record.items() if k != "checksum"})
    target = target or path
    target.write_text(json.dumps(record, indent=1))
    return target


def at(path) -> str:
    """`path` (or a key fingerprint) as a regular expression that matches it literally."""
    return re.escape(str(path))


def keyring_dir(consortium):
    return consortium["root"] / "keys"


# --- a signed release verifies --------------------------------------------------------------------------------------


def test_a_signed_release_verifies_against_its_partys_key(consortium, files):
    keys = consortium["keys"]["p"]
    loaded = bv.PerturbedStatistic.load(files["p"], verify_with=keyring_dir(consortium))
    original = consortium["released"]["p"]
    np.testing.assert_array_equal(loaded.perturbed, original.perturbed)
    assert loaded.count == original.count and loaded.release == original.release
    assert loaded.source_file.verified_key == keys.fingerprint and loaded.source_file.status == "verified"
    assert loaded.integrity == f"signed by its party's key {keys.fingerprint}, verified against the keyring"
    record = json.loads(files["p"].read_text())
    public_line = keys.public.read_text().split()
    assert record["signature"]["public_key"] == public_line[1] and public_line[2] == "p"
    assert len(base64.b64decode(record["signature"]["value"])) == 64
    # optional for older version 2 readers: not required, and the checksum covers it
    assert "signature" not in record["required"]
    assert record["checksum"] == _checksum({k: v for k, v in record.items() if k != "checksum"})


@pytest.mark.parametrize("form", ["folder", "one pub file", "list of pub files", "keyring file", "Keyring"])
def test_every_form_of_keyring_verifies(consortium, files, tmp_path, form):
    keys = consortium["keys"]
    ring = tmp_path / "consortium.keys"
    ring.write_text("# the consortium's keys\n\n" + "".join(keys[n].public.read_text() for n in NAMES))
    verify_with = {
        "folder": keyring_dir(consortium),
        "one pub file": keys["p"].public,
        "list of pub files": [str(keys[n].public) for n in NAMES],
        "keyring file": ring,
        "Keyring": Keyring.load([ring]),
    }[form]
    loaded = bv.PerturbedStatistic.load(files["p"], verify_with=verify_with)
    assert loaded.source_file.verified_key == keys["p"].fingerprint


def test_the_signature_is_over_the_canonical_content_not_the_layout(consortium, files):
    """Re-indented, with keys in another order, the file still verifies: what is signed is the canonical JSON."""
    record = json.loads(files["p"].read_text())
    files["p"].write_text(json.dumps(dict(reversed(list(record.items()))), indent=4, sort_keys=False))
    loaded = bv.PerturbedStatistic.load(files["p"], verify_with=keyring_dir(consortium))
    assert loaded.source_file.status == "verified"


def test_a_writer_may_require_the_signature(consortium, files):
    """A later writer may list `signature` in `required`: this reader knows it, and refuses such a file without one."""
    record = json.loads(files["p"].read_text())
    record["required"].append("signature")
    del record["checksum"]
    content = {k: v for k, v in record.items() if k != "signature"}
    record["signature"] = sign(_canonical(content), consortium["keys"]["p"].private).to_record()
    record["checksum"] = _checksum(record)
    files["p"].write_text(json.dumps(record))
    assert bv.PerturbedStatistic.load(files["p"], verify_with=keyring_dir(consortium)).source_file.status == "verified"
    rewrite(files["p"], lambda r: r.pop("signature"))
    with pytest.raises(ValueError, match=rf"release file {at(files['p'])}: fields \['signature'\] are missing"):
        bv.PerturbedStatistic.load(files["p"])


def test_a_signed_release_without_a_keyring_loads_and_says_it_is_not_verified(consortium, files):
    loaded = bv.PerturbedStatistic.load(files["q"])
    assert loaded.source_file.status == "signed, not verified"
    assert loaded.integrity.startswith(f"signed with key {consortium['keys']['q'].fingerprint}, not checked")


# --- edits are refused, naming the file ------------------------------------------------------------------------------


def test_one_edited_byte_is_refused_naming_the_file(files):
    text = files["p"].read_text()
    digit = text.index('"count": ') + len('"count": ')
    edited = text[:digit] + str((int(text[digit]) + 1) % 10) + text[digit + 1 :]  # one digit of the count
    assert sum(a != b for a, b in zip(text, edited)) == 1
    files["p"].write_text(edited)
    with pytest.raises(ValueError, match=rf"release file {at(files['p'])}: checksum mismatch"):
        bv.PerturbedStatistic.load(files["p"])


EDITS = {
    "count x 10": lambda r: r.update(count=r["count"] * 10),
    "one statistic entry": lambda r: r["perturbed"].__setitem__(0, r["perturbed"][0] + r["release"]["grid"]),
    "release_id": lambda r: r["release"].update(release_id="0" * 32),
    "experiment mark": lambda r: r.update(experiment=True),
    "bounds": lambda r: r["bounds"].update(x_norm=r["bounds"]["x_norm"] * 2),
    "statistic": lambda r: r["statistic"].update(kind="logistic_regression"),
    "required": lambda r: r.update(required=r["required"][:-1]),
    "an added field": lambda r: r.update(comment="added after signing"),
    "guarantee": lambda r: r["release"]["guarantee"].update(epsilon=r["release"]["guarantee"]["epsilon"] * 10),
}


@pytest.mark.parametrize("edit", sorted(EDITS))
@pytest.mark.parametrize("verify", [False, True], ids=["no keyring", "keyring"])
def test_a_re_checksummed_edit_of_any_field_is_refused(consortium, files, edit, verify):
    """The checksum is recomputed, as anyone can; the signature covers every field, so the edit is found, with or
    without the mediator's keyring."""
    rewrite(files["p"], EDITS[edit])
    with pytest.raises(ValueError, match=rf"release file {at(files['p'])}: its signature does not match its content"):
        bv.PerturbedStatistic.load(files["p"], verify_with=keyring_dir(consortium) if verify else None)


def test_a_copy_under_another_name_is_refused(consortium, files, tmp_path):
    """p's signed file renamed as party s (both owner fields, re-checksummed): its signature no longer matches."""

    def rename(record):
        record["owner"] = record["release"]["owner"] = "s"

    copy = rewrite(files["p"], rename, target=tmp_path / "s.release.json")
    with pytest.raises(ValueError, match=rf"release file {at(copy)}: its signature does not match its content"):
        bv.PerturbedStatistic.load(copy)


def test_a_release_signed_with_another_key_is_refused_naming_both_keys(consortium, files):
    """q's release re-signed with p's key (an edit by p, or p passing off a release as q's) verifies on its own but
    not against q's key in the keyring."""
    released = bv.PerturbedStatistic.load(files["q"])
    released.save(files["q"], signing_key=consortium["keys"]["p"].private)
    assert bv.PerturbedStatistic.load(files["q"]).source_file.status == "signed, not verified"
    keys = consortium["keys"]
    with pytest.raises(
        ValueError,
        match=rf"release file {at(files['q'])}: it is signed with key {at(keys['p'].fingerprint)}, which is not q's "
        rf"key \({at(keys['q'].fingerprint)}",
    ):
        bv.PerturbedStatistic.load(files["q"], verify_with=keyring_dir(consortium))


_ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"  # base64's


def test_a_key_written_in_another_base64_of_the_same_bytes_verifies(consortium, files, tmp_path):
    """Base64 leaves a 32-byte key's last two bits free: a keyring line that sets them names the same key, and the
    release verifies (it was refused as signed with another key, naming the same fingerprint twice)."""
    line = (keyring_dir(consortium) / "p.pub").read_text().split()
    other = line[1][:-2] + _ALPHABET[_ALPHABET.index(line[1][-2]) ^ 1] + "="
    assert other != line[1] and base64.b64decode(other) == base64.b64decode(line[1])
    (tmp_path / "p.pub").write_text(f"{line[0]} {other} {line[2]}\n")
    assert bv.PerturbedStatistic.load(files["p"], verify_with=tmp_path).source_file.status == "verified"


def test_an_unsigned_file_is_refused_when_verifying(consortium, files):
    with pytest.raises(
        ValueError, match=rf"release file {at(files['r'])}: it is unsigned, but the keyring holds r's key"
    ):
        bv.PerturbedStatistic.load(files["r"], verify_with=keyring_dir(consortium))


def test_a_party_missing_from_the_keyring_is_refused(consortium, files):
    with pytest.raises(ValueError, match=rf"{at(files['q'])}: the keyring has no public key for party 'q' .*\['p'\]"):
        bv.PerturbedStatistic.load(files["q"], verify_with=consortium["keys"]["p"].public)


# --- copies among the parties: the same release_id or statistic ------------------------------------------------------


def _renamed(path, target, owner, *, new_id=False):
    def rename(record):
        record["owner"] = record["release"]["owner"] = owner
        record.pop("signature", None)
        if new_id:
            record["release"]["release_id"] = "f" * 32

    return rewrite(path, rename, target=target)


@pytest.mark.parametrize("new_id", [False, True], ids=["same release_id", "new release_id"])
def test_an_unsigned_copy_under_another_name_is_refused_naming_both_files(files, tmp_path, monkeypatch, new_id):
    """An unsigned copy renamed to party s loads on its own, but valued beside the original it would be paid twice
    while the ledger counts its release once: refused before anything is sampled, naming both files."""
    copy = _renamed(files["r"], tmp_path / "s.release.json", "s", new_id=new_id)
    parties = [bv.PerturbedStatistic.load(f) for f in (files["r"], copy)]
    monkeypatch.setattr(party_path, "release_checked", _stop)
    what = "the same perturbed statistic bit for bit" if new_id else "the same release_id"
    with pytest.raises(
        ValueError,
        match=rf"party 'r' \(release file {at(files['r'])}\) and party 's' \(release file {at(copy)}\) hold {what}",
    ):
        bv.valuate(bv.models.LinearRegression(), parties, config=TINY)


@pytest.mark.parametrize(
    "field, value", [("release_id", ["a"]), ("release_id", ""), ("owner", "r\rs"), ("what", 7)], ids=str
)
def test_a_crafted_release_field_is_refused_at_load_naming_it(files, tmp_path, field, value):
    """A re-checksummed file whose release_id, owner or description is not one printable string is refused when it is
    read, naming the field (a list release_id once reached valuate as "unhashable type: 'list'")."""

    def craft(record):
        record["release"][field] = value
        record.pop("signature", None)

    crafted = rewrite(files["r"], craft, target=tmp_path / "crafted.release.json")
    with pytest.raises((ValueError, TypeError), match=rf"Release\.{field} must be a non-empty string of printable"):
        bv.PerturbedStatistic.load(crafted)


@pytest.mark.parametrize("num_features", [3, 10**6, 10**30])
def test_a_release_whose_num_features_disagrees_with_its_statistic_is_refused_before_any_layout(
    files, tmp_path, num_features
):
    """A re-checksummed file whose statistic says w features while `perturbed` holds the 2-feature statistic's 9
    entries is refused by the entry counts, in closed form: at w = 10^6 building the statistic's layout to count
    them tried to allocate 931 GiB (a traceback, not a refusal)."""

    def craft(record):
        record["statistic"]["num_features"] = num_features
        record.pop("signature", None)

    crafted = rewrite(files["r"], craft, target=tmp_path / "crafted.release.json")
    entries = (num_features + 2) * (num_features + 3) // 2 - 1
    with pytest.raises(ValueError, match=rf"statistic of .* has {entries} entries, the release has 9$"):
        bv.PerturbedStatistic.load(crafted)


def test_a_copy_re_signed_by_the_copier_is_refused_as_a_duplicate(consortium, files, tmp_path):
    """q copies p's release under its own name and signs it with its own key: the file verifies, and the copy is
    found by its statistic (and release_id)."""
    copy = _renamed(files["p"], files["q"], "q")
    bv.PerturbedStatistic.load(copy).save(copy, signing_key=consortium["keys"]["q"].private)
    ring = keyring_dir(consortium)
    parties = [bv.PerturbedStatistic.load(f, verify_with=ring) for f in (files["p"], copy)]
    assert [p.source_file.status for p in parties] == ["verified", "verified"]
    with pytest.raises(
        ValueError, match=rf"\(release file {at(files['p'])}\) and party 'q' \(release file {at(copy)}\) hold"
    ):
        bv.parties.check_parties(bv.models.LinearRegression(), parties)


def test_the_same_file_twice_is_refused_naming_it(files):
    parties = [bv.PerturbedStatistic.load(files["p"]), bv.PerturbedStatistic.load(files["p"])]
    with pytest.raises(
        ValueError, match=rf"names must be unique, got \['p', 'p'\] \(release files \['{at(files['p'])}', '"
    ):
        bv.parties.check_parties(bv.models.LinearRegression(), parties)


def test_the_cli_refuses_a_copy_naming_both_files(files, tmp_path, capsys):
    copy = _renamed(files["r"], tmp_path / "s.release.json", "s")
    with pytest.raises(SystemExit):
        main(["valuate", str(files["r"]), str(copy), "--no-progress"])
    err = capsys.readouterr().err
    assert f"(release file {files['r']}) and party 's' (release file {copy}) hold the same release_id" in err


# --- unsigned files still load, with a note --------------------------------------------------------------------------


def test_unsigned_files_load_with_a_note_and_valuate_warns(files, monkeypatch):
    loaded = [bv.PerturbedStatistic.load(files[name]) for name in ("q", "r")]
    assert loaded[1].source_file.status == "unsigned" and loaded[1].caveats == []
    assert loaded[1].integrity.startswith("unsigned: its checksum catches accidental damage, not a deliberate edit")
    monkeypatch.setattr(party_path, "release_checked", _stop)
    with pytest.warns(UserWarning, match=r"release files of q \(signed, not verified\), r \(unsigned\) are not veri"):
        with pytest.raises(_Stopped):
            bv.valuate(bv.models.LinearRegression(), loaded, config=TINY)


def test_verified_files_give_no_integrity_warning(consortium, files, monkeypatch):
    loaded = [bv.PerturbedStatistic.load(files[n], verify_with=keyring_dir(consortium)) for n in ("p", "q")]
    monkeypatch.setattr(party_path, "release_checked", _stop)
    with warnings.catch_warnings(record=True) as caught, pytest.raises(_Stopped):
        warnings.simplefilter("always")
        bv.valuate(bv.models.LinearRegression(), loaded, config=TINY)
    assert not [w for w in caught if "not verified" in str(w.message)]


# --- version 1 relabelling -------------------------------------------------------------------------------------------


def _as_version_1(record, *, keep=()):
    for name in ("required", "noise_source", "experiment", "signature"):
        if name not in keep:
            record.pop(name, None)
    record["version"] = 1


@pytest.mark.parametrize("field", ["required", "noise_source", "experiment", "signature"])
def test_a_version_1_file_with_a_version_2_field_is_refused(files, field):
    rewrite(files["p"], lambda r: _as_version_1(r, keep=(field,)))
    with pytest.raises(
        ValueError,
        match=rf"release file {at(files['p'])}: it says version 1 but carries the version 2 field\(s\) \['{field}",
    ):
        bv.PerturbedStatistic.load(files["p"])


def test_a_discrete_gaussian_release_relabelled_as_version_1_is_refused(files):
    rewrite(files["r"], _as_version_1)
    with pytest.raises(
        ValueError, match=rf"{at(files['r'])}: it says version 1, .* noise 'discrete_gaussian', grid [0-9.e-]+:"
    ):
        bv.PerturbedStatistic.load(files["r"])


def test_a_seeded_release_relabelled_as_version_1_is_refused_by_a_verifying_mediator(syn, consortium, tmp_path):
    """A signed, seeded float release rewritten as version 1 (its marks and signature dropped) loads without a
    keyring, saying its file does not record whether it was seeded; a verifying mediator refuses it."""
    party = bv.Party(*syn.parties[0], epsilon=0.5, bounds=syn.bounds, name="p", mechanism="gaussian", noise_seed=7)
    path = party.release().save(
        tmp_path / "p.release.json", experiment=True, signing_key=consortium["keys"]["p"].private
    )
    assert bv.PerturbedStatistic.load(path, verify_with=keyring_dir(consortium)).seeded
    rewrite(path, lambda r: (_as_version_1(r), r["release"].pop("grid")))
    loaded = bv.PerturbedStatistic.load(path)
    assert loaded.file_version == 1 and "does not record whether it was seeded" in loaded.caveats[0]
    with pytest.raises(ValueError, match=rf"release file {at(path)}: it is unsigned"):
        bv.PerturbedStatistic.load(path, verify_with=keyring_dir(consortium))


def test_a_version_1_file_with_a_null_grid_still_loads(syn, tmp_path):
    """Version 1 writers of float releases wrote `"grid": null` or no grid at all: both load."""
    released = bv.Party(*syn.parties[0], epsilon=0.5, bounds=syn.bounds, name="p", mechanism="gaussian").release()
    record = released.to_record()
    _as_version_1(record)
    record["checksum"] = _checksum(record)
    path = tmp_path / "old.release.json"
    path.write_text(json.dumps(record))
    assert record["release"]["grid"] is None and bv.PerturbedStatistic.load(path).file_version == 1


# --- key files --------------------------------------------------------------------------------------------------------


def test_keygen_writes_a_private_key_only_its_owner_reads_and_never_overwrites(tmp_path):
    keys = generate_keys(tmp_path / "party 1.key", owner="party 1")
    assert keys.private == tmp_path / "party 1.key" and keys.public == tmp_path / "party 1.pub"
    assert os.stat(keys.private).st_mode & 0o777 == 0o600
    tag, key, owner = keys.public.read_text().strip().split(maxsplit=2)
    assert (tag, owner) == ("bayesval-ed25519", "party 1") and len(base64.b64decode(key)) == 32
    ring = Keyring.load([keys.public])
    assert ring.keys == {"party 1": key} and ring.fingerprint_of("party 1") == keys.fingerprint
    private = load_signing_key(keys.private)
    raw = private.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    assert base64.b64encode(raw).decode() == key
    before = keys.private.read_bytes()
    with pytest.raises(ValueError, match=r"exist already; bayesval never overwrites a key"):
        generate_keys(tmp_path / "party 1", owner="party 1")
    assert keys.private.read_bytes() == before
    for owner in ("alice\rbob", "alice\x0bbob", "alice\u2028bob"):  # line breaks the keyring reader splits on
        with pytest.raises(ValueError, match=r"must be a party's name \(non-empty, one line"):
            generate_keys(tmp_path / "other", owner=owner)
    assert not (tmp_path / "other.key").exists()


def test_a_signing_key_readable_by_others_warns(tmp_path):
    keys = generate_keys(tmp_path / "p")
    os.chmod(keys.private, 0o644)
    with pytest.warns(
        UserWarning, match=rf"signing key file {at(keys.private)} can be read by other users \(mode 0644\)"
    ):
        load_signing_key(keys.private)


def _encrypted_key(path):
    key = Ed25519PrivateKey.generate()
    encryption = serialization.BestAvailableEncryption(b"secret")
    path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, encryption))


BAD_SIGNING_KEYS = {
    "missing": (None, FileNotFoundError, r"signing key file {path} does not exist \(`bayesval keygen NAME`"),
    "garbled": (b"-----BEGIN PRIVATE KEY-----\nnot a key\n", ValueError, r"{path} is not a PEM private key"),
    "binary": (bytes(range(256)), ValueError, r"{path} is not a PEM private key"),
    "a public key": (b"bayesval-ed25519 AAAA p\n", ValueError, r"{path} is a public key \(a .pub file\)"),
    "encrypted": ("encrypted", ValueError, r"{path} is encrypted with a password"),
    "a folder": ("folder", ValueError, r"signing key file {path} is a folder"),
}


@pytest.mark.parametrize("case", sorted(BAD_SIGNING_KEYS))
def test_a_bad_signing_key_gives_a_clear_error_before_anything_is_written(consortium, tmp_path, case):
    content, error, message = BAD_SIGNING_KEYS[case]
    path = tmp_path / "bad.key"
    if content == "encrypted":
        _encrypted_key(path)
    elif content == "folder":
        path.mkdir()
    elif content is not None:
        path.write_bytes(content)
    target = tmp_path / "p.release.json"
    with pytest.raises(error, match=message.format(path=at(path))):
        consortium["released"]["p"].save(target, signing_key=path)
    assert not target.exists()


BAD_KEYRINGS = {
    "missing": (None, FileNotFoundError, r"public key file or keyring {path} does not exist"),
    "garbled line": ("ssh-ed25519 AAAA p\n", ValueError, r"{path} line 1: expected 'bayesval-ed25519 KEY OWNER'"),
    "no owner": ("bayesval-ed25519 " + "A" * 43 + "=\n", ValueError, r"{path} line 1: expected"),
    "short key": ("bayesval-ed25519 AAAA p\n", ValueError, r"{path} line 1: the key must be the base64 of 32 bytes"),
    "not base64": ("bayesval-ed25519 !!!! p\n", ValueError, r"{path} line 1: the key must be the base64 of 32 bytes"),
    "binary": (bytes(range(128, 256)), ValueError, r"public key file {path} is not text"),
    "a private key": ("private", ValueError, r"{path} is a private key: the mediator's keyring takes public keys"),
    "empty": ("# nothing yet\n", ValueError, r"no public keys in \['{path}'\]"),
    "empty folder": ("folder", ValueError, r"keyring folder {path} holds no .pub files"),
}


@pytest.mark.parametrize("case", sorted(BAD_KEYRINGS))
def test_a_bad_public_key_file_gives_a_clear_error_naming_it(consortium, files, tmp_path, case):
    content, error, message = BAD_KEYRINGS[case]
    path = tmp_path / "bad.pub"
    if content == "private":
        shutil.copy(consortium["keys"]["p"].private, path)
    elif content == "folder":
        path.mkdir()
    elif isinstance(content, bytes):
        path.write_bytes(content)
    elif content is not None:
        path.write_text(content)
    with pytest.raises(error, match=message.format(path=at(path))):
        bv.PerturbedStatistic.load(files["p"], verify_with=path)


def test_a_keyring_refuses_two_keys_for_a_party_and_one_key_for_two_parties(consortium, tmp_path):
    keys = consortium["keys"]
    other = generate_keys(tmp_path / "other", owner="p")
    with pytest.raises(
        ValueError, match=rf"party 'p' has two different public keys, in {at(keys['p'].public)} line 1 and"
    ):
        Keyring.load([keys["p"].public, other.public])
    shared = tmp_path / "shared.pub"
    shared.write_text(keys["p"].public.read_text().replace(" p\n", " q\n"))
    with pytest.raises(ValueError, match=r"one public key is given for two parties, 'p' .* and 'q'"):
        Keyring.load([keys["p"].public, shared])
    # the same key in base64's other spelling (its last two bits set): still one key, so still refused for q, and
    # not a second key of p's
    tag, key, owner = keys["p"].public.read_text().split()
    respelled = key[:-2] + _ALPHABET[_ALPHABET.index(key[-2]) ^ 1] + "="
    assert respelled != key and base64.b64decode(respelled) == base64.b64decode(key)
    shared.write_text(f"{tag} {respelled} q\n")
    with pytest.raises(ValueError, match=r"one public key is given for two parties, 'p' .* and 'q'"):
        Keyring.load([keys["p"].public, shared])
    shared.write_text(f"{tag} {respelled} {owner}\n")
    assert Keyring.load([keys["p"].public, shared]).keys == {"p": key}


@pytest.mark.parametrize("verify_with", [3, [], [3.0]], ids=["a number", "an empty list", "a list of numbers"])
def test_verify_with_of_the_wrong_type_is_refused(files, verify_with):
    with pytest.raises(TypeError, match=r"verify_with must be a Keyring, or the path\(s\) of public key files"):
        bv.PerturbedStatistic.load(files["p"], verify_with=verify_with)


# --- the command line -------------------------------------------------------------------------------------------------


def test_cli_keygen_release_sign_and_valuate_verify(syn, tmp_path, capsys, monkeypatch):
    """keygen -> release --sign -> valuate --verify KEYS/ (stopped before sampling: the loading and the integrity
    lines are what is tested)."""
    import pandas as pd

    monkeypatch.chdir(tmp_path)
    (tmp_path / "keys").mkdir()
    release_files = []
    for name, (X, y) in zip(("a", "b"), syn.parties):
        main(["keygen", name])
        shutil.copy(f"{name}.pub", tmp_path / "keys")
        pd.DataFrame({"x0": X[:, 0], "x1": X[:, 1], "t": y}).to_csv(f"{name}.csv", index=False)
        options = ["--model", "linear", "--target", "t", "--epsilon", "1", "--bounds", "1,3", "--sign", f"{name}.key"]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            main(["release", f"{name}.csv", *options])
        release_files.append(f"{name}.release.json")
    out = capsys.readouterr().out
    fingerprint = Keyring.load([tmp_path / "keys"]).fingerprint_of("a")
    assert f"a: public key a.pub, fingerprint {fingerprint}" in out
    assert f"a: signed with key {fingerprint}, not checked" in out
    assert os.stat("a.key").st_mode & 0o777 == 0o600
    monkeypatch.setattr(cli, "_valuate_and_report", _stop)
    with pytest.raises(_Stopped):
        main(["valuate", *release_files, "--verify", "keys"])
    out = capsys.readouterr().out
    assert f"  a (a.release.json): signed by its party's key {fingerprint}, verified against the keyring" in out
    with pytest.raises(_Stopped):
        main(["valuate", *release_files])
    assert "  b (b.release.json): signed with key" in capsys.readouterr().out


def test_cli_refusals_name_the_file_and_release_nothing(syn, tmp_path, capsys, monkeypatch):
    import pandas as pd

    monkeypatch.chdir(tmp_path)
    X, y = syn.parties[0]
    pd.DataFrame({"x0": X[:, 0], "x1": X[:, 1], "t": y}).to_csv("a.csv", index=False)
    options = ["--model", "linear", "--target", "t", "--epsilon", "1", "--bounds", "1,3"]
    with pytest.raises(SystemExit):
        main(["release", "a.csv", *options, "--sign", "missing.key"])
    assert "bayesval release: signing key file missing.key does not exist" in capsys.readouterr().err
    assert not (tmp_path / "a.release.json").exists()
    main(["keygen", "a"])
    with pytest.raises(SystemExit):
        main(["keygen", "a"])
    assert "exist already" in capsys.readouterr().err
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        main(["release", "a.csv", *options])  # unsigned
    with pytest.raises(SystemExit):
        main(["valuate", "a.release.json", "a.release.json", "--verify", "a.pub"])
    assert "bayesval valuate: release file a.release.json: it is unsigned" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["valuate", "a.csv", "a.csv", "--verify", "a.pub"])
    assert "--verify checks signed release files" in capsys.readouterr().err
