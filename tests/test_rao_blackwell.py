"""The Rao-Blackwellised surprise (kl='rao-blackwell'): the KL of the mixture of the Gibbs sampler's conjugate
conditionals p(theta | s_C) against the NIG prior, checked against closed forms, Monte Carlo and the k-NN estimator."""

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


def test_expected_log_prior_density_matches_monte_carlo(rng):
    """E_{theta ~ q}[log p(theta)] of two NIGs in closed form against the mean of log p over 200,000 draws of q,
    and E_q[log q] - E_q[log p] against the closed-form KL's Monte Carlo check (tests/test_divergence.py)."""
    for q, p in ((random_nig(rng), PRIOR), (random_nig(rng, records=30.0), random_nig(rng, records=5.0))):
        draws = np.asarray(nig_draws(jax.random.key(3), q, 200_000))
        log_p = np.asarray(jax.vmap(lambda t: nig_log_density(p, t[:-1], t[-1]))(draws))
        expected = float(nig_expected_log_density(q, p))
        assert expected == pytest.approx(log_p.mean(), abs=4 * log_p.std() / np.sqrt(len(draws)))
        log_q = np.asarray(jax.vmap(lambda t: nig_log_density(q, t[:-1], t[-1]))(draws))
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

    which = rng.integers(0, 4, 400_000)
    draws = np.concatenate(
        [np.asarray(nig_draws(jax.random.key(i), c, np.sum(which == i))) for i, c in enumerate(components)]
    )
    log_c = np.stack([np.asarray(jax.vmap(lambda t: nig_log_density(c, t[:-1], t[-1]))(draws)) for c in components])
    log_q = jax.scipy.special.logsumexp(log_c, axis=0) - np.log(4)
    log_p = np.asarray(jax.vmap(lambda t: nig_log_density(PRIOR, t[:-1], t[-1]))(draws))
    terms = np.asarray(log_q - log_p)
    assert estimate == pytest.approx(terms.mean(), abs=4 * terms.std() / np.sqrt(len(terms)) + 0.01)
    assert estimate < np.mean([nig_kl(c, PRIOR) for c in components]) - 0.1
