"""The NUTS warm start (bayesval.inference.warm_start, bayesval.inference.nuts): the Laplace fit finds closed-form
modes and inverse Hessians; warm-started NUTS samples the same posterior (closed-form moments of a skewed and a
correlated site); a fit that fails falls back to prior starts with a one-line warning, and still samples the
posterior."""

import warnings

import jax
import jax.numpy as jnp
import numpy as np
import numpyro
import numpyro.distributions as dist
import pytest

from bayesval.inference.data import NoiseAwareData
from bayesval.inference.nuts import COLD_START, WARM_START, NUTSSettings, sample_coalition_posteriors_nuts
from bayesval.inference.warm_start import CONVERGED, laplace_fit

RATE_COORDINATES = 3  # entries of each release that inform the precision tau
MIXING = np.array([[1.0, 0.9], [0.9, 1.0], [0.5, -0.3]])  # the design of the entries that inform theta


def test_laplace_fit_finds_the_mode_and_covariance_of_a_skewed_and_a_correlated_potential():
    """U(z) = b e^z0 - a z0 (a Gamma(a, b) in log space: mode log(a / b), curvature a) plus a correlated quadratic
    0.5 (y - m)^T Q (y - m) in y = z[1:]: mode (log(a / b), m), covariance blockdiag(1 / a, Q^-1)."""
    a, b = 7.0, 2.0
    m, q = np.array([1.5, -2.0]), np.array([[4.0, 3.5], [3.5, 4.0]])

    def potential(z):
        y = z[1:] - m
        return b * jnp.exp(z[0]) - a * z[0] + 0.5 * y @ q @ y

    fit = jax.jit(laplace_fit, static_argnums=0)(potential, jnp.zeros(3))
    assert bool(fit.fitted) and float(fit.gradient) <= CONVERGED
    np.testing.assert_allclose(fit.mode, [np.log(a / b), *m], atol=1e-6)
    expected = np.zeros((3, 3))
    expected[0, 0], expected[1:, 1:] = 1 / a, np.linalg.inv(q)
    np.testing.assert_allclose(fit.cov, expected, atol=1e-6)


def test_laplace_fit_of_a_potential_without_a_minimum_is_not_fitted():
    """U(z) = -z0 + z1^2 / 2 falls without end along z0: the steps stop at their limit, not fitted."""
    fit = laplace_fit(lambda z: -z[0] + 0.5 * z[1] ** 2, jnp.zeros(2))
    assert not bool(fit.fitted) and float(fit.gradient) == pytest.approx(1.0)


def _skewed_and_correlated(data, mask):
    """tau ~ Gamma(2, 1) with the first RATE_COORDINATES entries of each release ~ N(0, 1 / tau), theta ~ N(0, I_2)
    with the others ~ N(MIXING theta, I): for members of the mask only."""
    tau = numpyro.sample("tau", dist.Gamma(2.0, 1.0))
    theta = numpyro.sample("theta", dist.Normal(0.0, 1.0).expand([2]).to_event(1))
    loc = jnp.concatenate([jnp.zeros(RATE_COORDINATES), jnp.asarray(MIXING) @ theta])
    scale = jnp.concatenate([jnp.full(RATE_COORDINATES, 1 / jnp.sqrt(tau)), jnp.ones(len(MIXING))])
    with numpyro.plate("parties", data.counts.shape[0]), numpyro.handlers.mask(mask=mask):
        numpyro.sample("perturbed", dist.Normal(loc, scale).to_event(1), obs=data.perturbed)


def _closed_form(perturbed, mask):
    """Posterior mean and variance of tau (Gamma(2 + |C| k / 2, 1 + sum ||o_i[:k]||^2 / 2)), and mean and covariance
    of theta (precision I + |C| M^T M, mean cov M^T sum o_i[k:])."""
    members = perturbed[mask]
    shape = 2.0 + members.shape[0] * RATE_COORDINATES / 2
    rate = 1.0 + 0.5 * np.sum(members[:, :RATE_COORDINATES] ** 2)
    cov = np.linalg.inv(np.eye(2) + members.shape[0] * MIXING.T @ MIXING)
    return shape / rate, shape / rate**2, cov @ MIXING.T @ members[:, RATE_COORDINATES:].sum(axis=0), cov


def test_warm_started_nuts_samples_the_closed_form_posterior():
    """Each coalition's draws of tau (skewed) and theta (correlated) have the closed-form posterior moments within
    Monte Carlo error; every chain started warm."""
    perturbed = np.random.default_rng(5).normal(size=(3, RATE_COORDINATES + len(MIXING))) * 0.8
    data = NoiseAwareData(jnp.asarray(perturbed), jnp.ones(3), jnp.ones(3))
    masks = np.array([[True, False, False], [True, True, True]])
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no fallback
        sampled = sample_coalition_posteriors_nuts(
            jax.random.key(3), _skewed_and_correlated, data, masks, ("tau", "theta"),
            num_chains=4, num_warmup=150, num_samples=1500, warm_start=True, progress_bar=False,
        )  # fmt: skip
    assert sampled.info["warm_start"].all() and sampled.kept_chains.all()
    for draws, mask in zip(sampled.draws, masks):
        draws = draws.reshape(-1, 3)
        tau_mean, tau_var, theta_mean, theta_cov = _closed_form(perturbed, mask)
        # 6,000 draws at an effective size of at least ~1,500: 0.1 sd is over 3.5 standard errors of a mean
        assert abs(draws[:, 0].mean() - tau_mean) < 0.1 * np.sqrt(tau_var), (draws[:, 0].mean(), tau_mean)
        assert draws[:, 0].var() == pytest.approx(tau_var, rel=0.15)
        assert np.all(np.abs(draws[:, 1:].mean(axis=0) - theta_mean) < 0.1 * np.sqrt(np.diag(theta_cov)))
        np.testing.assert_allclose(np.cov(draws[:, 1:].T), theta_cov, rtol=0.15, atol=0.02 * theta_cov.max())


def _kinked(data, mask):
    """theta ~ Laplace(0, 1), the releases ~ N(theta, 3^2): the posterior's mode sits on the prior's kink at 0,
    where the gradient jumps, so no Laplace fit converges."""
    theta = numpyro.sample("theta", dist.Laplace(0.0, 1.0))
    with numpyro.plate("parties", data.counts.shape[0]), numpyro.handlers.mask(mask=mask):
        numpyro.sample("perturbed", dist.Normal(theta, 3.0).expand([1]).to_event(1), obs=data.perturbed)


def test_a_failed_fit_falls_back_to_prior_starts_with_a_one_line_warning():
    """The kinked posterior's fit fails: one warning of one line, every chain started from prior draws, and the
    draws still have the posterior's mean and variance (by quadrature on a grid)."""
    perturbed = np.array([[0.4], [-0.2], [0.3]])
    data = NoiseAwareData(jnp.asarray(perturbed), jnp.ones(3), jnp.ones(3))
    masks = np.array([[True, True, True]])
    with pytest.warns(RuntimeWarning) as caught:
        sampled = sample_coalition_posteriors_nuts(
            jax.random.key(1), _kinked, data, masks, ("theta",),
            num_chains=4, num_warmup=300, num_samples=1500, warm_start=True, progress_bar=False,
        )  # fmt: skip
    messages = [str(w.message) for w in caught if "warm start" in str(w.message)]
    assert len(messages) == 1 and "\n" not in messages[0] and "prior draws" in messages[0], messages
    assert not sampled.info["warm_start"].any()
    grid = np.linspace(-12, 12, 200_001)
    density = np.exp(-np.abs(grid) - np.sum((perturbed[:, 0][:, None] - grid) ** 2, axis=0) / 18)
    density /= density.sum()
    mean = grid @ density
    variance = (grid - mean) ** 2 @ density
    draws = sampled.draws.reshape(-1)
    assert abs(draws.mean() - mean) < 0.1 * np.sqrt(variance), (draws.mean(), mean)
    assert draws.var() == pytest.approx(variance, rel=0.15)


def test_the_start_is_described_for_the_diagnostics():
    """Off by default (prior starts, as before); a model asks for it, and a result records which ran."""
    import bayesval as bv

    assert NUTSSettings().describe_start() == COLD_START
    assert NUTSSettings(warm_start=True).describe_start() == WARM_START
    assert bv.models.LogisticRegression(warm_start=True).kernel.warm_start
    assert not bv.models.LogisticRegression().kernel.warm_start
    with pytest.raises(TypeError, match="warm_start"):
        bv.models.NumPyroModel(_kinked, ["theta"], warm_start="yes")
    from bayesval.models.protocol import capabilities
    from bayesval.parties.surprise import start_that_runs

    config = bv.SamplerConfig.preset("fast", "nuts")
    warm = capabilities(bv.models.LogisticRegression(warm_start=True))
    assert start_that_runs(warm, None, config) == {"nuts_start": WARM_START}
    linear_releases = NoiseAwareData(jnp.zeros((2, 5)), jnp.ones(2), jnp.ones(2))  # one feature: 5 entries
    assert start_that_runs(capabilities(bv.models.LinearRegression()), linear_releases, config) == {}  # Gibbs


def _logistic_releases(num_features: int) -> NoiseAwareData:
    import bayesval as bv

    size = bv.models.LogisticRegression().statistic(num_features).size
    return NoiseAwareData(jnp.zeros((3, size)), jnp.full(3, 100.0), jnp.ones(3))


@pytest.mark.parametrize("num_features", [2, 4, 6, 7, 8])
def test_logistic_regression_starts_warm_from_30_unconstrained_coordinates(num_features):
    """warm_start=None (LogisticRegression's default) counts the coordinates NUTS moves, from an abstract trace:
    w + 1 coefficients, w scales and w (w - 1) / 2 of the LKJ factor; chains start warm from 30 (7 features), and
    True or False hold whatever the releases."""
    import bayesval as bv
    from bayesval.models.numpyro_model import WARM_START_FROM

    w, releases = num_features, _logistic_releases(num_features)
    model = bv.models.LogisticRegression()
    assert model.unconstrained_coordinates(releases) == (w + 1) + w + w * (w - 1) // 2
    assert model.kernel_settings(releases).warm_start is (model.unconstrained_coordinates(releases) >= WARM_START_FROM)
    assert model.kernel_settings(releases).warm_start is (num_features >= 7)
    per_row = NoiseAwareData(*(jnp.stack([leaf] * 2) for leaf in releases))  # one set of releases per sampler row
    assert model.unconstrained_coordinates(per_row) == model.unconstrained_coordinates(releases)
    for fixed in (True, False):
        assert bv.models.LogisticRegression(warm_start=fixed).kernel_settings(releases).warm_start is fixed
    assert bv.models.NumPyroModel(_kinked, ["theta"]).kernel_settings(releases).warm_start is False  # the default


def test_warm_chains_run_the_configs_warm_budget_and_the_result_records_it():
    """The NUTS fast preset gives warm chains 100 warm-up + 325 draws and cold ones 250 + 700; the budget that
    runs has no warm fields left (a result records what ran); a budget the user sets holds from every start."""
    import bayesval as bv
    from bayesval.models.protocol import capabilities
    from bayesval.parties.surprise import budget_that_runs

    fast = bv.SamplerConfig.preset("fast", "nuts")
    caps = capabilities(bv.models.LogisticRegression())
    warm, cold = (budget_that_runs(caps, _logistic_releases(w), fast) for w in (8, 4))
    assert (warm.num_warmup, warm.num_samples, cold.num_warmup, cold.num_samples) == (100, 325, 250, 700)
    assert warm.warm_warmup is warm.warm_samples is cold.warm_warmup is cold.warm_samples is None
    asked = fast.with_(num_samples=500)  # the CLI's --num-samples: the draws asked for, warm or not
    assert budget_that_runs(caps, _logistic_releases(8), asked).num_samples == 500
    assert budget_that_runs(caps, _logistic_releases(8), asked).num_warmup == 100
    gibbs = capabilities(bv.models.LinearRegression())
    linear = NoiseAwareData(jnp.zeros((2, 5)), jnp.ones(2), jnp.ones(2))
    assert budget_that_runs(gibbs, linear, bv.SamplerConfig.preset("fast", "gibbs")) == bv.SamplerConfig.preset(
        "fast", "gibbs"
    )
    with pytest.raises(ValueError, match="warm_samples=351 must be a multiple of thinning=2"):
        bv.SamplerConfig(thinning=2, num_samples=700, warm_samples=351)
    with pytest.raises(ValueError, match="warm_warmup"):
        bv.SamplerConfig(warm_warmup=-1)
