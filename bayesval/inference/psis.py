"""Pareto-smoothed importance sampling (Vehtari, Simpson, Gelman, Yao & Gabry 2024, "Pareto smoothed importance
sampling", JMLR 25(72), Sec. 3): the largest importance weights are replaced by the expected order statistics of a
generalised Pareto distribution fitted to them, and the fitted shape k-hat says whether the weighted estimate can be
trusted (Sec. 3.2: k-hat < min(1 - 1 / log10 S, 0.7) for S draws; above it the estimate's error does not shrink at
the Monte Carlo rate). The shape is fitted by Zhang & Stephens (2009, Technometrics 51(3), Sec. 3), with the weakly
informative prior of Vehtari et al. (2024, App. C) pulling it towards 0.5. Written in JAX for one weight vector;
`jax.vmap` batches it.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np

K_HAT_LIMIT = 0.7  # the most k-hat may be for any number of draws (Vehtari et al. 2024, Sec. 3.2)
PRIOR_SHAPE, PRIOR_WEIGHT = 0.5, 10.0  # k-hat is pulled towards 0.5 as by 10 tail draws (Vehtari et al. 2024, App. C)
GRID_SCALE = 3.0  # the Zhang & Stephens grid's prior scale (their Sec. 3, "b = 3")


def tail_length(num_draws: int) -> int:
    """The weights a tail holds: min(S / 5, 3 sqrt(S)), rounded up (Vehtari et al. 2024, Sec. 3.1)."""
    return int(min(math.ceil(0.2 * num_draws), math.ceil(3 * math.sqrt(num_draws))))


def k_hat_threshold(num_draws: int) -> float:
    """The largest k-hat at which an estimate from `num_draws` draws is trusted: min(1 - 1 / log10 S, 0.7)."""
    return min(1.0 - 1.0 / math.log10(num_draws), K_HAT_LIMIT)


def generalised_pareto_fit(exceedances: jnp.ndarray) -> tuple[jnp.ndarray, jnp.ndarray]:
    """(shape k, scale sigma) of a generalised Pareto distribution fitted to positive exceedances (M,), sorted
    ascending: the posterior mean of b = -k / sigma over Zhang & Stephens' grid of 30 + sqrt(M) values, each
    weighted by its profile likelihood, then k and sigma at it; k is shrunk towards PRIOR_SHAPE."""
    size = exceedances.shape[0]
    grid_size = 30 + int(math.sqrt(size))
    quartile = exceedances[int(size / 4 + 0.5) - 1]
    grid = 1.0 / exceedances[-1] + (1.0 - jnp.sqrt(grid_size / (jnp.arange(1, grid_size + 1) - 0.5))) / (
        GRID_SCALE * quartile
    )
    shapes = jnp.mean(jnp.log1p(-grid[:, None] * exceedances[None, :]), axis=1)
    profile = size * (jnp.log(-grid / shapes) - shapes - 1.0)
    b = jnp.sum(jax.nn.softmax(profile) * grid)
    shape = jnp.mean(jnp.log1p(-b * exceedances))
    scale = -shape / b
    return (size * shape + PRIOR_WEIGHT * PRIOR_SHAPE) / (size + PRIOR_WEIGHT), scale


def _quantiles(probabilities, shape, scale):
    """The generalised Pareto distribution's quantiles (its exponential limit where the shape is near 0)."""
    small = jnp.abs(shape) < 1e-8
    safe = jnp.where(small, 1.0, shape)
    return jnp.where(small, -scale * jnp.log1p(-probabilities), scale / safe * ((1 - probabilities) ** -safe - 1))


def pareto_smoothed(log_weights: jnp.ndarray) -> tuple[jnp.ndarray, jnp.ndarray]:
    """Pareto-smoothed log importance weights (S,) and k-hat. The `tail_length(S)` largest weights are replaced by
    the fitted distribution's quantiles at (z - 1/2) / M, z = 1..M, above the largest weight outside the tail, and
    truncated at the largest raw weight. Where the tail cannot be fitted (its weights all equal: no spread), the
    weights are returned as they are with k-hat -inf; a non-finite weight gives k-hat inf."""
    num_draws = log_weights.shape[0]
    tail = tail_length(num_draws)
    largest = jnp.max(log_weights)
    order = jnp.argsort(log_weights)
    ordered = log_weights[order] - largest
    cutoff = ordered[num_draws - tail - 1]
    exceedances = jnp.exp(ordered[num_draws - tail :]) - jnp.exp(cutoff)
    spread = exceedances[-1] > 0
    safe = jnp.where(spread, exceedances, jnp.linspace(1.0, 2.0, tail))  # a placeholder fit where there is no spread
    shape, scale = generalised_pareto_fit(safe)
    probabilities = (np.arange(1, tail + 1) - 0.5) / tail
    smoothed_tail = jnp.log(jnp.minimum(_quantiles(probabilities, shape, scale) + jnp.exp(cutoff), 1.0))
    fitted = jnp.isfinite(shape) & spread
    ordered = jnp.where(fitted, ordered.at[num_draws - tail :].set(smoothed_tail), ordered)
    smoothed = jnp.zeros_like(log_weights).at[order].set(ordered) + largest
    k_hat = jnp.where(spread, shape, -jnp.inf)
    return smoothed, jnp.where(jnp.isfinite(largest), k_hat, jnp.inf)
