"""Shapley values of coalition games over parties (Sim et al. 2023, Sec. 4; Algorithm 2 line 14).

Coalitions are boolean masks; a game on n players is its value vector over all 2^n coalitions,
indexed by the bitmask sum_i mask_i 2^i (index 0 = the empty coalition, value 0).
"""

from __future__ import annotations

from collections.abc import Callable
from math import comb

import jax
import numpy as np
from tqdm.auto import tqdm


def coalition_masks(num_players: int, include_empty: bool = False) -> np.ndarray:
    """All coalitions as boolean masks, shape (2^n [- 1], n), row r = bitmask r (+1 without the empty set)."""
    if num_players < 1:
        raise ValueError(f"a game needs at least one player, got {num_players}")
    codes = np.arange(0 if include_empty else 1, 2**num_players)
    return ((codes[:, None] >> np.arange(num_players)) & 1).astype(bool)


def mask_codes(masks: np.ndarray) -> np.ndarray:
    """Bitmask index of each boolean mask row."""
    masks = np.asarray(masks, dtype=bool)
    return masks @ (1 << np.arange(masks.shape[-1]))


def shapley_matrix(num_players: int) -> np.ndarray:
    """A with phi = A v for v over all 2^n coalitions: A[i, C u i] = w(|C|), A[i, C] = -w(|C|),
    w(s) = 1 / (n binom(n-1, s)) for C not containing i."""
    masks = coalition_masks(num_players, include_empty=True)
    sizes = masks.sum(axis=1)
    weights = np.array([1.0 / (num_players * comb(num_players - 1, s)) for s in range(num_players)])
    matrix = np.zeros((num_players, 2**num_players))
    for player in range(num_players):
        member = masks[:, player]
        matrix[player, member] = weights[sizes[member] - 1]
        matrix[player, ~member] = -weights[sizes[~member]]
    return matrix


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
    Each permutation adds one marginal contribution per player, of the mean estimate. The standard error
    combines the permutations' spread with the utility's own Monte Carlo error: the spread over r of the
    Shapley values computed from estimate r alone, on the same permutations. Sampling stops once every
    standard error is below `tolerance` (after `min_permutations`), at `max_permutations`, or as soon as
    `complete()` says the utility has nothing left to learn (every coalition known: then exact Shapley
    is cheaper). Returns (values, stderr, count).
    """
    total = np.zeros(num_players)
    total_sq = np.zeros(num_players)
    per_estimate = None
    count = 0
    bar = tqdm(total=max_permutations, disable=not progress_bar, desc="permutations")
    while count < max_permutations:
        key, sub = jax.random.split(key)
        size = min(batch_size, max_permutations - count)
        orders = np.asarray(jax.vmap(lambda k: jax.random.permutation(k, num_players))(jax.random.split(sub, size)))
        ranks = np.argsort(orders, axis=1)
        prefixes = ranks[:, None, :] < np.arange(num_players + 1)[None, :, None]  # (B, n+1, n)
        estimates = np.atleast_2d(np.asarray(utility(prefixes.reshape(-1, num_players))))
        steps = np.diff(estimates.reshape(len(estimates), size, num_players + 1), axis=2)  # player added at each step
        contributions = np.take_along_axis(steps, ranks[None], axis=2)  # (R, B, n)
        mean_contributions = contributions.mean(axis=0)
        total += mean_contributions.sum(axis=0)
        total_sq += (mean_contributions**2).sum(axis=0)
        per_estimate = contributions.sum(axis=1) + (0 if per_estimate is None else per_estimate)
        count += size
        bar.update(size)
        mean = total / count
        stderr = np.sqrt(np.maximum(total_sq / count - mean**2, 0.0) / max(count - 1, 1))
        if len(per_estimate) > 1:
            stderr = np.sqrt(stderr**2 + np.var(per_estimate / count, axis=0, ddof=1) / len(per_estimate))
        if (count >= min_permutations and stderr.max() < tolerance) or (complete is not None and complete()):
            break
    bar.close()
    return mean, stderr, count
