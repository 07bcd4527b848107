"""Honest variances of a sampled semivalue's groups: a standard error of 0 only where the value is exact.

The plain sample variance s^2 = m2 / (m - 1) of a group's m draws fails where sampling is needed most (measured in
docs/games.md, "Calibration"): a rare marginal (the airport game's cheap players, a unanimity game's large
coalitions) leaves a group with no or one outlying draw, whose s^2 is 0 or small exactly when the mean is too low,
so z-scores reach 10 to 50 and a `StandardError` rule stops on a false convergence; a layer of two or three draws is
often all zeros. Each group's variance is therefore shrunk toward a prior variance tau^2 worth `PRIOR_DRAWS` draws
(the conjugate normal-inverse-gamma update of a variance, Gelman et al. 2013, Sec. 3.3):

    sigma~^2 = (m2 + k tau^2) / (m - 1 + k)

* tau^2 is the pooled variance of the index's *other* sampled groups (its other layers: an empirical Bayes prior
  that moves variance between layers without inflating the total when the layers have equal counts);
* where there are none, or they never varied, tau^2 = (r / 2)^2, the largest variance of a number within the
  index's observed range r (its exact groups included: the airport game's cheap player shows its cost in the size-0
  group, so an unseen cost in the middle cannot hide behind a range of 0), or the game's largest range where the
  index's draws never varied at all.

Groups of a single coalition (`exact`: the empty coalition or everyone else) keep their sample variance, 0 for a
deterministic utility. A group with fewer than two draws has infinite variance: nothing is known of its spread.
"""

from __future__ import annotations

import numpy as np

PRIOR_DRAWS = 1.0  # k: the prior's weight in draws


def index_ranges(state) -> np.ndarray:
    """The range (n,) of each index's draws over the groups the semivalue weighs (0: all equal, or none)."""
    weighted = (state.coefficients != 0)[:, None] & (state.counts > 0)
    high = np.where(weighted, state.high, -np.inf).max(axis=0)
    low = np.where(weighted, state.low, np.inf).min(axis=0)
    return np.where(np.isfinite(high - low), high - low, 0.0)


def exact_indices(state) -> np.ndarray:
    """Indices (n,) whose every weighted group is a single coalition valued the same each time: exact values."""
    weighted = state.coefficients != 0
    constant = (state.counts >= 1) & (state.low == state.high)
    return (~weighted[:, None] | (state.exact[:, None] & constant)).all(axis=0)


def draw_variances(state) -> np.ndarray:
    """sigma~^2 (G, n): the honest variance of one draw of each group and index (module docstring)."""
    counts = state.counts.astype(np.float64)
    free = ((state.coefficients != 0) & ~state.exact)[:, None] & (counts >= 2)
    dof = np.where(free, counts - 1, 0.0)
    squares = np.where(free, state.m2, 0.0)
    other_dof, other_squares = dof.sum(axis=0) - dof, squares.sum(axis=0) - squares
    ranges = index_ranges(state)
    fallback = (np.where(ranges > 0, ranges, ranges.max(initial=0.0)) / 2) ** 2
    with np.errstate(invalid="ignore", divide="ignore"):
        pooled = np.where((other_dof > 0) & (other_squares > 0), other_squares / other_dof, fallback[None])
        shrunk = (state.m2 + PRIOR_DRAWS * pooled) / (counts - 1 + PRIOR_DRAWS)
        sample = state.m2 / (counts - 1)
    variances = np.where(state.exact[:, None], sample, shrunk)
    return np.where(counts >= 2, variances, np.inf)
