"""NumPyro models of bayesval, installed as `bayesval.models`."""

from bayesval.models.linear_regression import (
    LinearRegression,
    noise_aware_linear_regression,
    syn_data_prior,
    syn_model_prior,
)

__all__ = ["LinearRegression", "noise_aware_linear_regression", "syn_data_prior", "syn_model_prior"]
