"""Data-point valuation, one wing a paper family: `knn` (KNN-Shapley, TKNN-Shapley, DP-TKNN-Shapley and the naive
DP-KNN baseline), `layered` (Layered Shapley, DP Layered Shapley and the Monte Carlo baseline on retraining utilities)
and `gradients` (semivalues from DP gradient trajectories with correlated noise). The papers' experiment protocols
live in `bayesval.experiments`."""

from bayesval.estimators.base import PointEstimator
from bayesval.estimators.gradients import (
    NOISE_MODES,
    GradientSemivalues,
    LinearModel,
    LogisticModel,
    MLPModel,
    burn_in_values,
    dp_noise_covariance,
    gradient_marginals,
    mean_adjusted_variance,
    permutation_weights,
    release_covariance,
    released_gradients,
    weighted_marginals,
)
from bayesval.estimators.knn import DPKNNShapley, KNNShapley, TKNNShapley
from bayesval.estimators.layered import LayeredShapley, LogisticRegressionUtility, MonteCarloShapley, SklearnUtility

__all__ = [
    "PointEstimator",
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
    "DPKNNShapley",
    "KNNShapley",
    "LayeredShapley",
    "MonteCarloShapley",
    "LogisticRegressionUtility",
    "SklearnUtility",
    "TKNNShapley",
    "weighted_marginals",
]


def __getattr__(name: str):
    """Experiment protocols exported here before they moved to `bayesval.experiments` (one release)."""
    from bayesval.deprecated import moved_name

    return moved_name(__name__, name)
