"""phi(u) of a cheap surrogate game u from many evaluations, with its standard error: the estimated half of a
multi-fidelity control variate (`bayesval.games.control.EstimatedControl`; docs/games.md, "Multi-fidelity control
variates").

The expensive game v is then sampled as v - u on few coalitions, from another key, and phi^(v) = phi^(u) +
phi^(v - u) is unbiased with the two parts' variances added. For Shapley values phi(u) comes from the regression
estimator (`RegressionSampler`: every evaluation serves every player, docs/games.md, "Regression sampling"); for
other semivalues from the game layer's default sampler for them.
"""

from __future__ import annotations

import numpy as np

from bayesval.games.control import EstimatedControl, Surrogate, surrogate_values
from bayesval.games.regression import RegressionSampler
from bayesval.games.samplers import default_sampler
from bayesval.games.semivalues import semivalue
from bayesval.games.stopping import MaxEvaluations, StandardError
from bayesval.games.weights import Semivalue, as_semivalue
from bayesval.validation import check_count, check_int, check_positive

DEFAULT_MAX_EVALUATIONS = 100_000  # surrogate evaluations at most, where the tolerance is not reached first


def estimated_control(
    surrogate: Surrogate,
    num_players: int,
    key,
    *,
    tolerance: float,
    weights: str | Semivalue = "shapley",
    max_evaluations: int = DEFAULT_MAX_EVALUATIONS,
    batch_size: int | None = None,
    name: str = "surrogate",
    fallback: float = 0.0,
) -> EstimatedControl:
    """An `EstimatedControl` of `surrogate` (masks (B, n) -> u (B,), or `SurrogateValues` with flags) over
    `num_players` players: phi(u) of the semivalue `weights` sampled from `key` until every standard error is at
    most `tolerance` (trusted: `StandardError`) or `max_evaluations` evaluations of u are spent, the regression
    estimator for Shapley values (batches of `batch_size` paired coalitions, by default the smallest even number at
    least 2n). A coalition the surrogate fails for takes `fallback` here and in the draws of v - u alike. The key
    must not be the one the expensive game is sampled from (the two parts' errors must be independent)."""
    num_players = check_int("num_players", num_players, minimum=2)
    tolerance = check_positive("tolerance", tolerance)
    max_evaluations = check_count("max_evaluations", max_evaluations, minimum=1)
    weights = as_semivalue(weights)
    sampler = RegressionSampler() if weights.kind == "shapley" else default_sampler(weights)
    if batch_size is None:
        batch_size = 2 * num_players if weights.kind == "shapley" else 64
    result = semivalue(
        lambda _, masks: surrogate_values(surrogate, masks, fallback),
        num_players,
        key,
        weights=weights,
        sampler=sampler,
        stop=StandardError(tolerance) | MaxEvaluations(max_evaluations),
        batch_size=batch_size,
        game_id=f"the estimated control {name}",
    )
    return EstimatedControl(
        surrogate,
        result.values,
        np.square(result.stderr),
        np.asarray(result.diagnostics["indices"]["dof"], np.float64),
        weights.name,
        name,
        fallback,
        result.state.evaluations,
    )
