"""A multi-fidelity control variate (`bayesval.games.control.EstimatedControl`, `estimated_control`; docs/games.md,
"Multi-fidelity control variates"): phi(u) of a cheap surrogate estimated by the regression estimator with its
standard error, phi(v - u) sampled on few coalitions, the two variances added: unbiased and calibrated on a game of
30 players whose Shapley values are known in closed form, a surrogate that fails for some coalitions falls back there,
and a run resumes and saves with its estimate (issue 61)."""

import dataclasses

import jax
import numpy as np
import pytest

from bayesval.games import SHAPLEY, PermutationSampler, UnanimitySum, semivalue
from bayesval.games.control import EstimatedControl, SurrogateLevels, SurrogateValues, surrogate_values
from bayesval.games.multifidelity import estimated_control
from bayesval.games.stopping import MaxEvaluations
from bayesval.results.result import ValuationResult

N = 30
GAME = UnanimitySum.random(N, 60, 4, seed=3)  # v: the expensive game
# u: the same terms 15 % too small, and one term v lacks: phi(u) differs from phi(v), and is known in closed form
SURROGATE = UnanimitySum(GAME.coalitions + ((0, 1, 2),), tuple(0.85 * a for a in GAME.coefficients) + (0.7,), N)


def surrogate(masks):
    return SURROGATE.utility(None, masks)


def sampled(key, control, permutations=2 * N, **options):
    return semivalue(
        GAME.utility,
        N,
        key,
        sampler=PermutationSampler(latin=True),
        stop=MaxEvaluations(permutations * (N + 1)),
        batch_size=N,
        control=control,
        **options,
    )


def test_phi_of_v_is_unbiased_and_its_standard_error_holds_both_parts():
    """Over 20 keys: the estimate of phi(u) alone and the multi-fidelity phi(v) each have RMS z near 1 against their
    closed forms, and phi(v)'s variance is the sampled part's plus the estimate's (so it exceeds the estimate's)."""
    exact_u, exact_v = SURROGATE.semivalue(SHAPLEY), GAME.semivalue(SHAPLEY)
    z_u, z_v, evaluations = [], [], []
    for seed in range(20):
        control = estimated_control(surrogate, N, jax.random.key(1000 + seed), tolerance=0.02, max_evaluations=3000)
        result = sampled(seed, control)
        z_u.append((control.estimate - exact_u) / np.sqrt(control.variances))
        z_v.append((result.values - exact_v) / result.stderr)
        evaluations.append(control.evaluations)
        assert (result.stderr**2 > control.variances).all()
        assert "surrogate as a control variate" in result.method
    z_u, z_v = np.concatenate(z_u), np.concatenate(z_v)
    for z in (z_u, z_v):
        assert 0.75 <= np.sqrt(np.mean(z**2)) <= 1.3 and np.mean(np.abs(z) > 4) <= 0.01
    assert abs(np.mean(z_v)) < 0.2  # unbiased: 600 z-scores, their mean within 5 standard errors of 0
    assert min(evaluations) >= 2 * N


def test_a_surrogate_that_fails_for_a_coalition_falls_back_there_and_the_estimate_stays_unbiased():
    """The surrogate gives garbage (1e3) flagged as failed for every coalition that holds players 0 and 1: those take
    the fallback (0) in phi(u)'s estimate and in the draws of v - u alike, so phi(v) stays unbiased (RMS z near 1);
    a flag-less surrogate falls back where it is not finite, and one of the wrong shape is refused."""

    def failing(masks):
        masks = np.asarray(masks, bool)
        failed = masks[:, 0] & masks[:, 1]
        return SurrogateValues(np.where(failed, 1e3, surrogate(masks)), ~failed)

    masks = np.zeros((3, N), bool)
    masks[0, :2] = masks[1, 1:3] = True
    np.testing.assert_array_equal(surrogate_values(failing, masks), [0.0, surrogate(masks[1:2])[0], 0.0])
    assert surrogate_values(lambda m: np.array([1.0, np.nan, np.inf]), masks, fallback=-1.0).tolist() == [1, -1, -1]
    with pytest.raises(ValueError, match=r"one value per coalition, shape \(3,\) .* got shape \(2,\)"):
        surrogate_values(lambda m: np.zeros(2), masks)
    exact_v = GAME.semivalue(SHAPLEY)
    z = []
    for seed in range(12):
        control = estimated_control(failing, N, jax.random.key(2000 + seed), tolerance=0.02, max_evaluations=3000)
        assert control(masks[:1])[0] == 0.0
        result = sampled(seed, control)
        z.append((result.values - exact_v) / result.stderr)
    z = np.concatenate(z)
    assert 0.75 <= np.sqrt(np.mean(z**2)) <= 1.3 and np.abs(z).max() < 5


def test_a_run_with_an_estimated_control_resumes_saves_and_refuses_another():
    control = estimated_control(surrogate, N, jax.random.key(7), tolerance=0.05, max_evaluations=1000)
    whole = sampled(3, control, permutations=2 * N)
    half = sampled(3, control, permutations=N)
    resumed = sampled(3, control, permutations=2 * N, resume_from=half)
    assert np.array_equal(resumed.values, whole.values) and np.array_equal(resumed.stderr, whole.stderr)
    assert half.state.control_table is None and np.array_equal(half.state.control_variance, control.variances)
    other = EstimatedControl(surrogate, control.estimate + 0.01, control.variances, control.dof, "shapley")
    with pytest.raises(ValueError, match="resume with the same control"):
        sampled(3, other, permutations=2 * N, resume_from=half)
    with pytest.raises(ValueError, match="an estimated surrogate, this run with none"):
        sampled(3, None, permutations=2 * N, resume_from=half)
    renamed = dataclasses.replace(control, name="another surrogate")  # the same estimate of another u
    with pytest.raises(ValueError, match="against the estimated surrogate 'surrogate', this run against 'another"):
        sampled(3, renamed, permutations=2 * N, resume_from=half)
    unnamed = dataclasses.replace(half, state=dataclasses.replace(half.state, control_name=None))  # saved before
    with pytest.raises(ValueError, match="before results recorded which surrogate, so bayesval cannot check"):
        sampled(3, control, permutations=2 * N, resume_from=unnamed)
    with pytest.raises(ValueError, match="cannot merge the results of different games: estimated control 'surrogate'"):
        half + unnamed
    with pytest.raises(ValueError, match="estimates the shapley semivalue, not the banzhaf"):
        semivalue(GAME.utility, N, 0, weights="banzhaf", stop=MaxEvaluations(10), control=control)


def test_a_state_with_an_estimated_control_survives_a_file_and_part_of_one_is_refused(tmp_path):
    control = estimated_control(surrogate, N, jax.random.key(7), tolerance=0.05, max_evaluations=1000)
    result = sampled(3, control, permutations=N)
    result.save(tmp_path / "run.npz")
    loaded = ValuationResult.load(tmp_path / "run.npz")
    for name in ("control_semivalue", "control_variance", "control_dof"):
        assert np.array_equal(getattr(loaded.state, name), getattr(result.state, name))
    assert loaded.state.control_name == result.state.control_name == control.name
    meta, arrays = result.state.to_record()
    before = {key: value for key, value in meta.items() if key != "control_name"}  # as version 4 wrote it
    assert type(result.state).from_record(before, arrays, version=4).control_name is None
    assert np.array_equal(loaded.state.estimate().variances, result.stderr**2)
    with pytest.raises(ValueError, match="part of a control variate"):
        type(result.state).from_record(meta, {k: v for k, v in arrays.items() if k != "control_dof"})


def test_a_bad_estimated_control_is_refused():
    with pytest.raises(TypeError, match="surrogate must be a function of coalition masks"):
        EstimatedControl(np.zeros(4), np.zeros(2), np.zeros(2), np.zeros(2), "shapley")
    with pytest.raises(ValueError, match=r"must be of shape \(n,\) alike"):
        EstimatedControl(surrogate, np.zeros(2), np.zeros(3), np.zeros(2), "shapley")
    with pytest.raises(ValueError, match="variances and dof >= 0"):
        EstimatedControl(surrogate, np.zeros(2), -np.ones(2), np.zeros(2), "shapley")


# A closer surrogate than SURROGATE: the game's terms 3 % too small and a smaller extra term. Its difference from
# SURROGATE varies far less than it does, which is what a cheaper level beneath it is for.
CLOSER = UnanimitySum(GAME.coalitions + ((0, 1, 2),), tuple(0.97 * a for a in GAME.coefficients) + (0.2,), N)


def closer(masks):
    return CLOSER.utility(None, masks)


KEYS = 12


def test_levels_estimate_the_closest_surrogate_against_the_cheaper_one_to_a_far_smaller_error():
    """`SurrogateLevels((cheap, close))`: phi(close) estimated against the estimate of phi(cheap) is calibrated
    against its closed form over KEYS keys (RMS z near 1, with the cheaper level's variance inside), and from the same
    2,000 evaluations of `close` its standard error is at most a quarter of what estimating it alone gives (measured:
    an eighth); the cheaper level is estimated to a quarter of the tolerance, from its own key; one level alone is
    the surrogate alone, bit for bit."""
    exact = CLOSER.semivalue(SHAPLEY)
    levels = SurrogateLevels((surrogate, closer))
    z, stacked, alone = [], [], []
    for seed in range(KEYS):
        key = jax.random.key(3000 + seed)
        control = estimated_control(levels, N, key, tolerance=0.05, max_evaluations=2_000)
        single = estimated_control(closer, N, key, tolerance=0.05, max_evaluations=2_000)
        below = control.below
        assert below is not None and below.surrogate.levels == (surrogate,) and control.surrogate is levels
        assert (np.sqrt(below.variances) <= 0.05 / 4 + 1e-12).all() and below.evaluations > control.evaluations
        assert (control.variances > below.variances).all() and control.evaluations == single.evaluations
        z.append((control.estimate - exact) / np.sqrt(control.variances))
        stacked.append(np.sqrt(control.variances).mean())
        alone.append(np.sqrt(single.variances).mean())
    z = np.concatenate(z)
    assert 0.75 <= np.sqrt(np.mean(z**2)) <= 1.3 and np.mean(np.abs(z) > 4) <= 0.01
    assert np.mean(stacked) <= 0.25 * np.mean(alone)
    one = estimated_control(SurrogateLevels((closer,)), N, jax.random.key(5), tolerance=0.05, max_evaluations=2000)
    plain = estimated_control(closer, N, jax.random.key(5), tolerance=0.05, max_evaluations=2000)
    assert np.array_equal(one.estimate, plain.estimate) and one.below is None
    assert levels(np.ones((1, N), bool))[0] == closer(np.ones((1, N), bool))[0]
    with pytest.raises(TypeError, match="one or more functions of coalition masks"):
        SurrogateLevels((surrogate, np.zeros(3)))


def test_a_level_that_fails_for_a_coalition_takes_the_closest_level_below_that_does_not():
    """The closest level fails (flagged) for coalitions holding players 0 and 1, the middle one is not finite for
    those holding player 2 too: each such coalition takes the closest level below that gives it, and one that no
    level gives is flagged unusable (so `surrogate_values` gives it the fallback)."""

    def middle(masks):
        masks = np.asarray(masks, bool)
        return np.where(masks[:, 2], np.nan, closer(masks) + 1.0)

    def closest(masks):
        masks = np.asarray(masks, bool)
        return SurrogateValues(closer(masks) + 2.0, ~(masks[:, 0] & masks[:, 1]))

    def cheapest(masks):
        masks = np.asarray(masks, bool)
        return SurrogateValues(surrogate(masks), ~masks[:, 3])

    masks = np.zeros((4, N), bool)
    masks[0, 5] = True  # the closest level gives it
    masks[1, [0, 1]] = True  # the middle one
    masks[2, [0, 1, 2]] = True  # the cheapest
    masks[3, [0, 1, 2, 3]] = True  # none
    given = SurrogateLevels((cheapest, middle, closest))(masks)
    expected = [closer(masks[:1])[0] + 2.0, closer(masks[1:2])[0] + 1.0, surrogate(masks[2:3])[0], np.nan]
    np.testing.assert_array_equal(given.usable, [True, True, True, False])
    np.testing.assert_allclose(given.values[:3], expected[:3])
    assert surrogate_values(SurrogateLevels((cheapest, middle, closest)), masks, fallback=-1.0)[3] == -1.0
