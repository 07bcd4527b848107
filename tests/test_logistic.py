"""Noise-aware Bayesian logistic regression (Sim et al. 2023, App. H.1; Kulkarni et al. 2021): the PASS-GLM
statistic and its sensitivity, the quadrature CLT moments, the truncated prior, batched NUTS, and the posterior
at negligible privacy noise against NUTS on the exact logistic likelihood."""

import warnings

import jax
import jax.numpy as jnp
import numpy as np
import numpyro
import numpyro.distributions as dist
import pytest
from numpyro.infer import MCMC, NUTS
from scipy import stats

import bayesval as bv
from bayesval.inference.clt import gauss_hermite, logistic_statistic_moments
from bayesval.inference.data import NoiseAwareData
from bayesval.inference.gaussian import CovarianceGaussian, gaussian_log_density
from bayesval.inference.nuts import MAX_REPEATED_DRAWS, bfmi, longest_repeat, sample_coalition_posteriors_nuts
from bayesval.models.logistic_regression import BallTransform, NormTruncatedNormal, non_private_cap
from bayesval.statistics import Bounds, LogisticRegressionStatistic


def per_record(x, y):
    x_tilde = np.append(x, 1.0)
    rows, cols = LogisticRegressionStatistic(len(x)).pairs
    return np.concatenate([y * x_tilde, x_tilde[rows] * x_tilde[cols]])


def test_statistic_is_the_sum_of_per_record_statistics(rng):
    X, y = rng.normal(size=(30, 3)), rng.choice([0.0, 1.0], 30)
    layout = LogisticRegressionStatistic(3)
    expected = sum(per_record(x, 2 * label - 1) for x, label in zip(X, y))
    assert layout.size == 4 + 9 == len(expected)
    np.testing.assert_allclose(layout.compute(X, y), expected, rtol=1e-12)
    np.testing.assert_allclose(layout.compute(X, 2 * y - 1), expected, rtol=1e-12)  # {0,1} and {-1,+1} agree


def test_sensitivity_bounds_every_neighbour_and_is_attained_on_two_axes(rng):
    bounds = Bounds(x_norm=2.0)
    layout = LogisticRegressionStatistic(3)
    delta = layout.sensitivity(bounds)
    worst = 0.0
    for _ in range(3000):
        pair = [rng.normal(size=3) for _ in range(2)]
        pair = [v / np.linalg.norm(v) * bounds.x_norm * rng.uniform() ** 0.2 for v in pair]
        labels = rng.choice([-1.0, 1.0], 2)
        worst = max(worst, np.linalg.norm(per_record(pair[0], labels[0]) - per_record(pair[1], labels[1])))
    assert worst <= delta
    # attained: labels that differ, x and x' on two orthogonal axes at the bound (docs/sensitivity.md)
    first, second = per_record(np.array([bounds.x_norm, 0.0, 0.0]), 1.0), per_record(np.array([0.0, 2.0, 0.0]), -1.0)
    assert np.linalg.norm(first - second) == pytest.approx(delta, rel=1e-12)


def test_labels_outside_binary_are_rejected_with_the_party_named(rng):
    party = bv.Party(rng.normal(size=(10, 2)), np.arange(10.0) % 3, epsilon=1.0, bounds=Bounds(x_norm=3.0), name="lab")
    with pytest.raises(ValueError, match=r"lab: logistic regression needs labels in \{0, 1\} or \{-1, \+1\}"):
        party.release(LogisticRegressionStatistic(2))


def test_chebyshev_coefficients_of_the_log_sigmoid():
    b0, b1, b2 = LogisticRegressionStatistic.chebyshev_coefficients(4.0)
    assert b0 == pytest.approx(-np.log(2), abs=1e-12)  # log sigmoid(s) - s/2 is even
    assert b1 == pytest.approx(0.5, abs=1e-12)
    assert -0.125 < b2 < 0  # flatter than the Taylor coefficient -1/8 on a wide interval
    s = np.linspace(-4, 4, 401)
    error = np.abs(b0 + b1 * s + b2 * s**2 + np.logaddexp(0, -s))
    assert 0.05 < error.max() < 0.2
    b0, b1, b2 = LogisticRegressionStatistic.chebyshev_coefficients(0.5)
    assert b2 == pytest.approx(-0.125, abs=1e-3)


def test_quadrature_moments_match_monte_carlo_and_are_a_covariance(rng):
    layout = LogisticRegressionStatistic(3)
    theta = np.array([0.8, -1.2, 0.5, -0.4])
    x_mean = np.array([0.2, -0.1, 0.3])
    factor = rng.normal(size=(3, 3))
    x_cov = factor @ factor.T / 3 + 0.3 * np.eye(3)
    mean, cov = logistic_statistic_moments(
        jnp.asarray(theta), jnp.asarray(x_mean), jnp.asarray(x_cov), *layout.pairs, gauss_hermite()
    )
    n = 400_000
    X = rng.multivariate_normal(x_mean, x_cov, size=n)
    x_tilde = np.column_stack([X, np.ones(n)])
    y = np.where(rng.uniform(size=n) < 1 / (1 + np.exp(-x_tilde @ theta)), 1.0, -1.0)
    rows, cols = layout.pairs
    t = np.column_stack([y[:, None] * x_tilde, x_tilde[:, rows] * x_tilde[:, cols]])
    z = (t.mean(0) - np.asarray(mean)) / (t.std(0) / np.sqrt(n))
    assert np.abs(z).max() < 4.5, z
    np.testing.assert_allclose(np.cov(t.T), cov, atol=0.02 * np.abs(cov).max())
    assert np.linalg.eigvalsh(np.asarray(cov)).min() > 0
    finer = logistic_statistic_moments(
        jnp.asarray(theta), jnp.asarray(x_mean), jnp.asarray(x_cov), *layout.pairs, gauss_hermite(200)
    )
    np.testing.assert_allclose(finer[1], cov, atol=1e-7)


def _moments_summed_over_nodes(theta, x_mean, x_cov, rows, cols, quadrature):
    """The same moments with every eta-moment summed over the quadrature nodes (no polynomial shortcut): given
    eta = (u - E u) / sd u, x~ = E[x~ | eta] + r with r ~ N(0, Q) independent of eta."""
    nodes, weights = quadrature
    x_tilde_mean = np.append(x_mean, 1.0)
    cov = np.zeros((len(x_tilde_mean),) * 2)
    cov[:-1, :-1] = x_cov
    scale = np.sqrt(theta @ cov @ theta)
    direction = cov @ theta / scale
    residual = cov - np.outer(direction, direction)
    along = x_tilde_mean + nodes[:, None] * direction  # E[x~ | eta] at each node
    label = weights * np.tanh((x_tilde_mean @ theta + scale * nodes) / 2)  # weight times E[y | eta]
    label_mean = label @ along
    second = cov + np.outer(x_tilde_mean, x_tilde_mean)
    pairs = [(a, b) for a, b in zip(rows, cols)]
    pair_mean = np.array([second[a, b] for a, b in pairs])
    pair_cov = np.array(
        [[second[a, c] * second[b, d] + second[a, d] * second[b, c] for c, d in pairs] for a, b in pairs]
    ) - 2 * np.outer(*(2 * [np.array([x_tilde_mean[a] * x_tilde_mean[b] for a, b in pairs])]))
    third = np.array(
        [
            [
                sum(
                    label[n]
                    * (
                        along[n, a] * along[n, b] * along[n, c]
                        + along[n, a] * residual[b, c]
                        + along[n, b] * residual[a, c]
                        + along[n, c] * residual[a, b]
                    )
                    for n in range(len(nodes))
                )
                for b, c in pairs
            ]
            for a in range(len(x_tilde_mean))
        ]
    )
    cross = third - np.outer(label_mean, pair_mean)
    label_cov = second - np.outer(label_mean, label_mean)
    return np.concatenate([label_mean, pair_mean]), np.block([[label_cov, cross], [cross.T, pair_cov]])


def test_quadrature_moments_equal_the_sum_over_the_nodes(rng):
    """Only four eta-moments enter the quadrature (E[x~ | eta] is linear in eta): the same numbers as summing
    every third moment over the 64 nodes, written out term by term."""
    layout = LogisticRegressionStatistic(3)
    for _ in range(3):
        theta = rng.normal(scale=1.5, size=4)
        factor = rng.normal(size=(3, 3))
        x_mean, x_cov = rng.normal(scale=0.3, size=3), factor @ factor.T / 3 + 0.3 * np.eye(3)
        ours = logistic_statistic_moments(
            jnp.asarray(theta), jnp.asarray(x_mean), jnp.asarray(x_cov), *layout.pairs, gauss_hermite()
        )
        summed = _moments_summed_over_nodes(theta, x_mean, x_cov, *layout.pairs, gauss_hermite())
        for mine, theirs in zip(ours, summed):
            np.testing.assert_allclose(np.asarray(mine), theirs, rtol=1e-11, atol=1e-12)


def test_ball_transform_jacobian_and_inverse(rng):
    transform = BallTransform(1.7)
    for z in rng.normal(scale=2.0, size=(5, 4)):
        z = jnp.asarray(z)
        x = transform(z)
        assert float(jnp.linalg.norm(x)) < 1.7
        np.testing.assert_allclose(transform.inv(x), z, rtol=1e-8)
        jacobian = jax.jacfwd(transform)(z)
        assert float(transform.log_abs_det_jacobian(z, x)) == pytest.approx(np.linalg.slogdet(jacobian)[1], rel=1e-9)


def test_truncated_prior_draws_follow_the_truncated_chi_square():
    cap, dim = 6.0, 5
    draws = np.asarray(NormTruncatedNormal(dim, cap).sample(jax.random.key(0), (20_000,)))
    sq_norm = (draws**2).sum(1)
    assert sq_norm.max() <= cap
    truncated_cdf = lambda v: stats.chi2.cdf(v, dim) / stats.chi2.cdf(cap, dim)  # noqa: E731
    assert stats.kstest(sq_norm, truncated_cdf).pvalue > 1e-3
    direction = draws / np.sqrt(sq_norm)[:, None]
    assert np.abs(direction.mean(0)).max() < 0.03  # direction uniform
    log_prob = NormTruncatedNormal(dim, cap).log_prob(jnp.zeros(dim))
    assert float(log_prob) == pytest.approx(-dim / 2 * np.log(2 * np.pi) - np.log(stats.chi2.cdf(cap, dim)))


@pytest.mark.parametrize("size", [6, 53])
def test_covariance_gaussian_density_and_gradient_match_scipy_and_multivariate_normal(rng, size):
    """The closed-form gradient against autodiff through NumPyro's Cholesky-based MultivariateNormal, the density
    against scipy, batched as the logistic likelihood batches it (parties, and draws in front); 53 entries (8
    features) take the triangular inverse by halves (`TRIANGULAR_SOLVE_LIMIT`)."""
    factors = rng.normal(size=(3, size, size))
    cov = jnp.asarray(factors @ factors.transpose(0, 2, 1) + 0.5 * np.eye(size))
    mean, value = jnp.asarray(rng.normal(size=(3, size))), jnp.asarray(rng.normal(size=(2, 3, size)))
    ours = CovarianceGaussian(mean, cov).log_prob(value)
    assert ours.shape == (2, 3)
    scipy = [[stats.multivariate_normal(mean[i], cov[i]).logpdf(value[s, i]) for i in range(3)] for s in range(2)]
    np.testing.assert_allclose(ours, scipy, rtol=1e-12)

    def total(distribution):
        return lambda m, c: distribution(m, c).log_prob(value).sum()

    expected = jax.jit(jax.grad(total(dist.MultivariateNormal), (0, 1)))(mean, cov)
    for got, want in zip(jax.jit(jax.grad(total(CovarianceGaussian), (0, 1)))(mean, cov), expected):
        np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-12)
    gradient_in_value = jax.grad(gaussian_log_density)(value[0, 0], mean[0], cov[0])
    np.testing.assert_allclose(gradient_in_value, -np.linalg.solve(cov[0], value[0, 0] - mean[0]), rtol=1e-9)


def test_prior_log_density_is_the_one_the_generic_probe_finds(rng):
    """LogisticRegression reads theta's prior density off its prior; NumPyroModel's probe of the whole model finds the
    same function, bit for bit, inside the ball and outside it (-inf)."""
    counts, size = np.array([40.0, 60.0]), LogisticRegressionStatistic(2).size
    data = NoiseAwareData(jnp.asarray(rng.normal(size=(2, size))), jnp.asarray(counts), jnp.ones(2))
    model, cap = bv.models.LogisticRegression(max_sq_norm=3.0), 3.0
    thetas = jnp.asarray(np.concatenate([rng.normal(size=(20, 3)), 3 * rng.normal(size=(5, 3))]))
    ours = jax.jit(jax.vmap(model.prior_log_density(data)))(thetas)
    generic = jax.jit(jax.vmap(bv.models.NumPyroModel.prior_log_density(model, data)))(thetas)
    np.testing.assert_array_equal(ours, generic)
    assert np.isinf(np.asarray(ours)).sum() == (np.sum(np.asarray(thetas) ** 2, 1) > cap).sum() > 0
    log_normal = stats.norm.logpdf(np.asarray(thetas[:3])).sum(1) - np.log(stats.chi2.cdf(cap, 3))
    np.testing.assert_allclose(ours[:3], log_normal, rtol=1e-12)


def test_bfmi_separates_independent_from_sticky_energies(rng):
    independent = rng.normal(size=(4, 4000))
    sticky = np.cumsum(rng.normal(size=(4, 4000)), axis=1)
    assert np.allclose(bfmi(independent), 2.0, atol=0.15)
    assert np.all(bfmi(sticky) < 0.3)


def test_longest_repeat_finds_the_run_of_a_chain_that_stopped_moving(rng):
    """A chain stuck on one point for MAX_REPEATED_DRAWS + 1 draws (as NUTS chains on Diab's Table 1 were at 100
    warm-up steps) is told apart from moving chains, whose accepted and rejected steps leave only short runs."""
    moving = rng.normal(size=(2, 3, 200, 4))
    moving[0, 1, 50:53] = moving[0, 1, 49]  # three rejections after draw 49: a run of 4
    stuck = moving.copy()
    stuck[1, 2, 120 : 120 + MAX_REPEATED_DRAWS] = stuck[1, 2, 119]  # draws 119..135
    np.testing.assert_array_equal(longest_repeat(moving), [[1, 4, 1], [1, 1, 1]])
    np.testing.assert_array_equal(longest_repeat(stuck), [[1, 4, 1], [1, 1, MAX_REPEATED_DRAWS + 1]])
    stuck[1, 2, 127, 3] += 1e-12  # one coordinate moved: the run breaks into 119..126 and 128..135
    assert longest_repeat(stuck)[1, 2] == 8 <= MAX_REPEATED_DRAWS


def test_negligible_noise_posterior_matches_nuts_on_the_exact_likelihood(rng):
    """Within 0.35 posterior sd of NUTS on the exact likelihood; the PASS-GLM quadratic likelihood (Chebyshev on
    [-4, 4]) used as if exact is further off, which is the approximation error the CLT model avoids."""
    theta_true, x_cov, n = np.array([1.0, -0.5, 0.3]), np.array([[1.0, 0.3], [0.3, 0.6]]), 2000
    X = rng.multivariate_normal(np.zeros(2), x_cov, size=n)
    y = np.where(rng.uniform(size=n) < 1 / (1 + np.exp(-(X @ theta_true[:2] + theta_true[2]))), 1.0, -1.0)
    model = bv.models.LogisticRegression()
    parties = [
        bv.Party(X[half], y[half], epsilon=1e8, bounds=Bounds(x_norm=6.0), name=f"p{i}", noise_seed=i)
        for i, half in enumerate([slice(0, n // 2), slice(n // 2, n)])
    ]
    data = NoiseAwareData.from_releases([p.release(model.statistic(2)) for p in parties])
    assert float(data.noise_std.max()) < 0.01
    sample = sample_coalition_posteriors_nuts(
        jax.random.key(0),
        model.model,
        data,
        np.ones((1, 2), bool),
        ("theta",),
        num_chains=2,
        num_warmup=200,
        num_samples=600,
        progress_bar=False,
    )
    noise_aware = sample.draws.reshape(-1, 3)

    def exact_likelihood(X, y):
        theta = numpyro.sample("theta", dist.Normal(0, 1).expand([3]).to_event(1))
        numpyro.sample("y", dist.Bernoulli(logits=X @ theta[:2] + theta[2]), obs=(y > 0).astype(float))

    mcmc = MCMC(NUTS(exact_likelihood), num_warmup=300, num_samples=1500, progress_bar=False)
    mcmc.run(jax.random.key(1), jnp.asarray(X), jnp.asarray(y))
    exact = np.asarray(mcmc.get_samples()["theta"])
    sd = exact.std(0)
    noise_aware_error = np.abs(noise_aware.mean(0) - exact.mean(0)) / sd
    assert noise_aware_error.max() < 0.35, noise_aware_error
    np.testing.assert_allclose(noise_aware.std(0) / sd, 1.0, atol=0.15)
    pass_glm_mean, _ = bv.models.LogisticRegression.pass_glm_posterior(model.statistic(2).compute(X, y), n, 2)
    pass_glm_error = np.abs(pass_glm_mean - exact.mean(0)) / sd
    assert pass_glm_error.max() > 2 * noise_aware_error.max()


def test_non_private_cap_is_the_scaled_maximum_likelihood_norm(rng):
    X = rng.normal(size=(500, 2))
    theta = np.array([1.0, -2.0, 0.5])
    y = np.where(rng.uniform(size=500) < 1 / (1 + np.exp(-(X @ theta[:2] + theta[2]))), 1, 0)
    cap = non_private_cap(X, y)
    x_tilde = np.column_stack([X, np.ones(500)])

    def negative_log_likelihood(t):
        return np.sum(np.logaddexp(0, -(2 * y - 1) * (x_tilde @ t)))

    from scipy.optimize import minimize

    mle = minimize(negative_log_likelihood, np.zeros(3), method="BFGS", options={"gtol": 1e-10}).x
    assert cap == pytest.approx(2.5 * mle @ mle, rel=1e-5)


def test_short_chains_are_reported_as_not_converged(rng):
    X, y = rng.normal(size=(300, 2)), rng.choice([-1.0, 1.0], 300)
    parties = [
        bv.Party(X[i::2], y[i::2], epsilon=0.5, bounds=Bounds(x_norm=6.0), name=f"p{i}", noise_seed=i) for i in range(2)
    ]
    config = bv.SamplerConfig(num_chains=4, num_warmup=8, num_samples=40, thinning=1, num_repeats=2, progress_bar=False)
    with pytest.warns(UserWarning, match="did not converge"):
        result = bv.valuate(bv.models.LogisticRegression(max_sq_norm=6.0), parties, key=3, config=config)
    assert not result.diagnostics["converged"]
    assert max(result.diagnostics["r_hat"]) > 1.05
    assert len(result.diagnostics["dropped_chains"]) == 3
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert np.isfinite(result.values).all()


def test_features_beyond_the_bound_are_clipped_counted_and_warned_about(rng):
    from bayesval.parties import release_all

    X = rng.normal(size=(50, 2))
    X[:7] *= 10 / np.linalg.norm(X[:7], axis=1, keepdims=True)  # 7 rows at norm 10 > 3
    parties = [
        bv.Party(X, rng.choice([0, 1], 50), epsilon=1.0, bounds=Bounds(x_norm=3.0), name=f"p{i}", noise_seed=i)
        for i in range(2)
    ]
    with pytest.warns(UserWarning, match=r"p0: 7 of 50 rows lie outside the declared bounds"):
        release_all(bv.models.LogisticRegression(), parties)
    assert [p.clipped_rows for p in parties] == [7, 7]
    clipped = X.copy()
    clipped[:7] *= 3.0 / 10
    layout = LogisticRegressionStatistic(2)
    np.testing.assert_allclose(parties[0].exact_statistic(layout), layout.compute(clipped, parties[0].y))
