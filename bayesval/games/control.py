"""A control variate for sampled semivalues: a surrogate game u, known on every coalition, whose semivalue is exact
(docs/games.md, "Control variates").

Semivalues are linear in the game, so phi(v) = phi(u) + phi(v - u) for any u that is a fixed function of the
coalition. Sampling the difference v - u and adding phi(u), computed exactly over all 2^n coalitions, estimates
phi(v) without bias whatever u is; its variance is that of the sampled marginals of v - u, which is small as far as
the marginals of u track those of v (Glasserman 2004, Sec. 4.1, with the coefficient fixed at 1). A surrogate that
tracks v poorly costs precision, never correctness.

Beyond the players a table holds, `EstimatedControl` replaces the exact phi(u) by an estimate from many cheap
evaluations of u, with its variance (a multi-fidelity estimate, as ProxySHAP and Regression MSR do, here with an error
bar): phi^(v) = phi^(u) + phi^(v - u), the two parts sampled from independent keys, so their variances add and the
sum stays unbiased for phi(v) whatever u is (Peherstorfer, Willcox & Gunzburger 2018, Sec. 3, with the coefficient
fixed at 1).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from bayesval.games.masks import coalition_masks, mask_codes
from bayesval.games.weights import Semivalue, coalition_coefficients
from bayesval.results.variance import MAX_VALUE
from bayesval.validation import check_magnitude

MAX_CONTROL_PLAYERS = 20  # a surrogate's table holds 2^n values, and its semivalue sums over them


@dataclass(frozen=True, eq=False)
class ControlVariate:
    """A surrogate game u for `bayesval.games.semivalue(..., control=...)`.

    table  (2^n,) u of every coalition in code order (code sum_i mask_i 2^i, so code 0 is the empty coalition and
           2^n - 1 the grand coalition), finite
    name   what the surrogate is, for results and errors
    """

    table: np.ndarray
    name: str = "surrogate"

    def __post_init__(self) -> None:
        table = np.asarray(self.table, np.float64)
        num_players = int(np.log2(max(table.size, 1)))
        if table.ndim != 1 or table.size != 2**num_players or not 1 <= num_players <= MAX_CONTROL_PLAYERS:
            raise ValueError(
                f"a control variate's table holds u of every coalition of n players, 2^n values in code order for "
                f"1 <= n <= {MAX_CONTROL_PLAYERS}; got shape {np.shape(self.table)}"
            )
        if not np.isfinite(table).all():
            raise ValueError(f"a control variate's table must be finite; {np.sum(~np.isfinite(table))} values are not")
        check_magnitude("a control variate's table", table, MAX_VALUE, "its differences from the game would overflow")
        object.__setattr__(self, "table", table)

    @property
    def num_players(self) -> int:
        return self.table.size.bit_length() - 1

    def semivalue(self, weights: Semivalue) -> np.ndarray:
        """phi(u) (n,) of the `weights` semivalue, exactly: sum_c C[c] u(c) (`coalition_coefficients`)."""
        masks = coalition_masks(self.num_players, include_empty=True)
        return self.table @ coalition_coefficients(masks, weights)

    def __call__(self, masks) -> np.ndarray:
        """u of each coalition mask (B, n): (B,)."""
        return self.table[mask_codes(np.asarray(masks, bool))]


class SurrogateValues(NamedTuple):
    """A surrogate's values of a batch of coalitions (B,) and whether each could be had (B,): False where the
    surrogate failed for that coalition (a fit that did not converge)."""

    values: np.ndarray
    usable: np.ndarray


Surrogate = Callable[[np.ndarray], "SurrogateValues | np.ndarray"]  # masks (B, n) -> u of each, or with flags


@dataclass(frozen=True, eq=False)
class SurrogateLevels:
    """A surrogate game u with cheaper surrogates of itself: `levels`, the cheapest first and the closest last, each a
    `Surrogate`. Called, it is the closest level, and where that fails for a coalition (flag False, or not finite)
    the closest level below that does not: still a fixed function of the coalition, nearer the game than a constant
    fallback. `bayesval.games.multifidelity.estimated_control` estimates phi of each level against the estimate of
    the levels below as a control variate (a multi-fidelity hierarchy, Peherstorfer, Willcox & Gunzburger 2018,
    Sec. 3.2), so that the costly evaluations of u are spent on its difference from a cheaper surrogate, whose
    marginals vary less (docs/games.md, "Multi-fidelity control variates")."""

    levels: tuple

    def __post_init__(self) -> None:
        levels = tuple(self.levels)
        if not levels or not all(callable(level) for level in levels):
            raise TypeError("a surrogate's levels must be one or more functions of coalition masks, the cheapest first")
        object.__setattr__(self, "levels", levels)

    def up_to(self, depth: int) -> SurrogateLevels:
        """The levels up to `depth` (0 the cheapest), with their fallbacks."""
        return SurrogateLevels(self.levels[: depth + 1])

    def __call__(self, masks) -> SurrogateValues:
        masks = np.asarray(masks, bool)
        values, usable = _flagged(self.levels[-1], masks)
        failed = np.flatnonzero(~usable)
        if len(failed) and len(self.levels) > 1:
            values[failed], usable[failed] = _flagged(self.up_to(len(self.levels) - 2), masks[failed])
        return SurrogateValues(values, usable)


def surrogate_values(surrogate: Surrogate, masks, fallback: float = 0.0) -> np.ndarray:
    """u (B,) of the coalition masks (B, n): the surrogate's values, `fallback` where it failed or gave a value that
    is not finite. A failed coalition gets the same `fallback` every time, so u stays a fixed function of the
    coalition, and a control built on it unbiased (its difference from the game is then the game itself there)."""
    values, usable = _flagged(surrogate, np.asarray(masks, bool))
    return np.where(usable, values, fallback)


def _flagged(surrogate: Surrogate, masks: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The surrogate's values of `masks` (B,) and whether each is usable (flagged so, and finite)."""
    given = surrogate(masks)
    values, usable = given if isinstance(given, SurrogateValues) else (given, None)
    values = np.array(values, np.float64)
    if values.shape != (len(masks),):
        raise ValueError(
            f"a surrogate must give one value per coalition, shape ({len(masks)},) for masks of shape "
            f"{np.shape(masks)}; got shape {values.shape}"
        )
    usable = np.isfinite(values) if usable is None else np.asarray(usable, bool) & np.isfinite(values)
    return values, usable


@dataclass(frozen=True, eq=False)
class EstimatedControl:
    """A surrogate game u known as a function of the coalition whose semivalue is estimated, not computed over all
    2^n coalitions: a multi-fidelity control variate for `bayesval.games.semivalue(..., control=...)` beyond the
    players a table holds (docs/games.md, "Multi-fidelity control variates"). `estimated_control`
    (`bayesval.games.multifidelity`) makes one from many cheap evaluations of u.

    surrogate  masks (B, n) -> u of each (B,), or `SurrogateValues` with flags; a coalition it fails for (flag False,
               or not finite) takes `fallback`, in the estimate of phi(u) and in the draws of v - u alike
    estimate   (n,) the estimate of phi(u), of the semivalue `semivalue_name`
    variances  (n,) its variance: the run of v - u adds it to its own, from independent keys
    dof        (n,) the variance's degrees of freedom
    evaluations  the evaluations of u that the estimate spent (for results)
    below      the estimated control of a cheaper surrogate that this estimate was sampled against (`SurrogateLevels`),
               whose variance `variances` holds; None where u was sampled alone
    """

    surrogate: Surrogate
    estimate: np.ndarray
    variances: np.ndarray
    dof: np.ndarray
    semivalue_name: str
    name: str = "surrogate"
    fallback: float = 0.0
    evaluations: int = 0
    below: EstimatedControl | None = None

    def __post_init__(self) -> None:
        if not callable(self.surrogate):
            raise TypeError(f"surrogate must be a function of coalition masks, got {type(self.surrogate).__name__}")
        arrays = [np.asarray(part, np.float64) for part in (self.estimate, self.variances, self.dof)]
        if arrays[0].ndim != 1 or any(part.shape != arrays[0].shape for part in arrays):
            shapes = [np.shape(part) for part in (self.estimate, self.variances, self.dof)]
            raise ValueError(f"estimate, variances and dof must be of shape (n,) alike, got {shapes}")
        if not (np.isfinite(arrays[0]).all() and (arrays[1] >= 0).all() and (arrays[2] >= 0).all()):
            raise ValueError("an estimated control needs a finite estimate and variances and dof >= 0")
        for name, part in zip(("estimate", "variances", "dof"), arrays):
            object.__setattr__(self, name, part)

    @property
    def num_players(self) -> int:
        return self.estimate.size

    def semivalue(self, weights: Semivalue) -> np.ndarray:
        """The estimate of phi(u) (n,), for the semivalue it was estimated for."""
        if weights.name != self.semivalue_name:
            raise ValueError(
                f"this control's phi(u) estimates the {self.semivalue_name} semivalue, not the {weights.name}; "
                "estimate it again for that semivalue"
            )
        return self.estimate

    def __call__(self, masks) -> np.ndarray:
        """u of each coalition mask (B, n): (B,), `fallback` where the surrogate failed."""
        return surrogate_values(self.surrogate, masks, self.fallback)
