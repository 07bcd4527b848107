"""No confident wrong answer from the game layer (issue 57): draws that were all equal never converge an index and
never give it a standard error of 0 unless its value is exact by construction, with or without a control variate,
and the converged flags and the verdicts come from one function (`bayesval.results.variance.judged`); a run resumes
or merges only with the same game (its fingerprint is kept in the state); inputs that would overflow the arithmetic
are refused before they reach it, naming the argument and the bound."""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from game_examples import assert_flags_agree, random_table, table_utility

from bayesval.estimators.layered.utilities import LogisticRegressionUtility, SklearnUtility
from bayesval.games import (
    LEAVE_ONE_OUT,
    ControlVariate,
    KeylessUtility,
    MaxEvaluations,
    PermutationSampler,
    RankStability,
    StandardError,
    StratifiedSampler,
    UniformSampler,
    exact_semivalue,
    semivalue,
)
from bayesval.games.masks import mask_codes
from bayesval.games.utilities import KeyAloneCheck
from bayesval.games.weights import BANZHAF
from bayesval.results.state import SemivalueState
from bayesval.results.variance import ALL_EQUAL, judged, satterthwaite_dof

N = 8
TABLE = random_table(6, N)
RARE = 0b00011000  # the coalition {3, 4}: a permutation starts with it once in 28
THRESHOLD = 0.01


def table_of(game: str) -> tuple[np.ndarray, ControlVariate | None]:
    """The game's table and the control variate of the three cases of issue 57."""
    if game == "zero game":
        return np.zeros(2**N), None
    if game == "control equal to the game":
        return TABLE, ControlVariate(TABLE)
    off = TABLE.copy()
    off[RARE] += 5.0
    return off, ControlVariate(TABLE)


def run(table, key=0, cap=2_000, control=None, **options):
    options = {"stop": StandardError(THRESHOLD) | MaxEvaluations(cap)} | options
    result = semivalue(table_utility(table), N, key, control=control, **options)
    assert_flags_agree(result)
    return result


@pytest.mark.parametrize("game", ["zero game", "control equal to the game", "control off on one rare coalition"])
@pytest.mark.parametrize("cap", [612, 2_448])
def test_the_three_cases_give_no_converged_flag_and_no_zero_stderr_on_a_wrong_value(game, cap):
    """Before: StandardError(0.01) stopped all three after 612 evaluations with every stderr 0 and every index
    converged (the rare case off by up to 0.089), while the verdicts said 'all draws equal'. Now the all-equal draws
    are guarded by the game's scale (the surrogate's range) or unknown (inf), none converges, and flags and verdicts
    agree. The rare coalition, once drawn, varies too rarely to converge by 2,448 evaluations."""
    table, control = table_of(game)
    result = run(table, cap=cap, control=control)
    error = np.abs(result.values - exact_semivalue(table_utility(table), N, 0).values)
    assert result.diagnostics["evaluations"] >= cap  # the rule never held: the cap stopped it
    assert not result.converged.any()
    assert np.all(result.stderr > 0)
    assert not np.any((result.stderr == 0) & (error > 1e-12))
    if game != "control off on one rare coalition":
        assert result.diagnostics["indices"]["verdict"] == [ALL_EQUAL] * N
        assert np.all(np.array(result.diagnostics["indices"]["dof"]) < 10)
    else:
        assert np.all(error <= 3.5 * result.stderr), (error, result.stderr)


@pytest.mark.parametrize(
    ("weights", "sampler"),
    [
        ("shapley", PermutationSampler()),
        ("shapley", PermutationSampler(latin=True)),
        (BANZHAF, UniformSampler()),
        ("shapley", StratifiedSampler()),
    ],
    ids=["permutation", "latin", "uniform", "stratified"],
)
@pytest.mark.parametrize("game", ["zero game", "control equal to the game"])
@pytest.mark.filterwarnings("ignore:stratified sampling of the shapley semivalue")
def test_all_equal_draws_converge_under_no_sampler(weights, sampler, game):
    table, control = table_of(game)
    result = run(table, cap=600, control=control, weights=weights, sampler=sampler)
    assert not result.converged.any() and np.all(result.stderr > 0)
    if control is None:  # nothing varied anywhere: no scale, the error is unknown
        assert np.all(np.isinf(result.stderr))


def test_ranks_that_never_move_do_not_converge_draws_that_never_varied():
    result = run(np.zeros(2**N), cap=10_000, stop=RankStability(3) | MaxEvaluations(10_000))
    assert result.diagnostics["evaluations"] < 10_000  # the rule held: the ties never swapped
    assert not result.converged.any()


@pytest.mark.parametrize("how", ["leave-one-out sampled", "enumerated"])
def test_a_value_exact_by_construction_still_converges_with_stderr_zero(how):
    utility = table_utility(np.zeros(2**N))
    if how == "enumerated":
        result = exact_semivalue(utility, N, 0)
    else:
        result = semivalue(utility, N, 0, weights=LEAVE_ONE_OUT, stop=StandardError(0.0) | MaxEvaluations(10**4))
        assert result.diagnostics["indices"]["verdict"] == ["exact"] * N
        assert_flags_agree(result)
    assert result.converged.all() and np.all(result.stderr == 0) and np.all(result.values == 0)


def test_a_merge_judges_its_indices_again():
    zero = run(np.zeros(2**N), key=0, cap=600) + run(np.zeros(2**N), key=1, cap=600)
    assert not zero.converged.any() and zero.diagnostics["indices"]["draws"] == zero.counts.tolist()
    assert_flags_agree(zero)
    loose = {"stop": StandardError(10.0) | MaxEvaluations(6_000)}
    merged = run(TABLE, key=0, cap=6_000, **loose) + run(TABLE, key=1, cap=6_000, **loose)
    assert merged.converged.all()
    assert_flags_agree(merged)


@pytest.mark.parametrize(
    ("exact", "ranges", "dof", "stderr", "held", "flag", "verdict"),
    [
        (True, 0.0, np.inf, 0.0, False, True, "exact"),
        (True, 0.0, 3.0, 0.2, False, False, "their own error has 3.0 degrees of freedom"),
        (True, 0.0, 1.0, 0.01, True, False, "their own error has 1.0 degrees of freedom"),
        (True, 0.0, 12.0, 0.01, True, True, "converged"),
        (False, 0.0, np.inf, 0.0, True, False, "all draws equal"),
        (False, 1.0, 4.0, 0.001, True, False, "varied too rarely"),
        (False, 1.0, 40.0, 0.001, True, True, "converged"),
        (False, 1.0, 40.0, 0.5, False, False, "not converged: the rule did not hold"),
    ],
)
def test_one_function_gives_both_the_flag_and_the_verdict(exact, ranges, dof, stderr, held, flag, verdict):
    converged, verdicts = judged(*(np.array([value]) for value in (exact, ranges, dof, stderr, held)))
    assert converged.tolist() == [flag]
    assert verdict in verdicts[0]


def test_an_exact_value_of_noisy_estimates_is_judged_by_their_error():
    """Leave-one-out on 6 players whose utility holds two fixed estimates of every coalition (sd 0.05): every
    weighted group is one coalition valued the same each time, so each value is exact for these estimates, and its
    error is their spread, of one degree of freedom. No index converges on it, and the verdict says why: trusted as
    exact, one standard error came out 117 times smaller than its value's error."""
    n = 6
    noise = np.random.default_rng(0).normal(0, 0.05, (2, 2**n))
    codes = 2 ** np.arange(n)

    def two_estimates(masks):
        masks = np.asarray(masks)
        return np.sqrt(masks.sum(axis=1)) + noise[:, masks @ codes]

    stop = StandardError(0.1) | MaxEvaluations(500)
    result = semivalue(KeylessUtility(two_estimates), n, jax.random.key(1), weights="loo", stop=stop)
    indices = result.diagnostics["indices"]
    assert all(indices["exact"]) and np.all(np.asarray(indices["dof"]) == 1.0) and np.all(result.stderr > 0)
    assert not result.converged.any()
    assert all("their own error has 1.0 degrees of freedom" in verdict for verdict in indices["verdict"])
    assert_flags_agree(result)


def _rounded_accuracy(key, masks):
    """An accuracy-like utility of 6 players: 0.8 |S| / 6 plus noise of sd 0.01, rounded to 0.1. Everyone but one
    scores 0.7, or 0.6 when the noise crosses the rounding step (4.8 % of keys), so leave-one-out is 0.1048."""
    masks = jnp.asarray(masks)
    noise = 0.01 * jax.random.normal(key, (masks.shape[0],))
    return jnp.round(10 * (0.8 * masks.sum(axis=1) / 6 + noise)) / 10


def test_values_of_a_keyed_utility_that_agreed_are_draws_not_exact():
    """Leave-one-out of `_rounded_accuracy` (true value 0.1048 for every player) under the 5 keys of 60 whose first
    batch drew no crossing: the 8 values of each coalition agreed, and the run stopped "exact" at 0.1 with standard
    error 0. A keyed utility's values are draws, so the first batch is warned about, and the run goes on until they
    vary, its error covering the truth. The same values from a utility of the masks alone are exact."""
    true = 0.8 - (0.7 * (1 - 0.04779) + 0.6 * 0.04779)  # P(N(2/3, 0.01^2) < 0.65) = 0.04779
    stop = StandardError(0.05) | MaxEvaluations(5000)
    for key in (25, 36, 39, 41, 53):
        with pytest.warns(UserWarning, match="the utility takes a key, and its values .* were the same"):
            result = semivalue(_rounded_accuracy, 6, jax.random.key(key), weights="loo", batch_size=8, stop=stop)
        assert result.diagnostics["batches"] > 1 and not any(result.diagnostics["indices"]["exact"])
        assert result.converged.all() and np.all(np.abs(result.values - true) <= 3 * result.stderr)
        assert_flags_agree(result)
    rounded = KeylessUtility(lambda masks: np.round(8 * np.asarray(masks).sum(axis=1) / 6) / 10)
    exact = semivalue(rounded, 6, jax.random.key(25), weights="loo", batch_size=8, stop=stop)
    assert exact.diagnostics["batches"] == 1 and set(exact.diagnostics["indices"]["verdict"]) == {"exact"}
    np.testing.assert_allclose(exact.values, 0.1, atol=1e-12)


def _noise_of_the_key_alone(key, masks):
    """TABLE plus noise of sd 0.1 drawn once per coalition from the batch's key: every copy of a coalition in a batch
    gets one value (a model seeded with the key, say)."""
    codes = mask_codes(np.asarray(masks))
    return TABLE[codes] + 0.1 * np.asarray(jax.random.normal(key, (2**N,)))[codes]


def _noise_of_each_row(key, masks):
    codes = mask_codes(np.asarray(masks))
    return TABLE[codes] + 0.1 * np.asarray(jax.random.normal(key, (len(codes),)))


@pytest.mark.parametrize("weights, sampler", [("loo", None), ("shapley", PermutationSampler())])
def test_a_utility_whose_noise_follows_the_key_alone_is_refused_by_its_second_batch(weights, sampler):
    """Batches that hold copies of a coalition (everyone else for leave-one-out, the first and last players of
    permutations): its copies in one batch would count as several draws, and the standard errors would be several
    times too small. The run stops with a ValueError that says how to split the key, on the second batch; the same
    noise drawn for each row runs to its stopping rule."""
    batches = []

    def counted(key, masks):
        batches.append(len(masks))
        return _noise_of_the_key_alone(key, masks)

    stop = StandardError(0.05) | MaxEvaluations(20_000)
    with pytest.raises(ValueError, match=r"follow the batch's key alone.*jax.random.split\(key, len\(masks\)\)"):
        semivalue(counted, N, 0, weights=weights, sampler=sampler, stop=stop, batch_size=8)
    assert len([size for size in batches if size >= 8]) == 2  # after the fingerprint's probe
    result = semivalue(_noise_of_each_row, N, 0, weights=weights, sampler=sampler, stop=stop, batch_size=8)
    assert result.converged.all()


def test_the_chance_of_copies_that_agreed_is_one_over_their_arrangements():
    """One coalition, 8 copies a batch, a new value every batch: were the copies draws of their own, two batches that
    each hold one value have chance 2 / binom(16, 8) = 1 / 6,435, and disjoint pairs (batches 1 and 2, 3 and 4)
    multiply: 6,435 < 10^6 < 6,435^2, so the second pair (the fourth batch) is refused and not the first. A pair of
    one value is no evidence; batches after the first KEY_ALONE_BATCHES are not read; copies that differ within a batch
    end the check, and so do R > 1 estimates a coalition; values that differ between batches by float32's rounding are
    one value."""
    masks = np.zeros((9, 3), bool)
    masks[:8, :2] = True  # {0, 1} eight times, then {2}

    def batch(value):
        return np.array([[value] * 8 + [9.0]])

    check = KeyAloneCheck()
    for value in (0.0, 1.0, 2.0):
        check.add(masks, batch(value))
    assert check.log_chance == pytest.approx(-np.log(6435))
    with pytest.raises(
        ValueError, match=r"coalition \[0, 1\] of 2 players: 8 copies of 3.0, and 8 of 2.0 in an earlier batch"
    ):
        check.add(masks, batch(3.0))
    late = KeyAloneCheck()
    for value in (0.0, 0.0, 1.0, 2.0, 3.0):  # a pair of one value, a pair of two, then a batch past the fourth
        late.add(masks, batch(value))
    assert late.ended and late.log_chance == pytest.approx(-np.log(6435))
    rounded = KeyAloneCheck()
    for value in (0.1, 0.1 * (1 + 2e-7)):  # float32's rounding, which batches of other shapes can differ by
        rounded.add(masks, batch(value))
    assert rounded.log_chance == 0 and not rounded.ended
    rows = KeyAloneCheck()
    rows.add(masks, np.array([[1.0] * 7 + [1.0 + 1e-12, 9.0]]))
    assert rows.ended
    many = KeyAloneCheck()
    many.add(masks, np.ones((2, 9)))  # R = 2 estimates: their spread holds correlated errors
    assert many.ended


def test_an_unknown_variance_has_no_degrees_of_freedom():
    terms, dofs = np.array([[np.inf, 1.0], [0.5, 1.0]]), np.array([[1.0, 5.0], [3.0, 5.0]])
    assert satterthwaite_dof(terms, dofs).tolist() == [0.0, 10.0]


# A run resumes or merges only with the same game


def test_a_run_of_another_utility_is_not_resumed_or_merged():
    first = run(random_table(0, N), cap=300)
    with pytest.raises(ValueError, match=r"different game: it sampled .*_table_lookup \(values .* this run .*_table"):
        run(random_table(1, N), cap=600, resume_from=first)
    with pytest.raises(ValueError, match="cannot merge the results of different games: game .*_table_lookup"):
        first + run(random_table(1, N), key=1, cap=300)
    resumed = run(random_table(0, N), cap=600, resume_from=first)
    assert resumed.state.game == first.state.game and resumed.diagnostics["evaluations"] >= 600


def test_game_ids_that_differ_are_refused_naming_both():
    first = run(TABLE, cap=300, game_id="table A")
    with pytest.raises(ValueError, match="it sampled game_id='table A', this run game_id='table B'"):
        run(TABLE, cap=600, resume_from=first, game_id="table B")
    with pytest.raises(ValueError, match=r"it sampled game_id='table A', this run .*_table_lookup \(values"):
        run(TABLE, cap=600, resume_from=first)
    assert run(random_table(1, N), cap=600, resume_from=first, game_id="table A").state.game == {"id": "table A"}


def test_a_renamed_utility_of_the_same_values_resumes_with_a_warning():
    first = run(TABLE, cap=300)
    lookup = table_utility(TABLE)
    with pytest.warns(UserWarning, match="sampled a utility named .*_table_lookup, this run .*<lambda>; they agree"):
        semivalue(lambda key, masks: lookup(key, masks), N, 0, stop=MaxEvaluations(600), resume_from=first)


def test_a_noisy_utility_resumes_to_the_uninterrupted_run():
    """Its probe coalitions are valued with a fixed key, so the same noisy utility has the same fingerprint."""
    utility = table_utility(TABLE, noise=0.1)
    half = semivalue(utility, N, 3, stop=MaxEvaluations(300))
    resumed = semivalue(utility, N, 3, stop=MaxEvaluations(600), resume_from=half)
    np.testing.assert_array_equal(resumed.values, semivalue(utility, N, 3, stop=MaxEvaluations(600)).values)


def test_a_state_saved_before_fingerprints_loads_and_resumes_with_a_warning():
    result = run(TABLE, cap=300)
    meta, arrays = result.state.to_record()
    old = SemivalueState.from_record({k: v for k, v in meta.items() if k != "game"}, arrays, version=3)
    assert old.game is None and np.array_equal(old.estimate().values, result.values)
    with pytest.warns(UserWarning, match="saved before results kept their game's fingerprint"):
        resumed = run(TABLE, cap=600, resume_from=dataclasses.replace(result, state=old))
    assert resumed.state.game == result.state.game


def numpy_lookup(table: np.ndarray):
    """A utility that looks each mask's code up in `table` with NumPy, whatever the masks' width."""
    return lambda key, masks: table[np.asarray(masks) @ (1 << np.arange(np.shape(masks)[1]))]


@pytest.mark.parametrize(
    ("function", "utility", "rows", "error"),
    [
        (semivalue, table_utility(random_table(0, 6)), 4, "dot_general"),
        (exact_semivalue, table_utility(random_table(0, 6)), 256, "dot_general"),
        (semivalue, numpy_lookup(random_table(0, 6)), 4, "IndexError"),
    ],
    ids=["sampled", "exact", "numpy table"],
)
def test_a_utility_of_another_number_of_players_is_named_so(function, utility, rows, error):
    """A sampled run values the 4 probe coalitions first, an enumeration its first chunk of 256."""
    options = {"stop": MaxEvaluations(10)} if function is semivalue else {}
    said = rf"shape \(B, num_players\) = \({rows}, 8\).*written for num_players=8"
    with pytest.raises(ValueError, match=said) as info:
        function(utility, N, 0, **options)
    assert error in str(info.value)


@pytest.mark.parametrize("game_id", [5, "", b"game"])
def test_a_game_id_that_is_not_a_name_is_refused(game_id):
    with pytest.raises(TypeError, match="game_id must be a non-empty string naming the game"):
        run(TABLE, cap=100, game_id=game_id)


def test_merging_runs_that_estimated_their_coalitions_apart_names_the_players():
    names = ["ann", "bob", "cy", "dee", "eve", "fay", "gus", "hal"]
    rng = np.random.default_rng(0)
    first_estimates, other_estimates = (TABLE + 0.1 * rng.normal(size=(2, 2**N)) for _ in range(2))
    other_estimates[:, :RARE] = first_estimates[:, :RARE]  # the first coalitions agree: the empty one, {0}, ...
    first_estimates, other_estimates = jnp.asarray(first_estimates), jnp.asarray(other_estimates)

    def cached(estimates):
        return lambda key, masks: estimates[:, np.asarray(masks) @ (1 << np.arange(N))]

    options = {"stop": MaxEvaluations(300), "names": names, "independent_estimates": True, "game_id": "noisy"}
    first = semivalue(cached(first_estimates), N, 0, **options)
    other = semivalue(cached(other_estimates), N, 1, **options)
    with pytest.raises(ValueError, match=r"the coalition \['[a-z]+'(, '[a-z]+')*\] has different estimates") as info:
        first + other
    assert "independent_estimates" not in str(info.value) and "resume_from=" in str(info.value)


# Inputs whose size would overflow the arithmetic


def _data(seed: int = 0):
    rng = np.random.default_rng(seed)
    return rng.normal(size=(8, 3)), np.array([0, 1] * 4), rng.normal(size=(10, 3)), np.array([0, 1] * 5)


@pytest.mark.parametrize(("argument", "value"), [("X", 1e308), ("X", -1e200), ("X_val", 1e308), ("X_val", 1.1e100)])
def test_a_retraining_utility_refuses_features_that_overflow(argument, value):
    X, y, X_val, y_val = _data()
    (X if argument == "X" else X_val)[2, 1] = value
    with pytest.raises(ValueError, match=rf"^{argument} has 1 entries above 1e\+100 in absolute value .*\[2, 1\]"):
        LogisticRegressionUtility(X, y, X_val, y_val)


def test_a_scikit_learn_utility_refuses_features_that_overflow():
    pytest.importorskip("sklearn")
    from sklearn.linear_model import LogisticRegression

    X, y, X_val, y_val = _data()
    X[0, 0] = 1e308
    with pytest.raises(ValueError, match=r"X has 1 entries above 1e\+100 in absolute value"):
        SklearnUtility(LogisticRegression(), X, y, X_val, y_val)


def test_features_at_the_bound_or_clipped_to_a_norm_bound_give_finite_values():
    X, y, X_val, y_val = _data()
    masks = np.ones((1, 8), bool)
    X[2, 0] = 1e100
    assert np.isfinite(np.asarray(LogisticRegressionUtility(X, y, X_val, y_val)(None, masks))).all()
    X[2, 0] = 1e308  # the row is scaled down to norm 1 before any arithmetic
    values = np.asarray(LogisticRegressionUtility(X, y, X_val, y_val, norm_bound=1.0)(None, masks))
    assert np.isfinite(values).all()


@pytest.mark.parametrize("scale", [1e61, -1e300])
def test_utility_values_that_overflow_are_refused_naming_coalitions(scale):
    with pytest.raises(ValueError, match=r"utility returned values above 1e\+60 in absolute value for \d+ coalitions"):
        run(TABLE * scale, cap=100)


def test_enumerated_values_that_overflow_are_refused():
    with pytest.raises(ValueError, match=r"above 1e\+60 .*rescale the utility"):
        exact_semivalue(table_utility(TABLE * 1e100), N, 0)


def test_a_control_table_that_overflows_is_refused():
    with pytest.raises(ValueError, match=r"a control variate's table has 1 entries above 1e\+60 .*index \[3\]"):
        ControlVariate(np.r_[np.zeros(3), 1e300, np.zeros(2**N - 4)])


def test_key_is_unused_by_the_probe_of_a_deterministic_utility():
    """The probes value a utility of another key type the same: a fingerprint of a table game is its table's values on
    the four probe coalitions (the grand coalition first)."""
    result = run(TABLE, cap=100, key=jax.random.key(5))
    assert np.asarray(result.state.game["probes"]).shape == (1, 4)
    assert result.state.game["probes"][0][0] == TABLE[-1]


def test_exact_semivalues_of_a_few_estimates_a_coalition_are_converged_only_once_their_spread_is_trusted():
    """`exact_semivalue` of R estimates a coalition reads its standard error from the R semivalues' spread, of R - 1
    degrees of freedom; it called every index converged. Of an accuracy-like utility (its 4 players' values plus
    noise of sd 0.01, rounded to 0.1) two estimates often agree, and there it reported a standard error of 0 (or
    1e-17) beside a value wrong by its own size. Now R = 2 is never converged, R = 11 (10 degrees of freedom) is
    where the estimates differ, and agreeing estimates are exact only for a KeylessUtility."""
    scores = jnp.array([0.004, 0.008, 0.05, 0.034])

    def rounded(repeats):
        def utility(key, masks):
            clean = masks.astype(float) @ scores
            return jnp.round((clean + 0.01 * jax.random.normal(key, (repeats,) + clean.shape)) * 10) / 10

        return utility

    few = [exact_semivalue(rounded(2), 4, seed) for seed in range(10)]
    assert not np.any([result.converged for result in few])
    assert any((result.stderr == 0).any() for result in few)  # the case: estimates that agreed
    assert all((result.diagnostics["dof"] == 1).all() for result in few)
    many = exact_semivalue(rounded(11), 4, 0)
    assert (many.diagnostics["dof"] == 10).all()
    np.testing.assert_array_equal(many.converged, many.stderr > 0)
    exact = exact_semivalue(KeylessUtility(lambda masks: jnp.stack([masks.astype(float) @ scores] * 2)), 4, 0)
    assert exact.converged.all() and (exact.stderr == 0).all()
