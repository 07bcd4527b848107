"""Reward control and the metrics that judge rewards: MNLP on a held-out set."""

from bayesval.rewards.metrics import base_rate_mnlp, mnlp_classification, mnlp_regression

__all__ = ["base_rate_mnlp", "mnlp_classification", "mnlp_regression"]
