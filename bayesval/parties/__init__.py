"""The parties of a private collaboration (Sim et al. 2023): a party and its release, what crosses the privacy
boundary, the Bayesian surprise of coalitions, the party valuation and the model rewards (docs/architecture.md)."""

from bayesval.parties import rewards
from bayesval.parties.boundary import PerturbedStatistic
from bayesval.parties.party import Party, clip_records

__all__ = ["Party", "PerturbedStatistic", "clip_records", "rewards"]
