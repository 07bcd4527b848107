"""A control variate for sampled semivalues: a surrogate game u, known on every coalition, whose semivalue is exact
(docs/games.md, "Control variates").

Semivalues are linear in the game, so phi(v) = phi(u) + phi(v - u) for any u that is a fixed function of the
coalition. Sampling the difference v - u and adding phi(u), computed exactly over all 2^n coalitions, estimates
phi(v) without bias whatever u is; its variance is that of the sampled marginals of v - u, which is small as far as
the marginals of u track those of v (Glasserman 2004, Sec. 4.1, with the coefficient fixed at 1). A surrogate that
tracks v poorly costs precision, never correctness.
"""

from __future__ import annotations

from dataclasses import dataclass

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
