"""Coalitions as boolean masks (docs/games.md, "Design"), and their bitmask codes.

A coalition of n players is a boolean mask of shape (n,); its code is sum_i mask_i 2^i, so the 2^n coalitions
are codes 0 (the empty coalition) to 2^n - 1 (the grand coalition).
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np


def coalition_masks(num_players: int, include_empty: bool = False) -> np.ndarray:
    """All coalitions as boolean masks, shape (2^n [- 1], n), row r = bitmask r (+1 without the empty set)."""
    if num_players < 1:
        raise ValueError(f"a game needs at least one player, got {num_players}")
    return code_masks(np.arange(0 if include_empty else 1, 2**num_players), num_players)


def code_masks(codes, num_players: int):
    """Boolean masks (..., n) of bitmask codes (numpy in, numpy out; JAX in, JAX out)."""
    xp = jnp if isinstance(codes, jnp.ndarray) and not isinstance(codes, np.ndarray) else np
    return ((codes[..., None] >> xp.arange(num_players)) & 1).astype(bool)


def mask_codes(masks: np.ndarray) -> np.ndarray:
    """Bitmask index of each boolean mask row."""
    masks = np.asarray(masks, dtype=bool)
    return masks @ (1 << np.arange(masks.shape[-1]))


def members(mask, names: list[str] | None = None) -> list:
    """The players of one mask: their names, or their indices where no names are given."""
    indices = np.flatnonzero(np.asarray(mask, bool)).tolist()
    return indices if names is None else [names[i] for i in indices]
