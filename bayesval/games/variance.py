"""Honest variances of a sampled semivalue's groups: a standard error of 0 only where the value is exact.

The plain sample variance s^2 = m2 / (m - 1) of a group's m draws fails where sampling is needed most (measured in
docs/games.md, "Calibration"): a rare marginal (the airport game's cheap players, a unanimity game's large
coalitions) leaves a group with no or one outlying draw, whose s^2 is 0 or small exactly when the mean is too low,
so z-scores reach 10 to 50 and a `StandardError` rule stops on a false convergence; a layer of two or three draws is
often all zeros. Each group's variance is therefore shrunk toward two priors (the conjugate update of a normal
variance, Gelman et al. 2013, Sec. 3.3, with prior variances worth a number of draws):

    sigma~^2 = (m2 + p tau_pool^2 + g tau_guard^2) / (m - 1 + p + g)

* tau_pool^2, worth p = 1 draw where the index's *other* sampled groups (its other layers or size bins) varied: their
  pooled variance, an empirical Bayes prior (Smyth 2004) that moves variance between groups without inflating the
  total when the groups have equal counts, and gives a layer of all-equal draws its neighbours' spread;
* tau_guard^2 = (r / 2)^2, the largest variance of a number within the index's observed range r, worth g =
  `PRIOR_DRAWS` times the group's share of the index's sampled draws, so that the index as a whole carries one such
  draw however its draws are grouped: a rule-of-three guard against the mass no draw has shown. A layer (a group of
  one coalition size, whose spread is within that size) takes its own range where it varied; elsewhere the range counts
  the exact groups (the airport game's cheap player shows its cost in the size-0 group, so a rare cost in the middle
  sizes cannot hide behind the one small hit that was seen), then the game's largest range where the index never
  varied, then the range of the coalition values seen where no index did.

Groups of a single coalition (`exact`: the empty coalition or everyone else) vary only by the utility's noise: their
variance is the noise's, pooled over every such group of every index (a deterministic utility: exactly 0; a noisy
one: one estimate from all of them, where each group alone has two draws a batch). A group with fewer than two draws has infinite variance: nothing is known of its spread.
"""

from __future__ import annotations

import numpy as np

PRIOR_DRAWS = 1.0  # k: the prior's weight in draws
ROUNDING = 1e-12  # draws closer than this, relative to their size, are equal: a marginal v(S u i) - v(S) rounds


def spread(low, high):
    """high - low, or 0 where the two differ by rounding alone (a sum of the same terms in another order)."""
    width = high - low
    with np.errstate(invalid="ignore"):
        rounding = ROUNDING * np.maximum(np.abs(low), np.abs(high))
        return np.where(np.isfinite(width) & (width > rounding), width, 0.0)


def index_ranges(state) -> np.ndarray:
    """The range (n,) of each index's draws over the groups the semivalue weighs (0: all equal, or none)."""
    weighted = (state.coefficients != 0)[:, None] & (state.counts > 0)
    high = np.where(weighted, state.high, -np.inf).max(axis=0)
    low = np.where(weighted, state.low, np.inf).min(axis=0)
    return spread(low, high)


def exact_indices(state) -> np.ndarray:
    """Indices (n,) whose every weighted group is a single coalition valued the same each time: exact values."""
    weighted = state.coefficients != 0
    constant = (state.counts >= 1) & (spread(state.low, state.high) == 0)
    return (~weighted[:, None] | (state.exact[:, None] & constant)).all(axis=0)


def draw_variances(state) -> np.ndarray:
    """sigma~^2 (G, n): the honest variance of one draw of each group and index (module docstring)."""
    counts = state.counts.astype(np.float64)
    free = ((state.coefficients != 0) & ~state.exact)[:, None] & (counts >= 2)
    dof = np.where(free, counts - 1, 0.0)
    squares = np.where(free, state.m2, 0.0)
    other_dof, other_squares = dof.sum(axis=0) - dof, squares.sum(axis=0) - squares
    ranges = index_ranges(state)
    game = ranges.max(initial=0.0)
    if game == 0:  # no index's draws varied: the scale of the values seen
        game = spread(np.array(state.value_low), np.array(state.value_high)) if state.value_high > -np.inf else 0.0
    index_guard = np.where(ranges > 0, ranges, game)  # (n,)
    own = spread(state.low, state.high)  # a layer's own range where it varied: its spread is within one size
    guard = (np.where(state.layers[:, None] & (own > 0), own, index_guard[None]) / 2) ** 2  # (G, n)
    with np.errstate(invalid="ignore", divide="ignore"):
        share = np.where(free, counts, 0.0) / np.where(free, counts, 0.0).sum(axis=0)  # (G, n)
        pooling = ((other_dof > 0) & (other_squares > 0)).astype(np.float64)
        pooled = np.where(pooling > 0, other_squares / other_dof, 0.0)
        guarded = PRIOR_DRAWS * share
        shrunk = (state.m2 + pooling * pooled + guarded * guard) / (counts - 1 + pooling + guarded)
        single = state.exact[:, None] & (counts >= 2)  # one coalition each: their spread is the utility's noise
        noise = np.where(single, state.m2, 0.0).sum() / np.where(single, counts - 1, 0.0).sum()
    variances = np.where(state.exact[:, None], noise if np.isfinite(noise) else 0.0, shrunk)
    return np.where(counts >= 2, variances, np.inf)
