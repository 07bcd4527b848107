"""The Gaussian log density of a covariance matrix with its gradient in closed form, and `CovarianceGaussian`, the
NumPyro distribution that uses it, for NUTS over CLT-marginal likelihoods N(o; c mu(theta), c Sigma(theta) + s^2 I).

Differentiating NumPyro's `MultivariateNormal(loc, covariance_matrix).log_prob` runs the Cholesky factorisation's
reverse mode (triangular solves on the cotangents) on top of the forward factorisation and solve. The gradient of
log N(x; m, C) is known in closed form (Petersen & Pedersen 2012, The Matrix Cookbook, Eqs. 57 and 61):
    d/dm = C^-1 (x - m) = alpha,    d/dC = (alpha alpha^T - C^-1) / 2,
so the forward pass keeps alpha and C^-1 (one Cholesky factorisation and one triangular inverse) and the backward
pass is two outer products. On Diab's 19-entry statistic (3 parties, 84 chains) a gradient of the likelihood costs
~40 % less and compiles ~3x faster (docs/benchmarks.md, "Diab toward 30 s"). Above TRIANGULAR_SOLVE_LIMIT entries the
factor and its inverse are `bayesval.inference.linalg.cholesky_and_inverse`, matrix products by halves: XLA's batched
triangular solve with a matrix of right-hand sides made the 53-entry statistic of 8 features ~20x slower on a CPU,
and LAPACK's batched factorisation took twice the time of the halves (docs/benchmarks.md, "A warm start for NUTS").
Up to the limit the factorisation and solve stay (Diab's 19, and every statistic of up to 4 features, sample as
before to the bit).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpyro.distributions as dist
from jax.scipy.linalg import solve_triangular
from numpyro.distributions import constraints

from bayesval.inference.linalg import cholesky_and_inverse

TRIANGULAR_SOLVE_LIMIT = 24


def _log_density_and_residuals(value, mean, cov):
    """log N(value; mean, cov) of one vector, with (alpha = cov^-1 (value - mean), cov^-1) for the gradient."""
    dim = cov.shape[-1]
    if dim <= TRIANGULAR_SOLVE_LIMIT:
        lower = jnp.linalg.cholesky(cov)
        inverse_lower = solve_triangular(lower, jnp.eye(dim, dtype=cov.dtype), lower=True)
    else:
        lower, inverse_lower = cholesky_and_inverse(cov)
    standard = inverse_lower @ (value - mean)
    log_density = (
        -0.5 * (standard @ standard)
        - jnp.sum(jnp.log(jnp.diagonal(lower)))
        - 0.5 * value.shape[-1] * jnp.log(2 * jnp.pi)
    )
    return log_density, (inverse_lower.T @ standard, inverse_lower.T @ inverse_lower)


@jax.custom_vjp
def gaussian_log_density(value: jnp.ndarray, mean: jnp.ndarray, cov: jnp.ndarray) -> jnp.ndarray:
    """log N(value; mean, cov) for one vector (d,) and a symmetric positive-definite cov (d, d), differentiable in
    all three by the closed form above (NaN where cov is not positive definite); `vmap` batches it."""
    return _log_density_and_residuals(value, mean, cov)[0]


def _backward(residuals, cotangent):
    alpha, precision = residuals
    return -cotangent * alpha, cotangent * alpha, 0.5 * cotangent * (jnp.outer(alpha, alpha) - precision)


gaussian_log_density.defvjp(_log_density_and_residuals, _backward)


class CovarianceGaussian(dist.Distribution):
    """N(loc, covariance_matrix) over vectors, batched over leading axes, whose `log_prob` is
    `gaussian_log_density`: for observed sites whose covariance depends on the latent parameters."""

    arg_constraints = {"loc": constraints.real_vector, "covariance_matrix": constraints.positive_definite}
    support = constraints.real_vector
    reparametrized_params = ["loc", "covariance_matrix"]

    def __init__(self, loc: jnp.ndarray, covariance_matrix: jnp.ndarray, *, validate_args=None) -> None:
        batch_shape = jnp.broadcast_shapes(jnp.shape(loc)[:-1], jnp.shape(covariance_matrix)[:-2])
        event_shape = jnp.shape(covariance_matrix)[-1:]
        self.loc = jnp.broadcast_to(loc, batch_shape + event_shape)
        self.covariance_matrix = jnp.broadcast_to(covariance_matrix, batch_shape + event_shape * 2)
        super().__init__(batch_shape=batch_shape, event_shape=event_shape, validate_args=validate_args)

    def sample(self, key, sample_shape=()):
        lower = jnp.linalg.cholesky(self.covariance_matrix)
        noise = jax.random.normal(key, sample_shape + self.batch_shape + self.event_shape)
        return self.loc + jnp.einsum("...ij,...j->...i", lower, noise)

    def log_prob(self, value):
        batch = jnp.broadcast_shapes(jnp.shape(value)[:-1], self.batch_shape)
        event, matrix = self.event_shape, self.event_shape * 2
        value, loc, cov = (
            jnp.broadcast_to(array, batch + shape).reshape((-1,) + shape)
            for array, shape in ((value, event), (self.loc, event), (self.covariance_matrix, matrix))
        )
        return jax.vmap(gaussian_log_density)(value, loc, cov).reshape(batch)
