"""What `bayesval demo`, `bayesval valuate` and `bayesval knn` print, read as a newcomer reads it (tracker issue 28):
every progress bar says what it samples, the reward table has a legend for each of its columns, each party's privacy
line gives the declared guarantee first and the conversion second (labelled as one), and the meaning of ± (Monte
Carlo error given these releases, not release-to-release variability) is stated in the output and on the figure."""

from __future__ import annotations

import contextlib
import io
import re
import warnings

import numpy as np
import pandas as pd
import pytest

import bayesval as bv
from bayesval.cli import main

TINY = ["--num-chains", "2", "--num-warmup", "30", "--num-samples", "60", "--num-repeats", "2"]
BAR = re.compile(r"^(?P<description>.*?):\s+\d+%\|", re.MULTILINE)


def progress_descriptions(err: str) -> set[str]:
    """The description of every progress bar tqdm drew on stderr (bars redraw with carriage returns)."""
    return {match["description"].strip() for match in BAR.finditer(err.replace("\r", "\n"))}


def privacy_lines(out: str, names: list[str]) -> dict[str, str]:
    lines = {}
    for name in names:
        found = [line for line in out.splitlines() if line.strip().startswith(f"{name}: declared")]
        assert len(found) == 1, f"no single privacy line for {name!r} in:\n{out}"
        lines[name] = found[0]
    return lines


def assert_plus_minus_explained(out: str) -> None:
    text = " ".join(out.split())  # the explanation is wrapped over lines
    assert "± is the Monte Carlo error given these releases" in text
    assert "release-to-release variability" in text and "fresh release" in text
    assert "± MC s.e." in out  # the tables' column


@pytest.fixture(scope="module")
def demo_output(tmp_path_factory):
    """`bayesval demo` at a tiny budget, progress bars on, its stdout and stderr."""
    directory = tmp_path_factory.mktemp("demo")
    out, err = io.StringIO(), io.StringIO()
    with warnings.catch_warnings(), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        warnings.simplefilter("ignore", UserWarning)  # tiny budget: convergence, rewards off target
        main(["demo", *TINY, "--save", str(directory / "demo.npz")])
    return out.getvalue(), err.getvalue(), bv.ValuationResult.load(directory / "demo.npz")


def test_demo_progress_bars_say_what_they_sample(demo_output):
    _, err, result = demo_output
    descriptions = progress_descriptions(err)
    assert descriptions, f"no progress bar on stderr:\n{err[-2000:]}"
    assert "Gibbs" not in descriptions  # no bare sampler name
    assert ", compiling]" in err  # the wait before the first sweep is said, not a bar at 0 with no rate
    assert all(description.endswith("[Gibbs]") and ": " in description for description in descriptions), descriptions
    assert "valuation: posteriors p(theta | o_C) of 7 coalitions x 2 repeats [Gibbs]" in descriptions
    # the rewards compare with the valuation's own draws of the grand coalition and each party: no second sampling
    assert not any(d.startswith("rewards: draws of the grand coalition") for d in descriptions), descriptions
    searches = [d for d in descriptions if d.startswith("reward search by tempering, round 1: ")]
    assert all("trial values of kappa" in d for d in searches), descriptions
    # a fresh release (OS entropy) may put every target within the tiny budget's tolerance: then no search ran
    assert bool(searches) == bool(np.any(result.rewards.calls > 0)), (descriptions, result.rewards.calls)


def test_demo_reward_table_has_a_legend_for_every_column(demo_output):
    out, _, result = demo_output
    header, *_ = out[out.index("Model rewards by tempering") :].splitlines()[1:]
    columns = result.rewards.to_dataframe().rename(columns={"stderr": "± MC s.e."}).columns
    assert all(column in header for column in columns), header
    legend = out[out.index("Columns:") :].splitlines()[1 : len(columns)]
    for column in columns:
        if column == "± MC s.e.":  # the reward's error: named in the reward's line, explained above the tables
            assert any(line.startswith("  reward ") and column in line for line in legend), legend
        else:
            assert any(line.startswith(f"  {column} ") for line in legend), f"{column!r} has no legend line: {legend}"
    assert "kappa      the tempering factor" in out
    assert "similarity r'_i = -KL(p(theta | o_N) || q_i)" in out


def test_demo_privacy_shows_the_declared_guarantee_first_then_the_conversion(demo_output):
    out, _, result = demo_output
    lines = privacy_lines(out, result.names)
    for name, epsilon in zip(result.names, (0.2, 0.1, 0.2)):
        line = lines[name]
        declared = line.index(f"declared (2, {epsilon:g})-RDP")
        conversion = line.index("conversion to (epsilon, delta)-DP")
        converted = line.index(f"({result.privacy_spent()[name].epsilon:.4g}, 1e-05)-DP")
        assert declared < conversion < converted, line


def test_demo_states_what_plus_minus_means(demo_output):
    out, _, result = demo_output
    assert_plus_minus_explained(out)
    assert f"over the sampler's {result.diagnostics['sampler']['num_repeats']} repeats" in " ".join(out.split())


def test_valuate_output_and_figure_explain_themselves(syn, tmp_path, capsys):
    """Three CSV parties under (epsilon, delta)-DP: the declared (0.5, 1e-05)-DP comes first, then the conversion to
    Renyi DP; ± is explained in the text and on the figure's axes and title."""
    paths = []
    for name, (X, y) in zip(("alice", "bob", "carol"), syn.parties):
        paths.append(tmp_path / f"{name}.csv")
        pd.DataFrame({"x1": X[:, 0], "x2": X[:, 1], "y": y}).to_csv(paths[-1], index=False)
    arguments = ["valuate", *map(str, paths), "--model", "linear", "--target", "y", "--epsilon", "0.5"]
    arguments += ["--delta", "1e-5", "--bounds", "1,2", "--save", str(tmp_path / "r.npz"), *TINY]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        main(arguments)
    captured = capsys.readouterr()
    assert_plus_minus_explained(captured.out)
    descriptions = progress_descriptions(captured.err)
    assert descriptions == {"valuation: posteriors p(theta | o_C) of 7 coalitions x 2 repeats [Gibbs]"}
    result = bv.ValuationResult.load(tmp_path / "r.npz")
    for name, line in privacy_lines(captured.out, result.names).items():
        spent = result.privacy_spent()[name]
        assert (
            line.index("declared (0.5, 1e-05)-DP")
            < line.index("conversion to Renyi DP")
            < line.index(f"({spent.rdp_order:g}, {spent.rdp_epsilon:.4g})-RDP")
        ), line
    figure = result.plot()
    assert "Monte Carlo standard error given these releases" in figure._suptitle.get_text()
    labels = [ax.get_ylabel() for ax in figure.axes]
    assert "Shapley value (nats, ± MC s.e.)" in labels and "coalition value v_C (nats, ± MC s.e.)" in labels
    width, _ = figure.get_size_inches()
    assert width * figure.dpi <= 800  # fits a documentation column at its natural size


def test_knn_prints_no_column_of_zeros_and_numbers_rows_from_one(rng, tmp_path, capsys):
    X = rng.normal(size=(60, 3))
    y = (X[:, 0] > 0).astype(int)
    train, validation = tmp_path / "train.csv", tmp_path / "val.csv"
    pd.DataFrame(X[:40], columns=list("abc")).assign(label=y[:40]).to_csv(train, index=False)
    pd.DataFrame(X[40:], columns=list("abc")).assign(label=y[40:]).to_csv(validation, index=False)
    main(["knn", str(train), "--validation", str(validation), "--target", "label", "--save", str(tmp_path / "k.npz")])
    out = capsys.readouterr().out
    result = bv.ValuationResult.load(tmp_path / "k.npz")
    assert np.all(result.stderr == 0)
    assert "stderr" not in out and "±" not in out.split("lowest values")[1].split("The values")[0]
    assert "computed exactly" in out and f"row = the row's number in {train}, 1 = the first below the header" in out
    table = out.split("header:\n")[1].splitlines()
    assert table[0].split() == ["value"] and table[1].split() == ["row"]
    lowest = np.argsort(result.values, kind="stable")[:10]
    shown = [int(line.split()[0]) for line in table[2:12]]
    assert sorted(shown) == sorted((lowest + 1).tolist())  # 1-based positions of the lowest-valued rows


def test_dp_tknn_prints_the_declared_guarantee_first_and_no_zero_column(rng, tmp_path, capsys):
    X = rng.normal(size=(60, 3))
    y = (X[:, 0] > 0).astype(int)
    train, validation = tmp_path / "train.csv", tmp_path / "val.csv"
    pd.DataFrame(X[:40], columns=list("abc")).assign(label=y[:40]).to_csv(train, index=False)
    pd.DataFrame(X[40:], columns=list("abc")).assign(label=y[40:]).to_csv(validation, index=False)
    arguments = ["knn", str(train), "--validation", str(validation), "--target", "label", "--method", "tknn"]
    with pytest.raises(SystemExit) as refused:  # C from the private training labels would be released un-noised
        main([*arguments, "--epsilon", "1", "--delta", "1e-5"])
    assert refused.value.code == 2 and "--epsilon (DP-TKNN-Shapley) needs --classes" in capsys.readouterr().err
    main([*arguments, "--epsilon", "1", "--delta", "1e-5", "--classes", "0,1", "--save", str(tmp_path / "tknn.npz")])
    out = capsys.readouterr().out
    loaded = bv.ValuationResult.load(tmp_path / "tknn.npz")  # its composed privacy event loads back
    guarantees = {(r.guarantee.epsilon, r.guarantee.delta) for r in loaded.privacy.releases}
    assert guarantees == {(1.0, 1e-5)}
    assert "stderr" not in out and "computed exactly" not in out
    assert "a closed form of the released noisy counts, counted on a random subsample" in " ".join(out.split())
    assert loaded.diagnostics["n_classes"] == 2 and np.all(loaded.stderr == 0)
    lines = [line for line in out.splitlines() if ": declared " in line]
    assert lines and all(
        line.index("declared (1, 1e-05)-DP") < line.index("conversion to Renyi DP") < line.index("-RDP")
        for line in lines
    ), lines


def test_demo_explains_every_number_it_prints(demo_output):
    """The trailing time, the delta nobody declared, the grid, and the repair of negative Shapley values only where
    one was made (tracker issue 59)."""
    out, _, result = demo_output
    text = " ".join(out.split())
    assert re.search(r"Wall-clock time of the valuation and rewards: \d+\.\d s \(sampling and compiling", text)
    assert "delta = 1e-05 in the conversions was declared by nobody: a Renyi DP guarantee has no delta" in text
    grid = result.privacy.releases[0].grid
    assert f"grid {grid:g}: the statistic is rounded to multiples of the grid" in text and "floating-point safe" in text
    assert ("negative values repaired" in out) == (result.rewards.repair_weight > 0)


def test_valuate_rewards_release_files(syn, tmp_path, capsys):
    """`bayesval valuate --rewards tempering --rho 0.5` on Syn's release files prints the reward table as the demo
    does and saves it with the result; every target is reached."""
    files = []
    for i, ((X, y), epsilon) in enumerate(zip(syn.parties, (0.2, 0.1, 0.2))):
        party = bv.Party(X, y, epsilon=epsilon, bounds=syn.bounds, name=f"party {i + 1}", noise_seed=21 + i)
        files.append(str(party.release().save(tmp_path / f"p{i + 1}.release.json", experiment=True)))
    arguments = ["valuate", *files, "--rewards", "tempering", "--rho", "0.5", "--save", str(tmp_path / "r.npz")]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # tiny budget: convergence
        main([*arguments, *TINY, "--no-progress"])
    out = capsys.readouterr().out
    result = bv.ValuationResult.load(tmp_path / "r.npz")
    assert result.rewards is not None and result.rewards.mechanism == "tempering" and result.rewards.rho == 0.5
    assert "Model rewards by tempering (rho = 0.5" in out and "kappa      the tempering factor" in out
    assert result.rewards.reached.all(), result.rewards.to_dataframe()
    assert result.diagnostics["like_the_prior"] == []  # Syn's releases inform every coalition
    phi = result.values
    np.testing.assert_allclose(result.rewards.targets, result.rewards.grand_value * (phi / phi.max()) ** 0.5)
    with pytest.raises(SystemExit):
        main(["valuate", *files, "--rho", "0.5"])
    assert "--rho 0.5 sets the reward targets: pass --rewards tempering or --rewards noise" in capsys.readouterr().err


def test_valuate_tolerance_adds_repeats_and_says_how_many_ran(syn, tmp_path, capsys):
    """`bayesval valuate --tolerance` on three release files (every coalition valued) adds repeats until every
    standard error meets it: the output's ± counts the repeats that ran, a progress bar says what was added; a
    tolerance that is not a positive number is refused before anything runs."""
    files = []
    for i, (X, y) in enumerate(syn.parties):
        party = bv.Party(X, y, epsilon=0.5, bounds=syn.bounds, name=f"party {i + 1}", noise_seed=41 + i)
        files.append(str(party.release().save(tmp_path / f"p{i + 1}.release.json", experiment=True)))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # tiny budget: convergence
        main(["valuate", *files, "--tolerance", "1", "--save", str(tmp_path / "r.npz"), *TINY])
    captured = capsys.readouterr()
    result = bv.ValuationResult.load(tmp_path / "r.npz")
    repeats = result.diagnostics["repeats"]
    assert repeats >= 11 and np.all(result.stderr <= 1.0)
    assert f"over the sampler's {repeats} repeats" in " ".join(captured.out.split())
    added = [d for d in progress_descriptions(captured.err) if "more repeats of every coalition posterior" in d]
    pattern = r"valuation: \d+ more repeats of every coalition posterior, to a standard error of 1"
    pattern += r"(, call \d of \d)? \[Gibbs\]"
    assert added and all(re.fullmatch(pattern, d) for d in added), added
    for bad in ("0", "-0.01", "nan", "abc"):
        with pytest.raises(SystemExit):
            main(["valuate", *files, "--tolerance", bad, "--no-progress"])
        assert "argument --tolerance: must be a finite number > 0" in capsys.readouterr().err
