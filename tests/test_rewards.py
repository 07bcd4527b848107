"""Model rewards (Sim et al. 2023, Secs. 4-5): rho-Shapley targets against their closed forms, the negative-Shapley
repair against brute-force enumeration, tempering against the conjugate NIG update with kappa-scaled statistics, noise
addition's effective privacy against eps / (1 + tau eps), and both mechanisms end to end on Syn."""

from __future__ import annotations

import itertools
import math
import warnings

import jax
import numpy as np
import pytest

import bayesval as bv
from bayesval.divergence import nig_kl
from bayesval.games.shapley import coalition_masks, exact_shapley
from bayesval.inference.data import NoiseAwareData
from bayesval.parties import release_all
from bayesval.parties.boundary import describe_statistic
from bayesval.parties.rewards import nonnegative_shapley, rationality_bound, rho_shapley_targets
from bayesval.parties.rewards.sampling import RewardSampler
from bayesval.parties.surprise import CoalitionSurprise
from bayesval.privacy import Mechanism, NoiseSource
from bayesval.statistics import LinearRegressionStatistic

BUDGET = bv.SamplerConfig(num_chains=2, num_warmup=100, num_samples=400, thinning=1, num_repeats=2, progress_bar=False)
# the reward searches need r's standard error well below the gaps between targets: longer chains, three repeats
REWARD_BUDGET = BUDGET.with_(num_warmup=300, num_samples=600, num_repeats=3)


def test_targets_are_the_rho_shapley_closed_form():
    phi, v_grand = np.array([0.5, 1.0, 2.0]), 6.0
    for rho in (0.2, 0.5, 1.0):
        np.testing.assert_allclose(rho_shapley_targets(phi, v_grand, rho), v_grand * (phi / 2.0) ** rho)
    assert rho_shapley_targets(phi, v_grand, 1.0)[2] == v_grand  # the top party's target is v_N (P2)
    spread = [np.ptp(rho_shapley_targets(phi, v_grand, rho)) for rho in (0.1, 0.5, 1.0)]
    assert spread == sorted(spread)  # a smaller rho rewards more equally


@pytest.mark.parametrize("rho", [0, -0.1, 1.5, float("nan"), True])
def test_rho_outside_zero_one_is_refused(rho):
    with pytest.raises((ValueError, TypeError), match="rho"):
        rho_shapley_targets([1.0, 2.0], 3.0, rho)


def test_rationality_bound_is_the_largest_rho_that_keeps_every_party_at_least_its_own_value():
    phi, own, v_grand = np.array([0.4, 1.0, 2.5]), np.array([2.0, 3.0, 3.5]), 6.0
    bound = rationality_bound(phi, own, v_grand)
    expected = min(np.log(own[i] / v_grand) / np.log(phi[i] / phi.max()) for i in (0, 1))
    assert bound == pytest.approx(expected)
    assert np.all(rho_shapley_targets(phi, v_grand, bound) >= own - 1e-9)
    assert np.any(rho_shapley_targets(phi, v_grand, bound * 1.01) < own)
    assert rationality_bound(phi, np.array([2.0, 7.0, 3.5]), v_grand) == 0.0  # v_2 > v_N: no rho helps


def _game_values(num_players: int, value) -> np.ndarray:
    masks = coalition_masks(num_players, include_empty=True)
    return np.array([value(frozenset(np.flatnonzero(m))) for m in masks])


def test_negative_shapley_values_are_repaired_minimally_keeping_useless_and_dominated_players():
    """A 4-player game where player 3 harms every coalition it joins: phi_3 < 0 by enumeration; the repair mixes in
    the contribution to the empty set just enough that the smallest value is 0, a useless player stays at 0 and the
    order of the others is kept."""
    own = {0: 2.0, 1: 1.0, 2: 0.0, 3: 0.5}

    def value(coalition):
        if not coalition:
            return 0.0
        harm = 1.5 * len(coalition & {0, 1}) if 3 in coalition else 0.0
        return sum(own[i] for i in coalition) + 0.3 * (0 in coalition and 1 in coalition) - harm

    phi, _ = exact_shapley(_game_values(4, value))
    assert phi[3] < 0 and phi[2] == pytest.approx(0.0)
    with pytest.warns(UserWarning, match=r"negative Shapley values for \['d'\]"):
        repaired, weight = nonnegative_shapley(phi, [own[i] for i in range(4)], names=list("abcd"))
    assert 0 < weight < 1
    assert repaired.min() == pytest.approx(0.0, abs=1e-12) and repaired[3] == pytest.approx(0.0, abs=1e-12)
    np.testing.assert_allclose(repaired, (1 - weight) * phi + weight * np.array([own[i] for i in range(4)]), atol=1e-12)
    assert repaired[2] == pytest.approx(0.0) and repaired[0] > repaired[1] > 0
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        same, none = nonnegative_shapley(np.abs(phi), [own[i] for i in range(4)])
    assert none == 0.0 and np.array_equal(same, np.abs(phi))


def test_tempered_posterior_is_the_conjugate_update_with_kappa_scaled_statistics_and_monotone(syn, syn_parties):
    """At negligible noise, the sampler fed (kappa c, kappa o, kappa Z) samples NIG(prior updated with kappa s_N,
    kappa c_N) (App. E.1): its mean and r(kappa) = KL(. || prior) match the closed form, and r rises with kappa."""
    model = bv.models.LinearRegression()
    parties = syn_parties(epsilons=(1e7, 1e7, 1e7))
    data = NoiseAwareData.from_releases(release_all(model, parties))
    # the valuation's budget below (`tempered`): the grand coalition's sampler and reward programs are compiled once
    surprise = CoalitionSurprise(model, data, REWARD_BUDGET, 4, jax.random.key(5), max_coalitions=7)
    kappas = [0.01, 0.1, 0.4, 1.0]
    trials = RewardSampler(surprise, jax.random.key(6)).evaluate([data.tempered(k) for k in kappas], kappas)
    statistic = sum(p.exact_statistic() for p in parties)
    count = sum(len(p.X) for p in parties)
    prior = model.priors(2).model
    for kappa, trial in zip(kappas, trials):
        exact = model.exact_posterior(kappa * statistic, kappa * count, 2)
        assert trial.value == pytest.approx(nig_kl(exact, prior), rel=0.03), kappa
        np.testing.assert_allclose(trial.draws[:, :3].mean(axis=0), np.asarray(exact.mean), atol=0.05)
    assert [t.value for t in trials] == sorted(t.value for t in trials)


EPSILONS = (0.5, 0.5, 2.0)


@pytest.fixture(scope="module")
def tempered():
    from bayesval.datasets.synthetic import make_syn

    syn = make_syn(seed=0)
    # The releases the reward comparisons below were measured on: float noise from seeds 40-42 at the earlier
    # triangle-inequality sensitivity 2 max ||t(z)|| (12.3 here), released by hand. With the sensitivity derived per
    # block (6.45, docs/sensitivity.md) the DP noise halves, and Fig. 2f's "tempering lands closer to the grand
    # posterior than noise addition" held in 1 of 4 release draws (seeds 40 / 50 / 60 / 70, discrete noise: mean
    # similarity -2.21 / -1.75 / -1.91 / -1.48 for tempering against -1.33 / -0.76 / -1.25 / -1.95 for noise
    # addition), reported in issue 31; these tests check the rewards at the noise level they were measured at. Since
    # the collapsed moves propose from Student t, Fig. 2f does not hold at this noise level either (docs/rewards.md).
    statistic = LinearRegressionStatistic(2)
    r2, y2 = syn.bounds.x_norm**2, syn.bounds.y_abs**2
    triangle = 2 * np.sqrt(r2**2 + r2 + (r2 + 1) * y2 + y2**2)
    parties = []
    for i, ((X, y), eps) in enumerate(zip(syn.parties, EPSILONS)):
        party = bv.Party(X, y, epsilon=eps, bounds=syn.bounds, name=f"party {i + 1}")
        perturbed, record = Mechanism.gaussian(party.guarantee, float(triangle)).perturb(
            party.exact_statistic(), noise=NoiseSource(40 + i), owner=party.name, what="linear_regression statistic"
        )
        description = describe_statistic(statistic)
        parties.append(bv.PerturbedStatistic(party.name, perturbed, len(X), record, description, syn.bounds))
    model = bv.models.LinearRegression()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # convergence at the test budget
        # every coalition's draws kept: test_rewards_compare_with_the_valuations_own_draws... compares the rewards'
        # grand and own draws with them, on this valuation rather than on one more valuation and reward search
        result = bv.valuate(model, parties, key=1, config=REWARD_BUDGET, rewards="tempering", rho=0.5, keep_draws=True)
    return model, parties, syn, result


def _rewarded_again(tempered, mechanism):
    """The fixture's valuation rewarded again by `mechanism`: its coalition values are reused, not sampled."""
    model, parties, _, result = tempered
    return bv.valuate(model, parties, key=1, config=REWARD_BUDGET, resume_from=result, rewards=mechanism)


def test_tempering_meets_every_target_within_ten_calls_and_the_top_party_gets_the_grand_posterior(tempered):
    _, _, _, result = tempered
    rewards = result.rewards
    top = int(np.argmax(result.values))
    grand = result.coalition_values[result.coalition_masks.all(axis=1)][0]
    assert rewards.values[top] == grand and rewards.parameters[top] == 1.0 and rewards.calls[top] == 0
    np.testing.assert_allclose(rewards.targets, rho_shapley_targets(result.values, grand, 0.5))
    assert rewards.reached.all() and rewards.calls.max() <= 10
    tolerance = 2 * np.sqrt(np.mean(np.square(rewards.stderr)))
    assert np.all(np.abs(rewards.values - rewards.targets) <= 3 * tolerance)
    assert np.all(np.diff(rewards.parameters[np.argsort(rewards.targets)]) >= 0)  # higher targets, larger kappa
    assert rewards.similarity[top] == 0 and np.all(rewards.similarity <= 0)
    np.testing.assert_array_equal(rewards.effective_epsilon, np.tile(EPSILONS, (3, 1)))  # P1
    assert rewards.draws.shape[0] == 3 and rewards.draws.shape[2] == 4


def test_rewards_survive_save_and_load(tempered, tmp_path):
    _, _, _, result = tempered
    loaded = bv.ValuationResult.load(result.save(tmp_path / "rewards.npz"))
    for name in ("targets", "values", "parameters", "calls", "similarity", "effective_epsilon", "draws"):
        np.testing.assert_array_equal(getattr(loaded.rewards, name), getattr(result.rewards, name))
    assert loaded.rewards.mechanism == "tempering" and "Rewards(tempering" in repr(loaded)


def test_noise_addition_weakens_no_guarantee_and_tempering_predicts_better(tempered):
    """Noise addition reuses the valuation (resume_from: nothing is sampled again but the rewards), reports
    eps_k / (1 + tau_i eps_k) for every party inside each reward, and gives worse held-out MNLP than tempering at
    the same targets (Sim et al. 2023, Fig. 3d). Fig. 2f's "noise addition lands further from p(theta | o_N)" is not
    asserted: since the collapsed moves propose from Student t, noise addition's similarity here varies with its
    noise draw from -2.8 to -0.6 against tempering's -1.8 to -1.1, and is closer on average (docs/rewards.md)."""
    _, _, syn, result = tempered
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        noisy = _rewarded_again(tempered, bv.rewards.NoiseAddition(noise_seed=7))
    np.testing.assert_array_equal(noisy.values, result.values)
    rewards = noisy.rewards
    epsilons = np.array(EPSILONS)
    expected = epsilons / (1 + np.outer(rewards.parameters, epsilons))
    np.testing.assert_allclose(rewards.effective_epsilon, expected, rtol=1e-6)
    assert np.all(rewards.effective_epsilon <= epsilons + 1e-12)
    others = np.flatnonzero(rewards.parameters > 0)
    assert others.size == 2 and rewards.calls.max() <= 10
    X, y = syn.test
    assert result.rewards.mnlp(X, y)["reward"][others].mean() < rewards.mnlp(X, y)["reward"][others].mean()


def test_an_unreachable_target_within_the_call_budget_is_reported_not_hidden(tempered):
    with pytest.warns(UserWarning, match="did not reach their targets within 1 sampler calls"):
        noisy = _rewarded_again(tempered, bv.rewards.NoiseAddition(max_calls=1, noise_seed=8, z=1e-6))
    assert not noisy.rewards.reached.all()


def test_bad_reward_arguments_are_refused_before_any_release(syn, syn_parties, rng):
    parties = syn_parties(seeds=(61, 62, 63))
    model = bv.models.LinearRegression()
    for rho in (0, 1.5):
        with pytest.raises(ValueError, match=r"rho must be in \(0, 1\]"):
            bv.valuate(model, parties, config=BUDGET, rewards="tempering", rho=rho)
    with pytest.raises(ValueError, match="rho sets the reward targets"):
        bv.valuate(model, parties, config=BUDGET, rho=0.5)
    with pytest.raises(ValueError, match="rewards must be 'tempering', 'noise'"):
        bv.valuate(model, parties, config=BUDGET, rewards="shapley")
    with pytest.raises(ValueError, match="at least 2 parties"):
        bv.valuate(model, parties[:1], config=BUDGET, rewards="tempering")
    with pytest.raises(ValueError, match="max_calls"):
        bv.rewards.Tempering(max_calls=0)
    assert all(party.ledger.releases == [] for party in parties)
    X, y = rng.normal(size=(20, 2)), rng.integers(0, 2, 20)
    with pytest.raises(ValueError, match="rewards, rho apply to party models"):
        bv.valuate(bv.estimators.KNNShapley(3), (X, y), validation=(X, y), rewards="tempering", rho=0.5)


def test_enumerated_repair_keeps_shapley_values_that_are_already_non_negative():
    """Over every sign pattern of a 3-party game's singleton values, a game without negative Shapley values is left
    exactly as it is."""
    for own in itertools.product((0.0, 1.0, 2.0), repeat=3):
        phi, _ = exact_shapley(_game_values(3, lambda c, own=own: sum(own[i] for i in c) + 0.5 * (len(c) == 3)))
        repaired, weight = nonnegative_shapley(phi, own)
        assert weight == 0.0 and np.array_equal(repaired, phi)


def _hand_result(values_by_coalition, targets, rewards_values=None, names=("a", "b", "c")):
    """A valuation of 3 parties with given coalition values (by bitmask) and targets, with tempering rewards."""
    masks = coalition_masks(3)
    codes = (masks * (1 << np.arange(3))).sum(axis=1)
    coalition_values = np.array([values_by_coalition[c] for c in codes])
    grand = coalition_values[-1]
    rewards_values = np.asarray(targets if rewards_values is None else rewards_values, float)
    rewards = bv.rewards.Rewards(
        mechanism="tempering",
        rho=0.5,
        names=list(names),
        shapley=np.zeros(3),
        repair_weight=0.0,
        singleton_values=coalition_values[[0, 1, 3]],
        grand_value=grand,
        targets=np.asarray(targets, float),
        values=rewards_values,
        stderr=np.full(3, 0.01),
        parameters=np.ones(3),
        calls=np.zeros(3, int),
        reached=np.ones(3, bool),
        similarity=np.zeros(3),
        epsilon=np.ones(3),
        effective_epsilon=np.ones((3, 3)),
        rationality_bound=1.0,
        seconds=0.0,
    )
    return bv.ValuationResult(
        method="by hand",
        values=np.zeros(3),
        stderr=np.zeros(3),
        names=list(names),
        coalition_masks=masks,
        coalition_values=coalition_values,
        coalition_stderr=np.full(7, 0.01),
        rewards=rewards,
    )


def test_incentive_report_checks_fairness_on_every_coalition_and_catches_violations():
    """c adds nothing anywhere (F1), a dominates b (F3); rho-Shapley targets from the exact Shapley values satisfy
    both, swapped or non-zero targets fail them; P4 fails once a target drops below the party's own value."""
    own = {0: 0.0, 1: 3.0, 2: 2.0, 3: 4.0, 4: 0.0, 5: 3.0, 6: 2.0, 7: 4.0}  # bit 2 (party c) is useless
    phi, _ = exact_shapley(np.array([own[c] for c in range(8)]))
    targets = rho_shapley_targets(phi, own[7], 0.5)
    report = bv.rewards.incentive_report(_hand_result(own, targets))
    assert report["F1"].holds and report["F3"].holds and report["P1"].holds and report["P2"].holds
    assert report["F4"].holds is None and report.all_hold
    bad = bv.rewards.incentive_report(_hand_result(own, [2.0, 3.0, 0.5]))  # a below b and below v_a; c paid
    assert not bad["F1"].holds and "'c'" in bad["F1"].detail
    assert not bad["F3"].holds and "('a', 'b')" in bad["F3"].detail
    assert not bad["P4"].holds and not bad.all_hold
    with pytest.raises(ValueError, match="needs rewards"):
        bv.rewards.incentive_report(bv.ValuationResult(method="x", values=[1.0], stderr=[0.0], names=["a"]))


def test_incentive_report_on_syn_rewards(tempered):
    _, _, _, result = tempered
    report = bv.rewards.incentive_report(result)
    assert report["P1"].holds and report["P2"].holds and report["F1"].holds
    assert report["P4"].holds == (result.rewards.rho <= result.rewards.rationality_bound) or report["P4"].holds
    assert "IncentiveReport" in repr(report)


def test_plots_show_the_rewards_and_the_trade_off_numbers(tempered):
    import matplotlib

    matplotlib.use("Agg")
    _, _, _, result = tempered
    figure = result.plot()
    panel = figure.axes[3]
    heights = np.array([bar.get_height() for bar in panel.patches]).reshape(3, 3)
    np.testing.assert_allclose(
        heights, [result.rewards.singleton_values, result.rewards.targets, result.rewards.values]
    )
    trade_off = bv.plot_privacy_tradeoff([result, result], "party 2")
    lines = {bars.get_label(): bars.lines[0].get_ydata() for bars in trade_off.axes[0].containers}
    np.testing.assert_allclose(lines["reward r_i"], result.rewards.values[1])
    np.testing.assert_allclose(lines["Shapley value phi"], result.values[1])
    np.testing.assert_allclose(lines["own value v_i"], result.rewards.singleton_values[1])
    with pytest.raises(ValueError, match="2 or more privacy levels"):
        bv.plot_privacy_tradeoff([result], "party 2")
    with pytest.raises(ValueError, match="'party 9' is not a party"):
        bv.plot_privacy_tradeoff([result, result], "party 9")


def test_incentive_report_f2_compares_targets_within_their_standard_errors():
    """a and b are interchangeable: targets 0.5 apart fail F2; targets apart by less than their noise hold."""
    symmetric = {0: 0.0, 1: 2.0, 2: 2.0, 3: 3.0, 4: 1.0, 5: 2.5, 6: 2.5, 7: 3.5}
    assert not bv.rewards.incentive_report(_hand_result(symmetric, [3.0, 3.5, 2.0]))["F2"].holds
    assert bv.rewards.incentive_report(_hand_result(symmetric, [3.5, 3.5 - 1e-4, 2.0]))["F2"].holds


class DroppingFirstChains(bv.models.LinearRegression):
    """Linear regression whose every other batch row loses its first chain, as NUTS's BFMI rule drops chains; the
    dropped chain is filled with a sentinel, so any reward or posterior that used it shows."""

    def posterior_draws(self, key, data, masks, config):
        sample = super().posterior_draws(key, data, masks, config)
        kept, draws = np.array(sample.kept_chains), np.array(sample.draws)
        kept[::2, 0], draws[::2, 0] = False, 1e6
        return sample._replace(draws=draws, kept_chains=kept)


def test_rewards_leave_out_dropped_chains_and_keep_whole_chains(tempered):
    _, parties, _, _ = tempered
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # single-chain diagnostics and convergence at the test budget
        result = bv.valuate(DroppingFirstChains(), parties, key=1, config=REWARD_BUDGET, rewards="tempering", rho=0.5)
    rewards = result.rewards
    for draws in (rewards.draws, rewards.own_draws, rewards.grand_draws[None]):
        assert np.abs(draws).max() < 1e5  # no dropped chain's draws
    full = REWARD_BUDGET.num_repeats * REWARD_BUDGET.num_chains * REWARD_BUDGET.num_samples
    chain = REWARD_BUDGET.num_samples
    assert rewards.draws.shape[1] < full and rewards.draws.shape[1] % chain == 0  # fewer, whole chains
    assert rewards.own_draws.shape[1] % chain == 0 and len(rewards.grand_draws) % chain == 0
    assert np.isfinite(rewards.values).all() and np.isfinite(rewards.similarity).all()


def test_allocate_asks_any_reward_mechanism_the_same_questions():
    """allocate() knows a mechanism only through RewardMechanism: the top party gets the grand posterior at the
    mechanism's grand_parameter (P2), a party whose target is 0 the prior at its prior_parameter, and every other
    party what one solve() call found, whatever the mechanism's name. A stub sampler stands in for the posteriors."""
    from types import SimpleNamespace

    from bayesval.parties.rewards import RewardMechanism
    from bayesval.parties.rewards.allocation import allocate
    from bayesval.parties.rewards.control import Search
    from bayesval.parties.rewards.sampling import Evaluation

    rng = np.random.default_rng(3)

    class StubSampler:
        data, k, chain_length = "releases", 4, 50

        def evaluate(self, inputs, parameters, masks, stage):
            return [Evaluation(p, 0.0, 0.0, rng.normal(size=(100, 2))) for p in parameters]

        def prior(self, num_draws):
            return rng.normal(0.0, 3.0, size=(num_draws, 2))

        def sampled_draws(self, masks):
            return None  # no valuation behind the stub: the grand and own draws are sampled

    class Stub(RewardMechanism):
        name, symbol, grand_parameter, prior_parameter, max_calls = "stub", "s", 7.0, -7.0, 3
        asked = []

        def solve(self, sampler, targets, grand, releases, parties):
            self.asked.append((list(targets), grand.parameter, list(parties)))
            return [
                Search(t, [], True, calls=2, accepted=Evaluation(0.5, t, 0.1, rng.normal(2.0, 1.0, (100, 2))))
                for t in targets
            ]

        def effective_epsilons(self, releases, parameters):
            return np.zeros((len(parameters), len(releases)))

    releases = [SimpleNamespace(release=SimpleNamespace(guarantee=SimpleNamespace(epsilon=e))) for e in (1.0, 2.0, 3.0)]
    mechanism = Stub()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # rho above the rationality bound of these made-up values
        rewards = allocate(
            StubSampler(),
            mechanism,
            0.5,
            names=["a", "b", "c"],
            releases=releases,
            shapley=np.array([0.0, 1.0, 4.0]),
            singleton_values=np.array([0.5, 1.0, 2.0]),
            grand=(4.0, 0.2),
        )
    ((targets, grand_parameter, parties),) = mechanism.asked
    assert parties == [1] and targets == [pytest.approx(2.0)] and grand_parameter == 7.0
    np.testing.assert_array_equal(rewards.parameters, [-7.0, 0.5, 7.0])
    np.testing.assert_allclose(rewards.values, [0.0, 2.0, 4.0])
    np.testing.assert_array_equal(rewards.calls, [0, 2, 0])
    assert rewards.similarity[2] == 0.0 and rewards.similarity[1] < -1 and rewards.mechanism == "stub"
    np.testing.assert_array_equal(rewards.epsilon, [1.0, 2.0, 3.0])
    assert "parameter = " in repr(rewards)


def test_rewards_compare_with_the_valuations_own_draws_of_the_grand_coalition_and_each_party(tempered):
    """The grand coalition's and each party's own posterior draws that the reward metrics use are those the
    valuation sampled for v_N and v_i (every repeat, every chain), not a second sample of the same posteriors."""
    _, parties, _, result = tempered
    n, masks = len(parties), result.coalition_masks
    grand = int(np.flatnonzero(masks.all(axis=1))[0])
    dim = result.draws.shape[-1]
    np.testing.assert_array_equal(result.rewards.grand_draws, result.draws[grand].reshape(-1, dim))
    for party in range(n):
        own = int(np.flatnonzero((masks == np.eye(n, dtype=bool)[party]).all(axis=1))[0])
        np.testing.assert_array_equal(result.rewards.own_draws[party], result.draws[own].reshape(-1, dim))


def test_noise_addition_search_starts_from_the_grand_posterior_when_its_first_scan_trial_is_already_below():
    """Noise addition's bracket starts at tau = 0 (the grand posterior) whenever the scan's first trial already
    falls below the target, as party 2's did on Syn at epsilon_2 = 0.004 (examples/syn_rewards.py). Regula falsi
    then works in log tau from FLOOR times the bracket's upper end, as tempering's shared grid does from kappa = 0;
    it took log(0) before. On r(tau) = v_N / (1 + tau / tau_0), a target just below v_N is met within
    `max_calls`, each trial finite and positive."""
    from bayesval.parties.rewards.control import Search, _lockstep
    from bayesval.parties.rewards.sampling import Evaluation

    grand_value, tau_0, stderr, scan_start = 5.4, 1.0, 0.01, 100.0

    class CurveSampler:
        slots, calls = 4, 0

        def __init__(self):
            self.parameters = []

        def evaluate(self, inputs, parameters, stage):
            self.parameters += parameters
            self.calls += 1
            return [Evaluation(p, grand_value / (1 + p / tau_0), stderr, np.zeros((10, 2))) for p in parameters]

    mechanism = bv.rewards.NoiseAddition()
    target = 5.0  # r = 5.0 at tau = 0.08: far below the first scan trial, tau = 100
    search = Search(target, [Evaluation(0.0, grand_value, stderr, np.zeros((10, 2)))], increasing=False)
    sampler = CurveSampler()
    _lockstep(mechanism, sampler, [search], lambda search, tau: None, scan_start=scan_start)
    assert sampler.parameters[0] == scan_start and grand_value / (1 + scan_start / tau_0) < target
    assert all(0 < p < math.inf for p in sampler.parameters)
    assert search.reached and abs(search.accepted.value - target) <= mechanism.z * stderr
    assert search.calls <= mechanism.max_calls


def test_tempering_search_shares_its_first_round_and_lands_each_target_in_the_second():
    """r(kappa) is one curve for every party under tempering, so the first round splits (0, 1) into one log grid of
    distinct kappa (no two parties spending slots on the same trial), and the second puts regula falsi and its
    +-2 tolerance neighbours inside each bracket. On a curve shaped like Syn's (r about linear in log kappa below
    0.1, flattening towards v_N) the targets of three searched parties, from 3 nats to near v_N, land within two
    sampler calls."""
    from types import SimpleNamespace

    from bayesval.parties.rewards.sampling import Evaluation

    grand_value, knee, stderr = 5.4, 1e-5, 0.01

    def r(kappa):
        return grand_value * math.log1p(kappa / knee) / math.log1p(1 / knee)

    class CurveSampler:
        """Evaluates r exactly, with a standard error as three repeats of the valuation's batch would have."""

        slots, calls = 7, 0
        data = SimpleNamespace(tempered=lambda kappa: kappa)
        rounds = []

        def evaluate(self, inputs, parameters, stage):
            self.rounds.append(list(parameters))
            self.calls += 1
            return [Evaluation(p, r(p), stderr, np.zeros((10, 2))) for p in parameters]

    targets = [3.0, 4.4, 5.1]
    sampler = CurveSampler()
    grand = Evaluation(1.0, grand_value, stderr, np.zeros((10, 2)))
    searches = bv.rewards.Tempering().solve(sampler, targets, grand)
    first = sampler.rounds[0]
    assert len(first) == len(set(first)) == sampler.slots
    np.testing.assert_allclose(np.diff(np.log(first)), np.log(1e3) / (sampler.slots + 1))  # from 1e-3 to 1
    assert [search.calls for search in searches] == [2] * len(targets) and sampler.calls == 2
    for search in searches:
        assert search.reached and abs(search.accepted.value - search.target) <= 2 * stderr


def test_a_valuation_whose_numbers_leave_the_targets_undefined_is_kept_without_rewards(syn_parties, monkeypatch):
    """Every Shapley value 0, or an estimated v_N below 0 (releases that carry nothing), leaves r*_i undefined
    (`UndefinedTargets`); a valuation asked for rewards then warns and returns its values without them, where it
    raised after the sampling and lost them (and the CLI's --save, which comes after the rewards)."""
    from bayesval.parties.rewards import UndefinedTargets, allocation

    with pytest.raises(UndefinedTargets, match="every value is 0"):
        rho_shapley_targets([0.0, 0.0], 1.0, 0.5)
    with pytest.raises(UndefinedTargets, match=r"grand_value \(v_N, a KL divergence\) must be >= 0"):
        rho_shapley_targets([1.0, 2.0], -0.01, 0.5)
    real = allocation.rho_shapley_targets
    monkeypatch.setattr(allocation, "rho_shapley_targets", lambda phi, grand, rho: real(phi, -0.01, rho))
    with pytest.warns(UserWarning, match=r"no rewards: grand_value .* the valuation is returned without them"):
        result = bv.valuate(
            bv.models.LinearRegression(), syn_parties(seeds=(64, 65, 66)), config=BUDGET, rewards="tempering"
        )
    assert result.rewards is None and np.isfinite(result.values).all()
