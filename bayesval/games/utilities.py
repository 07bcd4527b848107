"""What a game's utility is: a function of a key and coalition masks (`Utility`), one whose values come from the masks
alone (`KeylessUtility`), and the values a utility with an error of its own may return (`NoisyValues`)
(docs/games.md, "Design").

The form says what a sampled semivalue may rely on. A `Utility` is handed a fresh key in every batch, so its values of
one coalition are draws that may differ from batch to batch, however often they happened to agree; each row of a
batch must be a draw of its own (a utility that seeds a model with the key alone gives every copy of a coalition in
the batch the same value, which then counts as several draws: split the key by row). A `KeylessUtility` gives a
coalition one value (or one set of R estimates) each time it is asked: a group of draws of a single coalition (the
empty one, everyone else) whose values agree is then exact.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import NamedTuple, Protocol

import jax
import numpy as np


class Utility(Protocol):
    """The contract of a game's utility: a pure function of a key and a batch of coalition masks (B, n) boolean,
    returning their values (B,), or (R, B) for R independent estimates of each (as the party surprise gives one per
    repeat). Any plain function with this signature is one; its values may depend on the key (module docstring)."""

    def __call__(self, key: jax.Array, masks: jax.Array) -> jax.Array: ...


@dataclass(frozen=True)
class KeylessUtility:
    """A utility that takes no key: `values_of(masks)` -> values, masks (B, n) a NumPy boolean array, values (B,) or
    (R, B). Its signature says what `semivalue` may rely on: the coalitions' values come from the masks alone, so no
    key goes down to it (each batch's key is still split, and the coalitions drawn are those of any utility with
    that key), and a coalition valued twice has the same values. For a deterministic utility, or one that keys its
    own randomness by coalition, as the party surprise derives each coalition posterior's chains from the coalition
    and the repeat (`bayesval.parties.keys`). Callable as a `Utility` (the key it is handed is not read)."""

    values_of: Callable[[np.ndarray], np.ndarray]

    def __call__(self, key: jax.Array | None, masks) -> np.ndarray:
        return self.values_of(np.asarray(masks))


class NoisyValues(NamedTuple):
    """What a utility whose evaluations carry their own Monte Carlo error may return instead of bare values: the
    values (B,) or (R, B) and the variance of each (the same shape; 0 where a value is exact), e.g. a coalition
    posterior's squared standard error. A utility that returns positive variances is noisy, and the default
    sampler for Shapley is then regression sampling (docs/games.md, "The default sampler")."""

    values: jax.Array
    variances: jax.Array
