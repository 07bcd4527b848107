"""The papers' experiment protocols on top of the estimators: corruption and its detection (Wang, Yang & Jia 2023,
Sec. 6), point-removal curves (Watson et al. 2023, Fig. 1), and the DP variance by number of permutations and
mislabel detection of Zhou et al. (2024, Secs. 6.1-6.2)."""

from bayesval.experiments.detection import (
    add_feature_noise,
    balanced_split,
    detection_auroc,
    detection_aurocs,
    flip_labels,
    standardise,
)
from bayesval.experiments.gradients import detection_auroc_bound, dp_variance_by_k, fitted_slope, mislabel_detection
from bayesval.experiments.removal import RemovalCurves, removal_curves

__all__ = [
    "RemovalCurves",
    "add_feature_noise",
    "balanced_split",
    "detection_auroc",
    "detection_auroc_bound",
    "detection_aurocs",
    "dp_variance_by_k",
    "fitted_slope",
    "flip_labels",
    "mislabel_detection",
    "removal_curves",
    "standardise",
]
