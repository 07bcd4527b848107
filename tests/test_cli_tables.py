"""`bayesval valuate a.csv b.csv c.csv` (parties released in-process from their tables) and `bayesval knn`, end to
end; each bad file is one line naming the file and the column."""

import re
import warnings

import numpy as np
import pandas as pd
import pytest

import bayesval as bv
from bayesval.cli import main

TINY = ["--num-chains", "2", "--num-warmup", "30", "--num-samples", "60", "--num-repeats", "2", "--no-progress"]


def write_parties(syn, directory) -> list[str]:
    paths = []
    for name, (X, y) in zip(("alice", "bob", "carol"), syn.parties):
        path = directory / f"{name}.csv"
        pd.DataFrame({"x1": X[:, 0], "x2": X[:, 1], "y": y}).to_csv(path, index=False)
        paths.append(str(path))
    return paths


def test_three_csv_parties_are_valued_end_to_end_with_a_plot(syn, tmp_path, capsys):
    paths = write_parties(syn, tmp_path)
    arguments = ["valuate", *paths, "--model", "linear", "--target", "y", "--epsilon", "0.5", "--bounds", "1,2"]
    arguments += ["--save", str(tmp_path / "r.npz"), "--plot", str(tmp_path / "r.png"), *TINY]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # tiny budget: convergence
        main(arguments)
    result = bv.ValuationResult.load(tmp_path / "r.npz")
    assert result.names == ["alice", "bob", "carol"]
    assert np.all(np.isfinite(result.values)) and np.all(result.coalition_values > 0)
    assert result.values.sum() == pytest.approx(result.coalition_value(["alice", "bob", "carol"]))
    spent = result.privacy_spent()
    assert [spent[name].rdp_epsilon for name in result.names] == pytest.approx([0.5] * 3)  # (2, 0.5)-RDP each
    assert (tmp_path / "r.png").read_bytes()[:4] == b"\x89PNG"
    out = capsys.readouterr().out
    assert "3 parties: alice, bob, carol" in out and "Shapley values" in out and "plot written" in out


def test_knn_values_training_rows_and_flags_the_mislabelled(rng, tmp_path, capsys):
    X = rng.normal(size=(240, 4))
    y = (X[:, 0] + X[:, 1] > 0).astype(int)
    flipped = np.zeros(200, bool)
    flipped[:20] = True
    labels = np.where(flipped, 1 - y[:200], y[:200])
    train, validation = tmp_path / "train.csv", tmp_path / "val.parquet"
    pd.DataFrame(X[:200], columns=list("abcd")).assign(label=labels).to_csv(train, index=False)
    pd.DataFrame(X[200:], columns=list("abcd")).assign(label=y[200:]).to_parquet(validation)
    main(["knn", str(train), "--validation", str(validation), "--target", "label", "--save", str(tmp_path / "k.npz")])
    result = bv.ValuationResult.load(tmp_path / "k.npz")
    assert len(result.values) == 200
    lowest = np.argsort(result.values)[:20]
    assert flipped[lowest].mean() > 0.5  # mislabelled rows are the lowest-valued
    assert "lowest values" in capsys.readouterr().out


@pytest.fixture
def tables(syn, tmp_path):
    good, other = (pd.DataFrame({"x1": X[:, 0], "x2": X[:, 1], "y": y}) for X, y in syn.parties[:2])
    files = {"good": good, "other": other, "copy": good.copy()}
    files["no_target"] = good.drop(columns="y")
    files["text"] = good.assign(x2=["high"] + ["0.1"] * (len(good) - 1))
    files["nan"] = good.assign(x1=good.x1.where(good.index != 4))
    files["renamed"] = good.rename(columns={"x2": "x3"})
    paths = {}
    for name, frame in files.items():
        paths[name] = tmp_path / f"{name}.csv"
        frame.to_csv(paths[name], index=False)
    paths["empty"] = tmp_path / "empty.csv"
    paths["empty"].write_text("")
    return {name: str(path) for name, path in paths.items()}


@pytest.mark.parametrize(
    "bad, message",
    [
        ("no_target", r"no_target.csv: has no target column 'y'; its columns are \['x1', 'x2'\]"),
        ("text", r"text.csv: column 'x2' is not numeric \(row 1 holds 'high'\)"),
        ("nan", r"nan.csv: column 'x1' has 1 empty or NaN cell\(s\) \(rows 5\)"),
        ("empty", r"empty.csv: the file is empty"),
        ("renamed", r"renamed.csv: its feature columns \['x1', 'x3'\] differ from those of .*good.csv \['x1', 'x2'\]"),
    ],
)
def test_each_bad_table_is_one_line_naming_the_file_and_column(tables, bad, message, capsys):
    arguments = ["valuate", tables["good"], tables["other"], tables[bad], "--model", "linear", "--target", "y"]
    with pytest.raises(SystemExit) as stop:
        main([*arguments, "--epsilon", "1", "--bounds", "1,2", "--no-progress"])
    assert stop.value.code == 2
    error = capsys.readouterr().err.strip()
    assert len(error.splitlines()) == 1 and error.startswith("bayesval valuate: ")
    assert re.search(message, error), error


@pytest.mark.parametrize("command", ["valuate", "knn"])
def test_one_table_given_twice_is_refused_naming_both_files(tables, tmp_path, command, capsys):
    """The same rows under two paths (a copy, or the file itself by another path) are one party's data given twice:
    valued as two parties they were once each released and valued, their privacy spent twice uncounted; as k-NN's
    training and validation rows each point was its own nearest neighbour. Refused before anything is released."""
    same = {"copy": tables["copy"], "another path": str(tmp_path / ".." / tmp_path.name / "good.csv")}
    for second in same.values():
        if command == "valuate":
            arguments = ["valuate", tables["good"], tables["other"], second, "--model", "linear", "--target", "y"]
            arguments += ["--epsilon", "1", "--bounds", "1,2", "--no-progress"]
        else:
            arguments = ["knn", tables["good"], "--validation", second, "--target", "y"]
        with pytest.raises(SystemExit) as stop:
            main(arguments)
        assert stop.value.code == 2
        error = capsys.readouterr().err.strip()
        assert len(error.splitlines()) == 1, error
        assert re.search(rf"{re.escape(second)}: holds exactly the rows of .*good.csv", error), error


def test_tables_need_their_options_and_do_not_mix_with_release_files(tables, capsys):
    with pytest.raises(SystemExit):
        main(["valuate", tables["good"], tables["other"], "--model", "linear", "--no-progress"])
    assert "valuing data tables needs --target, --epsilon, --bounds" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["valuate", tables["good"], "p.release.json", "--model", "linear", "--target", "y"])
    assert "not both" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["knn", tables["good"], "--validation", tables["other"], "--target", "y", "--epsilon", "1"])
    assert "--tau, --epsilon and --delta apply to --method tknn" in capsys.readouterr().err
