"""NumPyro models of bayesval, installed as `bayesval.models`."""

from bayesval.models.linear_regression import (
    LinearRegression,
    noise_aware_linear_regression,
    syn_data_prior,
    syn_model_prior,
)
from bayesval.models.logistic_regression import LogisticRegression, noise_aware_logistic_regression, non_private_cap
from bayesval.models.numpyro_model import NumPyroModel

__all__ = [
    "LinearRegression",
    "LogisticRegression",
    "NumPyroModel",
    "noise_aware_linear_regression",
    "noise_aware_logistic_regression",
    "non_private_cap",
    "syn_data_prior",
    "syn_model_prior",
]
