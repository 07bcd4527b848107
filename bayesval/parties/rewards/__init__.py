"""Model rewards (Sim et al. 2023, Secs. 4-5): rho-Shapley targets and the incentive report, reward control by
likelihood tempering or noise addition (two `RewardMechanism`s behind one `solve`), and the metrics that judge
rewards (similarity, MNLP on a held-out set)."""

from bayesval.divergence import kl_between
from bayesval.parties.rewards.allocation import Rewards
from bayesval.parties.rewards.control import NoiseAddition, RewardMechanism, Tempering
from bayesval.parties.rewards.metrics import base_rate_mnlp, mnlp_classification, mnlp_regression
from bayesval.parties.rewards.report import IncentiveReport, incentive_report
from bayesval.parties.rewards.targets import (
    UndefinedTargets,
    nonnegative_shapley,
    rationality_bound,
    rho_shapley_targets,
)

__all__ = [
    "IncentiveReport",
    "NoiseAddition",
    "RewardMechanism",
    "Rewards",
    "Tempering",
    "UndefinedTargets",
    "base_rate_mnlp",
    "incentive_report",
    "kl_between",
    "mnlp_classification",
    "mnlp_regression",
    "nonnegative_shapley",
    "rationality_bound",
    "rho_shapley_targets",
]
