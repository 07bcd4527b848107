"""What identifies a sampled semivalue's game, so that a run resumes or merges only with the same game
(docs/games.md, "Resume and merge").

A state keeps its game's fingerprint: the caller's own `game_id` where one is given (the party valuation gives the
hash of its model, releases and settings), else the utility's qualified name, its values on `PROBES` fixed probe
coalitions under a fixed key, and what it is made of (`bayesval.digests.content_parts`: a function's code and what it
closes over, an object's data, read before the utility is first called). The values tell two utilities apart: a run
resumed with a utility whose probe values differ is refused, naming both; one that agrees on them under another name
(a function renamed, or wrapped in a lambda) is warned about. The contents tell apart two utilities of one name that
agree on the probes (two `Airport` games whose costs differ where no probe coalition looks): refused, naming the
parts that differ. The probes cost `PROBES` evaluations a run, not counted among its draws.
"""

from __future__ import annotations

import functools

import jax
import numpy as np

from bayesval.games.utilities import KeylessUtility

PROBES = 4  # coalitions valued to fingerprint a utility: the grand coalition and three fixed random ones
PROBE_SEED = 20_261_128  # of the probe coalitions and of the key they are valued with


def probe_masks(num_players: int) -> np.ndarray:
    """(PROBES, n) the probe coalitions of an n-player game: everyone, then three coalitions that hold each player
    with probability 1/2, 1/4 and 3/4 (fixed by `PROBE_SEED`, so the same for every run of n players)."""
    uniform = np.random.default_rng(PROBE_SEED).random((PROBES - 1, num_players))
    return np.vstack([np.ones(num_players, bool), uniform < np.array([[0.5], [0.25], [0.75]])])


def probe_key() -> jax.Array:
    """The key the probe coalitions are valued with: the same for every run, so a noisy utility's probe values
    repeat."""
    return jax.random.key(PROBE_SEED)


def made_of(utility):
    """What identifies a utility: its `values_of` where it is a `KeylessUtility` (a wrapper of any function of the
    masks), else the utility itself."""
    return utility.values_of if isinstance(utility, KeylessUtility) else utility


def utility_name(utility) -> str:
    """The utility's qualified name: a function's, the function under a `functools.partial` or a `KeylessUtility`,
    a bound method's class and name, or a callable object's class."""
    utility = made_of(utility)
    while isinstance(utility, functools.partial):
        utility = utility.func
    name = getattr(utility, "__qualname__", None)
    if name is None:
        name = type(utility).__qualname__
    return f"{getattr(utility, '__module__', None) or type(utility).__module__}.{name}"


def fingerprint(game_id: str | None, name: str, probe_values: np.ndarray | None, content: dict | None = None) -> dict:
    """A state's game fingerprint: {"id": game_id} where the caller named the game, else {"utility": name, "probes":
    the values (R, PROBES) of the probe coalitions, "content": the utility's parts}, its parts those of
    `bayesval.digests.content_parts`."""
    if game_id is not None:
        return {"id": game_id}
    return {"utility": name, "probes": np.asarray(probe_values, np.float64).tolist(), "content": content}


def check_game_id(game_id) -> str | None:
    if game_id is not None and (not isinstance(game_id, str) or not game_id):
        raise TypeError(f"game_id must be a non-empty string naming the game (or None), got {game_id!r}")
    return game_id


def evaluated(utility, key, masks, num_players: int, first: bool = True):
    """utility(key, masks); on its `first` call, a TypeError, ValueError or IndexError it raises (a shape error from
    JAX, an index out of a table) said again in the caller's words: a utility written for another number of players
    fails so, on the first masks it is given (a later error is the utility's own, and is left as it is)."""
    if not first:
        return utility(key, masks)
    try:
        return utility(key, masks)
    except (TypeError, ValueError, IndexError) as error:
        raise ValueError(
            f"utility(key, masks) raised {type(error).__name__} on masks of shape (B, num_players) = "
            f"{tuple(np.shape(masks))}: {str(error).strip()[:300].rstrip('.')}. Is the utility written for num_players="
            f"{num_players} players? Pass the number of players the utility values"
        ) from error
