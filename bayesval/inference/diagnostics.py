"""MCMC convergence diagnostics in JAX, for batches of posteriors: rank-normalised split R-hat and bulk ESS
(Vehtari, Gelman, Simpson, Carpenter & Buerkner 2021, Sec. 4 and App. A), as arviz computes them, with a
mask of kept chains so that posteriors whose chains were dropped (low BFMI, stuck) stay in one fixed-shape batch.

One deviation from arviz: a single chain gets the R-hat of its two halves (arviz returns NaN below two
chains), which is what split R-hat measures.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.special import ndtri

# A posterior counts as converged with split R-hat <= 1.01 and bulk ESS >= 400 (Vehtari et al. 2021, Sec. 4).
R_HAT_THRESHOLD = 1.01
ESS_THRESHOLD = 400


def chain_diagnostics(draws, kept_chains=None) -> tuple[jnp.ndarray, jnp.ndarray]:
    """R-hat and bulk ESS of draws (batch, chains, kept, d), of the chains flagged in kept_chains (batch,
    chains) (default: all): two (batch, d) arrays."""
    draws = jnp.asarray(draws, jnp.float64)
    if kept_chains is None:
        kept_chains = jnp.ones(draws.shape[:2], bool)
    return _batch_diagnostics(draws, jnp.asarray(kept_chains, bool))


@jax.jit
def _batch_diagnostics(draws: jnp.ndarray, kept_chains: jnp.ndarray) -> tuple[jnp.ndarray, jnp.ndarray]:
    per_coordinate = jax.vmap(_r_hat_and_ess, in_axes=(2, None))  # over d, of one posterior (chains, kept, d)
    r_hat, ess = jax.vmap(per_coordinate)(draws, kept_chains)
    return r_hat, ess


def _r_hat_and_ess(chains: jnp.ndarray, kept: jnp.ndarray) -> tuple[jnp.ndarray, jnp.ndarray]:
    """(R-hat, bulk ESS) of one scalar quantity's chains (C, S), kept (C,)."""
    half = chains.shape[1] // 2
    split = jnp.concatenate([chains[:, :half], chains[:, -half:]])  # arviz: the middle draw of an odd S is left out
    kept = jnp.concatenate([kept, kept])
    z = _rank_normalise(split, kept)
    median = jnp.nanmedian(jnp.where(kept[:, None], split, jnp.nan))
    folded = _rank_normalise(jnp.abs(split - median), kept)
    r_hat = jnp.maximum(_r_hat(z, kept), _r_hat(folded, kept))
    return r_hat, _ess(z, kept)


def _rank_normalise(chains: jnp.ndarray, kept: jnp.ndarray) -> jnp.ndarray:
    """Phi^-1 of the average ranks among the kept chains' draws, offset by Blom's 3/8 (dropped chains: 0)."""
    values = jnp.where(kept[:, None], chains, jnp.inf).ravel()
    ordered = jnp.sort(values)
    rank = (jnp.searchsorted(ordered, values, "left") + jnp.searchsorted(ordered, values, "right") + 1) / 2
    size = kept.sum() * chains.shape[1]
    z = ndtri((rank - 3 / 8) / (size + 1 / 4)).reshape(chains.shape)
    return jnp.where(kept[:, None], z, 0.0)


def _chain_moments(chains: jnp.ndarray, kept: jnp.ndarray):
    """Number of kept chains, their means, and the variance (ddof 1) of those means."""
    num_chains = kept.sum()
    means = chains.mean(axis=1)
    mean_of_means = jnp.sum(jnp.where(kept, means, 0.0)) / num_chains
    between = jnp.sum(jnp.where(kept, (means - mean_of_means) ** 2, 0.0)) / (num_chains - 1)
    return num_chains, means, between


def _r_hat(chains: jnp.ndarray, kept: jnp.ndarray) -> jnp.ndarray:
    num_chains, _, between = _chain_moments(chains, kept)
    num_draws = chains.shape[1]
    within = jnp.sum(jnp.where(kept, chains.var(axis=1, ddof=1), 0.0)) / num_chains
    return jnp.sqrt((num_draws * between / within + num_draws - 1) / num_draws)


def _autocovariance(chains: jnp.ndarray) -> jnp.ndarray:
    """Autocovariance at every lag of each chain (C, S), by FFT, divided by S."""
    num_draws = chains.shape[1]
    size = int(2 ** np.ceil(np.log2(2 * num_draws)))
    centred = chains - chains.mean(axis=1, keepdims=True)
    spectrum = jnp.fft.rfft(centred, n=size, axis=1)
    return jnp.fft.irfft(spectrum * jnp.conj(spectrum), n=size, axis=1)[:, :num_draws] / num_draws


def _ess(chains: jnp.ndarray, kept: jnp.ndarray) -> jnp.ndarray:
    """ESS with Geyer's initial positive and initial monotone sequences over paired autocorrelations."""
    num_chains, _, between = _chain_moments(chains, kept)
    num_draws = chains.shape[1]
    acov = jnp.sum(jnp.where(kept[:, None], _autocovariance(chains), 0.0), axis=0) / num_chains
    mean_var = acov[0] * num_draws / (num_draws - 1.0)
    var_plus = mean_var * (num_draws - 1.0) / num_draws + between
    rho = (1.0 - (mean_var - acov) / var_plus).at[0].set(1.0)
    num_pairs = (num_draws - 1) // 2  # arviz computes pairs (t + 1, t + 2) for odd t < S - 3, after pair 0
    pairs = rho[0 : 2 * num_pairs : 2] + rho[1 : 2 * num_pairs : 2]
    index = jnp.arange(num_pairs)
    stop = jnp.where(jnp.any(pairs <= 0), jnp.argmax(pairs <= 0), num_pairs - 1)  # first non-positive pair, or last
    monotone = jax.lax.cummin(pairs)
    last_even = jnp.where((rho[2 * stop] > 0) | (pairs[stop] >= 0), rho[2 * stop], 0.0)
    tau = -1.0 + 2.0 * jnp.sum(jnp.where(index < stop, monotone, 0.0)) + last_even
    total = num_chains * num_draws
    ess = total / jnp.maximum(tau, 1.0 / jnp.log10(total))
    constant = jnp.ptp(jnp.where(kept[:, None], chains, chains[jnp.argmax(kept), 0])) < np.finfo(float).resolution
    return jnp.where(constant, total, ess)
