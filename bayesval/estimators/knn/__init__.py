"""Nearest-neighbour data valuation (Jia et al. 2019; Wang, Yang & Jia 2023): KNN-Shapley, Threshold-KNN-Shapley,
DP-TKNN-Shapley and the naive DP-KNN baseline (docs/knn.md)."""

from bayesval.estimators.knn.estimators import DPKNNShapley, KNNShapley, TKNNShapley

__all__ = ["DPKNNShapley", "KNNShapley", "TKNNShapley"]
