"""Differential privacy: calibration (a thin layer over dp-accounting), mechanisms and the ledger."""

from bayesval.privacy.accounting import (
    DPGuarantee,
    gaussian_epsilon_spent,
    gaussian_sigma_for_approx_dp,
    gaussian_sigma_for_rdp,
    rdp_to_approx_dp,
)
from bayesval.privacy.ledger import PrivacyLedger, Release
from bayesval.privacy.mechanisms import gaussian_mechanism

__all__ = [
    "DPGuarantee",
    "PrivacyLedger",
    "Release",
    "gaussian_epsilon_spent",
    "gaussian_mechanism",
    "gaussian_sigma_for_approx_dp",
    "gaussian_sigma_for_rdp",
    "rdp_to_approx_dp",
]
