"""A control variate for sampled semivalues (`bayesval.games.ControlVariate`, docs/games.md, "Control variates"):
phi(v) = phi(u) + phi(v - u) exactly, its standard errors calibrated over seeds, its variance below plain sampling's,
and a run with one resumes, merges and saves only with the same surrogate (issue 30)."""

import jax
import numpy as np
import pytest
from game_examples import assert_flags_agree, random_table, table_utility

from bayesval.games import SHAPLEY, Airport, ControlVariate, PermutationSampler, exact_semivalue, semivalue
from bayesval.games.masks import coalition_masks
from bayesval.games.stopping import MaxEvaluations
from bayesval.games.weights import BANZHAF, semivalue_matrix
from bayesval.results.result import ValuationResult

N = 8


def rough_surrogate(table: np.ndarray, seed: int, error: float = 0.05) -> np.ndarray:
    """A surrogate off `table` by an independent N(0, error^2) on every coalition (as a fit that misses v's noise)."""
    return table + error * np.random.default_rng(seed).normal(size=table.size)


def sampled(table, key, control=None, evaluations=9 * 64, **options):
    result = semivalue(
        table_utility(table),
        N,
        key,
        sampler=PermutationSampler(latin=True),
        stop=MaxEvaluations(evaluations),
        batch_size=16,
        control=control,
        **options,
    )
    assert_flags_agree(result)
    return result


@pytest.mark.parametrize("weights", [SHAPLEY, BANZHAF])
def test_the_semivalue_of_the_surrogate_is_the_closed_form(weights):
    """phi(u) from the table equals the airport game's closed-form semivalue (Littlechild & Owen 1973 for Shapley)."""
    game = Airport.random(N, seed=3)
    table = np.asarray(game.utility(None, coalition_masks(N, include_empty=True)))
    assert np.allclose(ControlVariate(table).semivalue(weights), game.semivalue(weights), atol=1e-12)


def test_a_surrogate_off_by_an_additive_game_gives_the_exact_values():
    """v - u = -a is additive: every marginal of player i is -a_i, so the values are phi(v) to rounding (their
    standard errors stay the honest bound of draws that never varied, bayesval.results.variance)."""
    table = random_table(0, N)
    additive = coalition_masks(N, include_empty=True) @ np.linspace(-1, 2, N)
    result = sampled(table, 0, ControlVariate(table + additive))
    exact = semivalue_matrix(N, SHAPLEY) @ table
    assert np.allclose(result.values, exact, atol=1e-12)
    assert np.max(np.abs(sampled(table, 0).values - exact)) > 1e-3


@pytest.mark.parametrize(("surrogate", "ratio"), [("scaled", (0.29, 0.31)), ("noisy", (0.5, 0.85))])
def test_standard_errors_are_calibrated_and_smaller_than_plain_sampling(surrogate, ratio):
    """Over 100 keys the errors of phi(v) over their standard errors have mean 0 and unit spread (no bias whatever
    the surrogate), and the standard errors are a fraction of plain sampling's: 0.3 for u = 0.7 v (v - u = 0.3 v),
    and less than 0.85 for u off v by independent noise of 0.05 per coalition."""
    table = random_table(1, N)
    exact = semivalue_matrix(N, SHAPLEY) @ table
    control = ControlVariate(0.7 * table if surrogate == "scaled" else rough_surrogate(table, 7), name=surrogate)
    z, ratios = [], []
    for seed in range(100):
        key = jax.random.key(seed)
        with_control = sampled(table, key, control, evaluations=9 * 64)
        z.append((with_control.values - exact) / with_control.stderr)
        ratios.append(with_control.stderr / sampled(table, key, evaluations=9 * 64).stderr)
    z = np.concatenate(z)
    assert abs(z.mean()) < 0.1 and 0.88 < z.std() < 1.12, (z.mean(), z.std())
    assert ratio[0] < np.median(ratios) < ratio[1], np.median(ratios)
    assert f"{surrogate} as a control variate" in with_control.method


def test_a_poor_surrogate_costs_precision_not_correctness():
    """An unrelated random table as u: the values stay unbiased over keys, within their (larger) errors."""
    table = random_table(2, N)
    exact = semivalue_matrix(N, SHAPLEY) @ table
    control = ControlVariate(np.random.default_rng(5).normal(scale=3.0, size=2**N))
    z = np.concatenate([(r.values - exact) / r.stderr for r in (sampled(table, seed, control) for seed in range(100))])
    assert abs(z.mean()) < 0.12 and 0.85 < z.std() < 1.2


def test_a_run_with_a_control_resumes_to_the_uninterrupted_run_and_merges():
    table = random_table(4, N)
    control = ControlVariate(rough_surrogate(table, 1))
    whole = sampled(table, 9, control, evaluations=9 * 64)
    half = sampled(table, 9, control, evaluations=9 * 32)
    resumed = sampled(table, 9, control, evaluations=9 * 64, resume_from=half)
    assert np.array_equal(resumed.values, whole.values) and np.array_equal(resumed.stderr, whole.stderr)
    merged = half + sampled(table, 10, control, evaluations=9 * 32)
    assert np.allclose(merged.values, semivalue_matrix(N, SHAPLEY) @ table, atol=6 * merged.stderr.max())


def test_a_different_surrogate_is_refused_on_resume_and_merge():
    table = random_table(4, N)
    control = ControlVariate(rough_surrogate(table, 1))
    half = sampled(table, 9, control, evaluations=9 * 32)
    with pytest.raises(ValueError, match="control variate a surrogate of 256 coalitions, this run with none"):
        sampled(table, 9, evaluations=9 * 64, resume_from=half)
    with pytest.raises(ValueError, match="resume with the same control"):
        sampled(table, 9, ControlVariate(rough_surrogate(table, 2)), evaluations=9 * 64, resume_from=half)
    with pytest.raises(ValueError, match="cannot merge the results of different games: control variate"):
        half + sampled(table, 10, evaluations=9 * 32)


def test_a_state_with_a_control_survives_a_file_and_a_version_1_record_cannot_hold_one(tmp_path):
    table = random_table(4, N)
    result = sampled(table, 9, ControlVariate(rough_surrogate(table, 1)))
    result.save(tmp_path / "run.npz")
    loaded = ValuationResult.load(tmp_path / "run.npz")
    assert np.array_equal(loaded.state.control_table, result.state.control_table)
    assert np.array_equal(loaded.state.estimate().values, result.values)
    meta, arrays = result.state.to_record()
    with pytest.raises(ValueError, match="arrays no semivalue state has"):
        type(result.state).from_record(meta, arrays, version=1)
    with pytest.raises(ValueError, match="does not fit its 8 players: state_control_table must hold 256"):
        type(result.state).from_record(meta, arrays | {"control_table": arrays["control_table"][:128]})


def test_the_exact_values_of_a_game_equal_its_sampled_values_plus_nothing_when_u_is_v():
    """u = v: every draw is 0 and the values are phi(u), the exact semivalue."""
    table = random_table(6, N)
    result = sampled(table, 0, ControlVariate(table))
    assert np.allclose(result.values, exact_semivalue(table_utility(table), N, 0).values, atol=1e-12)


@pytest.mark.parametrize(
    ("table", "match"),
    [
        (np.zeros(255), "2\\^n values in code order"),
        (np.zeros((16, 16)), "2\\^n values in code order"),
        (np.zeros(1), "2\\^n values in code order"),
        (np.r_[np.zeros(255), np.nan], "must be finite; 1 values are not"),
    ],
)
def test_a_bad_table_is_refused(table, match):
    with pytest.raises(ValueError, match=match):
        ControlVariate(table)


def test_a_control_of_another_game_or_type_is_refused():
    table = random_table(0, N)
    with pytest.raises(ValueError, match="control is a game of 7 players, this one has 8"):
        sampled(table, 0, ControlVariate(table[:128]))
    with pytest.raises(TypeError, match="control must be a bayesval.games.ControlVariate"):
        sampled(table, 0, table)
