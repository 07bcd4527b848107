"""Shapley values of coalition games over parties (Sim et al. 2023, Sec. 4; Algorithm 2 line 14): the Shapley case
of the game layer (`bayesval.games.weights`, `bayesval.games.semivalues`), with the signatures `valuate` uses.

Coalitions are boolean masks; a game on n players is its value vector over all 2^n coalitions,
indexed by the bitmask sum_i mask_i 2^i (index 0 = the empty coalition, value 0).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import jax
import numpy as np

from bayesval.games.masks import coalition_masks, mask_codes
from bayesval.games.samplers import PermutationSampler
from bayesval.games.semivalues import semivalue
from bayesval.games.stopping import MaxEvaluations, StandardError, When
from bayesval.games.utilities import KeylessUtility
from bayesval.games.weights import SHAPLEY, semivalue_matrix

__all__ = [
    "coalition_masks",
    "exact_shapley",
    "exact_shapley_per_repeat",
    "mask_codes",
    "permutation_shapley",
    "shapley_matrix",
]


def shapley_matrix(num_players: int) -> np.ndarray:
    """A with phi = A v for v over all 2^n coalitions: A[i, C u i] = w(|C|), A[i, C] = -w(|C|),
    w(s) = 1 / (n binom(n-1, s)) for C not containing i."""
    return semivalue_matrix(num_players, SHAPLEY)


def exact_shapley(values: np.ndarray, stderr: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Shapley values and their standard errors from all 2^n coalition values (independent errors)."""
    values = np.asarray(values, dtype=np.float64)
    num_players = int(np.log2(len(values)))
    if 2**num_players != len(values):
        raise ValueError(f"need the values of all 2^n coalitions, got {len(values)}")
    matrix = shapley_matrix(num_players)
    stderr = np.zeros_like(values) if stderr is None else np.asarray(stderr, dtype=np.float64)
    return matrix @ values, np.sqrt((matrix**2) @ stderr**2)


def exact_shapley_per_repeat(values: np.ndarray) -> np.ndarray:
    """Shapley values (R, n) of R estimates of a game, each over all 2^n coalitions (R, 2^n). Shapley is linear,
    so the spread of these rows is the spread of the values, whatever the correlation between coalitions."""
    values = np.atleast_2d(np.asarray(values, dtype=np.float64))
    num_players = int(np.log2(values.shape[1]))
    if 2**num_players != values.shape[1]:
        raise ValueError(f"need the values of all 2^n coalitions, got {values.shape[1]}")
    return values @ shapley_matrix(num_players).T


def permutation_shapley(
    utility: Callable[[np.ndarray], np.ndarray],
    num_players: int,
    key: jax.Array,
    *,
    tolerance: float = 1e-2,
    batch_size: int = 32,
    max_permutations: int = 10_000,
    min_permutations: int = 64,
    complete: Callable[[], bool] | None = None,
    progress_bar: bool = False,
) -> tuple[np.ndarray, np.ndarray, int]:
    """Monte Carlo Shapley values by permutation sampling (Castro et al. 2009) with a stopping rule.

    `utility` maps a batch of masks (B, n) to values (B,), or to R independent estimates of them (R, B).
    Each permutation adds one marginal contribution per player, of the mean estimate; the standard error adds
    the spread over r of the Shapley values from estimate r alone (`bayesval.results.state`). Sampling stops once
    every standard error is at most `tolerance` (after `min_permutations`), at `max_permutations` (rounded up to
    whole batches), or as soon as `complete()` says the utility has nothing left to learn (every coalition known:
    then exact Shapley is cheaper). Returns (values, stderr, count).
    """
    # the limits count whole batches, each of a batch's utility evaluations (its permutations and the ends they share)
    per_batch = PermutationSampler().plan(num_players, batch_size, SHAPLEY).num_masks
    at_least = MaxEvaluations(math.ceil(max(min_permutations, 2) / batch_size) * per_batch)
    stop = (StandardError(tolerance, min_count=2) & at_least) | MaxEvaluations(
        math.ceil(max_permutations / batch_size) * per_batch
    )
    if complete is not None:
        stop = stop | When(complete)
    result = semivalue(
        KeylessUtility(utility),
        num_players,
        key,
        weights=SHAPLEY,
        sampler=PermutationSampler(),
        stop=stop,
        batch_size=batch_size,
        progress_bar=progress_bar,
    )
    return result.values, result.stderr, result.state.batch_draws
