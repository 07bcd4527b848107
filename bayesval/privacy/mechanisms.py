"""The one Gaussian mechanism every release goes through (DESIGN.md Sec. 7)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from bayesval.privacy.accounting import DPGuarantee
from bayesval.privacy.ledger import PrivacyLedger, Release


def gaussian_mechanism(
    key: jax.Array,
    value: np.ndarray,
    sensitivity: float,
    guarantee: DPGuarantee,
    *,
    owner: str,
    what: str,
    ledger: PrivacyLedger | None = None,
    clipped_rows: int = 0,
) -> tuple[np.ndarray, Release]:
    """Release `value + N(0, sigma^2 I)` with sigma calibrated from `sensitivity` and `guarantee`.

    The noise is one standard-normal draw from `key` scaled by sigma, so the same key at different
    privacy levels gives nested noise (the fixed-seed epsilon sweep of Sim et al. 2023, Sec. 6).
    """
    value = np.asarray(value, dtype=np.float64)
    sigma = guarantee.gaussian_sigma(sensitivity)
    standard = np.asarray(jax.random.normal(key, value.shape, dtype=jnp.float64))
    release = Release(
        owner=owner,
        what=what,
        mechanism="gaussian",
        sensitivity=float(sensitivity),
        noise_std=float(sigma),
        dimension=int(value.size),
        epsilon=guarantee.epsilon,
        delta=guarantee.delta,
        rdp_order=None if guarantee.delta is not None else guarantee.rdp_order,
        clipped_rows=int(clipped_rows),
    )
    if ledger is not None:
        ledger.record(release)
    return value + sigma * standard, release
