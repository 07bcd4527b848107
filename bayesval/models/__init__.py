"""The party models of bayesval (`PartyModel`, the contract `valuate()` relies on, in `bayesval.models.protocol`)."""

from bayesval.models.linear_regression import (
    LinearRegression,
    noise_aware_linear_regression,
    syn_data_prior,
    syn_model_prior,
)
from bayesval.models.logistic_regression import LogisticRegression, noise_aware_logistic_regression, non_private_cap
from bayesval.models.numpyro_model import NumPyroModel
from bayesval.models.protocol import PartyModel, check_party_model, is_party_model

__all__ = [
    "LinearRegression",
    "LogisticRegression",
    "NumPyroModel",
    "PartyModel",
    "check_party_model",
    "is_party_model",
    "noise_aware_linear_regression",
    "noise_aware_logistic_regression",
    "non_private_cap",
    "syn_data_prior",
    "syn_model_prior",
]
