"""Layered Shapley, DP Layered Shapley and the Monte Carlo permutation baseline on retraining utilities
(Watson et al. 2023; docs/layered.md)."""

from bayesval.estimators.layered.estimators import LayeredShapley, MonteCarloShapley, layered_shapley
from bayesval.estimators.layered.utilities import LogisticRegressionUtility, SklearnUtility

__all__ = ["LayeredShapley", "LogisticRegressionUtility", "MonteCarloShapley", "SklearnUtility", "layered_shapley"]
