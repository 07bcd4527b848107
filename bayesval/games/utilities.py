"""What a game's utility is: a function of a key and coalition masks (`Utility`), one whose values come from the masks
alone (`KeylessUtility`), and the values a utility with an error of its own may return (`NoisyValues`)
(docs/games.md, "Design").

The form says what a sampled semivalue may rely on. A `Utility` is handed a fresh key in every batch, so its values of
one coalition are draws that may differ from batch to batch, however often they happened to agree; each row of a
batch must be a draw of its own (a utility that seeds a model with the key alone gives every copy of a coalition in
the batch the same value, which would then count as several draws: split the key by row; a run refuses such a utility
once its copies show it, `KeyAloneCheck`). A `KeylessUtility` gives a coalition one value (or one set of R
estimates) each time it is asked: a group of draws of a single coalition (the empty one, everyone else) whose values
agree is then exact.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from math import comb, log
from typing import NamedTuple, Protocol

import jax
import numpy as np

from bayesval.games.masks import members


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


# A run refuses a utility whose copies look like one draw once the chance of what it saw, were each row a draw of its
# own, is below this (Ville's inequality bounds the chance of a false refusal by it, over a whole run), within its
# first batches: a design that draws a coalition several times a batch shows it there, and rarer copies weigh little.
KEY_ALONE_CHANCE = 1e-6
KEY_ALONE_BATCHES = 4
# Two batches' values of a coalition differ where they differ by more than this share of the larger (or of 1): well
# above float32's rounding (1.2e-7), which can differ between batches of other shapes for a utility of the masks alone.
KEY_ALONE_DIFFERENT = 1e-5
SHOWN_MEMBERS = 8  # members named in the refusal


@dataclass
class KeyAloneCheck:
    """Whether a keyed utility draws its noise from each batch's key alone, not from each row (module docstring).

    Where a batch holds several copies of a coalition, they are draws of one value only if the rows are draws of their
    own. Two batches whose copies of a coalition each agree exactly, on values that differ (by more than
    `KEY_ALONE_DIFFERENT`), are evidence against that: were every copy an independent draw, given the values the two
    batches hold between them (c1 copies in one, c2 in the other) the chance that each batch holds one value alone is
    1 / binom(c1 + c2, c1) (twice that where c1 = c2). A coalition's batches with copies are paired in the order they
    come (the first with the second, the third with the fourth), whatever their values, so the inverse chances of the
    pairs (1 for a pair of one value, 0 for copies that differ) have expectation at most 1 given those values, and
    their product over the pairs and the coalitions is a test martingale: by Ville's inequality (Ramdas et al. 2023,
    "Game-theoretic statistics and safe anytime-valid inference", Statistical Science 38(4)) the run, which stops
    with a ValueError once the product passes 1 / `KEY_ALONE_CHANCE`, refuses a utility whose rows are draws of their
    own with at most that chance. That holds where how many copies a batch holds does not depend on the values before
    it (permutations, uniform coalitions, the semivalue's own distribution); stratified sampling's allocation and
    regression sampling's pilot choose later batches from earlier values, for which the bound is not proved. Copies
    of a coalition that differ within a batch show that the rows are draws, and the check ends there. A deterministic
    utility gives every copy one value in every batch: no evidence.

    It reads a run's first `KEY_ALONE_BATCHES` batches alone, so it catches the designs whose batches hold many copies
    of a coalition, where copies do most harm: leave-one-out and permutations of 8 players in batches of 8 are refused
    on their second batch. It misses rarer copies: some where they weigh little (regression sampling of 8 players,
    whose errors held), some where they make the noise's share of the standard error 1.2-1.4 times too small (uniform
    coalitions of 3, 4 or 7 players; leave-one-out of 2 players in batches of 2, which cannot reach the bound in 4
    batches) (docs/games.md, "Design"). Only for one estimate per coalition (R = 1): the spread of R > 1 estimates'
    semivalues holds errors that correlate between coalitions (docs/games.md, "The utility's own error")."""

    names: list[str] | None = None
    unpaired: dict[bytes, tuple[float, int]] = field(default_factory=dict)  # a coalition's batch not yet paired
    log_chance: float = 0.0
    batches: int = 0
    ended: bool = False

    def add(self, masks, values) -> None:
        """One batch: masks (M, n), values (M,) or (R, M)."""
        values = np.atleast_2d(np.asarray(values))
        self.batches += 1
        if self.ended or values.shape[0] != 1 or self.batches > KEY_ALONE_BATCHES:
            self.ended = True
            return
        masks = np.asarray(masks, bool)
        rows, first, inverse, copies = np.unique(
            np.packbits(masks, axis=1), axis=0, return_index=True, return_inverse=True, return_counts=True
        )
        copied = np.flatnonzero(copies > 1)
        if not len(copied):
            return
        low, high = np.full(len(rows), np.inf), np.full(len(rows), -np.inf)
        np.minimum.at(low, inverse.ravel(), values[0])
        np.maximum.at(high, inverse.ravel(), values[0])
        if (high > low)[copied].any():  # copies that differ: the rows are draws of their own
            self.ended = True
            return
        for row in copied:
            code, value, count = rows[row].tobytes(), float(low[row]), int(copies[row])
            earlier = self.unpaired.pop(code, None)
            if earlier is None:  # the first batch of a pair: pairs are the coalition's batches 1 and 2, 3 and 4, ...
                self.unpaired[code] = (value, count)
                continue
            if abs(earlier[0] - value) <= KEY_ALONE_DIFFERENT * max(1.0, abs(earlier[0]), abs(value)):
                continue  # a pair of one value: as likely whatever the rows are
            pair = comb(earlier[1] + count, count) / (2 if earlier[1] == count else 1)
            self.log_chance -= log(pair)
            if self.log_chance < log(KEY_ALONE_CHANCE):
                raise ValueError(self._refusal(masks[first[row]], value, count, earlier))

    def _refusal(self, mask, value: float, count: int, earlier: tuple[float, int]) -> str:
        named = members(mask, self.names)
        coalition = f"{named[:SHOWN_MEMBERS]}".rstrip("]") + (", ...]" if len(named) > SHOWN_MEMBERS else "]")
        return (
            f"the utility gave each copy of a coalition in a batch one value, in each of its first {self.batches} "
            f"batches (coalition {coalition} of {len(named)} players: {count} copies of {value!r}, and {earlier[1]} "
            f"of {earlier[0]!r} in an earlier batch), which draws of their own do with a chance under "
            f"{KEY_ALONE_CHANCE:g}: its values follow the batch's key alone, not each row, so the copies would count "
            "as draws of their own, which they are not, and the standard errors would not hold (for leave-one-out "
            "they come out tens of times too small). If it is noisy, split the key by row (keys = "
            "jax.random.split(key, len(masks)), one for each coalition's value); if its values do not depend on the "
            "key, pass KeylessUtility(lambda masks: ...)"
        )
