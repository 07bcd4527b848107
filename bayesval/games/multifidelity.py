"""phi(u) of a cheap surrogate game u from many evaluations, with its standard error: the estimated half of a
multi-fidelity control variate (`bayesval.games.control.EstimatedControl`; docs/games.md, "Multi-fidelity control
variates").

The expensive game v is then sampled as v - u on few coalitions, from another key, and phi^(v) = phi^(u) +
phi^(v - u) is unbiased with the two parts' variances added. For Shapley values phi(u) comes from the regression
estimator (`RegressionSampler`: every evaluation serves every player, docs/games.md, "Regression sampling"); for
other semivalues from the game layer's default sampler for them.
"""

from __future__ import annotations

from functools import partial

import jax
import numpy as np

from bayesval.games.control import EstimatedControl, Surrogate, SurrogateLevels, surrogate_values
from bayesval.games.regression import RegressionSampler
from bayesval.games.samplers import default_sampler
from bayesval.games.semivalues import semivalue
from bayesval.games.stopping import MaxEvaluations, StandardError
from bayesval.games.utilities import KeylessUtility
from bayesval.games.weights import Semivalue, as_semivalue
from bayesval.validation import check_count, check_int, check_positive

DEFAULT_MAX_EVALUATIONS = 100_000  # surrogate evaluations at most, where the tolerance is not reached first
# A cheaper level of `SurrogateLevels` is estimated to this share of the tolerance of the level above (its variance a
# 16th of the level's), from at most CHEAP_MAX_EVALUATIONS evaluations in batches CHEAP_BATCH times the default.
LEVEL_SHARE = 1 / 4
CHEAP_MAX_EVALUATIONS = 1_000_000
CHEAP_BATCH = 16
# The cheaper levels' keys are folded into fold_in(key, LEVEL_STREAM), a batch index `semivalue` never reaches (it
# folds batch b into the key), so the top level keeps the key a single surrogate is sampled from, and its values.
LEVEL_STREAM = 2**31 - 1


def estimated_control(
    surrogate: Surrogate | SurrogateLevels,
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
    must not be the one the expensive game is sampled from (the two parts' errors must be independent).

    `SurrogateLevels` are estimated cheapest first, each level's phi against the estimate of the level below as a
    control variate (each level with its fallback to the levels below, `SurrogateLevels.up_to`), so that the
    evaluations of u are spent on u minus a cheaper surrogate: a cheaper level to LEVEL_SHARE of the tolerance of
    the level above (at most CHEAP_MAX_EVALUATIONS evaluations, batches CHEAP_BATCH times as large), each from its
    own key (the top level from `key`); the result's `below` holds the cheaper level's estimate."""
    num_players = check_int("num_players", num_players, minimum=2)
    tolerance = check_positive("tolerance", tolerance)
    max_evaluations = check_count("max_evaluations", max_evaluations, minimum=1)
    weights = as_semivalue(weights)
    if batch_size is None:
        batch_size = 2 * num_players if weights.kind == "shapley" else 64
    depths = len(surrogate.levels) if isinstance(surrogate, SurrogateLevels) else 1
    control = None
    for depth in range(depths):
        level = surrogate if depth == depths - 1 else surrogate.up_to(depth)  # with its fallbacks below
        above = depths - 1 - depth  # the levels above this one
        cap, batch = (max_evaluations, batch_size) if above == 0 else (CHEAP_MAX_EVALUATIONS, CHEAP_BATCH * batch_size)
        level_name = name if above == 0 else f"{name}'s level {depth + 1} of {depths}"
        control = _estimate(
            level,
            num_players,
            _level_key(key, above, depth),
            tolerance * LEVEL_SHARE**above,
            weights,
            cap,
            batch,
            level_name,
            fallback,
            control,
        )
    return control


def _level_key(key, above: int, depth: int):
    """The key of the level `depth` (with `above` levels above it): `key` itself for the top level."""
    return key if above == 0 else jax.random.fold_in(jax.random.fold_in(key, LEVEL_STREAM), depth)


def _estimate(
    surrogate: Surrogate, num_players: int, key, tolerance, weights, max_evaluations, batch_size, name, fallback, below
) -> EstimatedControl:
    """One level of `estimated_control`: phi of `surrogate`, against the estimated control `below` if any."""
    sampler = RegressionSampler() if weights.kind == "shapley" else default_sampler(weights)
    result = semivalue(
        KeylessUtility(partial(surrogate_values, surrogate, fallback=fallback)),
        num_players,
        key,
        weights=weights,
        sampler=sampler,
        stop=StandardError(tolerance) | MaxEvaluations(max_evaluations),
        batch_size=batch_size,
        control=below,
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
        below,
    )
