"""CLT moments of a per-record second-moment statistic (Sim et al. 2023, App. A.3).

For a Gaussian record z ~ N(m, S), the entries t_k = z_{a_k} z_{b_k} have
E[t_k] = S_ab + m_a m_b and, by Isserlis' theorem,
Cov(z_a z_b, z_c z_d) = S_ac S_bd + S_ad S_bc + m_a m_c S_bd + m_a m_d S_bc + m_b m_c S_ad + m_b m_d S_ac.
This is the spec's Sec. 2.1 block formulas (verified there by Monte Carlo) in one expression.
"""

from __future__ import annotations

import jax.numpy as jnp


def linear_regression_record_moments(
    weights: jnp.ndarray,
    noise_var: jnp.ndarray,
    x_mean: jnp.ndarray,
    x_cov: jnp.ndarray,
) -> tuple[jnp.ndarray, jnp.ndarray]:
    """Mean and covariance of z = [x; 1; y] with x ~ N(x_mean, x_cov), y = w^T [x; 1] + N(0, noise_var)."""
    num_features = x_mean.shape[-1]
    slope = weights[:num_features]
    mean = jnp.concatenate([x_mean, jnp.ones(1), (slope @ x_mean + weights[-1])[None]])
    cov_xy = x_cov @ slope
    zero = jnp.zeros((num_features, 1))
    cov = jnp.block(
        [
            [x_cov, zero, cov_xy[:, None]],
            [zero.T, jnp.zeros((1, 1)), jnp.zeros((1, 1))],
            [cov_xy[None, :], jnp.zeros((1, 1)), (slope @ cov_xy + noise_var)[None, None]],
        ]
    )
    return mean, cov


def pair_product_moments(
    mean: jnp.ndarray, cov: jnp.ndarray, rows, cols
) -> tuple[jnp.ndarray, jnp.ndarray]:
    """Mean vector and covariance matrix of t_k = z[rows_k] z[cols_k] for Gaussian z ~ N(mean, cov)."""
    a, b = rows[:, None], cols[:, None]
    c, d = rows[None, :], cols[None, :]
    m, S = mean, cov
    stat_mean = cov[rows, cols] + mean[rows] * mean[cols]
    stat_cov = (
        S[a, c] * S[b, d]
        + S[a, d] * S[b, c]
        + m[a] * m[c] * S[b, d]
        + m[a] * m[d] * S[b, c]
        + m[b] * m[c] * S[a, d]
        + m[b] * m[d] * S[a, c]
    )
    return stat_mean, stat_cov
