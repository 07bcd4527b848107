"""Result files through one serialisation protocol (bayesval.results.serialisation): files written by the writer
before it still load bit for bit, records nest through the registry, readers refuse what they cannot read, results
are immutable, and the results layer imports nothing above validation and statistics."""

from __future__ import annotations

import ast
import dataclasses
import json
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest
from game_examples import random_table, table_utility

import bayesval as bv
from bayesval.parties.rewards.allocation import Rewards
from bayesval.results import serialisation
from bayesval.results.result import LEDGER_KIND
from bayesval.results.state import SemivalueState

OLD = Path(__file__).parent / "data" / "old_results"
sys.path.insert(0, str(OLD))
import make_old_results as old  # noqa: E402  (the builders of the old files, run here with today's code)


def _assert_same_record(loaded, expected):
    """Equal records, but for floats computed through libm (a release's calibrated noise scale), whose last bit may
    differ on another CPU than the one that wrote the old file: those within 1e-12 of each other."""
    if isinstance(expected, float):
        assert loaded == pytest.approx(expected, rel=1e-12, abs=0)
    elif isinstance(expected, dict):
        assert isinstance(loaded, dict) and loaded.keys() == expected.keys()
        for name in expected:
            _assert_same_record(loaded[name], expected[name])
    elif isinstance(expected, list | tuple):
        assert type(loaded) is type(expected) and len(loaded) == len(expected)
        for one, other in zip(loaded, expected):
            _assert_same_record(one, other)
    else:
        assert loaded == expected


def _assert_same_result(loaded, expected, recomputed=()):
    """Equal results, but for the `recomputed` arrays (today's code computes them otherwise than the file's did)."""
    for name in ("values", "stderr", "coalition_masks", "coalition_values", "coalition_stderr", "counts", "converged"):
        if name in recomputed:
            continue
        actual, wanted = getattr(loaded, name), getattr(expected, name)
        assert (actual is None) == (wanted is None), name
        if wanted is not None:
            assert actual.dtype == wanted.dtype, name
            np.testing.assert_array_equal(actual, wanted, err_msg=name)
    assert loaded.method == expected.method and loaded.names == expected.names
    assert loaded.parameter_names == expected.parameter_names
    _assert_same_record(loaded.privacy.to_records(), expected.privacy.to_records())


def test_a_sampled_result_written_before_the_protocol_loads_bit_for_bit_and_resumes():
    loaded = bv.ValuationResult.load(OLD / "sampled_2d1214a.npz")
    fresh = old.sampled()
    _assert_same_result(loaded, fresh, recomputed=("stderr",))
    # the file keeps the standard errors it reported; today's give a keyed utility's single coalitions each their own
    # noise variance with a guard of their own range (bayesval.results.variance, 2026-12-05), where the file's pooled
    # it over every such group
    np.testing.assert_allclose(loaded.stderr, fresh.stderr, rtol=0.05)
    for name in SemivalueState.ARRAYS:
        np.testing.assert_array_equal(getattr(loaded.state, name), getattr(fresh.state, name), err_msg=name)
    assert loaded.state.keyed and fresh.state.keyed  # version 1: the utility's form unknown, so sampled as keyed
    assert loaded.state.to_record()[0] == fresh.state.to_record()[0] | {"game": None}  # version 1: no fingerprint
    assert loaded.state.control_table is None and loaded.state.control_semivalue is None  # version 1: no control
    utility = table_utility(random_table(7, 5), noise=0.05)
    options = {"sampler": old.PermutationSampler(), "batch_size": 8, "names": list("abcde")}
    with pytest.warns(UserWarning, match="saved before results kept their game's fingerprint, so bayesval cannot"):
        resumed = old.semivalue(utility, 5, 3, stop=old.MaxEvaluations(1920), resume_from=loaded, **options)
    assert resumed.state.game == fresh.state.game  # it now carries this run's
    whole = old.semivalue(utility, 5, 3, stop=old.MaxEvaluations(1920), **options)
    np.testing.assert_array_equal(resumed.values, whole.values)
    np.testing.assert_array_equal(resumed.stderr, whole.stderr)


def test_a_party_result_written_before_the_protocol_loads_with_its_ledger_and_rewards():
    loaded = bv.ValuationResult.load(OLD / "parties_2d1214a.npz")
    expected = old.parties()
    _assert_same_result(loaded, expected)
    np.testing.assert_array_equal(loaded.draws, expected.draws)
    assert loaded.diagnostics == expected.diagnostics
    _assert_same_record(loaded.rewards.to_record()[0], expected.rewards.to_record()[0])
    for name in Rewards.ARRAYS:
        np.testing.assert_array_equal(getattr(loaded.rewards, name), getattr(expected.rewards, name), err_msg=name)
    assert loaded.privacy_spent().keys() == {"ann", "bob"}


def test_a_saved_result_is_one_versioned_archive_with_nested_records(tmp_path):
    result = old.parties()
    path = result.save(tmp_path / "r.npz")
    with np.load(path) as data:
        meta = json.loads(str(data["_meta"]))
        names = set(data.files)
    assert meta["format"] == "bayesval.archive" and meta["format_version"] == 1
    assert (meta["kind"], meta["version"]) == ("bayesval.valuation_result", 2)
    assert meta["meta"]["privacy"]["kind"] == LEDGER_KIND and meta["meta"]["rewards"]["kind"] == "bayesval.rewards"
    assert {"rewards_draws", "values", "draws"} <= names
    again = bv.ValuationResult.load(path)
    _assert_same_result(again, result)
    assert again.rewards.to_record()[0] == result.rewards.to_record()[0]
    sampled = old.sampled()
    loaded = bv.ValuationResult.load(sampled.save(tmp_path / "s.npz"))
    _assert_same_result(loaded, sampled)
    np.testing.assert_array_equal(loaded.state.sums, sampled.state.sums)


def _rewritten(path: Path, change) -> Path:
    with np.load(path) as data:
        arrays = {name: data[name] for name in data.files}
    meta = json.loads(str(arrays.pop("_meta")))
    change(meta)
    np.savez(path, _meta=np.array(json.dumps(meta)), **arrays)
    return path


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda m: m.update(version=3), r"valuation_result record of version 3, newer than this bayesval reads"),
        (lambda m: m.update(format_version=2), r"archive format_version 2 is not one this bayesval reads"),
        (lambda m: m.update(kind="bayesval.rewards"), r"it holds a 'bayesval.rewards' record, not a"),
        (lambda m: m["meta"]["privacy"].update(kind="x.y"), r"unknown kind 'x.y'"),
        (lambda m: m["meta"]["privacy"].update(version=2), r"privacy_ledger record of version 2, newer"),
        (lambda m: m.update(format="other"), r"not a bayesval result .*format is 'other'"),
    ],
)
def test_a_reader_refuses_what_it_cannot_read_with_the_path(tmp_path, change, message):
    path = _rewritten(bv.ValuationResult("m", [1.0, 2.0], [0.1, 0.2], ["a", "b"]).save(tmp_path / "r.npz"), change)
    with pytest.raises(ValueError, match=message) as error:
        bv.ValuationResult.load(path)
    assert str(path) in str(error.value)


def test_a_kind_names_one_class():
    @dataclasses.dataclass
    class Other:
        version = 1

        def to_record(self):
            return {}, {}

        @classmethod
        def from_record(cls, meta, arrays, *, version=1):
            return cls()

    with pytest.raises(ValueError, match="taken"):
        serialisation.register(LEDGER_KIND)(Other)
    assert serialisation.registered(LEDGER_KIND) is bv.PrivacyLedger
    with pytest.raises(TypeError, match="not a registered record class"):
        serialisation.encode(Other())


def test_a_result_is_immutable_once_built():
    values = np.array([1.0, 2.0])
    result = bv.ValuationResult("m", values, [0.1, 0.2], ["a", "b"], counts=[3, 4])
    with pytest.raises(dataclasses.FrozenInstanceError):
        result.values = np.zeros(2)
    with pytest.raises(ValueError, match="read-only"):
        result.values[0] = 5.0
    values[0] = 7.0  # the caller's array is not the result's
    assert result.values[0] == 1.0 and values.flags.writeable
    changed = dataclasses.replace(result, method="other")
    assert changed.method == "other" and result.method == "m"
    with pytest.raises(ValueError, match="finite"):
        dataclasses.replace(result, values=[1.0, np.nan])


def test_the_old_json_methods_warn_and_give_the_record():
    state = old.sampled().state
    with pytest.warns(DeprecationWarning, match="to_record"):
        meta = state.to_json()
    assert meta == state.to_record()[0]
    rewards = old.rewards()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        meta, arrays = rewards.to_record()
    with pytest.warns(DeprecationWarning, match="from_record"):
        again = Rewards.from_json(meta, arrays)
    np.testing.assert_array_equal(again.draws, rewards.draws)


ALLOWED = ("bayesval.results", "bayesval.validation", "bayesval.statistics", "bayesval.outputs")  # the bottom floor


def _imports(tree: ast.AST):
    """Every bayesval module a module imports, at any depth, but inside `if TYPE_CHECKING:`."""
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and getattr(node.test, "id", None) == "TYPE_CHECKING":
            node.body = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            yield node.module
        elif isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)


def test_the_results_layer_is_a_leaf():
    folder = Path(bv.__file__).parent / "results"
    upward = {
        (path.name, module)
        for path in folder.glob("*.py")
        for module in _imports(ast.parse(path.read_text()))
        if module.startswith("bayesval") and not module.startswith(ALLOWED)
    }
    assert not upward
