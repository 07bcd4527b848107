"""CLT moments of the per-record statistic against Monte Carlo (spec Sec. 2.1)."""

import jax
import jax.numpy as jnp
import numpy as np

import bayesval  # noqa: F401  (64-bit mode)
from bayesval.inference.clt import linear_regression_record_moments, pair_product_moments
from bayesval.statistics import LinearRegressionStatistic


def test_statistic_moments_match_monte_carlo(rng):
    statistic = LinearRegressionStatistic(2)
    weights = np.array([0.7, -1.2, 0.4])
    noise_var = 0.3
    x_mean = np.array([0.5, -0.3])
    x_cov = np.array([[0.6, 0.2], [0.2, 0.4]])
    mean, cov = pair_product_moments(
        *linear_regression_record_moments(jnp.asarray(weights), noise_var, jnp.asarray(x_mean), jnp.asarray(x_cov)),
        *statistic.pairs,
    )
    num = 1_000_000
    X = rng.multivariate_normal(x_mean, x_cov, num)
    y = X @ weights[:2] + weights[2] + np.sqrt(noise_var) * rng.normal(size=num)
    z = statistic.records(X, y)
    rows, cols = statistic.pairs
    t = z[:, rows] * z[:, cols]
    mc_mean, mc_cov = t.mean(axis=0), np.cov(t, rowvar=False)
    mean_se = t.std(axis=0) / np.sqrt(num)
    assert np.all(np.abs(np.asarray(mean) - mc_mean) < 5 * mean_se)
    np.testing.assert_allclose(np.asarray(cov), mc_cov, rtol=0.03, atol=0.03 * np.abs(mc_cov).max())
    # the exact statistic of the records is their sum of the same products
    np.testing.assert_allclose(statistic.compute(X[:50], y[:50]), t[:50].sum(axis=0))


def test_to_matrix_inverts_compute():
    statistic = LinearRegressionStatistic(3)
    X = np.arange(12.0).reshape(4, 3) / 7
    y = np.array([1.0, -2.0, 0.5, 3.0])
    z = statistic.records(X, y)
    np.testing.assert_allclose(np.asarray(statistic.to_matrix(jnp.asarray(statistic.compute(X, y)), 4.0)), z.T @ z)


def test_pair_moments_scalar_and_gathered_forms_agree(rng):
    """Up to SCALAR_LIMIT pairs the entries are written as scalars (unless `gathered` is asked for), beyond it
    gathered: the same numbers."""
    from bayesval.inference.linalg import SCALAR_LIMIT

    size = 6
    root = rng.normal(size=(size, size))
    mean, cov = jnp.asarray(rng.normal(size=size)), jnp.asarray(root @ root.T)
    rows, cols = np.triu_indices(size)
    assert len(rows) > SCALAR_LIMIT
    few = slice(0, SCALAR_LIMIT)
    scalar = pair_product_moments(mean, cov, rows[few], cols[few])
    gathered = pair_product_moments(mean, cov, rows[few], cols[few], gathered=True)
    for ours, theirs in zip(scalar, gathered):
        np.testing.assert_allclose(np.asarray(ours), np.asarray(theirs), rtol=1e-12)
    programs = [
        jax.make_jaxpr(lambda m, c, flag=flag: pair_product_moments(m, c, rows[few], cols[few], gathered=flag))(
            mean, cov
        )
        for flag in (False, True)
    ]
    assert len(programs[1].eqns) < len(programs[0].eqns) / 3  # the gathered form's program is the small one
    # the public function takes the gathered form beyond the limit: its entries match a sample's moments
    full_mean, full_cov = pair_product_moments(mean, cov, rows, cols)
    z = rng.multivariate_normal(np.asarray(mean), np.asarray(cov), 400_000)
    t = z[:, rows] * z[:, cols]
    assert np.all(np.abs(np.asarray(full_mean) - t.mean(axis=0)) < 5 * t.std(axis=0) / np.sqrt(len(t)))
    sample_cov = np.cov(t, rowvar=False)
    np.testing.assert_allclose(np.asarray(full_cov), sample_cov, rtol=0.05, atol=0.05 * np.abs(sample_cov).max())
