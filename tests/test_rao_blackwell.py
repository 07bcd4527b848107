"""The Rao-Blackwellised surprise (kl='rao-blackwell'): the KL of the mixture of the Gibbs sampler's conjugate
conditionals p(theta | s_C) against the NIG prior, checked against closed forms, Monte Carlo and the k-NN estimator."""

from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import bayesval as bv
from bayesval.divergence import batched_mixture_kl, nig_kl
from bayesval.inference.conjugate import NIG, nig_draws, nig_expected_log_density, nig_log_density
from bayesval.inference.data import NoiseAwareData
from bayesval.parties.rewards.sampling import RewardSampler
from bayesval.parties.surprise import CoalitionSurprise
from bayesval.parties.valuation import release_all

PRIOR = bv.models.syn_model_prior(2)
# At negligible noise every conditional is (nearly) the same NIG, so a short chain already gives the mixture.
SHORT = bv.SamplerConfig(num_chains=2, num_warmup=50, num_samples=100, thinning=1, num_repeats=2, progress_bar=False)


def random_nig(rng, dim=3, records=200.0) -> NIG:
    factor = rng.normal(size=(dim, dim))
    return NIG(
        jnp.asarray(rng.normal(size=dim)),
        jnp.asarray(factor @ factor.T + records * np.eye(dim)),
        jnp.asarray(5.0 + records / 2),
        jnp.asarray(rng.uniform(0.5, 2.0) * records / 2),
    )


def log_density(params: NIG, draws) -> np.ndarray:
    """log NIG(theta | params) at draws (n, D + 1)."""
    return np.asarray(jax.vmap(lambda theta: nig_log_density(params, theta[:-1], theta[-1]))(draws))


def test_expected_log_prior_density_matches_monte_carlo(rng):
    """E_{theta ~ q}[log p(theta)] of two NIGs in closed form against the mean of log p over 200,000 draws of q,
    and E_q[log q] - E_q[log p] against the closed-form KL's Monte Carlo check (tests/test_divergence.py)."""
    for q, p in ((random_nig(rng), PRIOR), (random_nig(rng, records=30.0), random_nig(rng, records=5.0))):
        draws = np.asarray(nig_draws(jax.random.key(3), q, 200_000))
        log_p = log_density(p, draws)
        expected = float(nig_expected_log_density(q, p))
        assert expected == pytest.approx(log_p.mean(), abs=4 * log_p.std() / np.sqrt(len(draws)))
        log_q = log_density(q, draws)
        assert float(nig_expected_log_density(q, q)) == pytest.approx(log_q.mean(), abs=4 * log_q.std() / 447)


def stacked(components: list[NIG], copies: int) -> NIG:
    """The components, each repeated `copies` times in turn, as one posterior of one chain: leading axes (1, 1, M)."""
    return jax.tree.map(lambda *parts: jnp.repeat(jnp.stack(parts), copies, axis=0)[None, None], *components)


def test_mixture_of_one_component_is_its_closed_form_kl(rng):
    """Identical components: the mixture is that NIG and the spread term is exactly 0, whatever the key."""
    component = random_nig(rng)
    keys = jax.random.split(jax.random.key(0), 1)
    kl = batched_mixture_kl(keys, stacked([component], 300), np.ones((1, 1), bool), PRIOR)
    assert float(kl[0]) == pytest.approx(nig_kl(component, PRIOR), rel=1e-10)


def test_mixture_kl_matches_monte_carlo_of_the_exact_mixture(rng):
    """Four distinct, overlapping NIGs, 256 copies each: the estimate against KL(q || p) by Monte Carlo with the
    mixture's exact density (400,000 draws). The mixture's entropy is far from any one component's, so the
    spread term is tested, and the estimate lies below the mean of the components' KLs."""
    centre = random_nig(rng, records=60.0)
    components = [centre._replace(mean=centre.mean + 0.15 * rng.normal(size=3)) for _ in range(4)]
    keys = jax.random.split(jax.random.key(1), 1)
    estimate = float(batched_mixture_kl(keys, stacked(components, 256), np.ones((1, 1), bool), PRIOR)[0])

    # equal numbers of draws of each component: a stratified sample of the equal-weight mixture
    draws = np.concatenate([nig_draws(jax.random.key(i), c, 100_000) for i, c in enumerate(components)])
    log_q = jax.scipy.special.logsumexp(np.stack([log_density(c, draws) for c in components]), axis=0) - np.log(4)
    terms = np.asarray(log_q - log_density(PRIOR, draws))
    assert estimate == pytest.approx(terms.mean(), abs=4 * terms.std() / np.sqrt(len(terms)) + 0.01)
    assert estimate < np.mean([nig_kl(c, PRIOR) for c in components]) - 0.1


def test_too_narrow_components_are_refused():
    """Components far narrower than their spread (as p(theta | s) under dominant DP noise): the leave-one-out and
    own-included estimates differ by far more than MIXTURE_GAP, so the estimate is NaN; it is not with the same
    components widened until they overlap."""
    rng = np.random.default_rng(4)
    narrow = [random_nig(rng, records=2000.0)]
    narrow = [narrow[0]._replace(mean=narrow[0].mean + rng.normal(size=3)) for _ in range(512)]
    wide = [c._replace(precision=c.precision / 1e4) for c in narrow]
    keys, kept = jax.random.split(jax.random.key(2), 1), np.ones((1, 1), bool)
    assert np.isnan(batched_mixture_kl(keys, stacked(narrow, 1), kept, PRIOR)[0])
    assert np.isfinite(batched_mixture_kl(keys, stacked(wide, 1), kept, PRIOR)[0])


def exact_kl(model, parties, mask, scale=1.0) -> float:
    """KL(NIG posterior given the members' pooled exact statistics, tempered by `scale` || NIG prior)."""
    members = [p for p, member in zip(parties, mask) if member]
    statistic, count = sum(p.exact_statistic() for p in members), sum(len(p.X) for p in members)
    return nig_kl(model.exact_posterior(scale * statistic, scale * count, 2), model.priors(2).model)


def test_negligible_noise_values_every_coalition_within_1_percent_of_the_closed_form(syn_parties):
    """At epsilon = 1e7 the conditionals p(theta | s_C) all but coincide with the exact-statistics NIG posterior,
    so the Rao-Blackwellised v_C equals its closed-form KL to within 1 % (the k-NN estimate's bound is 3 %,
    tests/test_valuate.py), and its repeats agree to 0.1 % where the k-NN's differ by ~1 % (docs/benchmarks.md)."""
    model = bv.models.LinearRegression()
    parties = syn_parties(epsilons=(1e7, 1e7, 1e7))
    result = bv.valuate(model, parties, key=3, config=SHORT, kl="rao-blackwell", progress_bar=False)
    assert result.diagnostics["kl_estimator"] == "rao-blackwell"
    for mask, value, stderr in zip(result.coalition_masks, result.coalition_values, result.coalition_stderr):
        exact = exact_kl(model, parties, mask)
        assert value == pytest.approx(exact, rel=0.01), (mask, value, exact)
        assert stderr < 1e-3 * value


def test_tempered_rewards_take_the_estimator_through_of_inputs(syn_parties):
    """The reward mechanisms' tempered inputs (kappa c, kappa o, kappa Z) still give NIG conditionals: at negligible
    noise each trial's Rao-Blackwellised value is the closed-form KL of the kappa-scaled exact posterior."""
    model = bv.models.LinearRegression()
    parties = syn_parties(epsilons=(1e7, 1e7, 1e7))
    data = NoiseAwareData.from_releases(release_all(model, parties))
    surprise = CoalitionSurprise(model, data, SHORT, 4, jax.random.key(5), max_coalitions=7, kl="rao-blackwell")
    kappas = [0.05, 0.3, 1.0]
    trials = RewardSampler(surprise, jax.random.key(6)).evaluate([data.tempered(k) for k in kappas], kappas)
    for kappa, trial in zip(kappas, trials):
        assert trial.value == pytest.approx(exact_kl(model, parties, [True] * 3, kappa), rel=0.01), kappa


def test_realistic_noise_is_refused(syn_parties):
    """At epsilon = 0.5 each conditional p(theta | s_C) is far narrower than p(theta | o_C): their mixture over the
    sweeps underestimates the posterior's entropy by nats (its leave-one-out and own-included estimates bracket the
    k-NN value 1-3 nats apart, docs/benchmarks.md), so kl='rao-blackwell' refuses with a clear error. (The batch
    shape is the negligible-noise test's, so its compiled sampler serves.)"""
    model = bv.models.LinearRegression()
    parties = syn_parties(epsilons=(0.5, 0.5, 0.5))
    data = NoiseAwareData.from_releases(release_all(model, parties))
    surprise = CoalitionSurprise(model, data, SHORT, 4, jax.random.key(5), max_coalitions=7, kl="rao-blackwell")
    with pytest.raises(RuntimeError, match="too narrow for their mixture.*use kl='prior-density'"):
        surprise(np.ones((1, 3), bool))


def test_models_without_conjugate_conditionals_are_refused_before_any_release(rng):
    """A NUTS model has no conjugate conditionals: kl='rao-blackwell' is a ValueError naming the alternatives, raised
    before any party releases."""
    X, y = rng.normal(size=(40, 2)), rng.integers(0, 2, 40).astype(float)
    bounds = bv.Bounds(x_norm=6.0)
    parties = [bv.Party(X[i::2], y[i::2], epsilon=1.0, bounds=bounds, name=f"p{i}", noise_seed=i) for i in range(2)]
    model = bv.models.LogisticRegression()
    with pytest.raises(ValueError, match="kl='rao-blackwell' needs a sampler.*use kl='auto', 'prior-density' or"):
        bv.valuate(model, parties, kl="rao-blackwell")
    assert all(p.current_release(model.statistic(2)) is None for p in parties)


def test_the_driver_returns_the_conditional_each_kept_theta_was_drawn_from(syn_parties):
    """With conditionals=True the theta draws are those of the default program, and each sweep's conditional is
    the NIG update with the members' records (shape a0 + c_C / 2); theta is a draw of it: the inverse-gamma
    probability integral transform of sigma^2 is uniform over the draws."""
    from scipy import stats

    from bayesval.inference.gibbs import sample_coalition_posteriors

    model = bv.models.LinearRegression(collapsed_moves=0)  # Algorithm 1 as printed: the smallest program
    data = NoiseAwareData.from_releases(release_all(model, syn_parties(epsilons=(1.0, 1.0, 1.0))))
    masks = np.array([[True, False, True], [True, True, True]])
    budget = dict(num_chains=2, num_warmup=10, num_samples=100, progress_bar=False)
    run = partial(
        sample_coalition_posteriors, jax.random.key(2), data, masks, model.priors(2), model.kernel_settings(data)
    )
    plain, with_conditionals = run(**budget), run(**budget, conditionals=True)
    np.testing.assert_allclose(with_conditionals.draws, plain.draws, rtol=1e-9)
    conditionals = with_conditionals.conditionals
    assert conditionals.mean.shape == (2, 2, 100, 3) and conditionals.precision.shape == (2, 2, 100, 3, 3)
    records = PRIOR.shape + 0.5 * (masks @ np.asarray(data.counts))
    np.testing.assert_allclose(conditionals.shape, np.broadcast_to(records[:, None, None], (2, 2, 100)))
    pit = stats.invgamma.cdf(with_conditionals.draws[..., -1], conditionals.shape, scale=conditionals.scale)
    assert stats.kstest(pit.ravel()[::4], "uniform").pvalue > 1e-3
