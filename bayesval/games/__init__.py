"""The game layer: a utility of coalition masks, semivalue weights, samplers of fixed-size mask batches,
stopping rules, and results that merge and resume (docs/games.md); games with closed-form semivalues to test them."""

from bayesval.games.analytic import (
    Airport,
    Miner,
    MinimumSpanningTree,
    Shoes,
    SymmetricVoting,
    UnanimitySum,
    WeightedVoting,
)
from bayesval.games.control import ControlVariate
from bayesval.games.regression import RegressionSampler
from bayesval.games.samplers import PermutationSampler, SemivalueSampler, StratifiedSampler, UniformSampler
from bayesval.games.semivalues import exact_semivalue, semivalue
from bayesval.games.stopping import MaxEvaluations, MaxTime, RankStability, StandardError, When
from bayesval.games.utilities import KeylessUtility, NoisyValues, Utility
from bayesval.games.weights import BANZHAF, LEAVE_ONE_OUT, SHAPLEY, Semivalue, beta_shapley

__all__ = [
    "BANZHAF",
    "LEAVE_ONE_OUT",
    "SHAPLEY",
    "Airport",
    "ControlVariate",
    "KeylessUtility",
    "MaxEvaluations",
    "MaxTime",
    "Miner",
    "MinimumSpanningTree",
    "NoisyValues",
    "PermutationSampler",
    "RankStability",
    "RegressionSampler",
    "SemivalueSampler",
    "Semivalue",
    "Shoes",
    "StandardError",
    "StratifiedSampler",
    "SymmetricVoting",
    "UnanimitySum",
    "UniformSampler",
    "Utility",
    "WeightedVoting",
    "When",
    "beta_shapley",
    "exact_semivalue",
    "semivalue",
]
