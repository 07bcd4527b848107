"""Conjugate families of Bayesian linear regression: normal-inverse-gamma (model) and
normal-inverse-Wishart (data model), their updates from sufficient statistics, and samplers.

NIG(mean, precision, shape, scale): sigma^2 ~ InvGamma(shape, scale), w | sigma^2 ~ N(mean, sigma^2 precision^-1)
(Sim et al. 2023, App. A.1). NIW(mean, kappa, scale, dof): Sigma ~ InvWishart(scale, dof),
mu | Sigma ~ N(mean, Sigma / kappa). Updates follow Bernstein & Sheldon (2019) as Sim et al. 2023 use them in their
Algorithm 1 (App. A.3), with eigenvalue clipping where perturbed statistics break positive definiteness (our
repair, which the papers do not discuss; docs/architecture.md, "Choices").
"""

from __future__ import annotations

from functools import partial
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpyro.distributions as dist
from jax.scipy.special import digamma, gammaln

from bayesval.inference.linalg import (
    cholesky,
    inverse_wishart_log_prob,
    inverse_wishart_sample,
    log_det_from_cholesky,
    mvn_log_prob,
    mvn_sample,
    psd_project,
    solve_upper,
    spd_solve,
)


class NIG(NamedTuple):
    mean: jnp.ndarray
    precision: jnp.ndarray
    shape: jnp.ndarray
    scale: jnp.ndarray


class NIW(NamedTuple):
    mean: jnp.ndarray
    kappa: jnp.ndarray
    scale: jnp.ndarray
    dof: jnp.ndarray


def nig_update(prior: NIG, second_moments: jnp.ndarray, count: jnp.ndarray) -> NIG:
    """NIG posterior from the summed matrix [[X~^T X~, X~^T y], [y^T X~, y^T y]] of `count` records.

    The matrix is projected to the PSD cone first, which keeps the posterior scale >= prior scale.
    """
    moments = psd_project(second_moments)
    xx, xy, yy = moments[:-1, :-1], moments[:-1, -1], moments[-1, -1]
    precision = xx + prior.precision
    mean = spd_solve(precision, xy + prior.precision @ prior.mean)
    scale = prior.scale + 0.5 * (yy + prior.mean @ prior.precision @ prior.mean - mean @ precision @ mean)
    return NIG(mean, precision, prior.shape + 0.5 * count, jnp.maximum(scale, prior.scale))


def niw_update(prior: NIW, x_sum: jnp.ndarray, xx_sum: jnp.ndarray, count: jnp.ndarray) -> NIW:
    """NIW posterior of (mu, Sigma) from sum x, sum x x^T and the count (floored to stay PD)."""
    x_bar = x_sum / count
    scatter = xx_sum - count * jnp.outer(x_bar, x_bar)
    kappa = prior.kappa + count
    shift = x_bar - prior.mean
    scale = prior.scale + scatter + (prior.kappa * count / kappa) * jnp.outer(shift, shift)
    return NIW(
        (prior.kappa * prior.mean + count * x_bar) / kappa,
        kappa,
        psd_project(scale, floor=0.1),
        prior.dof + count,
    )


def sample_nig(key: jax.Array, params: NIG) -> tuple[jnp.ndarray, jnp.ndarray]:
    """One draw (w, sigma^2) from NIG(params)."""
    key_var, key_w = jax.random.split(key)
    noise_var = dist.InverseGamma(params.shape, params.scale).sample(key_var)
    standard = jax.random.normal(key_w, params.mean.shape)
    weights = params.mean + jnp.sqrt(noise_var) * solve_upper(cholesky(params.precision).T, standard)
    return weights, noise_var


def sample_niw(key: jax.Array, params: NIW) -> tuple[jnp.ndarray, jnp.ndarray]:
    """One draw (mu, Sigma) from NIW(params)."""
    key_cov, key_mean = jax.random.split(key)
    cov = inverse_wishart_sample(key_cov, params.dof, params.scale)
    mean = mvn_sample(key_mean, params.mean, cov / params.kappa)
    return mean, cov


def nig_log_density(params: NIG, weights: jnp.ndarray, noise_var: jnp.ndarray) -> jnp.ndarray:
    """log NIG(w, sigma^2 | params)."""
    chol = cholesky(params.precision)
    dim = weights.shape[-1]
    residual = chol.T @ (weights - params.mean)
    log_normal = jnp.sum(jnp.log(jnp.diagonal(chol))) - 0.5 * dim * jnp.log(2 * jnp.pi * noise_var)
    return (
        dist.InverseGamma(params.shape, params.scale).log_prob(noise_var)
        + log_normal
        - 0.5 * (residual @ residual) / noise_var
    )


def nig_expected_log_density(q: NIG, p: NIG) -> jnp.ndarray:
    """E_{theta ~ NIG(q)}[log NIG(theta | p)] in closed form (the cross-entropy is its negative; with q = p, the
    negative entropy). Under q, sigma^2 ~ InvGamma(a, b) gives E[log sigma^2] = log b - psi(a) and
    E[1 / sigma^2] = a / b, and w | sigma^2 ~ N(m, sigma^2 L^-1) gives
    E[(w - m_p)^T L_p (w - m_p) / sigma^2] = (a / b) (m - m_p)^T L_p (m - m_p) + tr(L_p L^-1), so with D weights

        E_q[log p] = a_p log b_p - log Gamma(a_p) - (a_p + 1 + D / 2) (log b - psi(a)) - b_p a / b
                     + (1/2) log det L_p - (D / 2) log 2 pi - (1/2) [(a / b) (m - m_p)^T L_p (m - m_p) + tr(L_p L^-1)].
    """
    dim = q.mean.shape[-1]
    expected_log_var = jnp.log(q.scale) - digamma(q.shape)
    expected_precision = q.shape / q.scale
    offset = q.mean - p.mean
    spread = spd_solve(q.precision, p.precision)  # L_q^-1 L_p
    log_det_p = log_det_from_cholesky(cholesky(p.precision))
    return (
        p.shape * jnp.log(p.scale)
        - gammaln(p.shape)
        - (p.shape + 1.0 + 0.5 * dim) * expected_log_var
        - p.scale * expected_precision
        + 0.5 * log_det_p
        - 0.5 * dim * jnp.log(2.0 * jnp.pi)
        - 0.5 * (expected_precision * (offset @ p.precision @ offset) + jnp.trace(spread))
    )


def niw_log_density(params: NIW, mean: jnp.ndarray, cov: jnp.ndarray) -> jnp.ndarray:
    """log NIW(mu, Sigma | params)."""
    return inverse_wishart_log_prob(cov, params.dof, params.scale) + mvn_log_prob(mean, params.mean, cov / params.kappa)


@partial(jax.jit, static_argnames="num_draws")
def nig_draws(key: jax.Array, params: NIG, num_draws: int) -> jnp.ndarray:
    """`num_draws` i.i.d. draws of theta = (w, sigma^2) as rows of shape (num_draws, D + 1)."""
    weights, noise_var = jax.vmap(lambda k: sample_nig(k, params))(jax.random.split(key, num_draws))
    return jnp.column_stack([weights, noise_var])
