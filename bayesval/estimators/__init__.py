"""Data-point valuation: KNN-Shapley, TKNN-Shapley, DP-TKNN-Shapley and the naive DP-KNN baseline; Layered Shapley,
DP Layered Shapley and the Monte Carlo baseline on retraining utilities, with removal curves; semivalues from DP
gradient trajectories with correlated noise."""

from bayesval.estimators.evaluation import (
    add_feature_noise,
    balanced_split,
    detection_auroc,
    detection_aurocs,
    flip_labels,
    standardise,
)
from bayesval.estimators.gradient_experiments import (
    detection_auroc_bound,
    dp_variance_by_k,
    fitted_slope,
    mislabel_detection,
)
from bayesval.estimators.gradient_models import LinearModel, LogisticModel, MLPModel
from bayesval.estimators.gradients import (
    NOISE_MODES,
    GradientSemivalues,
    burn_in_values,
    gradient_marginals,
    mean_adjusted_variance,
    permutation_weights,
    released_gradients,
    weighted_marginals,
)
from bayesval.estimators.knn import DPKNNShapley, KNNShapley, TKNNShapley
from bayesval.estimators.layered import LayeredShapley, MonteCarloShapley
from bayesval.estimators.removal import RemovalCurves, removal_curves
from bayesval.estimators.utilities import LogisticRegressionUtility, SklearnUtility

__all__ = [
    "NOISE_MODES",
    "GradientSemivalues",
    "LinearModel",
    "LogisticModel",
    "MLPModel",
    "burn_in_values",
    "gradient_marginals",
    "mean_adjusted_variance",
    "mislabel_detection",
    "permutation_weights",
    "released_gradients",
    "DPKNNShapley",
    "KNNShapley",
    "LayeredShapley",
    "MonteCarloShapley",
    "RemovalCurves",
    "LogisticRegressionUtility",
    "SklearnUtility",
    "TKNNShapley",
    "add_feature_noise",
    "balanced_split",
    "detection_auroc",
    "detection_aurocs",
    "detection_auroc_bound",
    "dp_variance_by_k",
    "fitted_slope",
    "flip_labels",
    "removal_curves",
    "standardise",
    "weighted_marginals",
]
