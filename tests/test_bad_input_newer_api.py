"""Bad input across the newer half of the API (tracker issue 28): the tables the CLI reads, `ValuationResult` and its
files, the incentive report, removal curves, the scikit-learn utility, MNLP and the Monte Carlo baseline's plan.

The same harness as tests/test_bad_input_suite.py: each row of REFUSED is (call, expected exception type, a phrase
the message must contain). The call must raise that type (a SystemExit with the message on stderr for the CLI) from
bayesval's own code, within a second, and the message must name the argument, file or column. ACCEPTED lists what
looks unusual but is accepted on purpose, with the reason, and checks that it works and gives no NaN.
"""

from __future__ import annotations

import dataclasses
import json
import warnings
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from sklearn.linear_model import LinearRegression, LogisticRegression, Ridge
from sklearn.neighbors import KNeighborsRegressor
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.svm import SVC
from test_bad_input_suite import INF, NAN, Accepted, Case, problems
from test_rewards import _hand_result

import bayesval as bv
from bayesval.cli import main as cli_main
from bayesval.datasets.tables import read_table, read_tables
from bayesval.estimators import MonteCarloShapley, SklearnUtility, removal_curves
from bayesval.rewards import base_rate_mnlp, incentive_report, mnlp_classification, mnlp_regression

# the coalition values (by bitmask) of a 3-party game in which c adds nothing to any coalition
GAME = {0: 0.0, 1: 3.0, 2: 2.0, 3: 4.0, 4: 0.0, 5: 3.0, 6: 2.0, 7: 4.0}
META = {"method": "m", "names": ["a", "b"], "privacy": [], "diagnostics": {}}


class World:
    """The files and objects the cases use, built once."""

    def __init__(self, tmp: Path) -> None:
        rng = np.random.default_rng(28)
        self.tmp = tmp
        self.X = rng.normal(size=(40, 2)) * 0.4
        self.y = self.X @ np.array([1.0, -1.0]) + 0.1 * rng.normal(size=40)
        self.labels = (self.X[:, 0] > 0).astype(int)
        self.tables = self._tables()
        self.results = self._result_files()
        self.rewarded = _hand_result(GAME, [2.5, 1.5, 0.0])
        w = 2  # the reward draws predict from 2 features: (w, bias, noise variance) and (w, bias)
        self.regression_rewards = self._with_draws(w + 2)
        self.classification_rewards = self._with_draws(w + 1)

    def _with_draws(self, width: int) -> bv.rewards.Rewards:
        rng = np.random.default_rng(width)
        draws = np.abs(rng.normal(size=(3, 50, width))) + 0.1  # the noise variance (last column) > 0
        return dataclasses.replace(self.rewarded.rewards, draws=draws, grand_draws=draws[0], own_draws=draws)

    def _tables(self) -> dict[str, Path]:
        good = pd.DataFrame({"x1": self.X[:, 0], "x2": self.X[:, 1], "target": self.y})
        labelled = pd.DataFrame({"x1": self.X[:, 0], "x2": self.X[:, 1], "label": self.labels})
        paths = {name: self.tmp / f"{name}.csv" for name in ("good", "train", "validation")}
        good.to_csv(paths["good"], index=False)
        labelled.iloc[:30].to_csv(paths["train"], index=False)
        labelled.iloc[30:].to_csv(paths["validation"], index=False)
        flags = np.where(self.X[:, 1] > 0, "True", "False")
        raw = {  # written as text: the header and cells exactly as a user's file has them
            "duplicate": ("x1,x1,target", lambda i: f"{self.X[i, 0]},{self.X[i, 1]},{self.y[i]}"),
            "duplicate_target": ("x1,target,target", lambda i: f"{self.X[i, 0]},{self.y[i]},{self.y[i]}"),
            "duplicate_unused": ("x1,x2,note,note,target", lambda i: f"{self.X[i, 0]},{self.X[i, 1]},0,1,{self.y[i]}"),
            "index": (",x1,x2,target", lambda i: f"{i},{self.X[i, 0]},{self.X[i, 1]},{self.y[i]}"),
            "unnamed": ("x1,,target", lambda i: f"{self.X[i, 0]},{self.X[i, 1]},{self.y[i]}"),
            "long_rows": ("x1,x2,target", lambda i: f"{i},{self.X[i, 0]},{self.X[i, 1]},{self.y[i]}"),
            "flag": ("x1,flag,target", lambda i: f"{self.X[i, 0]},{flags[i]},{self.y[i]}"),
            "flag_blank": ("x1,flag,target", lambda i: f"{self.X[i, 0]},{'' if i == 6 else flags[i]},{self.y[i]}"),
            "flag_and_number": ("x1,flag,target", lambda i: f"{self.X[i, 0]},{'1' if i else 'True'},{self.y[i]}"),
            "flag_label": ("x1,x2,label", lambda i: f"{self.X[i, 0]},{self.X[i, 1]},{bool(self.labels[i])}"),
            "duplicate_train": ("x1,x1,label", lambda i: f"{self.X[i, 0]},{self.X[i, 1]},{self.labels[i]}"),
            "index_validation": (",x1,x2,label", lambda i: f"{i},{self.X[i, 0]},{self.X[i, 1]},{self.labels[i]}"),
            "long_validation": ("x1,x2,label", lambda i: f"{i},{self.X[i, 0]},{self.X[i, 1]},{self.labels[i]}"),
        }
        for name, (header, row) in raw.items():
            paths[name] = self.tmp / f"{name}.csv"
            paths[name].write_text("\n".join([header, *(row(i) for i in range(40))]) + "\n")
        return paths

    def _result_files(self) -> dict[str, Path]:
        files = {name: self.tmp / f"{name}.npz" for name in ("good", "truncated", "random", "json", "empty")}
        bv.ValuationResult("m", [1.0, 2.0], [0.1, 0.1], ["a", "b"], counts=[3, 4]).save(files["good"])
        data = files["good"].read_bytes()
        files["truncated"].write_bytes(data[: len(data) // 2])
        files["random"].write_bytes(np.random.default_rng(0).bytes(600))
        files["json"].write_text(json.dumps(META))
        files["empty"].write_text("")
        files["npy"] = self.tmp / "array.npy"
        np.save(files["npy"], np.ones(3))
        files["zip"] = self.tmp / "text.zip"
        with zipfile.ZipFile(files["zip"], "w") as archive:
            archive.writestr("notes.txt", "not a result")
        written = {  # .npz files that are not results, or whose contents a result refuses
            "no_meta": {"values": np.ones(2)},
            "meta_not_json": {"_meta": np.array("{bad"), "values": np.ones(2), "stderr": np.zeros(2)},
            "meta_list": {"_meta": np.array("[]"), "values": np.ones(2), "stderr": np.zeros(2)},
            "no_stderr": {"_meta": np.array(json.dumps(META)), "values": np.ones(2)},
            "nan_values": {"_meta": np.array(json.dumps(META)), "values": np.array([1.0, NAN]), "stderr": np.zeros(2)},
            "extra_array": {"_meta": np.array(json.dumps(META)), "values": np.ones(2), "stderr": np.zeros(2)}
            | {"weights": np.ones(2)},
            "object_array": {
                "_meta": np.array(json.dumps(META)),
                "values": np.array([1.0, None], dtype=object),
                "stderr": np.zeros(2),
            },
            "bad_privacy": {
                "_meta": np.array(json.dumps(META | {"privacy": [{"owner": "a"}]})),
                "values": np.ones(2),
                "stderr": np.zeros(2),
            },
            "duplicate_names": {
                "_meta": np.array(json.dumps(META | {"names": ["a", "a"]})),
                "values": np.ones(2),
                "stderr": np.zeros(2),
            },
        }
        for name, arrays in written.items():
            files[name] = self.tmp / f"{name}.npz"
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                np.savez(files[name], **arrays)
        files["directory"] = self.tmp / "results_directory"
        files["directory"].mkdir()
        files["missing"] = self.tmp / "missing.npz"
        return files

    def release_cli(self, table: str, *changes: str) -> list[str]:
        """`bayesval release` of one of the tables, with options added."""
        output = ["-o", str(self.tmp / "cli.release.json")]
        options = ["--model", "linear", "--target", "target", "--epsilon", "1", "--bounds", "3,3"]
        return ["release", str(self.tables[table]), *options, *output, *changes]

    def valuate_cli(self, table: str, *changes: str) -> list[str]:
        """`bayesval valuate` of the good table and one other, released in-process."""
        options = ["--model", "linear", "--target", "target", "--epsilon", "1", "--bounds", "3,3", "--no-progress"]
        return ["valuate", str(self.tables["good"]), str(self.tables[table]), *options, *changes]

    def knn_cli(self, train: str = "train", validation: str = "validation", *changes: str) -> list[str]:
        arguments = ["knn", str(self.tables[train]), "--validation", str(self.tables[validation])]
        return [*arguments, "--target", "label", *changes]

    def result(self, **changes) -> bv.ValuationResult:
        """ValuationResult of 2 values, with the given fields changed."""
        arguments = {"method": "m", "values": [1.0, 2.0], "stderr": [0.1, 0.1], "names": ["a", "b"]}
        return bv.ValuationResult(**(arguments | changes))

    def coalitions(self, **changes) -> bv.ValuationResult:
        """ValuationResult of 2 values and their 3 coalitions, with the given fields changed."""
        masks = np.array([[True, False], [False, True], [True, True]])
        arguments = {"coalition_masks": masks, "coalition_values": [1.0, 2.0, 3.0], "coalition_stderr": [0.1] * 3}
        return self.result(**(arguments | changes))

    def removal(self, removed):
        """removal_curves of 40 points with the given removal counts (refused before any refit)."""
        values = np.arange(40.0)
        return removal_curves(values, self.X, self.labels, self.X, self.labels, removed=removed)

    def sklearn(self, estimator, metric: str = "accuracy") -> SklearnUtility:
        return SklearnUtility(estimator, self.X, self.labels, self.X, self.labels, metric=metric)


@pytest.fixture(scope="module")
def world(tmp_path_factory) -> World:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return World(tmp_path_factory.mktemp("bad_input_newer_api"))


def refused(id: str, call: Callable[[World], Any], error: type[Exception], phrase: str) -> Any:
    """A call that must raise `error` whose message matches `phrase` (a regex)."""
    return pytest.param(Case(id, call, phrase, errors=(error,)), id=id)


def cli_refused(id: str, argv: Callable[[World], list[str]], phrase: str) -> Any:
    """A command line that must exit with status 2 and one line on stderr matching `phrase`."""
    return pytest.param(Case(id, lambda w: cli_main(argv(w)), phrase, cli=True, errors=(SystemExit,)), id=id)


TABLES = [
    # bayesval release
    cli_refused(
        "release-duplicate-header",
        lambda w: w.release_cli("duplicate"),
        r"duplicate.csv: column name 'x1' appears 2 times in the header \(columns \[1, 2\]; pandas would read them "
        r"as \['x1', 'x1.1'\]\)",
    ),
    cli_refused(
        "release-duplicate-target-header",
        lambda w: w.release_cli("duplicate_target"),
        r"duplicate_target.csv: column name 'target' appears 2 times",
    ),
    cli_refused(
        "release-index-column",
        lambda w: w.release_cli("index"),
        r"index.csv: column 1 has no name in the header \(pandas calls it 'Unnamed: 0'\).*index=False",
    ),
    cli_refused(
        "release-index-column-listed",
        lambda w: w.release_cli("index", "--features", "Unnamed: 0,x1"),
        r"index.csv: column 1 has no name in the header",
    ),
    cli_refused(
        "release-unnamed-column", lambda w: w.release_cli("unnamed"), r"unnamed.csv: column 2 has no name in the header"
    ),
    cli_refused(
        "release-rows-longer-than-header",
        lambda w: w.release_cli("long_rows"),
        r"long_rows.csv: some rows have more fields than the header has names",
    ),
    cli_refused(
        "release-target-among-features",
        lambda w: w.release_cli("good", "--features", "x1,target"),
        r"good.csv: the target column 'target' is also listed among the features",
    ),
    cli_refused(
        "release-feature-listed-twice",
        lambda w: w.release_cli("good", "--features", "x1,x2,x1"),
        r"good.csv: the features list column\(s\) \['x1'\] more than once",
    ),
    cli_refused(
        "release-bool-column-with-blank",
        lambda w: w.release_cli("flag_blank"),
        r"flag_blank.csv: column 'flag' has 1 empty or NaN cell\(s\) \(rows 7\)",
    ),
    cli_refused(
        "release-bool-column-with-number",
        lambda w: w.release_cli("flag_and_number"),
        r"flag_and_number.csv: column 'flag' is not numeric \(row 1 holds 'True'\)",
    ),
    cli_refused(
        "release-name-parent", lambda w: w.release_cli("good", "--name", "../x"), r"--name '../x' is not a plain"
    ),
    cli_refused(
        "release-name-absolute", lambda w: w.release_cli("good", "--name", "/tmp/x"), r"--name '/tmp/x' is not a plain"
    ),
    cli_refused("release-name-separator", lambda w: w.release_cli("good", "--name", "a/b"), r"--name 'a/b' is not"),
    cli_refused(
        "release-name-backslash", lambda w: w.release_cli("good", "--name", "a\\b"), r"--name 'a\\\\b' is not a plain"
    ),
    cli_refused(
        "release-name-dotdot", lambda w: w.release_cli("good", "--name", ".."), r"--name '\.\.' is not a plain"
    ),
    cli_refused("release-name-dot", lambda w: w.release_cli("good", "--name", "."), r"--name '\.' is not a plain"),
    cli_refused("release-name-empty", lambda w: w.release_cli("good", "--name", ""), r"--name must not be empty"),
    cli_refused("release-name-blank", lambda w: w.release_cli("good", "--name", "  "), r"--name must not be empty"),
    # bayesval valuate, tables released in-process
    cli_refused(
        "valuate-duplicate-header", lambda w: w.valuate_cli("duplicate"), r"duplicate.csv: column name 'x1' appears 2"
    ),
    cli_refused(
        "valuate-index-column", lambda w: w.valuate_cli("index"), r"index.csv: column 1 has no name.*'Unnamed: 0'"
    ),
    cli_refused(
        "valuate-target-among-features",
        lambda w: w.valuate_cli("index", "--features", "x1,x2,target"),
        r"good.csv: the target column 'target' is also listed among the features",
    ),
    cli_refused(
        "valuate-bool-column-with-blank", lambda w: w.valuate_cli("flag_blank"), r"flag_blank.csv: column 'flag' has 1"
    ),
    cli_refused(
        "valuate-rows-longer-than-header", lambda w: w.valuate_cli("long_rows"), r"long_rows.csv: some rows have more"
    ),
    # bayesval knn
    cli_refused(
        "knn-duplicate-header",
        lambda w: w.knn_cli("duplicate_train"),
        r"duplicate_train.csv: column name 'x1' appears 2 times",
    ),
    cli_refused(
        "knn-index-column-in-validation",
        lambda w: w.knn_cli("train", "index_validation"),
        r"index_validation.csv: column 1 has no name.*'Unnamed: 0'",
    ),
    cli_refused(
        "knn-target-among-features",
        lambda w: w.knn_cli("train", "validation", "--features", "label,x1"),
        r"train.csv: the target column 'label' is also listed among the features",
    ),
    cli_refused(
        "knn-rows-longer-than-header",
        lambda w: w.knn_cli("train", "long_validation"),
        r"long_validation.csv: some rows have more fields",
    ),
    # the Python functions behind them
    refused(
        "read_table-target-among-features",
        lambda w: read_table(w.tables["good"], "target", ["target"]),
        ValueError,
        r"good.csv: the target column 'target' is also listed among the features",
    ),
    refused(
        "read_tables-duplicate-header",
        lambda w: read_tables([w.tables["good"], w.tables["duplicate"]], "target"),
        ValueError,
        r"duplicate.csv: column name 'x1' appears 2 times",
    ),
]

RESULT = [
    # values
    refused(
        "values-nan", lambda w: w.result(values=[1.0, NAN]), ValueError, r"ValuationResult: values has 1 non-finite"
    ),
    refused("values-inf", lambda w: w.result(values=[INF, 1.0]), ValueError, r"values has 1 non-finite.*index \[0\]"),
    refused("values-2d", lambda w: w.result(values=[[1.0], [2.0]]), ValueError, r"values must be a 1-D array"),
    refused("values-strings", lambda w: w.result(values=["1", "2"]), TypeError, r"values must hold numbers"),
    refused("values-None", lambda w: w.result(values=None), TypeError, r"values must hold numbers"),
    refused("values-complex", lambda w: w.result(values=[1j, 2.0]), TypeError, r"values must hold real numbers"),
    refused("values-scalar", lambda w: w.result(values=1.0), ValueError, r"values must be a 1-D array, got shape \(\)"),
    # stderr: >= 0, or inf where unknown
    refused("stderr-negative", lambda w: w.result(stderr=[0.1, -0.1]), ValueError, r"stderr must hold standard errors"),
    refused(
        "stderr-nan", lambda w: w.result(stderr=[NAN, 0.1]), ValueError, r"stderr .*\(inf where unknown\), got nan"
    ),
    refused("stderr-minus-inf", lambda w: w.result(stderr=[-INF, 0.1]), ValueError, r"stderr must hold standard"),
    refused("stderr-2d", lambda w: w.result(stderr=[[0.1, 0.1]]), ValueError, r"stderr must be a 1-D array"),
    refused("stderr-strings", lambda w: w.result(stderr=["0.1", "0.1"]), TypeError, r"stderr must hold numbers"),
    refused(
        "stderr-short", lambda w: w.result(stderr=[0.1]), ValueError, r"values, stderr and names must have the same"
    ),
    # names
    refused("names-duplicate", lambda w: w.result(names=["a", "a"]), ValueError, r"names must be distinct.*\['a'\]"),
    refused("names-duplicate-as-strings", lambda w: w.result(names=[1, "1"]), ValueError, r"names must be distinct"),
    refused("names-string", lambda w: w.result(names="ab"), TypeError, r"names must be a list of names.*got str"),
    refused("names-None", lambda w: w.result(names=None), TypeError, r"names must be a list of names.*got NoneType"),
    refused("names-long", lambda w: w.result(names=["a", "b", "c"]), ValueError, r"names 3\)"),
    # counts and converged
    refused("counts-negative", lambda w: w.result(counts=[3, -1]), ValueError, r"counts must hold counts.*got -1"),
    refused("counts-fractional", lambda w: w.result(counts=[3, 1.5]), ValueError, r"counts must hold counts.*got 1.5"),
    refused("counts-nan", lambda w: w.result(counts=[3, NAN]), ValueError, r"counts must hold counts.*got nan"),
    refused("counts-bools", lambda w: w.result(counts=[True, False]), TypeError, r"counts must hold counts.*booleans"),
    refused("counts-short", lambda w: w.result(counts=[3]), ValueError, r"counts must have one entry per value \(2\)"),
    refused(
        "converged-strings", lambda w: w.result(converged=["yes", "no"]), TypeError, r"converged must hold booleans"
    ),
    refused("converged-twos", lambda w: w.result(converged=[2, 0]), TypeError, r"converged must hold booleans"),
    refused("converged-short", lambda w: w.result(converged=[True]), ValueError, r"converged must have one entry per"),
    # coalitions
    refused(
        "coalition_masks-wrong-width",
        lambda w: w.coalitions(coalition_masks=np.ones((3, 3), bool)),
        ValueError,
        r"coalition_masks must be \(coalitions, 2\)",
    ),
    refused(
        "coalition_masks-strings",
        lambda w: w.coalitions(coalition_masks=np.full((3, 2), "x")),
        TypeError,
        r"coalition_masks must hold booleans",
    ),
    refused(
        "coalition_values-nan",
        lambda w: w.coalitions(coalition_values=[1.0, NAN, 3.0]),
        ValueError,
        r"coalition_values has 1 non-finite",
    ),
    refused(
        "coalition_values-short",
        lambda w: w.coalitions(coalition_values=[1.0, 2.0]),
        ValueError,
        r"coalition_values must have one entry per coalition mask \(3\), got 2",
    ),
    refused(
        "coalition_values-without-masks",
        lambda w: w.result(coalition_values=[1.0, 2.0, 3.0]),
        ValueError,
        r"coalition_values and coalition_stderr need coalition_masks",
    ),
    refused(
        "coalition_stderr-negative",
        lambda w: w.coalitions(coalition_stderr=[0.1, -1.0, 0.1]),
        ValueError,
        r"coalition_stderr must hold standard errors",
    ),
    # the other fields
    refused("privacy-dict", lambda w: w.result(privacy={}), TypeError, r"privacy must be a bayesval.PrivacyLedger"),
    refused("diagnostics-list", lambda w: w.result(diagnostics=[]), TypeError, r"diagnostics must be a dict"),
    refused("method-int", lambda w: w.result(method=3), TypeError, r"method must be a string, got int"),
    refused("method-None", lambda w: w.result(method=None), TypeError, r"method must be a string, got NoneType"),
]

NOT_A_RESULT = r"is not a bayesval result \(an .npz file written by ValuationResult.save\)"

LOAD = [
    refused(
        "load-random-bytes",
        lambda w: bv.ValuationResult.load(w.results["random"]),
        ValueError,
        r"random.npz " + NOT_A_RESULT + ": it is not an .npz archive",
    ),
    refused("load-json", lambda w: bv.ValuationResult.load(w.results["json"]), ValueError, r"json.npz " + NOT_A_RESULT),
    refused(
        "load-truncated",
        lambda w: bv.ValuationResult.load(w.results["truncated"]),
        ValueError,
        r"truncated.npz " + NOT_A_RESULT + r": .*cut short",
    ),
    refused(
        "load-missing",
        lambda w: bv.ValuationResult.load(w.results["missing"]),
        FileNotFoundError,
        r"result file .*missing.npz does not exist",
    ),
    refused(
        "load-directory",
        lambda w: bv.ValuationResult.load(w.results["directory"]),
        ValueError,
        r"results_directory is a directory, not a bayesval result file",
    ),
    refused(
        "load-empty-file",
        lambda w: bv.ValuationResult.load(w.results["empty"]),
        ValueError,
        r"empty.npz " + NOT_A_RESULT,
    ),
    refused(
        "load-npy-array", lambda w: bv.ValuationResult.load(w.results["npy"]), ValueError, r"array.npy " + NOT_A_RESULT
    ),
    refused(
        "load-zip-of-text",
        lambda w: bv.ValuationResult.load(w.results["zip"]),
        ValueError,
        r"text.zip " + NOT_A_RESULT + r": it has no result metadata",
    ),
    refused(
        "load-csv-table",
        lambda w: bv.ValuationResult.load(w.tables["good"]),
        ValueError,
        r"good.csv " + NOT_A_RESULT,
    ),
    refused(
        "load-npz-without-metadata",
        lambda w: bv.ValuationResult.load(w.results["no_meta"]),
        ValueError,
        r"no_meta.npz " + NOT_A_RESULT + r": it has no result metadata \(_meta\); its arrays are \['values'\]",
    ),
    refused(
        "load-npz-metadata-not-json",
        lambda w: bv.ValuationResult.load(w.results["meta_not_json"]),
        ValueError,
        r"meta_not_json.npz " + NOT_A_RESULT + r": its metadata is not valid JSON",
    ),
    refused(
        "load-npz-metadata-a-list",
        lambda w: bv.ValuationResult.load(w.results["meta_list"]),
        ValueError,
        r"meta_list.npz " + NOT_A_RESULT + r": its metadata lacks \['method', 'names', 'privacy', 'diagnostics'\]",
    ),
    refused(
        "load-npz-without-stderr",
        lambda w: bv.ValuationResult.load(w.results["no_stderr"]),
        ValueError,
        r"no_stderr.npz " + NOT_A_RESULT + r": it lacks the arrays \['stderr'\]",
    ),
    refused(
        "load-npz-object-array",
        lambda w: bv.ValuationResult.load(w.results["object_array"]),
        ValueError,
        r"object_array.npz " + NOT_A_RESULT + r": its arrays cannot be read",
    ),
    refused(
        "load-npz-nan-values",
        lambda w: bv.ValuationResult.load(w.results["nan_values"]),
        ValueError,
        r"nan_values.npz is not a valid bayesval result: ValuationResult: values has 1 non-finite",
    ),
    refused(
        "load-npz-unknown-array",
        lambda w: bv.ValuationResult.load(w.results["extra_array"]),
        ValueError,
        r"extra_array.npz is not a valid bayesval result: it holds arrays no result has: \['weights'\]",
    ),
    refused(
        "load-npz-bad-privacy-record",
        lambda w: bv.ValuationResult.load(w.results["bad_privacy"]),
        ValueError,
        r"bad_privacy.npz is not a valid bayesval result: release record lacks",
    ),
    refused(
        "load-npz-duplicate-names",
        lambda w: bv.ValuationResult.load(w.results["duplicate_names"]),
        ValueError,
        r"duplicate_names.npz is not a valid bayesval result: .*names must be distinct",
    ),
    refused("load-path-None", lambda w: bv.ValuationResult.load(None), TypeError, r"path must be a file path"),
    refused("load-path-int", lambda w: bv.ValuationResult.load(3), TypeError, r"path must be a file path.*got int"),
]

INCENTIVE_REPORT = [
    refused(
        "report-z-nan", lambda w: incentive_report(w.rewarded, z=NAN), ValueError, r"z must be a finite number > 0"
    ),
    refused(
        "report-z-negative", lambda w: incentive_report(w.rewarded, z=-1), ValueError, r"z must be a finite number"
    ),
    refused(
        "report-z-zero", lambda w: incentive_report(w.rewarded, z=0.0), ValueError, r"z must be a finite number > 0"
    ),
    refused(
        "report-z-inf", lambda w: incentive_report(w.rewarded, z=INF), ValueError, r"z must be a finite number > 0"
    ),
    refused("report-z-string", lambda w: incentive_report(w.rewarded, z="2"), TypeError, r"z must be a number"),
    refused("report-z-bool", lambda w: incentive_report(w.rewarded, z=True), TypeError, r"z must be a number"),
    refused("report-z-None", lambda w: incentive_report(w.rewarded, z=None), TypeError, r"z must be a number"),
    refused(
        "report-result-dict",
        lambda w: incentive_report({"values": [1.0]}),
        TypeError,
        r"result must be a bayesval.ValuationResult with rewards.*got dict",
    ),
    refused("report-result-None", lambda w: incentive_report(None), TypeError, r"result must be a bayesval.Valuation"),
    refused(
        "report-result-rewards-object",
        lambda w: incentive_report(w.rewarded.rewards),
        TypeError,
        r"result must be a bayesval.ValuationResult.*got Rewards",
    ),
    refused(
        "report-result-without-rewards",
        lambda w: incentive_report(w.result()),
        ValueError,
        r"the incentive report needs rewards: result has none",
    ),
    refused(
        "report-result-without-coalitions",
        lambda w: incentive_report(dataclasses.replace(w.result(names=["a", "b"]), rewards=w.rewarded.rewards)),
        ValueError,
        r"result has no coalition values and standard errors",
    ),
    refused(
        "report-baseline-dict",
        lambda w: incentive_report(w.rewarded, baseline={}),
        TypeError,
        r"baseline must be a bayesval.ValuationResult.*got dict",
    ),
    refused(
        "report-baseline-string",
        lambda w: incentive_report(w.rewarded, baseline="before.npz"),
        TypeError,
        r"baseline must be a bayesval.ValuationResult.*got str",
    ),
    refused(
        "report-baseline-without-rewards",
        lambda w: incentive_report(w.rewarded, baseline=w.result()),
        ValueError,
        r"the incentive report needs rewards: baseline has none",
    ),
    refused(
        "report-baseline-other-parties",
        lambda w: incentive_report(w.rewarded, baseline=_hand_result(GAME, [2.5, 1.5, 0.0], names=("a", "b", "z"))),
        ValueError,
        r"baseline must value the same parties as result.*\['a', 'b', 'z'\] != \['a', 'b', 'c'\]",
    ),
]

REMOVAL = [
    refused(
        "removed-negative", lambda w: w.removal([0, -5]), ValueError, r"removed must hold counts .*got -5 at index"
    ),
    refused(
        "removed-all-points",
        lambda w: w.removal([0, 40]),
        ValueError,
        r"removed must hold counts \(whole numbers in "
        r"\[0, 39\]\), got 40",
    ),
    refused("removed-beyond", lambda w: w.removal([10**6]), ValueError, r"removed must hold counts.*got 1000000"),
    refused("removed-fractional", lambda w: w.removal([0, 2.5]), ValueError, r"removed must hold counts.*got 2.5"),
    refused("removed-nan", lambda w: w.removal([NAN]), ValueError, r"removed must hold counts.*got nan"),
    refused("removed-strings", lambda w: w.removal(["5"]), TypeError, r"removed must hold numbers"),
    refused("removed-bools", lambda w: w.removal([True, False]), TypeError, r"removed must hold counts.*booleans"),
    refused("removed-2d", lambda w: w.removal([[1, 2]]), ValueError, r"removed must be a 1-D array"),
    refused("removed-empty", lambda w: w.removal([]), ValueError, r"removed is empty"),
    refused("removed-scalar", lambda w: w.removal(5), ValueError, r"removed must be a 1-D array, got shape \(\)"),
]

SKLEARN = [
    refused(
        "SklearnUtility-LinearRegression",
        lambda w: w.sklearn(LinearRegression()),
        TypeError,
        r"estimator must be a classifier.*LinearRegression is a regressor",
    ),
    refused(
        "SklearnUtility-regression-pipeline",
        lambda w: w.sklearn(make_pipeline(StandardScaler(), Ridge())),
        TypeError,
        r"estimator must be a classifier.*Pipeline is a regressor",
    ),
    refused(
        "SklearnUtility-KNeighborsRegressor",
        lambda w: w.sklearn(KNeighborsRegressor()),
        TypeError,
        r"KNeighborsRegressor is a regressor",
    ),
    refused(
        "SklearnUtility-class",
        lambda w: w.sklearn(LogisticRegression),
        TypeError,
        r"estimator must be an instance, e.g. LogisticRegression\(\), not the class",
    ),
    refused("SklearnUtility-string", lambda w: w.sklearn("logistic"), TypeError, r"estimator must be a scikit-learn"),
    refused(
        "SklearnUtility-log_loss-without-probabilities",
        lambda w: w.sklearn(SVC(), metric="log_loss"),
        TypeError,
        r"metric='log_loss' needs predicted probabilities, but SVC has no predict_proba",
    ),
]

MNLP = [
    refused(
        "Rewards.mnlp-X-too-wide",
        lambda w: w.regression_rewards.mnlp(np.ones((5, 3)), np.ones(5)),
        ValueError,
        r"X has 3 columns, but the draws of shape \(50, 4\) hold 2 weights .*X needs 2 columns",
    ),
    refused(
        "Rewards.mnlp-X-too-narrow-classification",
        lambda w: w.classification_rewards.mnlp(np.ones((5, 1)), np.ones(5), task="classification"),
        ValueError,
        r"X has 1 columns, but the draws of shape \(50, 3\) hold 2 weights",
    ),
    refused(
        "Rewards.mnlp-X-strings",
        lambda w: w.regression_rewards.mnlp([["a", "b"]], [1.0]),
        TypeError,
        r"X must hold numbers, got strings",
    ),
    refused(
        "Rewards.mnlp-X-1d", lambda w: w.regression_rewards.mnlp(np.ones(2), [1.0]), ValueError, r"X must be a 2-D"
    ),
    refused(
        "Rewards.mnlp-X-nan",
        lambda w: w.regression_rewards.mnlp([[1.0, NAN]], [1.0]),
        ValueError,
        r"X has 1 non-finite entries",
    ),
    refused(
        "Rewards.mnlp-X-empty",
        lambda w: w.regression_rewards.mnlp(np.ones((0, 2)), []),
        ValueError,
        r"X must be a "
        r"non-empty 2-D array",
    ),
    refused(
        "Rewards.mnlp-y-short",
        lambda w: w.regression_rewards.mnlp(np.ones((5, 2)), np.ones(4)),
        ValueError,
        r"y has 4 entries but X has 5 rows",
    ),
    refused(
        "Rewards.mnlp-y-strings",
        lambda w: w.regression_rewards.mnlp(np.ones((2, 2)), ["a", "b"]),
        TypeError,
        r"y must hold numbers",
    ),
    refused(
        "Rewards.mnlp-task-list",
        lambda w: w.regression_rewards.mnlp(np.ones((2, 2)), np.ones(2), task=["regression"]),
        ValueError,
        r"task must be one of \['classification', 'regression'\]",
    ),
    refused(
        "mnlp_regression-X-too-wide",
        lambda w: mnlp_regression(np.ones((10, 4)), np.ones((3, 5)), np.ones(3)),
        ValueError,
        r"X has 5 columns, but the draws of shape \(10, 4\) hold 2 weights \(w weights, bias, noise variance\)",
    ),
    refused(
        "mnlp_regression-draws-too-narrow",
        lambda w: mnlp_regression(np.ones((10, 1)), np.ones((3, 5)), np.ones(3)),
        ValueError,
        r"draws must have at least 2 columns \(w weights, bias, noise variance\)",
    ),
    refused(
        "mnlp_classification-X-strings",
        lambda w: mnlp_classification(np.ones((10, 3)), [["a", "b"]], [1]),
        TypeError,
        r"X must hold numbers",
    ),
    refused(
        "base_rate_mnlp-y_train-strings",
        lambda w: base_rate_mnlp(["yes", "no"], [1, 0]),
        TypeError,
        r"y_train must hold numbers",
    ),
]

MONTE_CARLO = [
    refused(
        "MonteCarloShapley-alpha-1e-6",
        lambda w: MonteCarloShapley(alpha=1e-6),
        ValueError,
        r"would take at least 1.38e\+12 utility evaluations: 4.61e\+11 permutations \(to meet alpha=1e-06.*pass a "
        r"larger max_evaluations=",
    ),
    refused(
        "MonteCarloShapley-alpha-1e-300",
        lambda w: MonteCarloShapley(alpha=1e-300),
        ValueError,
        r"would take at least inf utility evaluations.*max_evaluations=10,000,000",
    ),
    refused(
        "MonteCarloShapley-num_permutations-1e7",
        lambda w: MonteCarloShapley(num_permutations=10**7),
        ValueError,
        r"at least 3e\+07 utility evaluations: 1e\+07 permutations \(num_permutations\)",
    ),
    refused(
        "MonteCarloShapley-plan-beyond-budget-for-40-points",
        lambda w: MonteCarloShapley(num_permutations=250_000).fit(w.X, w.labels).value(w.X, w.labels),
        ValueError,
        r"would take 1.02e\+07 utility evaluations: 2.5e\+05 permutations \(num_permutations\) times n \+ 1 = 41 "
        r"for 40 points, more than max_evaluations=10,000,000",
    ),
    refused(
        "MonteCarloShapley-max_evaluations-below-plan",
        lambda w: MonteCarloShapley(max_evaluations=100),
        ValueError,
        r"would take at least 576 utility evaluations: 185 permutations.*more than max_evaluations=100",
    ),
    refused(
        "MonteCarloShapley-max_evaluations-zero",
        lambda w: MonteCarloShapley(max_evaluations=0),
        ValueError,
        r"max_evaluations must be an integer >= 1, got 0",
    ),
    refused(
        "MonteCarloShapley-max_evaluations-float",
        lambda w: MonteCarloShapley(max_evaluations=1e8),
        TypeError,
        r"max_evaluations must be an integer >= 1, got 100000000.0 \(float\) \(write 100000000\)",
    ),
    refused(
        "MonteCarloShapley-max_evaluations-string",
        lambda w: MonteCarloShapley(max_evaluations="1e8"),
        TypeError,
        r"max_evaluations must be an integer",
    ),
]

REFUSED = TABLES + RESULT + LOAD + INCENTIVE_REPORT + REMOVAL + SKLEARN + MNLP + MONTE_CARLO


def accepted(id: str, call: Callable[[World], Any], why: str) -> Any:
    return pytest.param(Accepted(id, call, why, questionable=True), id=id)


def _released_count(w: World, table: str, *changes: str) -> float:
    cli_main(w.release_cli(table, *changes))
    return bv.PerturbedStatistic.load(w.tmp / "cli.release.json").count


ACCEPTED = [
    accepted(
        "release-bool-feature-as-0-1",
        lambda w: _released_count(w, "flag"),
        "a True/False column is a 0/1 indicator, as Party takes boolean X (tables.py's docstring)",
    ),
    accepted(
        "read_table-bool-label-as-0-1",
        lambda w: read_table(w.tables["flag_label"], "label")[1],
        "a True/False target is a 0/1 label",
    ),
    accepted(
        "release-index-column-left-out",
        lambda w: _released_count(w, "index", "--features", "x1,x2"),
        "an unnamed column the features leave out is never read as data",
    ),
    accepted(
        "release-duplicate-header-left-out",
        lambda w: read_table(w.tables["duplicate_unused"], "target", ["x1", "x2"])[0],
        "a repeated name is refused only where its columns are used",
    ),
    accepted(
        "ValuationResult-stderr-inf",
        lambda w: w.result(stderr=[INF, 0.1]).values,
        "inf is the standard error of a value whose Monte Carlo error is unknown (one draw)",
    ),
    accepted(
        "ValuationResult-counts-whole-floats",
        lambda w: w.result(counts=np.array([3.0, 4.0])).counts,
        "whole numbers stored as floats are counts",
    ),
    accepted(
        "MonteCarloShapley-alpha-1e-6-with-explicit-cap",
        lambda w: MonteCarloShapley(alpha=1e-6, max_evaluations=10**13).num_permutations,
        "an explicit max_evaluations allows a plan beyond the default budget",
    ),
]


@pytest.mark.parametrize("case", REFUSED)
def test_bad_input_gets_a_clear_error(case, world, capsys):
    found = problems(case, world, capsys)
    assert not found, f"{case.id}: " + "; ".join(found)


@pytest.mark.parametrize("case", ACCEPTED)
def test_accepted_on_purpose_works_without_nan(case, world):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        output = np.asarray(case.call(world), dtype=np.float64)
    assert not np.isnan(output).any(), f"{case.id} returned NaN: {output!r}"


def test_suite_size_and_share_of_clear_errors(world, capsys):
    """At least 130 distinct refused cases (issue 28's newer API), every one a clear error from bayesval (a missing
    file's FileNotFoundError counts: it names the path, as open() does)."""
    cases = [param.values[0] for param in REFUSED]
    assert len({c.id for c in cases}) == len(cases), "case ids must be distinct"
    assert len(cases) >= 130
    unclear = {c.id: problems(c, world, capsys) for c in cases}
    unclear = {id: found for id, found in unclear.items() if found}
    print(f"{len(cases) - len(unclear)} of {len(cases)} refused cases get a clear error; {len(ACCEPTED)} accepted")
    assert not unclear, unclear
