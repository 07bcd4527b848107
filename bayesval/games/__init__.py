"""The game layer: a utility of coalition masks, semivalue weights, samplers of fixed-size mask batches,
stopping rules, and results that merge and resume (docs/games.md)."""

from bayesval.games.samplers import PermutationSampler, SemivalueSampler, StratifiedSampler, UniformSampler
from bayesval.games.semivalues import exact_semivalue, semivalue
from bayesval.games.stopping import MaxEvaluations, MaxTime, RankStability, StandardError, When
from bayesval.games.weights import BANZHAF, LEAVE_ONE_OUT, SHAPLEY, Semivalue, beta_shapley

__all__ = [
    "BANZHAF",
    "LEAVE_ONE_OUT",
    "SHAPLEY",
    "MaxEvaluations",
    "MaxTime",
    "PermutationSampler",
    "RankStability",
    "SemivalueSampler",
    "Semivalue",
    "StandardError",
    "StratifiedSampler",
    "UniformSampler",
    "When",
    "beta_shapley",
    "exact_semivalue",
    "semivalue",
]
