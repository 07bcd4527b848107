"""The user-defined-model example of docs/user_models.md runs through valuate() and matches the closed form:
a Gaussian mean with known record variance has a Gaussian posterior given the perturbed sums, so every
coalition's Bayesian surprise is a Gaussian KL."""

import re
from pathlib import Path

import numpy as np
import pytest

from bayesval.divergence import gaussian_kl
from bayesval.games.shapley import coalition_masks, exact_shapley

DOC = Path(__file__).resolve().parents[1] / "docs" / "user_models.md"


@pytest.fixture(scope="module")
def example():
    code = re.search(r"```python\n(.*?)```", DOC.read_text(), re.S).group(1)
    namespace: dict = {}
    exec(compile(code, str(DOC), "exec"), namespace)
    return namespace


def closed_form_surprise(releases, prior_sd, record_sd, mask):
    """KL(p(mean | o_C) || p(mean)) for o_i ~ N(c_i mean, c_i record_sd^2 + sigma_i^2), mean ~ N(0, prior_sd^2)."""
    precision, shift = prior_sd**-2, 0.0
    for release, member in zip(releases, mask):
        if member:
            variance = release.count * record_sd**2 + release.noise_std**2
            precision += release.count**2 / variance
            shift += release.count * release.perturbed[0] / variance
    cov = np.array([[1 / precision]])
    return gaussian_kl(np.array([shift / precision]), cov, np.zeros(1), np.array([[prior_sd**2]]))


def test_documented_user_model_matches_the_closed_form(example):
    result, parties = example["result"], example["parties"]
    releases = [r for r in result.privacy.releases]
    assert [r.owner for r in releases] == [p.name for p in parties]
    # the sums the mediator held: rebuild them exactly as released (same noise seeds)
    stats = [p.release(example["SumStatistic"]()) for p in parties]
    masks = coalition_masks(3)
    exact = np.array([closed_form_surprise(stats, example["PRIOR_SD"], example["RECORD_SD"], m) for m in masks])
    estimated = np.array([result.coalition_value([p.name for p, m in zip(parties, mask) if m]) for mask in masks])
    assert np.all(np.abs(estimated - exact) < 0.1 + 3 * result.coalition_stderr), (estimated, exact)
    phi_exact, _ = exact_shapley(np.append(0.0, exact), np.zeros(len(exact) + 1))
    assert np.allclose(result.values, phi_exact, atol=0.15), (result.values, phi_exact)
    # the noisiest, smallest party is worth least; the large but very private one is not worth most
    assert np.argmin(phi_exact) == np.argmin(result.values)
    assert result.diagnostics["converged"]


def test_kl_estimator_uses_the_prior_density_only_where_it_is_theta_s_marginal(example):
    """The documented model's mean has a fixed Gaussian prior: its density is used. A hierarchical prior
    (mean ~ N(0, scale), scale ~ HalfNormal) has no closed marginal: 'auto' falls back to prior draws, and asking
    for the density, or for an unknown estimator, is refused before any party releases."""
    import numpyro
    import numpyro.distributions as dist

    import bayesval as bv
    from bayesval.inference.data import NoiseAwareData

    assert example["result"].diagnostics["kl_estimator"] == "prior-density"

    def hierarchical(data, mask):
        scale = numpyro.sample("scale", dist.HalfNormal(10.0))
        mean = numpyro.sample("mean", dist.Normal(0.0, scale))
        with numpyro.plate("parties", data.counts.shape[0]), numpyro.handlers.mask(mask=mask):
            numpyro.sample("perturbed", dist.Normal(data.counts * mean, 10.0), obs=data.perturbed[:, 0])

    model = bv.models.NumPyroModel(hierarchical, parameters=["mean"], statistic=example["SumStatistic"]())
    data = NoiseAwareData(np.zeros((2, 1)), np.ones(2) * 10, np.ones(2))
    assert model.prior_log_density(data) is None
    assert example["model"].prior_log_density(data) is not None
    bounds = bv.Bounds(x_norm=1.0, y_abs=4.0)
    parties = [bv.Party(np.zeros((30, 1)), np.ones(30), epsilon=1.0, bounds=bounds, name=n) for n in "ab"]
    for kl, message in (("prior-density", "kl='prior-density' needs theta's marginal prior"), ("knn", "kl must be")):
        with pytest.raises(ValueError, match=re.escape(message)):
            bv.valuate(model, parties, kl=kl)
    assert all(p.current_release(model.statistic(1)) is None for p in parties)


def test_nuts_maps_a_support_that_depends_on_another_site():
    """theta ~ Uniform(0, scale), scale ~ Exponential(1): the runner maps between unconstrained and constrained
    space inside the program, per draw, so every draw keeps 0 < theta < scale and theta / scale is uniform (a
    support fixed at one example draw of scale would put theta outside (0, scale) or bend its distribution)."""
    import jax
    import jax.numpy as jnp
    import numpyro
    import numpyro.distributions as dist
    from scipy import stats

    from bayesval.inference.data import NoiseAwareData
    from bayesval.inference.nuts import sample_coalition_posteriors_nuts

    def model(data, mask):
        scale = numpyro.sample("scale", dist.Exponential(1.0))
        theta = numpyro.sample("theta", dist.Uniform(0.0, scale))
        with numpyro.plate("parties", data.counts.shape[0]), numpyro.handlers.mask(mask=mask):
            numpyro.sample("perturbed", dist.Normal(data.counts * theta, 1.0), obs=data.perturbed[:, 0])

    data = NoiseAwareData(jnp.ones((2, 1)), jnp.ones(2), jnp.ones(2))
    sample = sample_coalition_posteriors_nuts(
        jax.random.key(0),
        model,
        data,
        np.zeros((1, 2), bool),  # the empty coalition: NUTS samples the prior
        ("theta", "scale"),
        num_chains=4,
        num_warmup=300,
        num_samples=1000,
        max_tree_depth=5,
        progress_bar=False,
    )
    theta, scale = sample.draws.reshape(-1, 2).T
    assert np.all((theta > 0) & (theta < scale))
    assert stats.kstest(theta / scale, "uniform").pvalue > 1e-3
    assert abs(scale.mean() - 1.0) < 0.15
