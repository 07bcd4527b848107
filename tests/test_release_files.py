"""Release files, format version 2 (the contract in the docstring of bayesval/parties/boundary.py): round trip,
version 1 files, the experiment flag for seeded and floating-point releases, fields a reader may ignore or must
refuse, and the plausibility check on load."""

import importlib
import json
import warnings

import numpy as np
import pytest

import bayesval as bv
from bayesval.cli import main
from bayesval.parties.boundary import PLAUSIBLE_NOISE_STDS, _checksum
from bayesval.statistics import LinearRegressionStatistic, LogisticRegressionStatistic

party_path = importlib.import_module("bayesval.parties.valuation")  # where valuate releases parties
TINY = bv.SamplerConfig(num_chains=2, num_warmup=10, num_samples=40, thinning=2, num_repeats=2, progress_bar=False)


def rewrite(path, change, *, checksum=True):
    record = json.loads(path.read_text())
    change(record)
    if checksum:
        record["checksum"] = _checksum({k: v for k, v in record.items() if k != "checksum"})
    path.write_text(json.dumps(record))
    return path


def test_a_v2_file_round_trips_exactly(syn, tmp_path):
    released = bv.Party(*syn.parties[0], epsilon=0.5, bounds=syn.bounds, name="p").release()
    path = released.save(tmp_path / "p.release.json")
    record = json.loads(path.read_text())
    assert record["version"] == 2 and record["noise_source"] == "os-entropy" and record["experiment"] is False
    assert set(record["required"]) == set(record) - {"checksum"}  # every v2 field is required
    assert record["release"]["noise"] == "discrete_gaussian" and record["release"]["grid"] == released.release.grid
    loaded = bv.PerturbedStatistic.load(path)
    np.testing.assert_array_equal(loaded.perturbed, released.perturbed)  # exact multiples of the grid, exact in JSON
    assert loaded.release == released.release and loaded.count == released.count and loaded.bounds == syn.bounds
    assert loaded.noise_std == released.noise_std and loaded.caveats == [] and loaded.file_version == 2
    assert loaded.to_record() == released.to_record()


def test_a_v1_file_still_loads_and_says_it_carries_float_noise(syn, tmp_path, monkeypatch):
    # written as version 1 did: eight fields and a checksum, a float Gaussian release without a grid
    released = bv.Party(*syn.parties[0], epsilon=0.5, bounds=syn.bounds, name="p", mechanism="gaussian").release()
    record = {k: v for k, v in released.to_record().items() if k not in ("required", "noise_source", "experiment")}
    record["version"] = 1
    record["release"].pop("grid")
    record["checksum"] = _checksum(record)
    path = tmp_path / "old.release.json"
    path.write_text(json.dumps(record))
    loaded = bv.PerturbedStatistic.load(path)
    np.testing.assert_array_equal(loaded.perturbed, released.perturbed)
    assert loaded.file_version == 1 and not loaded.release.floating_point_safe
    assert loaded.caveats == [
        "release file version 1: its noise is floating-point Gaussian, not floating-point safe, and the file does not "
        "record whether it was seeded"
    ]
    with pytest.raises(ValueError, match="not safe to send out of the process"):
        loaded.save(tmp_path / "again.release.json")  # re-saving it as v2 needs the experiment flag
    # valuate warns before it releases or samples anything (stopped there: the warning is what is tested)
    monkeypatch.setattr(party_path, "release_checked", _stop)
    other = bv.Party(*syn.parties[1], epsilon=0.5, bounds=syn.bounds, name="q").release()
    with pytest.warns(UserWarning, match="p: release file version 1"), pytest.raises(_Stopped):
        bv.valuate(bv.models.LinearRegression(), [loaded, other], config=TINY)


class _Stopped(Exception):
    pass


def _stop(*args, **kwargs):
    raise _Stopped


def test_a_seeded_release_needs_the_experiment_flag_which_the_file_records(syn, tmp_path):
    party = bv.Party(*syn.parties[1], epsilon=0.5, bounds=syn.bounds, name="s", noise_seed=31)
    released = party.release()
    assert released.seeded
    with pytest.raises(ValueError, match=r"s: this release is not safe .*seeded noise .* experiment=True"):
        released.save(tmp_path / "s.release.json")
    assert not (tmp_path / "s.release.json").exists()
    path = released.save(tmp_path / "s.release.json", experiment=True)
    record = json.loads(path.read_text())
    assert record["noise_source"] == "seeded" and record["experiment"] is True
    loaded = bv.PerturbedStatistic.load(path)
    assert loaded.seeded and loaded.experiment
    assert loaded.caveats == [
        "seeded noise (noise_seed): anyone with the seed can remove it",
        "marked as an experiment by its party",
    ]
    loaded.save(tmp_path / "again.release.json")  # the flag travels with the release
    # the flag cannot be dropped from the file: a seeded release not marked as an experiment is refused
    rewrite(path, lambda r: r.update(experiment=False))
    with pytest.raises(ValueError, match="seeded or floating-point release that is not marked as an experiment"):
        bv.PerturbedStatistic.load(path)


def test_fields_a_reader_does_not_know_are_ignored_unless_required(syn, tmp_path):
    released = bv.Party(*syn.parties[0], epsilon=0.5, bounds=syn.bounds, name="p").release()
    path = rewrite(released.save(tmp_path / "p.release.json"), lambda r: r.update(comment="added by a later writer"))
    np.testing.assert_array_equal(bv.PerturbedStatistic.load(path).perturbed, released.perturbed)
    rewrite(path, lambda r: r.update(required=[*r["required"], "comment"]))
    with pytest.raises(ValueError, match=r"requires field\(s\) \['comment'\] that this version of bayesval"):
        bv.PerturbedStatistic.load(path)
    # and an added field is covered by the checksum like any other
    rewrite(path, lambda r: r.update(required=r["required"][:-1], comment="changed"), checksum=False)
    with pytest.raises(ValueError, match="checksum mismatch"):
        bv.PerturbedStatistic.load(path)


@pytest.mark.parametrize("kind", ["linear", "logistic"])
def test_genuine_releases_at_the_edge_of_the_bounds_are_plausible(kind, tmp_path):
    """Every record at an extreme of the bounds puts the exact statistic on the edge of its range; with noise it
    lies outside by a few stds and must still load. Beyond PLAUSIBLE_NOISE_STDS stds it is refused."""
    bounds = bv.Bounds(2.0, 3.0)
    X = np.tile([[2.0, 0.0]], (50, 1))
    if kind == "linear":
        statistic, y = LinearRegressionStatistic(2), np.full(50, 3.0)
    else:
        statistic, y = LogisticRegressionStatistic(2), np.ones(50)
    released = bv.Party(X, y, epsilon=2.0, bounds=bounds, name="edge").release(statistic)
    low, high = statistic.entry_ranges(bounds)
    exact = statistic.compute(X, y)
    assert np.all((exact == 50 * low) | (exact == 50 * high) | ((exact > 50 * low) & (exact < 50 * high)))
    path = released.save(tmp_path / "edge.release.json")
    bv.PerturbedStatistic.load(path)
    # moved to just inside and just outside the limit on entry 0 (x_1^2, whose range is [0, 50 * 4])
    for stds, plausible in ((0.99 * PLAUSIBLE_NOISE_STDS, True), (1.01 * PLAUSIBLE_NOISE_STDS, False)):
        value = 50 * high[0] + stds * released.noise_std
        rewrite(path, lambda r, value=value: r["perturbed"].__setitem__(0, value))
        if plausible:
            assert bv.PerturbedStatistic.load(path).perturbed[0] == value
        else:
            with pytest.raises(ValueError, match=r"edge.release.json: edge: implausible release: entry 0"):
                bv.PerturbedStatistic.load(path)


def test_entry_ranges_contain_every_record_and_are_reached(rng):
    """One record's statistic lies inside entry_ranges for random records in the bounds, and the ends are nearly
    attained (within 15 %) by some of 4,000 random records: the ranges are neither wrong nor loose."""
    bounds = bv.Bounds(1.5, 2.0)
    X = rng.normal(size=(4000, 3))
    X *= 1.5 * rng.uniform(size=(4000, 1)) ** 0.1 / np.linalg.norm(X, axis=1, keepdims=True)
    for statistic, y in (
        (LinearRegressionStatistic(3), rng.uniform(-2, 2, 4000)),
        (LogisticRegressionStatistic(3), rng.choice([-1.0, 1.0], 4000)),
    ):
        low, high = statistic.entry_ranges(bounds)
        each = np.array([statistic.compute(X[i : i + 1], y[i : i + 1]) for i in range(len(y))])
        assert np.all(each >= low - 1e-12) and np.all(each <= high + 1e-12)
        assert np.all(each.max(axis=0) >= 0.85 * high)
        assert np.all(np.where(low < 0, each.min(axis=0) <= 0.85 * low, True))


def test_cli_release_with_experiment_flag_and_valuate_reports_it(syn, tmp_path, capsys, monkeypatch):
    import pandas as pd

    monkeypatch.chdir(tmp_path)
    files = []
    for i, (X, y) in enumerate(syn.parties):
        csv = tmp_path / f"party{i}.csv"
        pd.DataFrame({"x0": X[:, 0], "x1": X[:, 1], "target": y}).to_csv(csv, index=False)
        seeded = ["--noise-seed", "5", "--experiment"] if i == 0 else []
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            main(["release", str(csv), "--model", "linear", "--target", "target", "--epsilon", "1", "--bounds", "1,3"])
            if seeded:
                main(
                    ["release", str(csv), "--model", "linear", "--target", "target", "--epsilon", "1"]
                    + ["--bounds", "1,3", "-o", "party0.release.json", "--force", *seeded]  # replaces the first
                )
        files.append(str(tmp_path / f"party{i}.release.json"))
    out = capsys.readouterr().out
    assert "discrete Gaussian on grid" in out and "an experiment) to party0.release.json" in out
    assert json.loads((tmp_path / "party0.release.json").read_text())["experiment"] is True
    sizes = ("num_chains", "num_warmup", "num_samples", "thinning", "num_repeats")
    budget = [text for name in sizes for text in (f"--{name.replace('_', '-')}", str(getattr(TINY, name)))]
    main(["valuate", *files, "--no-progress", *budget])
    out, err = capsys.readouterr()
    assert "note: party0's release file: seeded noise (noise_seed)" in out
    assert "note: party0's release file: marked as an experiment by its party" in out
    assert "party1: discrete Gaussian on grid" in out and "note: party1" not in out
    warned = [line for line in err.splitlines() if "party0: seeded noise" in line]  # in the command's own words
    assert warned and all(line.startswith("warning: ") for line in warned) and "UserWarning" not in err


def _release_table(frame, tmp_path, name: str, *options: str) -> str:
    """`bayesval release` of one table (`frame`, a pandas DataFrame) with target 'y': the release file's path."""
    csv = tmp_path / f"{name}.csv"
    frame.to_csv(csv, index=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        main(["release", str(csv), "--model", "linear", "--target", "y", "--epsilon", "1", "--bounds", "1,3", *options])
    return str(tmp_path / f"{name}.release.json")


def test_a_release_names_its_columns_and_parties_of_other_columns_are_refused(syn, tmp_path, capsys, monkeypatch):
    """`bayesval release` records the table's target and features, in the statistic's order, in the file (covered by
    its checksum): releases of the same columns in another order were valued together without a word, each entry
    pooled with another feature's (a confident wrong answer that valuing the tables themselves refuses)."""
    import pandas as pd

    monkeypatch.chdir(tmp_path)
    (X0, y0), (X1, y1) = syn.parties[:2]
    first = _release_table(pd.DataFrame({"x1": X0[:, 0], "x2": X0[:, 1], "y": y0}), tmp_path, "a")
    swapped = _release_table(pd.DataFrame({"x2": X1[:, 1], "x1": X1[:, 0], "y": y1}), tmp_path, "b")
    chosen = _release_table(
        pd.DataFrame({"x2": X1[:, 1], "x1": X1[:, 0], "y": y1}), tmp_path, "c", "--features", "x1,x2"
    )
    assert json.loads(open(first).read())["columns"] == {"target": "y", "features": ["x1", "x2"]}
    assert bv.PerturbedStatistic.load(swapped).columns == ("y", ("x2", "x1"))
    capsys.readouterr()
    with pytest.raises(SystemExit) as stop:
        main(["valuate", first, swapped, "--no-progress"])
    assert stop.value.code == 2
    error = capsys.readouterr().err
    assert "party 'a' (release file" in error and "party 'b' (release file" in error
    assert "features ['x1', 'x2'] against 'y', ['x2', 'x1']" in error
    with pytest.raises(ValueError, match="were released from other columns"):
        bv.valuate(bv.models.LinearRegression(), [bv.PerturbedStatistic.load(f) for f in (first, swapped)], config=TINY)
    # the same columns chosen in the file's order (--features), and a release of arrays, which names none, pass
    unnamed = bv.Party(*syn.parties[2], epsilon=1.0, bounds=bv.Bounds(1.0, 3.0), name="d").release()
    releases = [bv.PerturbedStatistic.load(f) for f in (first, chosen)] + [unnamed]
    party_path.check_parties(bv.models.LinearRegression(), releases)
    # an edit of the columns is an edit: the checksum refuses it, and a re-checksummed file whose columns do not fit
    # its statistic is refused on load
    rewrite(tmp_path / "b.release.json", lambda r: r["columns"].update(features=["x1", "x2"]), checksum=False)
    with pytest.raises(ValueError, match="checksum mismatch"):
        bv.PerturbedStatistic.load(swapped)
    rewrite(tmp_path / "b.release.json", lambda r: r["columns"].update(features=["x1"]))
    with pytest.raises(ValueError, match="columns name 1 features, but its statistic is of 2"):
        bv.PerturbedStatistic.load(swapped)


@pytest.mark.parametrize("num_features", [1, 2, 7, 13, 40])
def test_a_statistic_length_in_closed_form_is_the_length_of_its_layout(num_features):
    """`size` is read in closed form (a release file's num_features is checked against it before any layout is
    built): it must be the count of the entries the statistic computes."""
    linear, logistic = LinearRegressionStatistic(num_features), LogisticRegressionStatistic(num_features)
    assert linear.size == len(linear.pairs[0]) == (num_features + 2) * (num_features + 3) // 2 - 1
    assert logistic.size == logistic.dim + len(logistic.pairs[0])
    rng = np.random.default_rng(num_features)
    X, y = rng.normal(size=(5, num_features)), rng.normal(size=5)
    assert linear.compute(X, y).shape == (linear.size,)
    assert logistic.compute(X, np.sign(y)).shape == (logistic.size,)
