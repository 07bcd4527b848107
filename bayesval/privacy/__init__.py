"""Differential privacy: guarantees and accounting (over dp-accounting), the noise source, the one
mechanism every release goes through, and the ledger of releases."""

from bayesval.privacy.accounting import (
    CalibrationError,
    DPGuarantee,
    PrivacySpent,
    gaussian_epsilon_spent,
    gaussian_sigma_for_approx_dp,
    gaussian_sigma_for_rdp,
    rdp_to_approx_dp,
)
from bayesval.privacy.ledger import PrivacyLedger, Release
from bayesval.privacy.mechanisms import Mechanism, add_noise
from bayesval.privacy.noise import NoiseSource, SeedReuseError

__all__ = [
    "CalibrationError",
    "DPGuarantee",
    "Mechanism",
    "NoiseSource",
    "PrivacyLedger",
    "PrivacySpent",
    "Release",
    "SeedReuseError",
    "add_noise",
    "gaussian_epsilon_spent",
    "gaussian_sigma_for_approx_dp",
    "gaussian_sigma_for_rdp",
    "rdp_to_approx_dp",
]
