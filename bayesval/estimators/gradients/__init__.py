"""Semivalues from differentially private gradient trajectories with correlated noise (Zhou et al. 2024;
docs/gradients.md)."""

from bayesval.estimators.gradients.estimator import (
    NOISE_MODES,
    GradientSemivalues,
    burn_in_values,
    dp_noise_covariance,
    gradient_marginals,
    mean_adjusted_variance,
    permutation_weights,
    release_covariance,
    released_gradients,
    weighted_marginals,
)
from bayesval.estimators.gradients.models import LinearModel, LogisticModel, MLPModel

__all__ = [
    "NOISE_MODES",
    "GradientSemivalues",
    "LinearModel",
    "LogisticModel",
    "MLPModel",
    "burn_in_values",
    "dp_noise_covariance",
    "gradient_marginals",
    "mean_adjusted_variance",
    "permutation_weights",
    "release_covariance",
    "released_gradients",
    "weighted_marginals",
]
