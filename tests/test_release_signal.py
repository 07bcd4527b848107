"""A release that knows when it is useless (tracker issue 59): at release time the party sees the signal-to-noise of
each block of its statistic, and a warning naming the likely cause when the block that ties the target to the
features is swamped by the noise; the mediator's result names the coalitions whose posterior it cannot tell from the
prior. The Pima figures are the walk-through of docs/own_data.md."""

from __future__ import annotations

import contextlib
import io
import warnings

import numpy as np
import pandas as pd
import pytest

import bayesval as bv
from bayesval.cli import main
from bayesval.datasets.pima import read_pima
from bayesval.parties.signal import block_names
from bayesval.parties.valuation import like_the_prior, repeats_note
from bayesval.statistics import LinearRegressionStatistic, LogisticRegressionStatistic

# docs/own_data.md: public constants the three hospitals agree on (round clinical reference values, fitted to nothing)
CENTRE = np.array([3.0, 120.0, 70.0, 20.0, 80.0, 32.0, 0.5, 33.0])
SCALE = np.array([3.0, 30.0, 20.0, 15.0, 100.0, 8.0, 0.3, 12.0])
USELESS = "carries almost no information"


@pytest.fixture(scope="module")
def hospital_a():
    """The walk-through's first hospital: 150 Pima rows (raw features, 0/1 labels); skipped where the shared data
    file is absent."""
    try:
        X, y, _ = read_pima()
    except FileNotFoundError as error:
        pytest.skip(f"shared data file absent: {error}")
    rows = np.random.default_rng(0).permutation(len(X))[:150]
    return X[rows], y[rows].astype(float)


def release_warnings(X, y, bounds: bv.Bounds, epsilon: float) -> tuple[list[str], bv.Party]:
    party = bv.Party(X, y, epsilon=epsilon, bounds=bounds, name="hospital_a", noise_seed=1)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        party.release(LogisticRegressionStatistic(X.shape[1]))
    return [str(w.message) for w in caught], party


def test_raw_features_under_bounds_900_warn_naming_the_bounds(hospital_a):
    """Largest row norm 872 under X_NORM = 900: noise std 1.6e6 against sums of y x of a few thousand."""
    X, y = hospital_a
    assert 860 < np.linalg.norm(X, axis=1).max() < 900
    messages, party = release_warnings(X, y, bv.Bounds(900.0), 0.5)
    useless = [m for m in messages if USELESS in m]
    assert len(useless) == 1, messages
    assert "Likely cause: the bounds: X_NORM = 900" in useless[0]
    report = party.signal_report(LogisticRegressionStatistic(8))
    assert report.noise_std == pytest.approx(1.621e6, rel=1e-3)
    target = {b.block: b for b in report.blocks}["y x"]
    assert target.entries == 8 and target.snr < 0.01


def test_well_scaled_release_does_not_warn(hospital_a):
    """Standardised with public constants, --bounds 4, epsilon 0.5: the y x block is at signal-to-noise about 1."""
    X, y = hospital_a
    messages, party = release_warnings((X - CENTRE) / SCALE, y, bv.Bounds(4.0), 0.5)
    assert not [m for m in messages if USELESS in m], messages
    assert {b.block: b for b in party.signal_report(LogisticRegressionStatistic(8)).blocks}["y x"].snr > 0.5


def test_too_small_an_epsilon_for_the_count_is_named(hospital_a):
    """The same well-scaled rows at epsilon 0.001: noise std sqrt(500) times larger, so the y x block drops about
    22-fold below the 0.5 above; the bounds are fine (rows of median norm 2.6 under 4), so epsilon is blamed."""
    X, y = hospital_a
    messages, _ = release_warnings((X - CENTRE) / SCALE, y, bv.Bounds(4.0), 0.001)
    useless = [m for m in messages if USELESS in m]
    assert len(useless) == 1 and "Likely cause: epsilon = 0.001 is too small for 150 records" in useless[0], messages


def test_signal_to_noise_is_the_block_rms_over_the_noise_std(rng):
    """Per block, root mean square of the exact entries / the noise std, checked against the statistic computed by
    hand for linear regression (z = [x; 1; y])."""
    X, y = rng.uniform(-0.5, 0.5, (40, 2)), rng.uniform(-1, 1, 40)
    party = bv.Party(X, y, epsilon=1.0, bounds=bv.Bounds(1.0, 1.0), name="p", noise_seed=3)
    party.release()
    report = party.signal_report()
    snr = {b.block: b.snr for b in report.blocks}
    by_hand = {
        "y y": [y @ y],
        "y x": X.T @ y,
        "y": [y.sum()],
        "x": X.sum(axis=0),
        "x x": [X[:, 0] @ X[:, 0], X[:, 0] @ X[:, 1], X[:, 1] @ X[:, 1]],
    }
    for block, entries in by_hand.items():
        expected = np.sqrt(np.mean(np.square(entries))) / report.noise_std
        assert snr[block] == pytest.approx(expected, rel=1e-12), block
    assert list(block_names(LinearRegressionStatistic(2))).count("x x") == 3
    assert list(block_names(LogisticRegressionStatistic(3))).count("y x") == 3


def test_release_command_prints_the_report_and_the_warning(hospital_a, tmp_path):
    X, y = hospital_a
    table = pd.DataFrame(X, columns=[f"f{i}" for i in range(8)]).assign(target=y)
    table.to_csv(tmp_path / "hospital_a.csv", index=False)
    out, err = io.StringIO(), io.StringIO()
    arguments = ["release", str(tmp_path / "hospital_a.csv"), "--model", "logistic", "--target", "target"]
    arguments += ["--epsilon", "0.5", "--bounds", "900", "-o", str(tmp_path / "a.release.json")]
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        main(arguments)
    assert "signal-to-noise per block" in out.getvalue() and "not written to the release file" in out.getvalue()
    assert "grid 128: the statistic is rounded to multiples of the grid" in " ".join(out.getvalue().split())
    assert f"warning: hospital_a: this release {USELESS}" in err.getvalue()
    assert "X_NORM = 900" in err.getvalue()
    # the figures stay with the party: nothing of the report is in the release file
    assert "signal" not in (tmp_path / "a.release.json").read_text()


def test_coalitions_like_the_prior_are_named_and_warned_about():
    """A surprise within 2 standard errors of 0, or negative, cannot be told from the prior; the empty coalition is
    never listed."""
    masks = np.array([[0, 0], [1, 0], [0, 1], [1, 1]], dtype=bool)
    values = np.array([0.0, 0.05, -0.02, 1.3])
    stderr = np.array([0.0, 0.03, 0.04, 0.05])
    with pytest.warns(UserWarning, match=r"2 coalition\(s\) cannot be told from the prior"):
        assert like_the_prior(["a", "b"], masks, values, stderr) == ["{a}", "{b}"]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert like_the_prior(["a", "b"], masks, np.array([0.0, 0.5, 0.4, 1.3]), stderr) == []


def test_the_diagnostics_say_which_repeats_were_used():
    """The fast Gibbs preset samples each coalition 3 times where coalitions are enumerated and 2 where they are
    sampled: a result's diagnostics show both numbers, so a note says which one this game used."""
    fast = bv.SamplerConfig.preset("fast")
    assert (fast.num_repeats, fast.sampled_repeats) == (3, 2)
    note = repeats_note(fast)
    assert "sampled num_repeats = 3 times" in note and "sampled_repeats = 2 is what a game whose coalitions" in note
    assert repeats_note(fast.for_sampled_game()) is None  # a sampled game used sampled_repeats: nothing to explain
    assert repeats_note(fast.with_(num_repeats=4)) is None  # with_(num_repeats=...) drops sampled_repeats
