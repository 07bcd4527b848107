"""The game layer's machinery: resume and merge, stopping rules, fixed batch shapes, the result type, bad input."""

import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from game_examples import assert_flags_agree, random_table, table_utility

import bayesval as bv
from bayesval.games.fingerprint import PROBES
from bayesval.games.samplers import PermutationSampler, StratifiedSampler, UniformSampler, default_sampler
from bayesval.games.semivalues import semivalue
from bayesval.games.stopping import (
    DEFAULT_MAX_EVALUATIONS,
    MaxEvaluations,
    MaxTime,
    Progress,
    RankStability,
    StandardError,
)
from bayesval.games.weights import as_semivalue, beta_shapley
from bayesval.results.variance import variances_and_dof

N = 5
TABLE = random_table(7, N)
NAMES = ["ann", "bob", "cy", "dee", "eve"]
SAMPLERS = [PermutationSampler(), PermutationSampler(antithetic=True), UniformSampler(), StratifiedSampler()]


@pytest.fixture(scope="module")
def utility():
    return table_utility(TABLE, noise=0.05)


def run(utility, key, evaluations, **options):
    """A run of 16 draws a batch, to `evaluations` utility evaluations unless `stop` says otherwise; by the
    semivalue's sampler of before the noise-probing default (permutations for Shapley: this utility is noisy), so
    that the counts these tests pin stay those of the sampler they were written for."""
    weights = as_semivalue(options.get("weights", "shapley"))
    options = {"batch_size": 16, "names": NAMES, "sampler": default_sampler(weights)} | options
    options.setdefault("stop", MaxEvaluations(evaluations) if evaluations else None)
    result = semivalue(utility, N, key, **options)
    assert_flags_agree(result)
    return result


@pytest.mark.parametrize("sampler", SAMPLERS, ids=lambda s: s.name)
def test_a_stopped_and_resumed_run_is_the_uninterrupted_run(utility, sampler, tmp_path):
    weights = "banzhaf" if isinstance(sampler, UniformSampler) else "shapley"
    whole = run(utility, 3, 2000, sampler=sampler, weights=weights)
    first = run(utility, 3, 700, sampler=sampler, weights=weights)
    saved = bv.ValuationResult.load(first.save(tmp_path / "first.npz"))  # resume survives a save
    resumed = run(utility, 3, 2000, sampler=sampler, weights=weights, resume_from=saved)
    assert first.state.evaluations < whole.state.evaluations == resumed.state.evaluations
    np.testing.assert_array_equal(resumed.values, whole.values)
    np.testing.assert_array_equal(resumed.stderr, whole.stderr)
    np.testing.assert_array_equal(resumed.counts, whole.counts)
    assert resumed.diagnostics["batches"] == whole.diagnostics["batches"]
    again = run(utility, 3, 2000, sampler=sampler, weights=weights, resume_from=resumed)  # nothing left to do
    np.testing.assert_array_equal(again.values, whole.values)


def test_a_result_saved_before_the_higher_moments_were_kept_loads_and_resumes(utility, tmp_path):
    """Files written before the state kept m3 and m4 have no state_m3 / state_m4: they load with the moments of normal
    draws (their variances count m - 1 degrees of freedom), keep their values and standard errors, and resume."""
    first = run(utility, 3, 700)
    with np.load(first.save(tmp_path / "new.npz")) as data:
        arrays = {name: data[name] for name in data.files if name not in ("state_m3", "state_m4")}
    np.savez(tmp_path / "old.npz", **arrays)
    old = bv.ValuationResult.load(tmp_path / "old.npz")
    np.testing.assert_array_equal(old.values, first.values)
    np.testing.assert_array_equal(old.stderr, first.stderr)
    counts = old.state.counts
    np.testing.assert_allclose(old.state.m4, 3 * old.state.m2**2 / np.maximum(counts, 1))
    free = (counts >= 2) & (old.state.m2 > 0) & ~old.state.exact[:, None]
    extra = variances_and_dof(old.state)[1][free] - (counts - 1)[free]  # m - 1 for normal moments, plus priors
    assert free.any() and np.all((extra >= -1e-9) & (extra <= 2 + 1e-9))
    resumed = run(utility, 3, 2000, resume_from=old)
    assert resumed.state.evaluations >= 2000 and np.all(np.isfinite(resumed.stderr))


def test_merging_two_keys_equals_resuming_with_the_second_key(utility):
    a, b = run(utility, 1, 960), run(utility, 2, 960)  # 10 batches of 16 permutations (96 evaluations) each
    merged = a + b
    both = run(utility, 2, 1920, resume_from=a)  # a's draws, then key 2's batches from the start
    np.testing.assert_allclose(merged.values, both.values, rtol=1e-12)
    np.testing.assert_allclose(merged.stderr, both.stderr, rtol=1e-9)
    np.testing.assert_array_equal(merged.counts, a.counts + b.counts)
    sums, counts = a.state.sums[0] + b.state.sums[0], a.state.counts + b.state.counts  # groups first, middle, last
    pooled = (a.state.coefficients[:, None] * sums / counts).sum(axis=0)
    np.testing.assert_allclose(merged.values, pooled, rtol=1e-12)
    assert merged.state.evaluations == a.state.evaluations + b.state.evaluations
    assert np.all(merged.stderr < np.minimum(a.stderr, b.stderr))
    with pytest.raises(ValueError, match="sampled from the same key"):
        a + a
    with pytest.raises(ValueError, match="different games: semivalue 'shapley' != 'banzhaf'"):
        a + run(utility, 4, 1000, weights="banzhaf", sampler=PermutationSampler())
    with pytest.raises(ValueError, match="only sampled semivalues merge"):
        a + a.sorted()


@pytest.mark.parametrize(
    "change, message",
    [
        ({"weights": "banzhaf", "sampler": PermutationSampler()}, "its semivalue is 'shapley', this run's 'banzhaf'"),
        ({"sampler": PermutationSampler(antithetic=True)}, "its sampler is 'permutation', this run's 'permutation \\("),
        ({"names": ["a", "b", "c", "d", "e"]}, "its names is"),
        ({"batch_size": 32}, "resume with batch_size=16"),
    ],
)
def test_resuming_a_different_game_is_refused(utility, change, message):
    first = run(utility, 0, 500)
    with pytest.raises(ValueError, match=message):
        run(utility, 0, 1000, resume_from=first, **change)


def test_resuming_with_other_players_or_without_state_is_refused(utility):
    first = run(utility, 0, 500)
    with pytest.raises(ValueError, match="its num_players is 5, this run's 4"):
        semivalue(table_utility(random_table(0, 4)), 4, 0, resume_from=first, stop=MaxEvaluations(10))
    with pytest.raises(ValueError, match="resume_from must be a result of bayesval.games.semivalue"):
        run(utility, 0, 1000, resume_from=first.sorted())


def counting_utility(traces: list):
    """A jitted table utility that notes each trace (a Python side effect runs only while tracing)."""

    @jax.jit
    def counted(key, masks):
        traces.append(masks.shape)
        return jnp.asarray(TABLE)[masks @ (1 << jnp.arange(N))]

    return counted


def test_a_jitted_utility_compiles_once_across_batches_and_resumes():
    """Once for the batches, and once for the 4 probe coalitions of the game's fingerprint (games/fingerprint.py)."""
    for sampler in SAMPLERS:
        traces = []
        counted = counting_utility(traces)
        first = semivalue(counted, N, 0, sampler=sampler, batch_size=16, stop=MaxEvaluations(600))
        semivalue(counted, N, 0, sampler=sampler, batch_size=16, stop=MaxEvaluations(1500), resume_from=first)
        assert len(traces) == 2 and traces[0] == (PROBES, N) and first.diagnostics["batches"] > 1, (sampler, traces)


def test_a_run_resumed_with_another_key_goes_on_in_its_own_batches():
    """Without a batch size, a run resumed with another key takes the one it was sampled in: Latin blocks of 5
    players need a multiple of 5 (the default 64 is not), and it adds whole blocks of that size."""
    utility = table_utility(random_table(0, 5))
    latin = PermutationSampler(latin=True)
    first = semivalue(utility, 5, 0, sampler=latin, batch_size=10, stop=MaxEvaluations(200))
    resumed = semivalue(utility, 5, 1, sampler=latin, stop=MaxEvaluations(400), resume_from=first)
    assert [size for size, _ in resumed.state.streams.values()] == [10, 10]
    assert resumed.state.batch_draws > first.state.batch_draws


def test_semivalue_sampling_at_another_batch_size_neither_resumes_nor_merges():
    """Semivalue sampling cuts the middle coalition sizes into bins by the batch size (n = 10, Beta(2, 2): 56 and 64
    give as many bins of other sizes); a draw filed in another layout's bin biased the estimate (z above 20 on every
    index), so both are refused, naming the batch size to resume with; the same batch size resumes."""
    from bayesval.games.samplers import SemivalueSampler
    from bayesval.games.weights import beta_shapley

    utility = table_utility(random_table(1, 10))
    options = {"weights": beta_shapley(2, 2), "sampler": SemivalueSampler(), "stop": MaxEvaluations(3000)}
    first = semivalue(utility, 10, 0, batch_size=56, **options)
    other = semivalue(utility, 10, 1, batch_size=64, **options)
    plans = [SemivalueSampler().plan(10, size, beta_shapley(2, 2)).coefficients for size in (56, 64)]
    assert len(plans[0]) == len(plans[1]) and not np.array_equal(*plans)
    with pytest.raises(ValueError, match=r"groups of coalition sizes"):
        first + other
    with pytest.raises(ValueError, match=r"resume with the batch size it ran with \(56\)"):
        semivalue(utility, 10, 2, batch_size=64, resume_from=first, **options)
    resumed = semivalue(utility, 10, 2, batch_size=56, resume_from=first, **(options | {"stop": MaxEvaluations(6000)}))
    assert resumed.state.batch_draws > first.state.batch_draws


def test_a_keyless_utility_gets_no_key_and_the_coalitions_of_any_utility():
    """`KeylessUtility(values_of)`: values_of sees the masks alone (as NumPy), and a run draws the coalitions, and so
    the values, that the same function wrapped as utility(key, masks) gives with that key, to the last bit. Only the
    keyless one's single coalitions (the first and last positions) are exact groups: the keyed one's values of a
    coalition are draws that may differ under another key."""
    seen = []

    def values_of(masks):
        seen.append(type(masks))
        return np.asarray(masks, np.float64) @ TABLE[1 : N + 1] + np.asarray(masks).all(axis=1)

    keyless = semivalue(bv.games.KeylessUtility(values_of), N, 3, batch_size=16, stop=MaxEvaluations(400))
    keyed = semivalue(lambda key, masks: values_of(np.asarray(masks)), N, 3, batch_size=16, stop=MaxEvaluations(400))
    np.testing.assert_array_equal(keyless.values, keyed.values)
    assert keyed.state.keyed and not keyless.state.keyed
    with pytest.raises(ValueError, match=r"the utility's form \(a KeylessUtility: .* != a utility of a key"):
        keyless + keyed
    assert set(seen) == {np.ndarray} and keyless.state.evaluations == keyed.state.evaluations >= 400


def test_repeated_estimates_per_coalition_are_averaged(utility):
    """A utility of R identical estimates (R, B) gives the values of R = 1: the spread over repeats is 0."""
    single = run(utility, 5, 800)
    triple = run(lambda key, masks: jnp.stack([utility(key, masks)] * 3), 5, 800)
    np.testing.assert_allclose(triple.values, single.values, rtol=1e-12)
    np.testing.assert_allclose(triple.stderr, single.stderr, rtol=1e-9)
    assert triple.state.num_repeats == 3
    with pytest.raises(ValueError, match="cannot merge the results of different games: estimates per coalition"):
        triple + run(utility, 6, 800)


def test_standard_error_rule_stops_and_marks_converged_indices(utility):
    result = run(utility, 0, None, stop=StandardError(0.05) | MaxEvaluations(10**6))
    assert np.all(result.stderr <= 0.05) and result.converged.all()
    assert result.state.evaluations < 10**6
    capped = run(utility, 0, 200, stop=StandardError(1e-9) | MaxEvaluations(200))
    assert not capped.converged.any() and capped.state.evaluations == 240  # 2 batches: 16 x 6, and 2 x 12 exact


def progress(values, stderr, counts=100, evaluations=0, elapsed=0.0, rankings=None):
    values = np.asarray(values, float)
    rankings = np.zeros((0, len(values)), int) if rankings is None else np.asarray(rankings)
    ranges, exact = np.ones(len(values)), np.zeros(len(values), bool)  # draws that varied, no exact value
    dof = np.full(len(values), counts - 1.0)  # as normal draws give
    return Progress(
        values,
        np.asarray(stderr, float),
        np.full(len(values), counts),
        evaluations,
        elapsed,
        rankings,
        ranges,
        exact,
        dof,
    )


def test_stopping_rules_combine_with_and_and_or():
    small, large = progress([1, 2], [0.01, 0.02]), progress([1, 2], [0.01, 0.5], evaluations=50, elapsed=3.0)
    se, cap, clock = StandardError(0.1), MaxEvaluations(50), MaxTime(2.0)
    assert se.holds(small) and not se.holds(large)
    assert se.converged(large).tolist() == [True, False]
    assert not StandardError(0.1, min_count=200).holds(small)  # too few draws yet
    assert (se | cap).holds(large) and not (se & cap).holds(large) and (se & cap).holds(small._replace(evaluations=50))
    assert (se | cap).converged(large).tolist() == [True, False]  # a budget stops, it does not converge
    assert clock.holds(large) and not clock.holds(small)
    assert (se | cap).capped and not (se & RankStability()).capped and (cap & clock).capped and not se.capped
    stable = RankStability(3)
    assert not stable.holds(progress([2, 1], [1, 1], rankings=[[0, 1], [0, 1]]))  # too few checks
    assert stable.holds(progress([2, 1], [1, 1], rankings=[[1, 0], [0, 1], [0, 1], [0, 1]]))
    assert stable.converged(progress([3, 2, 1], [1] * 3, rankings=[[0, 1, 2], [1, 0, 2], [0, 1, 2]])).tolist() == [
        False,
        False,
        True,
    ]
    assert repr(se | cap & clock) == "(StandardError(0.1) | (MaxEvaluations(50) & MaxTime(2)))"
    with pytest.raises(TypeError, match="stop must be a stopping rule"):
        se | 5


def test_rank_stability_stops_a_run(utility):
    result = run(utility, 0, None, stop=RankStability(4) | MaxEvaluations(10**5))
    assert result.converged.all() and result.state.rankings.shape == (4, N)
    assert (result.state.rankings == result.state.rankings[-1]).all()


def test_a_rule_that_may_never_hold_gets_a_warning_and_a_cap(utility):
    with pytest.warns(UserWarning, match="no evaluation or time cap and may never hold"):
        result = run(utility, 0, None, stop=StandardError(0.2))
    assert result.diagnostics["stop"] == f"(StandardError(0.2) | MaxEvaluations({DEFAULT_MAX_EVALUATIONS}))"
    with pytest.warns(UserWarning, match="no evaluation or time cap"):
        run(utility, 0, None, stop=MaxEvaluations(100) & StandardError(0.2))  # '&' a cap is no cap
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        run(utility, 0, None, stop=StandardError(0.2) | MaxTime(60))


def test_a_utility_returning_nan_names_the_coalitions():
    def utility(key, masks):  # NaN wherever both cy and dee are in
        return jnp.where(masks[:, 2] & masks[:, 3], jnp.nan, masks.sum(axis=1) * 1.0)

    with pytest.raises(
        ValueError, match=r"utility returned NaN or inf for \d+ coalitions \(members listed\): \[\[.*'cy', 'dee'"
    ):
        semivalue(utility, N, 0, names=NAMES, stop=MaxEvaluations(10), batch_size=4)
    with pytest.raises(
        ValueError, match=r"NaN or inf for 8 coalitions \(members listed\): \[\['2', '3'\], \['0', '2', '3'\]"
    ):
        bv_exact(utility)

    def noisy(key, masks):  # two estimates a coalition, the second NaN wherever both cy and dee are in
        values = masks.sum(axis=1) * 1.0
        return jnp.stack([values, jnp.where(masks[:, 2] & masks[:, 3], jnp.nan, values)])

    with pytest.raises(ValueError, match=r"NaN or inf for 8 coalitions \(members listed\): \[\['2', '3'\]"):
        bv_exact(noisy)


def bv_exact(utility):
    from bayesval.games.semivalues import exact_semivalue

    return exact_semivalue(utility, N, 0)


@pytest.mark.parametrize(
    "options, error, message",
    [
        ({"weights": "owen"}, ValueError, r"semivalue must be one of \('shapley', 'banzhaf', 'beta', 'loo'\)"),
        ({"weights": "beta"}, ValueError, r"semivalue='beta' needs its parameters: pass beta_shapley"),
        ({"weights": 3}, TypeError, r"semivalue must be a name"),
        ({"batch_size": 0}, ValueError, r"batch_size must be an integer >= 1, got 0"),
        ({"batch_size": -4}, ValueError, r"batch_size must be an integer >= 1"),
        ({"batch_size": 2.0}, TypeError, r"batch_size must be an integer"),
        ({"sampler": PermutationSampler(antithetic=True), "batch_size": 5}, ValueError, r"batch_size must be even"),
        (
            {"sampler": PermutationSampler(latin=True), "batch_size": 12},
            ValueError,
            r"batch_size must be a multiple of the 5 players for Latin permutations",
        ),
        ({"sampler": StratifiedSampler(), "batch_size": 9}, ValueError, r"batch_size must be at least twice .* \(5\)"),
        ({"sampler": "permutation"}, TypeError, r"sampler must be a PermutationSampler"),
        ({"names": ["a", "b"]}, ValueError, r"names must be 5 distinct names"),
        ({"stop": 100}, TypeError, r"stop must be a stopping rule"),
        ({"key": "seed"}, TypeError, r"key must be an int seed or a jax.random.key"),
    ],
)
def test_bad_arguments_are_named(utility, options, error, message):
    options = {"key": 0, "stop": MaxEvaluations(10)} | options
    with pytest.raises(error, match=message):
        semivalue(utility, N, options.pop("key"), **options)


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda: beta_shapley(0, 1), r"alpha \(of the Beta semivalue\) must be a finite number > 0, got 0"),
        (lambda: beta_shapley(1, -2.0), r"beta \(of the Beta semivalue\) must be a finite number > 0, got -2.0"),
        (lambda: beta_shapley(float("nan"), 1), r"alpha \(of the Beta semivalue\) must be a finite number > 0"),
        (lambda: StandardError(-1), r"threshold must be a finite number >= 0"),
        (lambda: MaxEvaluations(0), r"limit must be an integer >= 1"),
        (lambda: MaxTime(0), r"seconds must be a finite number > 0"),
        (lambda: RankStability(1), r"checks must be an integer >= 2"),
        (lambda: StratifiedSampler(allocation=(1, -1)), r"allocation must be finite weights >= 0"),
        (lambda: StratifiedSampler((1, 0, 1, 1, 1)).plan(5, 20, bv_shapley()), r"no draws to coalition sizes \[1\]"),
    ],
)
def test_bad_parameters_are_named(make, message):
    with pytest.raises((ValueError, TypeError), match=message):
        make()


def bv_shapley():
    from bayesval.games.weights import SHAPLEY

    return SHAPLEY


@pytest.mark.parametrize(
    "output, message",
    [
        (lambda masks: masks * 1.0, r"utility must return values of shape \(B,\) or \(R, B\) .* got shape \(\d+, 5\)"),
        (lambda masks: jnp.zeros(3), r"for masks of shape \(B, n\) = \(\d+, 5\); got shape \(3,\)"),
    ],
)
def test_a_utility_of_the_wrong_shape_is_refused(output, message):
    with pytest.raises(ValueError, match=message):
        semivalue(lambda key, masks: output(masks), N, 0, stop=MaxEvaluations(10), batch_size=4)


def test_the_result_indexes_sorts_shows_and_saves(utility, tmp_path):
    result = run(utility, 0, 1000)
    item = result["cy"]
    assert item.name == "cy" and item.value == result.values[2] and item.count == result.counts[2]
    assert result[-1].name == "eve" and item.converged is False
    with pytest.raises(KeyError, match="no value named 'zed'"):
        result["zed"]
    ordered = result.sorted()
    assert np.all(np.diff(ordered.values) <= 0) and ordered[0].value == result.values.max()
    assert ordered.state is None and set(ordered.names) == set(NAMES)
    assert np.all(result.sorted(descending=False).values == ordered.values[::-1])
    np.testing.assert_allclose(result.variances, result.stderr**2)
    assert list(result.to_dataframe().columns) == ["value", "stderr", "counts", "converged"]
    loaded = bv.ValuationResult.load(result.save(tmp_path / "r.npz"))
    for name in ("values", "stderr", "counts", "converged"):
        np.testing.assert_array_equal(getattr(loaded, name), getattr(result, name))
    assert loaded.state.streams == result.state.streams and loaded.state.sampler == "permutation"
    np.testing.assert_array_equal(loaded.state.sums, result.state.sums)


def test_a_long_result_prints_a_few_rows():
    n = 1000
    result = bv.ValuationResult("m", np.arange(n), np.ones(n), [f"p{i}" for i in range(n)], counts=np.ones(n))
    text = repr(result)
    assert len(text.splitlines()) == 12 and "990 more" in text and "p999" in text
    old = bv.ValuationResult("exact Shapley", [1.0, 2.0], [0.1, 0.1], ["ann", "bob"])
    assert old.counts is None and "ann" in repr(old) and old["bob"].count is None
