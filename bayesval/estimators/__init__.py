"""Data-point valuation: KNN-Shapley, TKNN-Shapley, DP-TKNN-Shapley and the naive DP-KNN baseline; Layered Shapley,
DP Layered Shapley and the Monte Carlo baseline on retraining utilities, with removal curves."""

from bayesval.estimators.evaluation import (
    add_feature_noise,
    balanced_split,
    detection_auroc,
    detection_aurocs,
    flip_labels,
    standardise,
)
from bayesval.estimators.knn import DPKNNShapley, KNNShapley, TKNNShapley
from bayesval.estimators.layered import LayeredShapley, MonteCarloShapley
from bayesval.estimators.removal import RemovalCurves, removal_curves
from bayesval.estimators.utilities import LogisticRegressionUtility, SklearnUtility

__all__ = [
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
    "flip_labels",
    "removal_curves",
    "standardise",
]
