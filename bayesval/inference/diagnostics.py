"""MCMC convergence diagnostics (split R-hat, bulk ESS) by arviz, for batches of posteriors."""

from __future__ import annotations

import warnings

import numpy as np

# A posterior counts as converged with split R-hat <= 1.01 and bulk ESS >= 400 (Vehtari et al. 2021, Sec. 4).
R_HAT_THRESHOLD = 1.01
ESS_THRESHOLD = 400


def chain_diagnostics(draws: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """R-hat and bulk ESS of draws shaped (batch, chains, kept, d): two (batch, d) arrays."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        import arviz as az

        dataset = az.convert_to_dataset({"theta": np.moveaxis(draws, (1, 2), (0, 1))})
        r_hat = az.rhat(dataset)["theta"].values
        ess = az.ess(dataset)["theta"].values
    return np.asarray(r_hat), np.asarray(ess)
