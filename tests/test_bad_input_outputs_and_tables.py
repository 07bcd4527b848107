"""Bad input to the CLI's output paths, the tables it reads and the words of its messages (tracker issue 57, points 5
to 7): output paths checked before any sampling or release, `-o` that never overwrites without `--force`, tables
that refuse dates, infinite cells and continuous class targets naming the file, column and row, table options given
with release files, and messages in the CLI's own words.

The same harness as tests/test_bad_input_suite.py: each row of REFUSED is a call with one bad input that must raise
(a SystemExit with one line on stderr for the CLI) from bayesval's own code, within a second and before any sampling,
with a message that names the argument, file or column. ACCEPTED lists inputs near the refused ones that must work
(reach sampling, or return numbers). `test_bad_output_paths_fail_in_under_2_s_before_the_work` times the four
commands issue 57 names, with the sampler and the release replaced by stubs that record whether they were entered.
"""

from __future__ import annotations

import errno
import gzip
import os
import stat
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from test_bad_input_newer_api import cli_refused, refused
from test_bad_input_suite import SamplingStarted, _NoSampling, party_path, problems

import bayesval as bv
from bayesval.cli import main as cli_main
from bayesval.datasets.tables import read_table, read_tables
from bayesval.estimators import KNNShapley
from bayesval.outputs import write_whole
from bayesval.parties import boundary
from bayesval.results import serialisation
from bayesval.results.plotting import plot_privacy_tradeoff

LINEAR = ["--model", "linear", "--target", "y", "--epsilon", "1", "--bounds", "3,3"]


class World:
    """The tables, release files and results the cases use, built once in a temporary directory."""

    def __init__(self, tmp: Path) -> None:
        rng = np.random.default_rng(57)
        self.tmp = tmp
        self.X = rng.normal(size=(40, 2)) * 0.4
        self.y = self.X @ np.array([1.0, -1.0]) + 0.1 * rng.normal(size=40)
        self.labels = (self.X[:, 0] > 0).astype(int)
        self.tables = self._tables()
        self.releases = self._releases()
        self.result = bv.ValuationResult("m", [1.0, 2.0], [0.1, 0.1], ["a", "b"])
        self.directory = tmp / "a_directory"
        self.directory.mkdir()
        self.existing = tmp / "existing.release.json"
        self.existing.write_text("the party's earlier release\n")
        self.earlier = self.result.save(tmp / "earlier.npz")
        self.earlier.with_suffix(".png").write_bytes(b"")  # an earlier figure

    def frame(self, **columns) -> pd.DataFrame:
        """x1, x2 and y (the regression target) with columns added or replaced."""
        return pd.DataFrame({"x1": self.X[:, 0], "x2": self.X[:, 1], "y": self.y} | columns)

    def _tables(self) -> dict[str, Path]:
        t, X, y = self.tmp, self.X, self.y
        with_cell = lambda values, row, value: np.where(np.arange(40) == row, value, values)  # noqa: E731
        second = self.frame(x1=X[:, 0] / 2)  # a second party's rows (one table given twice is refused)
        frames = {
            "good.csv": self.frame(),
            "other.csv": second,
            "labels.csv": self.frame(y=self.labels),
            "one_class.csv": self.frame(y=np.ones(40, int)),
            "labels_three.csv": self.frame(y=np.where(np.arange(40) == 9, 2, self.labels)),
            "labels_pm.csv": self.frame(y=2 * self.labels - 1),
            "labels_mixed.csv": self.frame(y=np.where(np.arange(40) == 3, -1, self.labels)),
            "labels_two.csv": self.frame(y=2 * self.labels),
            "labels_half.csv": self.frame(y=with_cell(self.labels, 7, 0.5)),
            "inf_feature.csv": self.frame(x2=with_cell(X[:, 1], 5, np.inf)),
            "minus_inf_target.csv": self.frame(y=with_cell(y, 11, -np.inf)),
            "dates.parquet": self.frame(when=pd.date_range("2024-01-01", periods=40)),
            "dates_utc.parquet": self.frame(when=pd.date_range("2024-01-01", periods=40, tz="UTC")),
            "durations.parquet": self.frame(wait=pd.to_timedelta(np.arange(40), unit="s")),
            "categories.parquet": self.frame(colour=pd.Categorical(["red", "blue"] * 20)),
            "dates_target.parquet": self.frame(y=pd.date_range("2024-01-01", periods=40)),
            "labels_dates.parquet": self.frame(y=self.labels, when=pd.date_range("2024-01-01", periods=40)),
            "good.parquet": second,
            "good.csv.gz": second,
            "labels_inf.csv": self.frame(y=self.labels, x1=with_cell(X[:, 0], 2, -np.inf)),
        }
        paths = {}
        for name, frame in frames.items():
            paths[name] = t / name
            if name.endswith(".parquet"):
                frame.to_parquet(paths[name])
            else:
                frame.to_csv(paths[name], index=False)
        paths["labels_val.csv"] = t / "labels_val.csv"
        self.frame(y=self.labels, x1=X[:, 0] / 2).iloc[::-1].to_csv(paths["labels_val.csv"], index=False)
        written = {
            "damaged.parquet": b"PAR1" + bytes(range(200)),
            "empty.parquet": b"",
            "csv_inside.parquet": paths["good.csv"].read_bytes(),
            "not_gzip.csv.gz": b"x1,x2,y\n1,2,3\n",
            "semicolons.csv": b"x1;x2;y\n1;2;3\n4;5;6\n",
            "notes.txt": b"x1,x2,y\n1,2,3\n",
        }
        for name, data in written.items():
            paths[name] = t / name
            paths[name].write_bytes(data)
        packed = gzip.compress(self.frame().to_csv(index=False).encode(), mtime=0)
        damaged = bytearray(packed)
        damaged[12] ^= 0xFF  # the first block's code lengths: zlib refuses the stream
        for name, data in (("cut_short.csv.gz", packed[: len(packed) // 2]), ("damaged.csv.gz", bytes(damaged))):
            paths[name] = t / name
            paths[name].write_bytes(data)
        paths["empty_gzip.csv.gz"] = t / "empty_gzip.csv.gz"
        paths["empty_gzip.csv.gz"].write_bytes(gzip.compress(b""))
        paths["upper.CSV"] = t / "upper.CSV"
        second.to_csv(paths["upper.CSV"], index=False)
        return paths

    def _releases(self) -> dict[str, Path]:
        bounds = bv.Bounds(3.0, 3.0)
        parties = {
            "alice": bv.Party(self.X, self.y, epsilon=1.0, bounds=bounds, name="alice"),
            "bob": bv.Party(self.X[::-1], self.y[::-1], epsilon=1.0, bounds=bounds, name="bob"),
            "carol": bv.Party(self.X, self.labels, epsilon=1.0, bounds=bounds, name="carol"),
        }
        statistics = {"carol": bv.models.LogisticRegression().statistic(2)}
        files = {}
        for name, party in parties.items():
            files[name] = party.release(statistics.get(name)).save(self.tmp / f"{name}.release.json")
        files["npz"] = self.input_npz = self.tmp / "party.npz"  # a release file named as a result is
        self.input_npz.write_bytes(files["carol"].read_bytes())
        return files

    def table(self, name: str) -> str:
        return str(self.tables[name])

    def hidden_table(self) -> str:
        """A table whose file name starts with a dot (`release` takes the party's name from the file name)."""
        hidden = self.tmp / ".hidden.csv"
        hidden.write_bytes(Path(self.table("good.csv")).read_bytes())
        return str(hidden)

    def release_cli(self, table: str = "good.csv", *changes: str, output: str | None = None) -> list[str]:
        """`bayesval release` of one table (linear, target y) to a fresh file, with options added."""
        output = output or str(self.tmp / "fresh.release.json")
        return ["release", self.table(table), *LINEAR, "-o", output, *changes]

    def valuate_cli(self, *changes: str, files: tuple[str, ...] = ("alice", "bob")) -> list[str]:
        """`bayesval valuate` of release files, with options added."""
        return ["valuate", *(str(self.releases[f]) for f in files), "--no-progress", *changes]

    def tables_cli(self, table: str = "other.csv", *changes: str) -> list[str]:
        """`bayesval valuate` of the good table and one other, released in-process."""
        return ["valuate", self.table("good.csv"), self.table(table), *LINEAR, "--no-progress", *changes]

    def knn_cli(self, train: str = "labels.csv", validation: str = "labels_val.csv", *changes: str) -> list[str]:
        return ["knn", self.table(train), "--validation", self.table(validation), "--target", "y", *changes]

    def missing(self, name: str) -> str:
        """A path in a directory that does not exist."""
        return str(self.tmp / "no_such_directory" / name)

    def under_file(self, name: str) -> str:
        """A path whose directory is a file."""
        return str(self.tables["good.csv"] / name)


@pytest.fixture(scope="module")
def world(tmp_path_factory) -> World:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return World(tmp_path_factory.mktemp("bad_input_outputs_and_tables"))


@pytest.fixture(autouse=True)
def no_sampling(monkeypatch):
    monkeypatch.setattr(party_path, "CoalitionSurprise", _NoSampling)


# where each command writes: (option as the message names it, argv with that path)
WRITERS = {
    "demo-save": ("--save", lambda w, path: ["demo", "--save", path]),
    "valuate-save": ("--save", lambda w, path: w.valuate_cli("--save", path)),
    "valuate-plot": ("--plot", lambda w, path: w.valuate_cli("--plot", path)),
    "valuate-tables-save": ("--save", lambda w, path: w.tables_cli("other.csv", "--save", path)),
    "valuate-tables-plot": ("--plot", lambda w, path: w.tables_cli("other.csv", "--plot", path)),
    "knn-save": ("--save", lambda w, path: w.knn_cli("labels.csv", "labels_val.csv", "--save", path)),
    "knn-plot": ("--plot", lambda w, path: w.knn_cli("labels.csv", "labels_val.csv", "--plot", path)),
    "release-output": ("-o", lambda w, path: w.release_cli(output=path)),
}
# paths no command can write to: (the path, given the file name to use, and what the message says)
UNWRITABLE = {
    "missing-directory": (lambda w, name: w.missing(name), r"the directory .*no_such_directory' does not exist"),
    "directory": (lambda w, name: str(w.directory), r"a_directory' is a directory; give a file name inside it"),
    "under-a-file": (lambda w, name: w.under_file(name), r"the directory .*good\.csv' is not a directory"),
}


def _writer_case(writer: str, kind: str) -> Any:
    option, argv = WRITERS[writer]
    path, phrase = UNWRITABLE[kind]
    name = "f.png" if option == "--plot" else "p.release.json" if option == "-o" else "r.npz"
    return cli_refused(f"{writer}-{kind}", lambda w: argv(w, path(w, name)), f"{option} .*{phrase}")


OUTPUT_PATHS = [_writer_case(writer, kind) for writer in WRITERS for kind in UNWRITABLE] + [
    cli_refused("demo-save-empty", lambda w: ["demo", "--save", ""], r"--save must be a file path, got ''"),
    # a saved result (of tables: the only record of the releases the run made) is overwritten only with --force
    cli_refused(
        "valuate-save-over-a-result",
        lambda w: w.valuate_cli("--save", str(w.earlier)),
        r"--save .*earlier\.npz' already exists; choose another file name, or add --force to overwrite it",
    ),
    cli_refused(
        "demo-save-over-a-result",
        lambda w: ["demo", "--save", str(w.earlier)],
        r"--save .*earlier\.npz' already exists; .*--force",
    ),
    cli_refused(
        "knn-plot-over-a-figure",
        lambda w: w.knn_cli("labels.csv", "labels_val.csv", "--plot", str(w.earlier.with_suffix(".png"))),
        r"--plot .*earlier\.png' already exists; .*--force",
    ),
    cli_refused(
        "demo-save-name-too-long",
        lambda w: ["demo", "--save", "r" * 300 + ".npz"],
        r"--save 'r+\.npz' cannot be written: File name too long",
    ),
    cli_refused(
        "valuate-plot-txt",
        lambda w: w.valuate_cli("--plot", str(w.tmp / "f.txt")),
        r"--plot .*f\.txt' has no known extension: end it in one of \.png, \.pdf, \.svg",
    ),
    cli_refused(
        "valuate-plot-no-extension",
        lambda w: w.valuate_cli("--plot", str(w.tmp / "figure")),
        r"--plot .*figure' has no known extension",
    ),
    cli_refused(
        "valuate-plot-npz",
        lambda w: w.valuate_cli("--plot", str(w.tmp / "r.npz")),
        r"--plot .*r\.npz' has no known extension",
    ),
    cli_refused(
        "valuate-tables-plot-txt",
        lambda w: w.tables_cli("other.csv", "--plot", str(w.tmp / "f.txt")),
        r"--plot .*f\.txt' has no known extension",
    ),
    cli_refused(
        "knn-plot-txt",
        lambda w: w.knn_cli("labels.csv", "labels_val.csv", "--plot", str(w.tmp / "k.txt")),
        r"--plot .*k\.txt' has no known extension",
    ),
    cli_refused(
        "valuate-save-over-its-release-file",
        lambda w: w.valuate_cli("--save", str(w.releases["alice"])),
        r"--save .*alice\.release\.json' has no known extension: end it in one of \.npz",
    ),
    cli_refused(
        "valuate-save-txt",
        lambda w: w.valuate_cli("--save", str(w.tmp / "r.txt")),
        r"--save .*r\.txt' has no known extension: end it in one of \.npz",
    ),
    cli_refused(
        "knn-save-over-its-table",
        lambda w: w.knn_cli("labels.csv", "labels_val.csv", "--save", w.table("labels.csv")),
        r"--save .*labels\.csv' has no known extension: end it in one of \.npz",
    ),
    cli_refused(
        "valuate-save-over-an-input-named-npz",
        lambda w: w.valuate_cli("--save", str(w.input_npz), files=("alice", "bob", "npz")),
        r"--save .*party\.npz' is .*party\.npz', an input of this command; choose another file name",
    ),
    cli_refused(
        "release-hidden-file-without-a-name",
        lambda w: ["release", w.hidden_table(), *LINEAR],
        r"\.hidden\.csv: its file name gives no party name \(it starts with a dot\); name the party: --name",
    ),
    cli_refused(
        "release-output-exists",
        lambda w: w.release_cli(output=str(w.existing)),
        r"-o .*existing\.release\.json' already exists; choose another file name, or add --force",
    ),
    cli_refused(
        "release-output-named-csv",
        lambda w: w.release_cli(output=str(w.tmp / "p.csv")),
        r"-o .*p\.csv' is named like a data table .*name the release file NAME\.release\.json",
    ),
    cli_refused(
        "release-output-named-parquet",
        lambda w: w.release_cli(output=str(w.tmp / "p.parquet")),
        r"-o .*p\.parquet' is named like a data table",
    ),
    cli_refused(
        "release-output-named-csv-gz",
        lambda w: w.release_cli(output=str(w.tmp / "p.csv.gz")),
        r"-o .*p\.csv\.gz' is named like a data table",
    ),
    cli_refused("release-output-empty", lambda w: w.release_cli(output=" "), r"-o must be a file path, got ' '"),
    refused(
        "result-save-missing-directory",
        lambda w: w.result.save(w.missing("r.npz")),
        ValueError,
        r"path .*no_such_directory' does not exist",
    ),
    refused(
        "result-save-under-a-file",
        lambda w: w.result.save(w.under_file("r.npz")),
        ValueError,
        r"path .*good\.csv' is not a directory",
    ),
    refused(
        "result-save-bytes",
        lambda w: w.result.save(b"r.npz"),
        TypeError,
        r"path must be a file path \(a str or a Path\), got b'r\.npz' \(bytes\)",
    ),
    refused(
        "result-plot-txt",
        lambda w: w.result.plot(w.tmp / "f.txt"),
        ValueError,
        r"path .*f\.txt' has no known extension",
    ),
    refused(
        "result-plot-missing-directory",
        lambda w: w.result.plot(w.missing("f.png")),
        ValueError,
        r"path .*does not exist",
    ),
    refused(
        "result-plot-directory", lambda w: w.result.plot(w.directory), ValueError, r"path .*a_directory' is a directory"
    ),
    refused("result-plot-int", lambda w: w.result.plot(3), TypeError, r"path must be a file path .*got 3 \(int\)"),
    refused(
        "tradeoff-plot-txt",
        lambda w: plot_privacy_tradeoff([w.result, w.result], "a", w.tmp / "t.txt"),
        ValueError,
        r"path .*t\.txt' has no known extension",
    ),
    refused(
        "release-save-directory",
        lambda w: bv.PerturbedStatistic.load(w.releases["alice"]).save(w.directory),
        ValueError,
        r"path .*a_directory' is a directory",
    ),
    refused(
        "release-save-missing-directory",
        lambda w: bv.PerturbedStatistic.load(w.releases["alice"]).save(w.missing("p.json")),
        ValueError,
        r"path .*no_such_directory' does not exist",
    ),
    refused(
        "release-save-None",
        lambda w: bv.PerturbedStatistic.load(w.releases["alice"]).save(None),
        TypeError,
        r"path must be a file path .*got None",
    ),
]

TABLES = [
    cli_refused(
        "release-dates-feature",
        lambda w: w.release_cli("dates.parquet"),
        r"dates\.parquet: column 'when' holds dates and times \(datetime64\[.*\]\), not numbers; encode it as "
        r"numbers .* or leave it out with --features",
    ),
    cli_refused(
        "release-dates-feature-listed",
        lambda w: w.release_cli("dates.parquet", "--features", "x1,when"),
        r"dates\.parquet: column 'when' holds dates and times",
    ),
    cli_refused(
        "release-dates-utc-feature",
        lambda w: w.release_cli("dates_utc.parquet"),
        r"dates_utc\.parquet: column 'when' holds dates and times \(datetime64\[.*UTC\]\)",
    ),
    cli_refused(
        "release-durations-feature",
        lambda w: w.release_cli("durations.parquet"),
        r"durations\.parquet: column 'wait' holds time durations",
    ),
    cli_refused(
        "release-categories-feature",
        lambda w: w.release_cli("categories.parquet"),
        r"categories\.parquet: column 'colour' holds categories",
    ),
    cli_refused(
        "release-dates-target",
        lambda w: w.release_cli("dates_target.parquet"),
        r"dates_target\.parquet: column 'y' holds dates and times",
    ),
    cli_refused(
        "valuate-tables-dates",
        lambda w: w.tables_cli("dates.parquet"),
        r"dates\.parquet: column 'when' holds dates and times",
    ),
    cli_refused(
        "knn-dates-feature",
        lambda w: w.knn_cli("labels_dates.parquet"),
        r"labels_dates\.parquet: column 'when' holds dates and times",
    ),
    cli_refused(
        "release-inf-feature",
        lambda w: w.release_cli("inf_feature.csv"),
        r"inf_feature\.csv: column 'x2' has 1 infinite cell\(s\) \(rows 6\)",
    ),
    cli_refused(
        "release-minus-inf-target",
        lambda w: w.release_cli("minus_inf_target.csv"),
        r"minus_inf_target\.csv: column 'y' has 1 infinite cell\(s\) \(rows 12\)",
    ),
    cli_refused(
        "valuate-tables-inf",
        lambda w: w.tables_cli("inf_feature.csv"),
        r"inf_feature\.csv: column 'x2' has 1 infinite cell\(s\) \(rows 6\)",
    ),
    cli_refused(
        "knn-inf-feature",
        lambda w: w.knn_cli("labels.csv", "labels_inf.csv"),
        r"labels_inf\.csv: column 'x1' has 1 infinite cell\(s\) \(rows 3\)",
    ),
    cli_refused(
        "release-damaged-parquet",
        lambda w: w.release_cli("damaged.parquet"),
        r"damaged\.parquet: is not a readable Parquet file \(damaged, or another format\)",
    ),
    cli_refused(
        "release-empty-parquet",
        lambda w: w.release_cli("empty.parquet"),
        r"empty\.parquet: is not a readable Parquet file",
    ),
    cli_refused(
        "release-csv-named-parquet",
        lambda w: w.release_cli("csv_inside.parquet"),
        r"csv_inside\.parquet: is not a readable Parquet file",
    ),
    cli_refused(
        "valuate-tables-damaged-parquet",
        lambda w: w.tables_cli("damaged.parquet"),
        r"damaged\.parquet: is not a readable Parquet file",
    ),
    cli_refused(
        "release-not-gzip",
        lambda w: w.release_cli("not_gzip.csv.gz"),
        r"not_gzip\.csv\.gz: cannot be read as a table: Not a gzipped file",
    ),
    cli_refused(
        "release-gzip-cut-short",
        lambda w: w.release_cli("cut_short.csv.gz"),
        r"cut_short\.csv\.gz: cannot be read as a table: Compressed file ended before the end-of-stream marker",
    ),
    cli_refused(
        "release-gzip-damaged",
        lambda w: w.release_cli("damaged.csv.gz"),
        r"damaged\.csv\.gz: cannot be read as a table: Error -3 while decompressing data",
    ),
    cli_refused(
        "release-empty-gzip", lambda w: w.release_cli("empty_gzip.csv.gz"), r"empty_gzip\.csv\.gz: the file is empty"
    ),
    cli_refused(
        "release-txt-table",
        lambda w: w.release_cli("notes.txt"),
        r"notes\.txt: not a table file \(expected one of \.csv, \.csv\.gz, \.parquet, \.pq\)",
    ),
    cli_refused(
        "release-semicolons",
        lambda w: w.release_cli("semicolons.csv"),
        r"semicolons\.csv: has no target column 'y'; its columns are \['x1;x2;y'\] \(is it separated by ';'\?\)",
    ),
    cli_refused(
        "release-table-directory",
        lambda w: ["release", str(w.directory), *LINEAR, "-o", str(w.tmp / "d.release.json")],
        r"a_directory: is a directory, not a table file",
    ),
    cli_refused(
        "knn-continuous-target",
        lambda w: w.knn_cli("good.csv", "labels_val.csv"),
        r"good\.csv: target column 'y' must hold class labels \(integers\), but row 1 holds -?\d.*; a continuous "
        r"target is a regression target, not classes",
    ),
    cli_refused(
        "knn-continuous-validation-target",
        lambda w: w.knn_cli("labels.csv", "other.csv"),
        r"other\.csv: target column 'y' must hold class labels \(integers\), but row 1 holds",
    ),
    cli_refused(
        "knn-one-half-label",
        lambda w: w.knn_cli("labels_half.csv"),
        r"labels_half\.csv: target column 'y' must hold class labels \(integers\), but row 8 holds 0\.5",
    ),
    cli_refused(
        "release-logistic-continuous-target",
        lambda w: w.release_cli("good.csv", "--model", "logistic"),
        r"good\.csv: target column 'y' must hold 0/1 \(or -1/\+1\) labels for --model logistic, but row 1 holds "
        r".*a continuous target is a regression target",
    ),
    cli_refused(
        "release-logistic-labels-0-2",
        lambda w: w.release_cli("labels_two.csv", "--model", "logistic"),
        r"labels_two\.csv: target column 'y' must hold 0/1 \(or -1/\+1\) labels for --model logistic, but row \d+ "
        r"holds 2$",
    ),
    cli_refused(
        "release-logistic-mixed-codings",
        lambda w: w.release_cli("labels_mixed.csv", "--model", "logistic"),
        r"labels_mixed\.csv: target column 'y' mixes 0/1 and -1/\+1 labels \(row \d+ holds 0, row 4 holds -1\)",
    ),
    cli_refused(
        "valuate-tables-logistic-continuous",
        lambda w: w.tables_cli("labels.csv", "--model", "logistic"),
        r"good\.csv: target column 'y' must hold 0/1 \(or -1/\+1\) labels for --model logistic",
    ),
    refused(
        "read-table-path-None",
        lambda w: read_table(None, "y"),
        TypeError,
        r"path must be a table file's path \(a str or a Path\), got None",
    ),
    refused(
        "read-table-features-string",
        lambda w: read_table(w.tables["good.csv"], "y", "x1"),
        TypeError,
        r"features must be a list of column names, got the string 'x1'; pass \['x1'\]",
    ),
    refused(
        "read-table-upper-case-dates",
        lambda w: read_table(w.tables["dates.parquet"], "y", ["when"]),
        ValueError,
        r"column 'when' holds dates and times",
    ),
    refused(
        "read-tables-one-path",
        lambda w: read_tables(str(w.tables["good.csv"]), "y"),
        TypeError,
        r"paths must be a list of table files, got the single path .*good\.csv'",
    ),
    refused(
        "read-tables-empty",
        lambda w: read_tables([], "y"),
        ValueError,
        r"paths is empty: give one table file per party",
    ),
    refused(
        "read-tables-None",
        lambda w: read_tables(None, "y"),
        TypeError,
        r"paths must be a list of table files, got None \(NoneType\)",
    ),
    refused(
        "read-table-target-list",
        lambda w: read_table(w.tables["good.csv"], ["y"]),
        TypeError,
        r"target must be a column name \(a str\), got \['y'\] \(list\)",
    ),
    refused(
        "read-table-features-index",
        lambda w: read_table(w.tables["good.csv"], "y", [0]),
        TypeError,
        r"features must be column names \(strings\), got 0 \(int\)",
    ),
    refused(
        "read-table-features-nested",
        lambda w: read_table(w.tables["good.csv"], "y", [["x1"]]),
        TypeError,
        r"features must be column names \(strings\), got \['x1'\] \(list\)",
    ),
    refused(
        "read-table-features-int",
        lambda w: read_table(w.tables["good.csv"], "y", 3),
        TypeError,
        r"features must be a list of column names, got 3 \(int\)",
    ),
    refused(
        "read-table-path-bytes",
        lambda w: read_table(b"good.csv", "y"),
        TypeError,
        r"path must be a table file's path \(a str or a Path\), got b'good\.csv' \(bytes\)",
    ),
    refused(
        "result-plot-pgf",
        lambda w: w.result.plot(w.tmp / "f.pgf"),
        ValueError,
        r"path .*f\.pgf' has no known extension",
    ),
    refused(
        "knn-unseen-continuous-labels-short",
        lambda w: KNNShapley().fit(w.X, w.y).value(w.X, w.y[::-1] + 0.5),
        ValueError,
        r"^y_val has labels not seen in y: \[[^\]]*\] \.\.\. \(40 in all\); known: \[[^\]]*\] \.\.\. \(40 in all\)$",
    ),
]

OPTIONS_AND_WORDS = [
    cli_refused(
        "release-rdp-order-with-delta",
        lambda w: w.release_cli("good.csv", "--delta", "1e-5", "--rdp-order", "3"),
        r"--rdp-order 3 sets the order of a Renyi DP release, --delta 1e-05 makes it \(epsilon, delta\)-DP, which has",
    ),
    cli_refused(
        "valuate-tables-rdp-order-with-delta",
        lambda w: w.tables_cli("other.csv", "--delta", "1e-5", "--rdp-order", "3"),
        r"--rdp-order 3 sets the order of a Renyi DP release",
    ),
    cli_refused(
        "knn-tau-without-tknn",
        lambda w: w.knn_cli("labels.csv", "labels_val.csv", "--tau", "-0.3"),
        r"--tau, --epsilon and --delta apply to --method tknn",
    ),
    cli_refused(
        "knn-k-with-tknn",
        lambda w: w.knn_cli("labels.csv", "labels_val.csv", "--method", "tknn", "--k", "3"),
        r"--k applies to --method knn: TKNN-Shapley counts every neighbour within --tau",
    ),
    cli_refused(
        "valuate-linear-warm-budget",
        lambda w: w.valuate_cli("--warm-warmup", "100"),
        r"--warm-warmup: the budget of NUTS chains started warm, which noise-aware Bayesian linear regression",
    ),
    cli_refused(
        "valuate-releases-with-epsilon",
        lambda w: w.valuate_cli("--epsilon", "2"),
        r"--epsilon apply to data tables .*release files carry their own target, features, privacy and bounds: drop it",
    ),
    cli_refused(
        "valuate-releases-with-bounds", lambda w: w.valuate_cli("--bounds", "1,2"), r"--bounds apply to data tables"
    ),
    cli_refused(
        "valuate-releases-with-target", lambda w: w.valuate_cli("--target", "y"), r"--target apply to data tables"
    ),
    cli_refused(
        "valuate-releases-with-features",
        lambda w: w.valuate_cli("--features", "x1"),
        r"--features apply to data tables",
    ),
    cli_refused(
        "valuate-releases-with-delta", lambda w: w.valuate_cli("--delta", "1e-5"), r"--delta apply to data tables"
    ),
    cli_refused(
        "valuate-releases-with-rdp-order",
        lambda w: w.valuate_cli("--rdp-order", "4"),
        r"--rdp-order apply to data tables",
    ),
    cli_refused(
        "valuate-releases-with-three-table-options",
        lambda w: w.valuate_cli("--target", "y", "--epsilon", "1", "--bounds", "3"),
        r"--target, --epsilon, --bounds apply to data tables .*: drop them",
    ),
    cli_refused(
        "valuate-linear-and-logistic",
        lambda w: w.valuate_cli(files=("alice", "carol")),
        r"the release files hold statistics of different models \(.*alice\.release\.json: linear_regression; "
        r".*carol\.release\.json: logistic_regression\); .*value each model's files separately, or have the parties "
        r"release again with one --model",
    ),
    cli_refused(
        "valuate-linear-and-logistic-with-model",
        lambda w: w.valuate_cli("--model", "linear", files=("alice", "carol")),
        r"the release files hold statistics of different models",
    ),
    cli_refused(
        "valuate-gz-table-and-release",
        lambda w: ["valuate", w.table("good.csv.gz"), str(w.releases["alice"]), "--model", "linear"],
        r"pass either release files \(\.release\.json\) or data tables",
    ),
    cli_refused(
        "knn-k-0",
        lambda w: w.knn_cli("labels.csv", "labels_val.csv", "--k", "0"),
        r"argument --k: must be an integer >= 1, got '0'",
    ),
    cli_refused(
        "knn-k-negative",
        lambda w: w.knn_cli("labels.csv", "labels_val.csv", "--k", "-3"),
        r"argument --k: must be an integer >= 1, got '-3'",
    ),
    cli_refused(
        "knn-k-text",
        lambda w: w.knn_cli("labels.csv", "labels_val.csv", "--k", "five"),
        r"argument --k: must be an integer >= 1, got 'five'",
    ),
    cli_refused(
        "knn-k-float",
        lambda w: w.knn_cli("labels.csv", "labels_val.csv", "--k", "2.5"),
        r"argument --k: must be an integer >= 1, got '2\.5'",
    ),
    cli_refused(
        "valuate-num-repeats-1",
        lambda w: w.valuate_cli("--num-repeats", "1"),
        r"^bayesval valuate: --num-repeats must be an integer >= 2, got 1$",
    ),
    cli_refused(
        "valuate-num-chains-0",
        lambda w: w.valuate_cli("--num-chains", "0"),
        r"^bayesval valuate: --num-chains must be an integer >= 1, got 0$",
    ),
    cli_refused(
        "valuate-thinning-does-not-divide",
        lambda w: w.valuate_cli("--num-samples", "30", "--thinning", "4"),
        r"--num-samples=30 must be a multiple of --thinning=4",
    ),
    cli_refused(
        "demo-reruns-too-many",
        lambda w: ["demo", "--num-samples", "1000", "--reruns", "40"],
        r"--num-samples=1000 with --reruns=40 would ask .* lower --reruns or --num-samples",
    ),
    cli_refused(
        "valuate-tables-num-warmup-negative",
        lambda w: w.tables_cli("other.csv", "--num-warmup", "-1"),
        r"--num-warmup must be an integer >= 0, got -1",
    ),
    cli_refused(
        "release-linear-bounds-features-only",
        lambda w: w.release_cli("good.csv", "--bounds", "3"),
        r"--bounds 3 bounds the features only; --model linear also needs a bound on the target: --bounds X_NORM,Y_ABS",
    ),
    cli_refused(
        "valuate-tables-linear-bounds-features-only",
        lambda w: w.tables_cli("other.csv", "--bounds", "2"),
        r"--bounds 2 bounds the features only; --model linear also needs a bound on the target",
    ),
    cli_refused(
        "knn-one-class",
        lambda w: w.knn_cli("one_class.csv"),
        r"one_class\.csv: target column 'y' holds a single class \(1\); KNN needs two",
    ),
    cli_refused(
        "knn-validation-class-unseen",
        lambda w: w.knn_cli("labels.csv", "labels_three.csv"),
        r"labels_three\.csv: target column 'y' holds 1 class\(es\) that .*labels\.csv does not have \(row 10 holds 2; "
        r".*labels\.csv has 0, 1\)",
    ),
    cli_refused(
        "demo-seed-beyond-64-bits",
        lambda w: ["demo", "--seed", str(2**70)],
        r"demo: --seed must be an integer in",
    ),
    cli_refused(
        "release-grid-too-fine",
        lambda w: w.release_cli("good.csv", "--grid", str(2.0**-80)),
        r"steps of the grid 8\.27.*e-25, more than the 2\^26 a discrete Gaussian is drawn exactly with: choose a "
        r"coarser grid \(grid=, --grid on the command line\) or a larger epsilon",
    ),
    *[
        cli_refused(
            f"release-grid-{name}",
            lambda w, grid=grid: w.release_cli("good.csv", "--grid", repr(grid)),
            r"steps of the grid .*, more than the 2\^26 a discrete Gaussian is drawn exactly with",
        )
        for name, grid in (("smallest-normal", 2.2250738585072014e-308), ("subnormal", 5e-324))
    ],
]

REFUSED = OUTPUT_PATHS + TABLES + OPTIONS_AND_WORDS


def _reaches_sampling(w: World, argv: list[str]) -> str:
    with pytest.raises(SamplingStarted):
        cli_main(argv)
    return "reached sampling"


ACCEPTED = [
    pytest.param(lambda w: _reaches_sampling(w, w.tables_cli("good.csv.gz")), id="valuate-csv-gz-tables"),
    pytest.param(lambda w: _reaches_sampling(w, w.tables_cli("upper.CSV")), id="valuate-upper-case-csv"),
    pytest.param(lambda w: _reaches_sampling(w, w.tables_cli("good.parquet")), id="valuate-parquet-table"),
    pytest.param(lambda w: _reaches_sampling(w, w.valuate_cli("--plot", str(w.tmp / "F.PNG"))), id="plot-upper-case"),
    pytest.param(lambda w: _reaches_sampling(w, w.valuate_cli("--plot", str(w.tmp / "f.svg"))), id="plot-svg"),
    pytest.param(
        lambda w: _reaches_sampling(w, w.valuate_cli("--save", str(w.earlier), "--force")), id="save-over-a-result"
    ),
    pytest.param(lambda w: _reaches_sampling(w, ["demo", "--save", str(w.tmp / "demo.npz")]), id="demo-save-ok"),
    pytest.param(lambda w: read_table(w.tables["dates.parquet"], "y", ["x1", "x2"])[0], id="dates-left-out"),
    pytest.param(lambda w: read_table(w.tables["good.csv.gz"], "y")[0], id="read-csv-gz"),
    pytest.param(lambda w: read_table(w.tables["labels_pm.csv"], "y")[1], id="read-plus-minus-labels"),
]


@pytest.mark.parametrize("case", REFUSED)
def test_bad_input_gets_a_clear_error(case, world, capsys):
    found = problems(case, world, capsys)
    assert not found, f"{case.id}: " + "; ".join(found)


@pytest.mark.parametrize("call", ACCEPTED)
def test_accepted_near_misses_work(call, world):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        output = call(world)
    if isinstance(output, str):
        assert output == "reached sampling"
    else:
        assert np.isfinite(np.asarray(output, dtype=np.float64)).all()


def test_csv_gz_table_reads_the_same_numbers_as_the_csv(world):
    plain, zipped = read_table(world.tables["other.csv"], "y"), read_table(world.tables["good.csv.gz"], "y")
    np.testing.assert_array_equal(plain[0], zipped[0])
    np.testing.assert_array_equal(plain[1], zipped[1])
    assert plain[2] == zipped[2] == ["x1", "x2"]
    np.testing.assert_allclose(plain[0], world.X / [2, 1], rtol=1e-15)  # the CSV round trip keeps every digit


def test_release_overwrites_only_with_force(world, tmp_path, capsys):
    """-o of an existing file is refused and leaves it as it was; --force replaces it by a release that loads."""
    target = tmp_path / "p.release.json"
    target.write_text("earlier\n")
    with pytest.raises(SystemExit):
        cli_main(world.release_cli(output=str(target)))
    assert target.read_text() == "earlier\n"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cli_main(world.release_cli("good.csv", "--force", output=str(target)))
    assert bv.PerturbedStatistic.load(target).count == 40


class _Entered(AssertionError):
    """The stub of the sampler or of the release was entered: the bad path was not checked first."""


def test_bad_output_paths_fail_in_under_2_s_before_the_work(world, monkeypatch, capsys):
    """Issue 57: `demo --save`, `valuate --plot/--save` and `release -o` with a bad path fail in under 2 s, before any
    sampling or release, and nothing is lost (the existing release file is unchanged). The sampler and `Party.release`
    are stubs that raise `_Entered`: the command must stop with status 2 before either runs."""

    def entered(*args, **kwargs):
        raise _Entered("the work started before the output path was checked")

    monkeypatch.setattr(party_path, "CoalitionSurprise", entered)
    monkeypatch.setattr(bv.Party, "release", entered)
    before = world.existing.read_bytes()
    commands = {
        "demo --save": ["demo", "--save", world.missing("r.npz")],
        "valuate --plot": world.valuate_cli("--plot", str(world.tmp / "f.txt")),
        "valuate --save": world.valuate_cli("--save", str(world.directory)),
        "valuate tables --plot": world.tables_cli("other.csv", "--plot", world.missing("f.png")),
        "release -o folder": world.release_cli(output=str(world.directory)),
        "release -o existing": world.release_cli(output=str(world.existing)),
    }
    if Path("/proc/self").is_dir():  # a folder `os.access` calls writable for a superuser, that takes no new file
        commands["release -o /proc"] = world.release_cli(output="/proc/bayesval-test.release.json")
        commands["valuate --save /proc"] = world.valuate_cli("--save", "/proc/bayesval-test.npz")
    for command, argv in commands.items():
        start = time.perf_counter()
        with pytest.raises(SystemExit) as stop:
            cli_main(argv)
        elapsed = time.perf_counter() - start
        assert stop.value.code == 2, command
        assert elapsed < 2.0, f"{command} took {elapsed:.2f} s"
        err = capsys.readouterr().err
        assert len(err.strip().splitlines()) == 1 and "Traceback" not in err, (command, err)
    assert world.existing.read_bytes() == before


def _disk_full_at(target: Path, write_whole):
    """`write_whole` as it is, but for `target`, where the disk fills after part of the content is written."""

    def writing(path, write):
        if Path(path) != target:
            return write_whole(path, write)

        def part_then_full(partial):
            partial.write_bytes(b"the first part")
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(partial))

        return write_whole(path, part_then_full)

    return writing


def test_a_file_is_written_whole_or_not_at_all(tmp_path):
    """A write that fails part way leaves the earlier file as it was and no partial file; one that succeeds replaces
    it, with the permissions a new file gets."""
    target = tmp_path / "result.npz"
    target.write_bytes(b"the earlier result")

    def part_then_full(partial):
        partial.write_bytes(b"the first part")
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    with pytest.raises(OSError, match="No space left"):
        write_whole(target, part_then_full)
    assert target.read_bytes() == b"the earlier result" and os.listdir(tmp_path) == ["result.npz"]
    write_whole(target, lambda partial: partial.write_bytes(b"the new result"))
    assert target.read_bytes() == b"the new result" and os.listdir(tmp_path) == ["result.npz"]
    umask = os.umask(0)
    os.umask(umask)
    assert stat.S_IMODE(target.stat().st_mode) == 0o666 & ~umask


def test_a_result_the_disk_refuses_after_the_work_is_saved_elsewhere_and_named(world, tmp_path, monkeypatch, capsys):
    """`--save` was checked before the work; where the disk fills when the result is written, the finished result
    goes to the temporary folder, the command fails in one line naming both files, and nothing is left at --save."""
    target, rescue_folder = tmp_path / "k.npz", tmp_path / "temporary"
    rescue_folder.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(rescue_folder))
    monkeypatch.setattr(serialisation, "write_whole", _disk_full_at(target, serialisation.write_whole))
    with pytest.raises(SystemExit) as stop:
        cli_main(world.knn_cli("labels.csv", "labels_val.csv", "--save", str(target)))
    err = capsys.readouterr().err
    assert stop.value.code == 2 and len(err.strip().splitlines()) == 1 and "Traceback" not in err
    (rescued,) = rescue_folder.iterdir()
    assert f"--save {str(target)!r} could not be written (No space left on device)" in err and str(rescued) in err
    assert bv.ValuationResult.load(rescued).values.shape == (40,)
    assert not target.exists() and os.listdir(tmp_path) == ["temporary"]


def test_a_release_the_disk_refuses_leaves_no_file_and_says_nothing_left_the_process(world, monkeypatch, capsys):
    target = world.tmp / "full.release.json"
    monkeypatch.setattr(boundary, "write_whole", _disk_full_at(target, boundary.write_whole))
    before = sorted(os.listdir(world.tmp))
    with warnings.catch_warnings(), pytest.raises(SystemExit) as stop:
        warnings.simplefilter("ignore")
        cli_main(world.release_cli(output=str(target)))
    err = capsys.readouterr().err
    assert stop.value.code == 2 and len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert "No space left on device" in err and "releasing again spends no more privacy" in err
    assert sorted(os.listdir(world.tmp)) == before


def test_parties_of_different_bounds_are_valued_with_a_warning_naming_each(world, monkeypatch):
    """Each party's noise is calibrated to its own bounds, so the valuation is sound, but rows clipped to different
    bounds are differently shrunk data: a warning names every party's bounds, before any sampling."""
    monkeypatch.setattr(party_path, "CoalitionSurprise", _NoSampling)
    bounds = (bv.Bounds(3.0, 3.0), bv.Bounds(3.0, 3.0), bv.Bounds(1.5, 3.0))
    parties = [bv.Party(world.X, world.y, epsilon=1.0, bounds=b, name=f"p{i}") for i, b in enumerate(bounds)]
    with pytest.warns(UserWarning, match=r"declared different bounds \(p0: 3,3; p1: 3,3; p2: 1.5,3\)"):
        with pytest.raises(SamplingStarted):
            bv.valuate(bv.models.LinearRegression(), parties, progress_bar=False)
    same = [bv.Party(world.X, world.y, epsilon=1.0, bounds=bounds[0], name=f"q{i}") for i in range(2)]
    with warnings.catch_warnings(record=True) as caught, pytest.raises(SamplingStarted):
        warnings.simplefilter("always")
        bv.valuate(bv.models.LinearRegression(), same, progress_bar=False)
    assert not any("different bounds" in str(w.message) for w in caught)


def test_a_value_read_as_an_option_is_explained(world, capsys):
    """`--bounds -1,2` reads -1,2 as an option, so argparse says --bounds lacks its value: the message says why and
    how to write it, and written so, the value is checked as any other."""
    with pytest.raises(SystemExit) as stop:
        cli_main(world.tables_cli("other.csv", "--bounds", "-1,2"))
    err = capsys.readouterr().err
    assert stop.value.code == 2 and "argument --bounds: expected one argument" in err and "--OPTION=VALUE" in err
    with pytest.raises(SystemExit):
        cli_main(world.tables_cli("other.csv", "--bounds=-1,2"))
    assert "Bounds.x_norm must be a finite number > 0, got -1.0" in capsys.readouterr().err
