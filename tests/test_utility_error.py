"""The utility's own error where it caches each coalition's estimates (`semivalue(..., independent_estimates=True)`,
`bayesval.results.coalition_noise`, docs/games.md, "The utility's own error"): the variance it adds is the brute-force
sum over all coalitions of (exact semivalue coefficient)^2 x (variance of their mean estimate) where every coalition
was valued, the standard errors are calibrated over keys where a control variate leaves little else (the per-repeat
spread, 1 degree of freedom, is not), and a run with the record resumes, merges and saves (issue 30)."""

import jax.numpy as jnp
import numpy as np
import pytest
from game_examples import assert_flags_agree, random_table

from bayesval.games import (
    SHAPLEY,
    ControlVariate,
    KeylessUtility,
    PermutationSampler,
    SemivalueSampler,
    UniformSampler,
    semivalue,
)
from bayesval.games.masks import coalition_masks, mask_codes
from bayesval.games.stopping import MaxEvaluations
from bayesval.games.weights import BANZHAF, Semivalue, semivalue_matrix
from bayesval.results.coalition_noise import CoalitionNoise
from bayesval.results.result import ValuationResult
from bayesval.results.state import SemivalueState
from bayesval.results.variance import TRUSTED_DOF

REPEATS = 2


def noisy_tables(table: np.ndarray, seed: int, noise: float) -> np.ndarray:
    """(R, 2^n) estimates of every coalition: v plus independent N(0, noise^2) per coalition and repeat (v(empty)
    exact)."""
    estimates = table + noise * np.random.default_rng(seed).normal(size=(REPEATS, table.size))
    estimates[:, 0] = table[0]
    return estimates


def cached_utility(estimates: np.ndarray):
    """A utility that returns each coalition's fixed R estimates whenever asked (as the party surprise caches them):
    of the masks alone."""
    estimates = jnp.asarray(estimates)
    return KeylessUtility(lambda masks: estimates[:, mask_codes(masks)])


def sampled(utility, num_players: int, key, evaluations: int, **options):
    options = dict(sampler=PermutationSampler(latin=True), batch_size=2 * num_players) | options
    result = semivalue(utility, num_players, key, stop=MaxEvaluations(evaluations), **options)
    assert_flags_agree(result)
    return result


@pytest.mark.parametrize(
    ("weights", "sampler"),
    [
        (SHAPLEY, PermutationSampler(latin=True)),
        (BANZHAF, UniformSampler()),
        (Semivalue("beta", 4.0, 1.0), SemivalueSampler()),
    ],
    ids=["shapley", "banzhaf", "beta"],
)
def test_the_added_variance_is_the_exact_semivalues_where_every_coalition_was_valued(weights, sampler):
    """Once every coalition of 4 players has been valued, and where a coalition's error variance depends on its size
    alone (the record's model where a class or size holds one coalition), the record's variance is
    sum_C w_Ci^2 s_C^2 / R over the 16 coalitions with the semivalue's own coefficients (its matrix), to rounding."""
    table = random_table(0, 4)
    sizes = coalition_masks(4, include_empty=True).sum(axis=1)
    spread = 0.1 * np.minimum(sizes, 3)  # v(empty) exact; N's error as its neighbours'
    estimates = table + np.stack([spread, -spread])
    result = sampled(cached_utility(estimates), 4, 3, 400, weights=weights, sampler=sampler, independent_estimates=True)
    assert result.state.noise.num_coalitions == 16
    exact = semivalue_matrix(4, weights) ** 2 @ (estimates.var(axis=0, ddof=1) / REPEATS)
    variance, dof = result.state.noise.variance()
    assert np.allclose(variance, exact, rtol=1e-12, atol=0), (variance, exact)
    assert np.all(dof > REPEATS - 1)
    described = result.diagnostics["utility_error"]
    assert described == "the exact semivalue's, from the cached estimates of 16 coalitions"


def test_the_record_estimates_the_exact_semivalues_error_from_a_fraction_of_the_coalitions():
    """At 10 players after two batches, under a third of the 1,024 coalitions valued: over 40 noise draws (0.2 on
    every coalition but the empty one) the record's variance over the true sum_C w_Ci^2 sigma^2 / R has mean 1 (no
    bias) and scatters about as its degrees of freedom say, sqrt(2 / nu): measured 0.246 against 0.290 (over 100
    draws, 0.273 against 0.292). Counting the classes that share a size's coalitions as independent gave nu about 42,
    sqrt(2 / nu) = 0.22, which the upper bound refuses."""
    table = random_table(3, 10)
    truth = semivalue_matrix(10, SHAPLEY)[:, 1:] ** 2 @ np.full(2**10 - 1, 0.2**2 / REPEATS)
    ratios, dofs = [], []
    for seed in range(40):
        result = sampled(
            cached_utility(noisy_tables(table, 4 + seed, 0.2)), 10, seed, 2 * 20 * 11, independent_estimates=True
        )
        assert result.state.noise.num_coalitions < 2**10 / 3
        variance, dof = result.state.noise.variance()
        ratios.append(variance / truth)
        dofs.append(dof)
    ratios = np.array(ratios)
    assert np.all(np.abs(ratios.mean(axis=0) - 1) < 0.1), ratios.mean(axis=0)
    predicted = np.sqrt(2 / np.median(dofs))
    assert 0.7 * predicted < ratios.std(axis=0).mean() < 1.1 * predicted, (ratios.std(axis=0).mean(), predicted)


@pytest.mark.parametrize("case", ["perfect", "scaled", "uneven"])
def test_standard_errors_are_calibrated_where_a_control_variate_leaves_little_but_the_utility_error(case):
    """A perfect surrogate (u = v) leaves v - u = the utility's error alone; 0.7 v leaves a third of the game too;
    'uneven' is 0.7 v with three times the error on every coalition that holds player 0 (the record's size model does
    not hold). Over 100 keys at 8 players, with the estimates cached (a coalition's error shared by every draw that
    uses it), the z-scores of the record's standard errors have unit spread, and at least 95 % of them have the
    degrees of freedom the stopping rule trusts; the per-repeat spread (1 degree of freedom) gives far fewer."""
    num_players = 8
    table = random_table(5, num_players)
    exact = semivalue_matrix(num_players, SHAPLEY) @ table
    control = ControlVariate(table if case == "perfect" else 0.7 * table)
    scale = np.where(coalition_masks(num_players, include_empty=True)[:, 0] & (case == "uneven"), 0.3, 0.1)
    z, trusted = {True: [], False: []}, {True: [], False: []}
    for seed in range(100):
        estimates = table + scale * np.random.default_rng(100 + seed).normal(size=(REPEATS, table.size))
        estimates[:, 0] = 0.0
        utility = cached_utility(estimates)
        for cached in (True, False):
            result = sampled(utility, num_players, seed, 2 * 16 * 9, control=control, independent_estimates=cached)
            z[cached].append((result.values - exact) / result.stderr)
            trusted[cached].append(np.asarray(result.diagnostics["indices"]["dof"]) >= TRUSTED_DOF)
    record_z = np.concatenate(z[True])
    assert abs(record_z.mean()) < 0.1 and 0.9 < record_z.std() < 1.1, (record_z.mean(), record_z.std())
    assert 0.93 < np.mean(np.abs(record_z) < 1.96) < 0.97, np.mean(np.abs(record_z) < 1.96)
    assert np.mean(trusted[True]) >= 0.95 > np.mean(trusted[False]) + 0.1, (
        np.mean(trusted[True]),
        np.mean(trusted[False]),
    )


def test_a_run_with_the_record_resumes_to_the_uninterrupted_run_merges_and_survives_a_file(tmp_path):
    table = random_table(4, 6)
    utility = cached_utility(noisy_tables(table, 2, 0.1))
    whole = sampled(utility, 6, 9, 4 * 12 * 7, independent_estimates=True)
    half = sampled(utility, 6, 9, 2 * 12 * 7, independent_estimates=True)
    resumed = sampled(utility, 6, 9, 4 * 12 * 7, resume_from=half, independent_estimates=True)
    assert np.array_equal(resumed.values, whole.values) and np.array_equal(resumed.stderr, whole.stderr)
    other = sampled(utility, 6, 10, 2 * 12 * 7, independent_estimates=True)
    merged = half + other
    both = np.unique(np.concatenate([half.state.noise.masks, other.state.noise.masks]), axis=0)
    assert (
        merged.state.noise.num_coalitions
        == len(both)
        < half.state.noise.num_coalitions + other.state.noise.num_coalitions
    )
    whole.save(tmp_path / "run.npz")
    loaded = ValuationResult.load(tmp_path / "run.npz")
    assert np.array_equal(loaded.state.estimate().variances, whole.state.estimate().variances)
    again = sampled(utility, 6, 9, 6 * 12 * 7, resume_from=loaded, independent_estimates=True)
    uninterrupted = sampled(utility, 6, 9, 6 * 12 * 7, independent_estimates=True)
    assert np.array_equal(again.stderr, uninterrupted.stderr)
    assert again.state.noise.num_coalitions == uninterrupted.state.noise.num_coalitions


def test_a_utility_that_does_not_cache_or_a_run_estimated_otherwise_is_refused():
    table = random_table(4, 6)
    utility = cached_utility(noisy_tables(table, 2, 0.1))
    record = sampled(utility, 6, 9, 12 * 7, independent_estimates=True)
    spread = sampled(utility, 6, 10, 12 * 7)
    with pytest.raises(ValueError, match="resume with independent_estimates=True, as it was sampled"):
        sampled(utility, 6, 9, 2 * 12 * 7, resume_from=record)
    with pytest.raises(ValueError, match="resume with independent_estimates=False"):
        sampled(utility, 6, 10, 2 * 12 * 7, resume_from=spread, independent_estimates=True)
    with pytest.raises(ValueError, match="cannot merge the results of different games: the utility's error"):
        record + spread
    other_estimates = cached_utility(noisy_tables(table, 3, 0.1))
    with pytest.raises(ValueError, match="resume_from is a result of a different game: it sampled"):
        sampled(other_estimates, 6, 9, 2 * 12 * 7, resume_from=record, independent_estimates=True)
    named = sampled(utility, 6, 9, 12 * 7, independent_estimates=True, game_id="same")  # the caller vouches for it
    with pytest.raises(ValueError, match="two different sets of estimates: independent_estimates=True is for"):
        sampled(other_estimates, 6, 9, 2 * 12 * 7, resume_from=named, independent_estimates=True, game_id="same")
    one_estimate = sampled(lambda key, masks: utility(key, masks)[0], 6, 9, 12 * 7, independent_estimates=True)
    assert one_estimate.state.noise is None and one_estimate.diagnostics["utility_error"].startswith("none")
    with pytest.raises(TypeError, match="independent_estimates must be True or False, got 1"):
        sampled(utility, 6, 9, 12 * 7, independent_estimates=1)


def test_a_record_with_part_of_the_noise_or_noise_of_another_game_is_refused():
    table = random_table(4, 6)
    result = sampled(cached_utility(noisy_tables(table, 2, 0.1)), 6, 9, 12 * 7, independent_estimates=True)
    meta, arrays = result.state.to_record()
    assert SemivalueState.from_record(meta, arrays).noise.num_coalitions == result.state.noise.num_coalitions
    with pytest.raises(ValueError, match="arrays no semivalue state has"):
        SemivalueState.from_record(meta, arrays, version=2)
    with pytest.raises(ValueError, match="part of a coalition noise record"):
        SemivalueState.from_record(meta, {k: v for k, v in arrays.items() if k != "noise_estimates"})
    for name, bad in [
        ("noise_estimates", arrays["noise_estimates"][:, :1]),
        ("noise_weights", arrays["noise_weights"][:5]),
        ("noise_masks", arrays["noise_masks"][:-1]),
    ]:
        with pytest.raises(ValueError, match="does not fit its 6 players and 2 estimates per coalition"):
            SemivalueState.from_record(meta, arrays | {name: bad})


def test_a_size_of_one_coalition_not_valued_takes_the_next_sizes_error():
    """Uniform coalitions seldom hold the empty one or N: where a run valued neither, their classes take the mean of
    the next size (1, n - 1), whose coalitions all share one error here, so the added variance is the exact sum with
    those two coalitions' errors set to it."""
    table = random_table(0, 5)
    masks = coalition_masks(5, include_empty=True)
    sizes = masks.sum(axis=1)
    spread = 0.1 * np.clip(sizes, 1, 4)  # N's error as size 4's, the empty coalition's as size 1's
    estimates = table + np.stack([spread, -spread])
    inner = (sizes > 0) & (sizes < 5)
    noise = CoalitionNoise.empty(SHAPLEY.weights(5), REPEATS).added(masks[inner], estimates[:, inner])
    expected = semivalue_matrix(5, SHAPLEY) ** 2 @ (estimates.var(axis=0, ddof=1) / REPEATS)
    assert np.allclose(noise.variance()[0], expected, rtol=1e-12, atol=0)
    exact_empty = CoalitionNoise.empty(SHAPLEY.weights(5), REPEATS).added(masks, np.where(sizes == 0, 0.0, estimates))
    expected_exact = semivalue_matrix(5, SHAPLEY)[:, 1:] ** 2 @ (estimates[:, 1:].var(axis=0, ddof=1) / REPEATS)
    assert np.allclose(exact_empty.variance()[0], expected_exact, rtol=1e-12, atol=0)  # v(empty) = 0 adds nothing


def test_a_version_2_state_reads_without_the_record():
    table = random_table(4, 6)
    utility = cached_utility(noisy_tables(table, 2, 0.1))
    result = sampled(utility, 6, 9, 12 * 7)
    meta, arrays = result.state.to_record()
    old = SemivalueState.from_record(meta, arrays, version=2)
    assert old.noise is None and np.array_equal(old.estimate().variances, result.state.estimate().variances)


def test_estimates_that_differ_by_rounding_are_one_coalitions_but_noise_is_not():
    """With a control variate the record holds v - u, and u is computed again whenever its coalition comes, in a
    batch of another shape (a Laplace fit, a sum over members), which can round otherwise in the last bits: such
    estimates are the coalition's own (the first kept), where estimates 1e-6 apart, a utility that values afresh,
    are refused as before."""
    record = CoalitionNoise.empty(np.ones(3) / 3, 2)
    masks = np.array([[1, 0, 1], [0, 1, 0]], bool)
    values = np.array([[1.25, 0.5], [1.5, 0.75]])  # (R, M)
    first = record.added(masks, values)
    again = first.added(masks[::-1], values[:, ::-1] * (1 + 4 * np.finfo(np.float64).eps))
    assert again.num_coalitions == 2 and np.array_equal(again.estimates, first.estimates)
    with pytest.raises(ValueError, match=r"the coalition \[0, 2\] two different sets of estimates"):
        first.added(masks[:1], values[:, :1] + 1e-6)
