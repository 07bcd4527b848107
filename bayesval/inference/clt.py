"""CLT moments of a per-record statistic: s_i ~ N(c_i mu_t, c_i Sigma_t) (Sim et al. 2023, App. A.3).

Linear regression: for a Gaussian record z ~ N(m, S), the entries t_k = z_{a_k} z_{b_k} have
E[t_k] = S_ab + m_a m_b and, by Isserlis' theorem,
Cov(z_a z_b, z_c z_d) = S_ac S_bd + S_ad S_bc + m_a m_c S_bd + m_a m_d S_bc + m_b m_c S_ad + m_b m_d S_ac.
One expression covers every block of the statistic (x x^T, x y, y^2) and every pair of blocks; tests/test_clt.py
checks it against Monte Carlo (docs/architecture.md, "Choices").

Logistic regression (PASS-GLM statistic, Kulkarni et al. 2021): y is not Gaussian, but it depends
on x only through u = theta^T x~. Writing x~ = A(eta) + r with eta = standardised u and r Gaussian
and independent of eta, every moment is a one-dimensional expectation over eta times Gaussian
algebra in r; the eta expectations use Gauss-Hermite quadrature. The result is the exact moment
set of a distribution (eta on the quadrature nodes), so Sigma_t is positive semi-definite by
construction, smooth in theta (NUTS needs gradients) and free of Monte Carlo noise.
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np

from bayesval.inference.linalg import SCALAR_LIMIT


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
    mean: jnp.ndarray, cov: jnp.ndarray, rows, cols, gathered: bool = False
) -> tuple[jnp.ndarray, jnp.ndarray]:
    """Mean vector and covariance matrix of t_k = z[rows_k] z[cols_k] for Gaussian z ~ N(mean, cov).

    `rows` and `cols` are static. Up to `SCALAR_LIMIT` pairs the entries are written as scalars: under `vmap`
    each is an elementwise product over the batch, which XLA fuses, where gathering the index pairs ran ~4x
    slower. Beyond it, or if `gathered`, the gathered form, whose program stays small (docs/architecture.md): its
    second derivatives compile in seconds, where the scalar form's took over a minute
    (a Laplace fit's Newton steps, docs/benchmarks.md)."""
    if gathered or len(rows) > SCALAR_LIMIT:
        return _gathered_pair_product_moments(mean, cov, np.asarray(rows), np.asarray(cols))
    stat_mean, stat_cov = pair_product_entries(mean, cov, rows, cols)
    return jnp.stack(stat_mean), jnp.stack([jnp.stack(row) for row in stat_cov])


def pair_product_entries(mean: jnp.ndarray, cov: jnp.ndarray, rows, cols) -> tuple[list, list[list]]:
    """`pair_product_moments` on scalars: the mean as a list of scalars and the covariance as nested lists. A
    caller that only reads the entries (a Gaussian density's factorisation, `bayesval.inference.linalg`) never
    gathers them into a matrix: under `vmap` stacking scalars into a (batch, P, P) array and reading them back
    cost 17x the arithmetic (docs/benchmarks.md)."""
    rows, cols = np.asarray(rows).tolist(), np.asarray(cols).tolist()
    size = mean.shape[-1]
    m = [mean[i] for i in range(size)]
    S = [[cov[i, j] for j in range(size)] for i in range(size)]
    stat_mean = [S[a][b] + m[a] * m[b] for a, b in zip(rows, cols)]
    entries = {}
    for first, (a, b) in enumerate(zip(rows, cols)):
        for second, (c, d) in enumerate(zip(rows[: first + 1], cols[: first + 1])):
            entries[first, second] = entries[second, first] = _isserlis(S, m, a, b, c, d)
    size = len(rows)
    return stat_mean, [[entries[first, second] for second in range(size)] for first in range(size)]


def _gathered_pair_product_moments(mean, cov, rows: np.ndarray, cols: np.ndarray):
    a, b, c, d = rows[:, None], cols[:, None], rows[None, :], cols[None, :]
    return cov[rows, cols] + mean[rows] * mean[cols], _isserlis(cov, mean, a, b, c, d, gathered=True)


def _isserlis(S, m, a, b, c, d, gathered: bool = False):
    """Cov(z_a z_b, z_c z_d) by Isserlis' theorem, from nested lists (scalars) or arrays (gathered)."""
    if gathered:
        return (
            S[a, c] * S[b, d]
            + S[a, d] * S[b, c]
            + m[a] * m[c] * S[b, d]
            + m[a] * m[d] * S[b, c]
            + m[b] * m[c] * S[a, d]
            + m[b] * m[d] * S[a, c]
        )
    return (
        S[a][c] * S[b][d]
        + S[a][d] * S[b][c]
        + m[a] * m[c] * S[b][d]
        + m[a] * m[d] * S[b][c]
        + m[b] * m[c] * S[a][d]
        + m[b] * m[d] * S[a][c]
    )


def gauss_hermite(num_nodes: int = 64) -> tuple[np.ndarray, np.ndarray]:
    """Nodes and weights (summing to 1) of E[f(eta)], eta ~ N(0, 1)."""
    nodes, weights = np.polynomial.hermite_e.hermegauss(num_nodes)
    return nodes, weights / weights.sum()


def logistic_statistic_moments(
    theta: jnp.ndarray,
    x_mean: jnp.ndarray,
    x_cov: jnp.ndarray,
    rows,
    cols,
    quadrature: tuple[np.ndarray, np.ndarray],
) -> tuple[jnp.ndarray, jnp.ndarray]:
    """Mean and covariance of t = (y x~, x~[rows] x~[cols]) for x ~ N(x_mean, x_cov), x~ = [x; 1] and
    y in {-1, +1} with p(y = 1 | x) = sigmoid(theta^T x~), so E[y | x] = tanh(theta^T x~ / 2).

    Given eta, E[x~ | eta] = mean_tilde + eta direction is linear in eta, so every moment weighted by E[y | eta]
    is a polynomial of degree <= 3 in eta: the quadrature is needed only for the four scalars
    E[eta^k E[y | eta]], k = 0..3, and the rest is Gaussian algebra in the direction and the residual. Written
    so, the moments' gradient over Diab's 84 chains costs half what summing the third moments over the nodes did (the
    same numbers to rounding; docs/benchmarks.md, "Diab under 30 s").
    """
    num_features = x_mean.shape[-1]
    rows, cols = np.asarray(rows), np.asarray(cols)
    slope = theta[:num_features]
    mean_tilde = jnp.append(x_mean, 1.0)
    cov_tilde = jnp.zeros((num_features + 1, num_features + 1)).at[:num_features, :num_features].set(x_cov)
    # u = theta^T x~ = mean_u + scale * eta; x~ = mean_tilde + direction * eta + r, Cov r = residual.
    cov_slope = x_cov @ slope
    scale = jnp.sqrt(slope @ cov_slope + 1e-12)
    direction = jnp.append(cov_slope / scale, 0.0)
    residual = cov_tilde - jnp.outer(direction, direction)
    nodes, weights = quadrature
    powers = weights[:, None] * nodes[:, None] ** np.arange(4)  # (nodes, 4)
    label_moments = jnp.tanh((mean_tilde @ theta + scale * nodes) / 2) @ powers  # E[eta^k E[y | eta]]

    label_mean = label_moments[0] * mean_tilde + label_moments[1] * direction  # E[y x~]
    pair_mean, pair_cov = pair_product_moments(mean_tilde, cov_tilde, rows, cols)
    # E[y x~_a x~_b x~_c] with (b, c) the pairs: the pair (b, c) of E[x~ | eta] is a quadratic in eta, with
    # coefficients below; the residual's share is Gaussian algebra, weighted by E[y x~].
    pair_coefficients = (
        mean_tilde[rows] * mean_tilde[cols],
        direction[rows] * mean_tilde[cols] + mean_tilde[rows] * direction[cols],
        direction[rows] * direction[cols],
    )
    along_mean = sum(label_moments[k] * pair_coefficients[k] for k in range(3))
    along_direction = sum(label_moments[k + 1] * pair_coefficients[k] for k in range(3))
    third = (
        jnp.outer(mean_tilde, along_mean)
        + jnp.outer(direction, along_direction)
        + jnp.outer(label_mean, residual[rows, cols])
        + label_mean[rows][None, :] * residual[:, cols]
        + label_mean[cols][None, :] * residual[:, rows]
    )
    label_cov = cov_tilde + jnp.outer(mean_tilde, mean_tilde) - jnp.outer(label_mean, label_mean)
    cross_cov = third - jnp.outer(label_mean, pair_mean)
    mean = jnp.concatenate([label_mean, pair_mean])
    cov = jnp.block([[label_cov, cross_cov], [cross_cov.T, pair_cov]])
    return mean, cov
