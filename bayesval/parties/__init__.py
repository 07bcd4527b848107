"""The parties of a private collaboration (Sim et al. 2023): a party and its release, what crosses the privacy
boundary, the Bayesian surprise of coalitions, the party valuation and the model rewards (docs/architecture.md).

`check_parties` and `release_all` (`bayesval.parties.valuation`) check a list of parties and release them, as the
party path of `bayesval.valuate` does before it samples anything."""

from bayesval.parties import rewards
from bayesval.parties.boundary import PerturbedStatistic
from bayesval.parties.party import Party, clip_records
from bayesval.parties.valuation import check_parties, release_all

__all__ = ["Party", "PerturbedStatistic", "check_parties", "clip_records", "release_all", "rewards"]
