"""The party path's route without chains (docs/importance.md): Pareto-smoothed importance sampling from each
coalition's Laplace fit, checked against the closed-form KL at negligible noise, against today's Gibbs chains at Syn's
noise, and falling back to MCMC where it cannot be trusted or the model does not offer it."""

import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import bayesval as bv
from bayesval.divergence import nig_kl
from bayesval.games.shapley import coalition_masks
from bayesval.inference.data import NoiseAwareData
from bayesval.inference.importance import ImportanceDraws
from bayesval.inference.psis import k_hat_threshold, pareto_smoothed, tail_length
from bayesval.parties import importance, release_all
from bayesval.parties.keys import rerun_key
from bayesval.parties.surprise import CoalitionSurprise, per_repeat

# 2 repeats of 2,048 draws: the importance route draws `draws_per_repeat` weighted draws a repeat, here as many as at
# the fast preset (`importance.IMPORTANCE_DRAWS`), so that its row programs serve the tests at that preset too
CONFIG = bv.SamplerConfig(num_chains=1, num_warmup=100, num_samples=2048, num_repeats=2, progress_bar=False)


def _normal_ratio(scale: float, size: int, seed: int) -> np.ndarray:
    """log weights of N(0, scale^2) against draws of N(0, 1): their tail has Pareto shape 1 - 1 / scale^2."""
    draws = np.random.default_rng(seed).standard_normal(size)
    return -0.5 * draws**2 / scale**2 - np.log(scale) + 0.5 * draws**2


def _arviz_psis(log_weights: np.ndarray) -> tuple[np.ndarray, float, float, float]:
    """ArviZ's Pareto-smoothed log weights (normalised) and k-hat, and how closely ours must match each: up to ArviZ
    0.x `arviz.psislw`, the same algorithm, to 1e-9. From ArviZ 1.x (Python 3.12 and newer) its replacement, the
    array backend of arviz-stats, takes log likelihoods (the negated log ratios) and fits the generalised Pareto tail
    with other details: on these tails its k-hat was within 0.011 of ours and its log weights within 0.026
    (measured with ArviZ 1.3), so there the test allows 0.02 and 0.05."""
    arviz = pytest.importorskip("arviz")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if int(arviz.__version__.split(".")[0]) < 1:
            return (*arviz.psislw(log_weights.copy(), reff=1.0), 1e-9, 1e-9)
        from arviz_stats.base import array_stats

        smoothed, k_hat = array_stats.psislw(-log_weights, r_eff=1.0)
        return smoothed, k_hat, 0.02, 0.05


@pytest.mark.parametrize("scale", [1.2, 1.5, 2.0])
def test_pareto_smoothing_matches_arviz(scale):
    log_weights = _normal_ratio(scale, 4000, seed=int(10 * scale))
    smoothed, k_hat = pareto_smoothed(jnp.asarray(log_weights))
    reference, reference_k, k_tolerance, tolerance = _arviz_psis(log_weights)
    smoothed = np.asarray(smoothed) - np.logaddexp.reduce(np.asarray(smoothed))
    assert float(k_hat) == pytest.approx(float(reference_k), abs=k_tolerance)
    np.testing.assert_allclose(smoothed, reference, atol=tolerance)


def test_k_hat_tells_bounded_from_infinite_variance_weights():
    """Weights of a wider proposal are bounded (k-hat < 0.5); of a proposal narrower than half the target's scale
    they have infinite variance (shape 1 - 1/4 = 0.75 > 0.7): over 20,000 draws and 4 seeds."""
    bounded = [float(pareto_smoothed(jnp.asarray(_normal_ratio(0.8, 20_000, seed)))[1]) for seed in range(4)]
    heavy = [float(pareto_smoothed(jnp.asarray(_normal_ratio(2.0, 20_000, seed)))[1]) for seed in range(4)]
    assert max(bounded) < 0.5
    assert np.mean(heavy) == pytest.approx(0.75, abs=0.08) and min(heavy) > k_hat_threshold(20_000) - 0.1
    assert k_hat_threshold(4000) == 0.7 and k_hat_threshold(100) == 0.5 and tail_length(4000) == 190


def test_equal_weights_are_left_alone():
    smoothed, k_hat = pareto_smoothed(jnp.zeros(100))
    assert float(k_hat) == -np.inf and np.array_equal(np.asarray(smoothed), np.zeros(100))


def _syn_data(syn, epsilons):
    parties = [
        bv.Party(X, y, epsilon=eps, rdp_order=2.0, bounds=syn.bounds, name=f"party {i + 1}", noise_seed=900 + i)
        for i, ((X, y), eps) in enumerate(zip(syn.parties, epsilons))
    ]
    return parties, NoiseAwareData.from_releases(release_all(bv.models.LinearRegression(), parties))


def test_negligible_noise_gives_the_closed_form_kl(syn):
    """At epsilon = 1e7 every coalition of Syn is within 1 % of the closed-form KL of its exact-statistics NIG
    posterior, from importance draws alone (k-hat below the threshold)."""
    parties, data = _syn_data(syn, (1e7,) * 3)
    masks = coalition_masks(3)
    game = CoalitionSurprise(bv.models.LinearRegression(), data, CONFIG, 4, jax.random.key(0), 7, surprise="importance")
    values = game(masks).mean(axis=0)
    model = bv.models.LinearRegression()
    for mask, value in zip(masks, values):
        members = [p for p, member in zip(parties, mask) if member]
        statistic, count = sum(p.exact_statistic() for p in members), sum(len(p.X) for p in members)
        closed = nig_kl(model.exact_posterior(statistic, count, 2), model.priors(2).model)
        assert value == pytest.approx(closed, rel=0.01), mask
    assert game.diagnostics["route"] == ["importance"] * 7
    assert max(game.diagnostics["k_hat"]) <= 0.7


# where a test's coalitions fall back to the chains: Algorithm 1 as printed, the quickest sweep program to compile (the
# importance route's programs do not depend on the moves)
QUICK_CHAINS = dict(collapsed_moves=0)


class _Untrusted(bv.models.LinearRegression):
    """LinearRegression whose importance draws of the first row of each call report an unconverged fit."""

    def __init__(self) -> None:
        super().__init__(**QUICK_CHAINS)

    def importance_draws(self, keys, data, masks, num_draws, attempt=0):
        out = super().importance_draws(keys, data, masks, num_draws, attempt)
        return out._replace(converged=np.arange(len(out.converged)) > 0)


class _NoStructure(bv.models.LinearRegression):
    """A linear regression without the importance route (as any user model)."""

    importance_draws = None


# a short chain of CONFIG's 2,048 draws a repeat, so that the importance route's programs are CONFIG's
SMOKE = CONFIG.with_(num_warmup=50, reruns=0)


def test_an_untrusted_coalition_is_sampled_by_mcmc(syn):
    """The row whose fit did not converge sends its coalition, and only it, to the chains, with its k-hat kept."""
    _, data = _syn_data(syn, (0.5, 0.5, 0.5))
    masks = coalition_masks(3)[:2]
    game = CoalitionSurprise(_Untrusted(), data, SMOKE, 4, jax.random.key(1), 2, surprise="importance")
    game(masks)
    assert game.diagnostics["route"] == ["mcmc, after importance", "importance"]
    assert np.isfinite(game.diagnostics["k_hat"]).all()
    assert game.diagnostics["coalitions"] == [[1, 0, 0], [0, 1, 0]]


class _UntrustedAtFirst(bv.models.LinearRegression):
    """LinearRegression whose importance draws report unconverged fits in its first `failing` calls, and which
    records the attempt each call was drawn at."""

    def __init__(self, failing: int) -> None:
        super().__init__(**QUICK_CHAINS)
        self.failing, self.attempts = failing, []

    def importance_draws(self, keys, data, masks, num_draws, attempt=0):
        out = super().importance_draws(keys, data, masks, num_draws, attempt)
        self.attempts.append(attempt)
        return out._replace(converged=np.full(len(out.converged), len(self.attempts) > self.failing))


@pytest.mark.parametrize("failing", [3, 5])
def test_an_untrusted_coalition_is_drawn_again_from_fresh_keys_before_the_chains(syn, failing):
    """A coalition still untrusted after the reruns is drawn again up to UNTRUSTED_RETRIES times from the keys of the
    next attempts at the last rerun's inner draws (the model's attempt stays the reruns'), and goes to the chains
    only where every retry fails too."""
    _, data = _syn_data(syn, (0.5, 0.5, 0.5))
    model = _UntrustedAtFirst(failing)
    game = CoalitionSurprise(model, data, CONFIG, 4, jax.random.key(3), 1, surprise="importance")
    game(coalition_masks(3)[:1])
    reruns = importance.RERUNS_PER_CHAIN_RERUN * CONFIG.reruns
    assert reruns == 2 and importance.UNTRUSTED_RETRIES == 2
    drawn = min(failing + 1, reruns + importance.UNTRUSTED_RETRIES + 1)  # the first attempt, its reruns and retries
    assert model.attempts == [min(attempt, reruns) for attempt in range(drawn)]
    if failing < drawn:
        assert game.diagnostics["route"] == ["importance"] and game.diagnostics["reruns"] == [failing]
        retry = game.importance.coalitions(rerun_key(game.key_posterior, failing), [1], data, 2, failing)
        np.testing.assert_allclose(game.values[1], retry.kl[0], rtol=1e-12)
    else:
        assert game.diagnostics["route"] == ["mcmc, after importance"]


def test_k_hat_over_the_threshold_sends_coalitions_to_mcmc(syn, monkeypatch):
    """Any coalition whose k-hat passes the threshold is sampled by the chains (here a threshold below every
    k-hat)."""
    monkeypatch.setattr(importance, "k_hat_threshold", lambda num_draws: -np.inf)
    _, data = _syn_data(syn, (0.5, 0.5, 0.5))
    model = bv.models.LinearRegression(**QUICK_CHAINS)
    game = CoalitionSurprise(model, data, SMOKE, 4, jax.random.key(2), 1, surprise="importance")
    game(coalition_masks(3)[:1])
    assert game.diagnostics["route"] == ["mcmc, after importance"] and game.num_sampled == 1


def test_a_model_without_the_structure_keeps_the_chains_with_a_note(syn):
    _, data = _syn_data(syn, (0.5, 0.5, 0.5))
    with pytest.warns(UserWarning, match="surprise='importance': .* offers no importance_draws"):
        game = CoalitionSurprise(_NoStructure(), data, SMOKE, 4, jax.random.key(3), 1, surprise="importance")
    assert "offers no importance_draws" in game.diagnostics["surprise_note"] and game.importance is None
    with pytest.warns(UserWarning, match="kl='two-sample' reads MCMC chains"):
        CoalitionSurprise(
            bv.models.LinearRegression(), data, SMOKE, 4, jax.random.key(3), 1, kl="two-sample", surprise="importance"
        )
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # 'auto' keeps the chains, without a note
        quiet = CoalitionSurprise(_NoStructure(), data, SMOKE, 4, jax.random.key(3), 1, surprise="auto")
    assert quiet.importance is None and "surprise_note" not in quiet.diagnostics and "route" not in quiet.diagnostics


def test_auto_takes_importance_where_coalitions_are_sampled_and_keeps_the_chains_where_enumerated(syn):
    """The default takes the route where the Shapley values are sampled at a budget where it pays (at 12 parties it
    agreed with the exact values in a third of the chains' time, docs/importance.md) and keeps the chains where every
    coalition is enumerated (the demo's values do not move) or the chains are short; where the model cannot take it,
    a sampled game keeps the chains with the note in its diagnostics and no warning."""
    _, data = _syn_data(syn, (0.5, 0.5, 0.5))
    six = NoiseAwareData(*(np.concatenate([p, p]) for p in data))
    fast = bv.SamplerConfig.preset("fast", "gibbs")
    model = bv.models.LinearRegression()
    assert CoalitionSurprise(model, six, fast, 4, jax.random.key(3), 1, surprise="auto").importance is None
    sampled = CoalitionSurprise(model, six, fast, 4, jax.random.key(3), 1, surprise="auto", sampled=True)
    assert sampled.importance.num_draws == importance.IMPORTANCE_DRAWS and sampled.game.route == "importance"
    assert "surprise_note" not in sampled.diagnostics
    forced = CoalitionSurprise(model, six, fast, 4, jax.random.key(3), 1, surprise="mcmc", sampled=True)
    assert forced.importance is None
    # at a smoke test's budget (2 x 300 x 2 = 1,200 chain-sweeps a coalition) the chains cost less: they stay
    smoke = fast.with_(num_chains=2, num_warmup=100, num_samples=200, num_repeats=2)
    assert not importance.pays(smoke) and importance.pays(smoke.with_(num_samples=900))
    assert (
        CoalitionSurprise(model, six, smoke, 4, jax.random.key(3), 1, surprise="auto", sampled=True).importance is None
    )
    asked = CoalitionSurprise(model, six, smoke, 4, jax.random.key(3), 1, surprise="importance")
    assert asked.importance is not None
    # its estimates are not the chains': a result of one route never resumes or merges with the other's
    assert sampled.fingerprint != forced.fingerprint
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        plain = CoalitionSurprise(_NoStructure(), six, fast, 4, jax.random.key(3), 1, surprise="auto", sampled=True)
    assert plain.importance is None and "offers no importance_draws" in plain.diagnostics["surprise_note"]
    assert bv.valuate.__kwdefaults__["surprise"] is None  # None: 'auto'


def test_the_programs_a_call_names_are_the_ones_it_calls(syn, lowered):
    """`importance_programs` names the fit and row programs a call of `importance_draws` calls, to the last type:
    compiled from their `Program`s first, the call compiles none of them again (a program named with other types
    would compile twice, once ahead and once in the call)."""
    _, data = _syn_data(syn, (0.5, 0.5, 0.5))
    model = bv.models.LinearRegression()
    keys, masks = jax.random.split(jax.random.key(4), 2), coalition_masks(3)[[2, 2]]
    rows = NoiseAwareData.per_row([data, data])
    programs = model.importance_programs(keys, rows, masks, 2048, 0)
    assert [program.function.__name__ for program in programs] == ["_mode", "_release_start", "_row_draws"]
    for program in programs:
        program.compile()
    before = len(lowered())
    model.importance_draws(keys, rows, masks, 2048, 0)
    called = {name for name, _ in lowered()[before:]}
    assert not {"jit(_mode)", "jit(_release_start)", "jit(_row_draws)"} & called


def test_each_widths_programs_are_compiled_ahead_once_while_the_widths_before_it_are_drawn(monkeypatch):
    """The executor asks the model for the programs of every width of a call but the first, once a process for each
    width and attempt, and waits for a width's before drawing its rows: rows of 2, 4 and 6 party slots of 6 parties
    (a model whose draws are standard normal)."""
    named, waited, drawn = [], [], []

    def programs(keys, data, masks, num_draws, attempt):
        named.append((masks.shape[1], attempt))
        return []

    def draw(keys, data, masks, num_draws, attempt):
        drawn.append(masks.shape[1])
        draws = np.asarray(jax.random.normal(jax.random.key(0), (len(masks), num_draws, 3)))
        ones = np.ones(len(masks))
        return bv.inference.importance.ImportanceDraws(draws, 0 * ones, 1000 * ones, ones > 0, 0 * ones)

    monkeypatch.setattr(importance, "_compiled", lambda future: waited.append((len(drawn), future is not None)))
    log_density = jax.tree_util.Partial(lambda theta: -0.5 * theta @ theta)  # a standard normal prior's
    executor = importance.ImportanceExecutor(draw, 6, CONFIG, 4, log_density, programs)
    data = NoiseAwareData(np.zeros((6, 5)), np.full(6, 100.0), np.ones(6))
    masks = np.eye(6, dtype=bool)[[0, 0, 1]] | np.eye(6, dtype=bool)[[0, 2, 3]]  # members 1, 2 and 2 (width 2)
    masks = np.concatenate([masks, [np.arange(6) < 3], np.ones((1, 6), bool)])  # 3 members (width 4), 6 (width 6)
    keys = jax.random.split(jax.random.key(1), len(masks))
    for attempt in (0, 0, 1):
        executor.run(keys, masks, data, attempt)
    assert named == [(4, 0), (6, 0), (4, 1), (6, 1)]
    assert drawn == [2, 4, 6] * 3
    # each width waited for before its rows were drawn: the first width of a call on nothing, the others on their
    # programs, started in the first call of the attempt
    assert waited == [(calls, calls % 3 > 0) for calls in range(9)]


def test_a_rerun_is_filed_over_the_rows_before():
    """A rerun's rows replace the coalitions drawn again, every part, and no other row, as a chain's rerun does."""
    rows = importance.ImportanceRows(
        np.array([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]]),
        np.array([[0.1, 0.2], [0.8, 0.4], [0.5, 0.6]]),
        np.array([[300.0, 500.0], [200.0, 250.0], [900.0, 900.0]]),
        np.array([[0.1, 0.4], [0.2, 0.2], [0.1, 0.1]]),
        np.array([[True, True], [False, True], [True, True]]),
    )
    rerun = importance.ImportanceRows(
        np.array([[2.0, 4.0], [6.0, 7.0]]),
        np.array([[0.3, 0.1], [0.2, 0.3]]),
        np.array([[650.0, 450.0], [800.0, 700.0]]),
        np.array([[0.05, 0.1], [0.1, 0.1]]),
        np.array([[True, True], [True, True]]),
    )
    replaced = rows.replaced(np.array([0, 1]), rerun)
    np.testing.assert_array_equal(replaced.kl, [[2.0, 4.0], [6.0, 7.0], [5.0, 6.0]])
    np.testing.assert_array_equal(replaced.k_hat, [[0.3, 0.1], [0.2, 0.3], [0.5, 0.6]])
    np.testing.assert_array_equal(replaced.ess, [[650.0, 450.0], [800.0, 700.0], [900.0, 900.0]])
    np.testing.assert_array_equal(replaced.noise_spread, [[0.05, 0.1], [0.1, 0.1], [0.1, 0.1]])
    assert replaced.trusted.all()
    assert rows.kl[0, 0] == 1.0 and not rows.trusted[1, 0]  # the rows before are left as they were


def test_a_coalition_short_of_effective_draws_is_drawn_again_with_closer_likelihoods(syn, monkeypatch):
    """Where a repeat's weights are worth fewer than the chains' 400 effective draws (here: a threshold every
    coalition falls short of), a rerun draws the coalition again from the rerun key of its attempt, each member's
    likelihood from RERUN_INNER times the inner draws, twice for the chains' one rerun, and the last rerun's estimates
    replace the ones before, recorded as the rerun that drew them."""
    _, data = _syn_data(syn, (0.5, 0.5, 0.5))
    # 2,047 effective draws of 2,048: every coalition falls short, though its draws could hold them
    monkeypatch.setattr(importance, "ESS_THRESHOLD", CONFIG.draws_per_repeat - 1)
    masks, codes = coalition_masks(3)[:2], [1, 2]
    game = CoalitionSurprise(bv.models.LinearRegression(), data, CONFIG, 4, jax.random.key(5), 2, surprise="importance")
    game(masks)
    last = importance.RERUNS_PER_CHAIN_RERUN * CONFIG.reruns
    assert last == 2 and game.importance.reruns == last
    assert game.diagnostics["route"] == ["importance"] * 2 and game.diagnostics["reruns"] == [last] * 2
    executor = game.importance
    first = executor.coalitions(game.key_posterior, codes, data, CONFIG.num_repeats)
    rerun = executor.coalitions(rerun_key(game.key_posterior, last), codes, data, CONFIG.num_repeats, attempt=last)
    for row, code in enumerate(codes):
        np.testing.assert_allclose(game.values[code], rerun.kl[row], rtol=1e-12)
        assert not np.allclose(rerun.kl[row], first.kl[row])
        assert game.diagnostics["ess"][row] == pytest.approx(np.min(rerun.ess[row]))
    # closer likelihoods: the rerun's weights hold more effective draws, and are more evenly noisy, than the first's
    assert rerun.ess.mean() > first.ess.mean()
    assert rerun.noise_spread.mean() < first.noise_spread.mean()


def _drawn_from_the_prior(model, data, effective, attempts):
    """A model's `importance_draws` that records the attempt of each call and gives each row prior draws, trusted
    (k-hat 0.1, converged), with `effective(num_draws)` effective draws: the reruns' rule alone decides what is
    drawn again."""

    def draw(keys, rows, masks, num_draws, attempt):
        attempts.append(attempt)
        theta = np.stack([model.prior_draws(key, data, num_draws) for key in keys])
        ones = np.ones(len(keys))
        return ImportanceDraws(theta, 0.1 * ones, effective(num_draws) * ones, ones.astype(bool), 0.0 * ones)

    return draw


def test_reruns_ask_for_the_effective_draws_a_row_can_hold_and_no_more_inner_draws_than_measured(syn):
    """A row's effective draws are at most its draws. At 200 draws a repeat (here 180 effective) no rerun can raise
    them to the chains' 400, so none is drawn (the flag marks the coalition, as it marks the chains' at that budget);
    at 2,048 draws a repeat of 300 effective draws is drawn again as often as the reruns allow, and past the route's
    reruns for the chains' first the model's attempt, which sets the inner draws, stays MOST_INNER_ATTEMPT."""
    _, data = _syn_data(syn, (0.5, 0.5, 0.5))
    model = bv.models.LinearRegression()
    log_density = model.prior_log_density(data)
    codes = [1, 6]
    for config, effective, expected, last_rerun in (
        (CONFIG.with_(num_samples=200), lambda draws: 0.9 * draws, [0], 0),
        (CONFIG.with_(reruns=3), lambda draws: 300, [0, 1, 2, 2, 2, 2, 2], 6),
    ):
        attempts = []
        draw = _drawn_from_the_prior(model, data, effective, attempts)
        executor = importance.ImportanceExecutor(draw, 3, config, 4, log_density)
        done, reruns = executor.until_effective(jax.random.key(0), codes, data)
        assert attempts == expected, attempts
        assert list(reruns) == [last_rerun] * len(codes)
        assert (done.ess < importance.ESS_THRESHOLD).all() and done.trusted.all()
    assert importance.MOST_INNER_ATTEMPT == 2 == importance.RERUNS_PER_CHAIN_RERUN


def test_a_coalition_noisy_unevenly_over_theta_is_drawn_again(syn, monkeypatch):
    """A coalition whose estimated likelihoods are noisy unevenly over theta in some repeat (spread above
    NOISE_SPREAD: here a threshold both first attempts exceed and their reruns do not) is drawn again though its
    effective draws and k-hat pass, and the rerun's estimates are kept; at today's threshold Syn's coalitions pass
    (first attempts spread 0.18-0.31 at epsilon 0.5) and are not drawn again."""
    _, data = _syn_data(syn, (0.5, 0.5, 0.5))
    codes = [1, 3]
    game = CoalitionSurprise(bv.models.LinearRegression(), data, CONFIG, 4, jax.random.key(5), 2, surprise="importance")
    executor = game.importance
    first = executor.coalitions(game.key_posterior, codes, data, CONFIG.num_repeats)
    rerun = executor.coalitions(rerun_key(game.key_posterior, 1), codes, data, CONFIG.num_repeats, attempt=1)
    assert first.trusted.all() and first.ess.min() >= importance.ESS_THRESHOLD
    assert first.noise_spread.max() < importance.NOISE_SPREAD
    done, reruns = executor.until_effective(game.key_posterior, codes, data)
    assert reruns.tolist() == [0, 0]
    threshold = 0.5 * (first.noise_spread.min() + rerun.noise_spread.max())
    assert rerun.noise_spread.max() < threshold < first.noise_spread.min()
    monkeypatch.setattr(importance, "NOISE_SPREAD", threshold)
    done, reruns = executor.until_effective(game.key_posterior, codes, data)
    assert reruns.tolist() == [1, 1]
    np.testing.assert_allclose(done.kl, rerun.kl, rtol=1e-12)


@pytest.mark.parametrize("scale, inner_draws", [(0.5, 8), (0.7, 32)])
def test_likelihood_noise_is_the_variance_of_the_estimated_log_likelihood(rng, scale, inner_draws):
    """`likelihood_noise` at a theta is the variance of log L-hat, the sum over members of the log of each one's mean
    of K inner weights: on log-normal inner weights (each member's of its own spread) it matches the spread of log
    L-hat over 20,000 independent thetas, and the delta method's closed form sum_i (e^(s_i^2) - 1) / K, within 15 %;
    a non-member (weights 0 in the log) adds nothing. (Where the weights are heavier-tailed than here, K of them
    under-read their second moment, and the estimate falls below the spread: 0.21 against 0.34 at s = 1.5, K = 16.)"""
    from bayesval.inference.importance import likelihood_noise

    spreads = scale * np.array([0.5, 1.0, 0.0])  # the third party is not a member
    log_inner = rng.normal(size=(20_000, inner_draws, 3)) * spreads + np.array([-3.0, 2.0, 0.0])
    log_likelihood = np.log(np.exp(log_inner).mean(axis=1)).sum(axis=1)
    noise = np.asarray(likelihood_noise(jnp.asarray(log_inner)))
    closed_form = np.sum(np.expm1(spreads**2)) / inner_draws
    assert noise.mean() == pytest.approx(log_likelihood.var(), rel=0.15)
    assert noise.mean() == pytest.approx(closed_form, rel=0.15)
    assert np.asarray(likelihood_noise(jnp.zeros((5, inner_draws, 3)))) == pytest.approx(0.0)


@pytest.fixture(scope="module")
def twelve():
    """12 Syn parties of 100 points at epsilon 0.5, released for `LinearRegression`."""
    from bayesval.datasets.synthetic import make_syn

    syn = make_syn(seed=0, sizes=(100,) * 12)
    parties = [
        bv.Party(X, y, epsilon=0.5, bounds=syn.bounds, name=f"p{i}", noise_seed=100 + i)
        for i, (X, y) in enumerate(syn.parties)
    ]
    return NoiseAwareData.from_releases(release_all(bv.models.LinearRegression(), parties))


def test_a_wide_coalition_draws_each_members_data_model_more_times(twelve, monkeypatch):
    """The inner draws follow the party slots of a row (`inner_draw_count`: one per 3 slots, at least 4), because
    the noise of the members' estimated likelihoods adds up over the members: 11 members of 12 parties (epsilon 0.5)
    at 8 draws hold well more effective draws than at 4, on the same keys."""
    from bayesval.inference import importance as draws

    model = bv.models.LinearRegression()
    assert [draws.inner_draw_count(width) for width in (3, 4, 12, 17, 24, 34, 50)] == [4, 4, 4, 6, 8, 12, 18]
    assert draws.inner_draw_count(24, attempt=1) == 8 * draws.RERUN_INNER
    masks = np.ones((3, 12), bool)
    masks[:, 0] = False
    keys = jax.random.split(jax.random.key(3), 3)
    rows = NoiseAwareData.per_row([twelve] * 3)
    monkeypatch.setattr(draws, "MEMBERS_PER_INNER_DRAW", 1.5)  # 8 draws at 12 slots
    wide = model.importance_draws(keys, rows, masks, 1024)
    monkeypatch.setattr(draws, "MEMBERS_PER_INNER_DRAW", np.inf)  # every width at the fewest, 4
    assert draws.inner_draw_count(12) == draws.INNER_DRAWS
    few = model.importance_draws(keys, rows, masks, 1024)
    assert wide.ess.mean() > 1.3 * few.ess.mean(), (wide.ess, few.ess)


@pytest.mark.parametrize("widened", [True, False])
def test_each_members_inner_weights_have_a_variance(twelve, monkeypatch, widened):
    """A member's likelihood is estimated by the mean of its K inner weights, an estimate with a variance only where
    their tail is lighter than Pareto shape 0.5. At the adapted proposal of 11 of 12 parties' members, 4,000 inner
    draws at each of 8 theta draws: with the data models' spread widened OMEGA_INFLATE times over the Bessel-corrected
    weighted conditional, the weights' Pareto k-hat is at most 0.5 for nine in ten members and theta draws (median
    about 0.1); at sqrt(3 / 4) of it, the spread K = 4 inner draws leave without Bessel's correction, it is not."""
    from bayesval.inference import importance as draws
    from bayesval.inference.laplace import coalition_terms

    if not widened:
        monkeypatch.setattr(draws, "OMEGA_INFLATE", np.sqrt(3 / 4))
    model = bv.models.LinearRegression()
    priors, statistic = model.priors(2), model.statistic(2)
    mask = np.arange(12) > 0
    mode = draws.joint_mode(twelve, mask, priors.model, priors.data, statistic)
    terms = coalition_terms(twelve, priors.model, priors.data, statistic)

    @jax.jit
    def member_k_hats(key):
        key_adapt, key_theta, key_white = jax.random.split(key, 3)
        modes = jax.tree.map(lambda part: part[None], mode)
        proposal = draws.adapted_draws(key_adapt, terms, jnp.asarray(mask), modes, 2048, 4)[0].component(0)
        thetas = proposal.centre + jax.random.normal(key_theta, (8, terms.theta_dim)) @ proposal.chol.T
        white = jax.random.normal(key_white, (8, 4000, 12, proposal.omega_centre.shape[1]))
        log_inner = jax.vmap(lambda theta, w: draws.log_inner_weights(terms, mask, proposal, theta, w))(thetas, white)
        member_weights = jnp.moveaxis(log_inner[..., 1:], 1, -1).reshape(-1, 4000)  # (8 x 11, 4,000)
        return jax.vmap(lambda weights: pareto_smoothed(weights)[1])(member_weights)

    k_hats = np.asarray(member_k_hats(jax.random.key(0)))
    if widened:
        assert np.quantile(k_hats, 0.9) < 0.5 and np.median(k_hats) < 0.25, k_hats
    else:
        assert np.median(k_hats) > 0.25 and np.quantile(k_hats, 0.9) > 0.5, k_hats


def test_a_fit_that_fails_from_the_priors_mode_starts_again_from_the_releases(syn, monkeypatch):
    """Where the steps from the prior's mode fail (here: both fits from there reported unconverged), the fit starts
    again from the mode of the NIG posterior of the members' releases taken as exact statistics, which the data
    place, and converges to the mode the steps from the prior's mode reach where they converge."""
    from bayesval.inference import importance as draws
    from bayesval.inference import laplace

    _, data = _syn_data(syn, (0.5, 0.5, 0.5))
    model = bv.models.LinearRegression()
    priors, statistic = model.priors(2), model.statistic(2)
    mask = np.array([True, True, False])
    prior_start = np.append(priors.model.mean, np.log(priors.model.scale / (priors.model.shape + 1)))
    converged = draws.joint_mode(data, mask, priors.model, priors.data, statistic)
    assert converged.gradient <= laplace.CONVERGED
    fit, starts = draws._mode, []

    def failing_from_the_prior(data, mask, prior, data_prior, statistic, theta_start, profiled):
        starts.append((np.asarray(theta_start), bool(profiled)))
        mode = fit(data, mask, prior, data_prior, statistic, theta_start, profiled)
        return mode._replace(gradient=np.inf) if len(starts) <= 2 else mode

    monkeypatch.setattr(draws, "_mode", failing_from_the_prior)
    again = draws.joint_mode(data, mask, priors.model, priors.data, statistic)
    assert [profiled for _, profiled in starts] == [False, True, False]
    np.testing.assert_allclose(starts[0][0], prior_start)
    np.testing.assert_allclose(starts[1][0], prior_start)
    release_start = laplace.coalition_terms(data, priors.model, priors.data, statistic).release_start(mask)
    np.testing.assert_allclose(starts[2][0], release_start)
    assert np.abs(starts[2][0] - prior_start).max() > 0.5  # a start of its own
    assert again.gradient <= laplace.CONVERGED
    np.testing.assert_allclose(again.theta, converged.theta, atol=1e-5)


def _syn_members_of_24(members: list[int]):
    """The releases of `members` of 24 Syn parties of 100 points at epsilon 0.5 (noise seeds 100 + i, as
    benchmarks/bench_scale.py releases them), and `LinearRegression`'s priors and statistic."""
    from bayesval.datasets.synthetic import make_syn

    syn = make_syn(seed=0, sizes=(100,) * 24)
    releases = [
        bv.Party(*syn.parties[i], epsilon=0.5, bounds=syn.bounds, name=f"p{i}", noise_seed=100 + i).release()
        for i in members
    ]
    model = bv.models.LinearRegression()
    return NoiseAwareData.from_releases(releases), model.priors(2), model.statistic(2)


def test_a_fit_the_data_models_led_astray_is_replaced_by_the_profiled_one():
    """Six of 24 Syn parties at epsilon 0.5 (docs/benchmarks.md, "Modes the data models made"): from the prior's
    mode with each data model at its own release's mode, the steps converge to a mode where the data models explain
    the releases in theta's place, 26 nats above the coalition's highest; with the data models first moved to their
    modes given theta (the profiled start) they reach the highest, and the coalition's fit is that one."""
    from bayesval.inference import importance as draws
    from bayesval.inference import laplace

    data, priors, statistic = _syn_members_of_24([3, 6, 9, 11, 18, 23])
    mask = np.ones(data.counts.shape[0], bool)
    start = laplace.prior_start(priors.model)
    plain = draws._mode(data, mask, priors.model, priors.data, statistic, start, False)
    profiled = draws._mode(data, mask, priors.model, priors.data, statistic, start, True)
    chosen = draws.joint_mode(data, mask, priors.model, priors.data, statistic)
    assert plain.gradient <= laplace.CONVERGED and profiled.gradient <= laplace.CONVERGED  # two modes
    assert float(plain.potential) > float(profiled.potential) + 20.0
    np.testing.assert_array_equal(chosen.theta, profiled.theta)
    assert float(chosen.theta[0]) > 0 and float(plain.theta[0]) < 0  # the first weight's sign, as the data have it


def test_a_coalition_with_two_modes_is_drawn_about_both():
    """Five of 24 Syn parties at epsilon 0.5 (docs/benchmarks.md, "Two modes of one coalition"): the fits reach two
    modes, the first two weights' signs flipped, within a nat of Laplace mass of each other. Drawn about its highest
    mode alone, as the route drew every coalition before, the resampled draws hold under a tenth of the other (0.06
    with four moves of the proposal, under 0.05 with two); drawn
    about both, each mode holds its share of the Laplace mass (about 0.32 and 0.68) within 0.1, the weights are
    trusted, and the surprise is lower by about the entropy of that split (0.63 nats), which the draws about one mode
    left out."""
    from bayesval.inference import importance as draws

    data, priors, statistic = _syn_members_of_24([6, 9, 12, 14, 23])
    mask = np.ones(data.counts.shape[0], bool)
    model = bv.models.LinearRegression()
    modes = draws.joint_modes(data, mask, priors.model, priors.data, statistic)
    assert len(modes) == 2
    first, second = (np.asarray(mode.theta) for mode in modes)
    assert np.all(np.sign(first[:2]) == -np.sign(second[:2])), (first, second)
    masses = np.array([float(draws.log_mass(mode)) for mode in modes])
    assert abs(masses[1] - masses[0]) < 1.0
    laplace_share = 1.0 / (1.0 + np.exp(masses[0] - masses[1]))  # the second mode's

    keys = jax.random.split(jax.random.key(3), 2)
    inner_draws = draws.inner_draw_count(len(mask))
    log_density = model.prior_log_density(data)
    shares, surprises = {}, {}
    for route, found in (("one", modes[:1]), ("both", modes)):
        stacked = jax.tree.map(lambda *parts: jnp.stack(parts), *found)
        rows = [
            draws._row_draws(key, data, mask, priors.model, priors.data, statistic, stacked, 1024, inner_draws)
            for key in keys
        ]
        drawn = np.stack([np.asarray(row[0]) for row in rows])
        nearer_second = np.abs(drawn[..., 0] - second[0]) < np.abs(drawn[..., 0] - first[0])
        shares[route] = nearer_second.mean()
        surprises[route] = float(np.mean(importance._kl(jnp.asarray(drawn)[:, None], 4, log_density, 50)))
        if route == "both":
            assert max(float(row[1]) for row in rows) <= k_hat_threshold(1024), [float(row[1]) for row in rows]
    assert shares["one"] < 0.1, shares
    assert abs(shares["both"] - laplace_share) < 0.1, (shares, laplace_share)
    mixing = -(laplace_share * np.log(laplace_share) + (1 - laplace_share) * np.log1p(-laplace_share))
    assert 0.5 * mixing < surprises["one"] - surprises["both"] < 1.5 * mixing, (surprises, mixing)


@pytest.mark.parametrize("num_modes", [1, 2])
def test_a_round_whose_draws_all_weigh_nothing_leaves_the_proposal_as_it_was(num_modes):
    """Where every theta draw of an adaptation round has weight 0 (log weight -inf), the moments are not numbers:
    the proposal moves nowhere, its components and their shares of the draws kept to the bit (before, a mixture's
    shares became NaN and the next round drew from no component)."""
    from bayesval.inference import importance as draws

    rng = np.random.default_rng(num_modes)
    parties, theta_dim, width, num_draws, inner = 2, 4, 5, 40, 4

    def lower(size, *lead):
        return jnp.asarray(np.tril(rng.normal(size=(*lead, size, size)), -1) + np.eye(size))

    mixture = draws._Mixture(
        draws._Proposal(
            jnp.asarray(rng.normal(size=(num_modes, theta_dim))),
            lower(theta_dim, num_modes),
            jnp.asarray(rng.normal(size=(num_modes, parties, width))),
            jnp.asarray(rng.normal(size=(num_modes, parties, width, theta_dim))),
            lower(width, num_modes, parties),
        ),
        jnp.log(jnp.asarray([1.0] if num_modes == 1 else [0.7, 0.3])),
    )
    weighted = draws._Weighted(
        jnp.asarray(rng.normal(size=(num_draws, theta_dim))),
        jnp.arange(num_draws) % num_modes,
        jnp.asarray(rng.normal(size=(num_draws, inner, parties, width))),
        jnp.asarray(rng.normal(size=(num_draws, inner, parties))),
        jnp.full(num_draws, -jnp.inf),
    )
    moved = jax.jit(draws._moments)(weighted, mixture, jnp.ones(parties, bool))
    for kept, before in zip(jax.tree.leaves(moved), jax.tree.leaves(mixture)):
        np.testing.assert_array_equal(kept, before)


def test_a_shared_data_model_offers_no_importance_draws_and_keeps_the_chains_with_the_note(syn_parties):
    """The Laplace fit models each party's data apart, so a shared data model has no importance route: 'importance'
    warns and values by the chains, and 'auto' takes the note (no warning) where the coalitions are sampled."""
    from bayesval.models.protocol import capabilities
    from bayesval.parties.importance import route

    model = bv.models.LinearRegression(shared_data_model=True, **QUICK_CHAINS)
    assert model.importance_draws is None and bv.models.LinearRegression().importance_draws is not None
    config = bv.SamplerConfig(num_chains=2, num_warmup=10, num_samples=20, num_repeats=2, progress_bar=False)
    with pytest.warns(UserWarning, match="surprise='importance': .* offers no importance_draws"):
        asked = bv.valuate(model, syn_parties(), config=config, surprise="importance")
    assert "offers no importance_draws" in asked.diagnostics["surprise_note"]
    assert np.isfinite(asked.values).all()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        takes, note = route(capabilities(model), model.name, "auto", "auto", True, bv.SamplerConfig.preset("fast"))
    assert not takes and "offers no importance_draws" in note
    assert route(capabilities(bv.models.LinearRegression()), "", "auto", "auto", True, bv.SamplerConfig.preset("fast"))[
        0
    ]


def test_an_unknown_route_is_refused_by_name(syn_parties):
    with pytest.raises(ValueError, match=r"surprise must be one of \('auto', 'importance', 'mcmc'\), got 'fast'"):
        bv.valuate(bv.models.LinearRegression(), syn_parties(), surprise="fast")


def test_realistic_noise_agrees_with_the_gibbs_chains(syn):
    """At Syn's epsilons (0.2, 0.1, 0.2) each coalition's importance estimate is within its error of today's Gibbs
    chains at the fast preset: |z| < 3.5 for each, RMS z < 2 (3 repeats each)."""
    _, data = _syn_data(syn, (0.2, 0.1, 0.2))
    masks = coalition_masks(3)
    config = bv.SamplerConfig.preset("fast", "gibbs").with_(progress_bar=False)
    values = {}
    for route in ("importance", "mcmc"):
        game = CoalitionSurprise(bv.models.LinearRegression(), data, config, 4, jax.random.key(4), 7, surprise=route)
        values[route] = per_repeat(game(masks))
        if route == "importance":
            assert "importance" in game.diagnostics["route"]
    (ours, ours_se), (gibbs, gibbs_se) = values["importance"], values["mcmc"]
    z = (ours - gibbs) / np.hypot(ours_se, gibbs_se)
    assert np.abs(z).max() < 3.5 and np.sqrt(np.mean(z**2)) < 2.0, z


def test_a_valuation_by_importance_records_its_routes_and_saves_them(syn, tmp_path):
    """`valuate(surprise='importance')`: exact Shapley values from importance draws alone, efficient (they sum to the
    grand coalition's value), with each coalition's route and k-hat in the diagnostics, kept through save and load."""
    parties, _ = _syn_data(syn, (1e7,) * 3)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        result = bv.valuate(bv.models.LinearRegression(), parties, key=0, config=CONFIG, surprise="importance")
    assert result.diagnostics["route"] == ["importance"] * 7 and len(result.diagnostics["k_hat"]) == 7
    assert result.values.sum() == pytest.approx(result.coalition_value([p.name for p in parties]), abs=1e-9)
    result.save(tmp_path / "result.npz")
    loaded = bv.ValuationResult.load(tmp_path / "result.npz")
    assert loaded.diagnostics["route"] == result.diagnostics["route"]
    np.testing.assert_allclose(loaded.diagnostics["k_hat"], result.diagnostics["k_hat"])


def test_the_rows_bar_advances_as_rows_are_drawn_and_changes_no_value(syn, monkeypatch):
    """Under a shown progress bar the importance route opens one bar a call, named by its stage, whose rows advance
    as each chunk's estimates reach the host (a valuation of 50 parties spent half an hour in one batch with no bar
    moving), and the values are those of a run without it."""
    _, data = _syn_data(syn, (0.5, 0.5, 0.5))
    bars = []

    class RecordingBar:
        def __init__(self, total, desc, disable, unit):
            self.total, self.desc, self.shown, self.updates = total, desc, not disable, []
            bars.append(self)

        def update(self, rows):
            self.updates.append(rows)

        def close(self):
            pass

    monkeypatch.setattr(importance, "tqdm", RecordingBar)
    monkeypatch.setattr(importance, "ROWS_PER_CALL", 2)  # two chunks of the call's 4 rows
    values = {}
    for shown in (True, False):
        game = CoalitionSurprise(
            bv.models.LinearRegression(),
            data,
            SMOKE.with_(progress_bar=shown),
            4,
            jax.random.key(5),
            2,
            surprise="importance",
        )
        values[shown] = game(coalition_masks(3)[:2])
    first = bars[0]
    assert first.desc == "importance draws of 2 coalition posteriors x 2 repeats [importance]" and first.shown
    assert first.total == 4 and first.updates == [2, 2]
    assert not bars[-1].shown
    np.testing.assert_array_equal(values[True], values[False])
