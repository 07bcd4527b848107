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
  one coalition size, or of positions no other group draws from, whose spread is within them) takes its own range
  where it varied; elsewhere the range counts
  the exact groups (the airport game's cheap player shows its cost in the size-0 group, so a rare cost in the middle
  sizes cannot hide behind the one small hit that was seen), then the game's largest range where the index never
  varied, then the range of the coalition values seen where no index did.

Groups of a single coalition (`exact`: the empty coalition or everyone else) are exact (`one_valued`: variance 0,
known exactly) only where the utility gives a coalition one value (`bayesval.games.utilities.KeylessUtility`). A keyed
utility's values of one coalition are draws, which may agree however noisy the utility is: a utility whose noise of
sd 0.01 rarely crossed a rounding step to 0.1 had its leave-one-out values, all draws equal, reported exact at 0.1
against 0.1048 on 5 of 60 keys. Such a group varies by the utility's noise alone, which may differ from one coalition
to the next, so it takes its own sample variance with a guard of its own range, worth one draw (the index's range
where its draws agreed), and lends nothing to its index's sampled groups: pooled over every such group of every
index (until 2026-12-05), one coalition with noise of sd 1 among others of 0.05 left the index it decides with
standard errors 2.7 times too small (RMS z 2.69 over 100 keys, leave-one-out) and the others' several times too
wide. Draws that were all equal leave an index that is not exact unconverged (`judged`). A group with fewer than two
draws has infinite variance: nothing is known of its spread.

How far a variance can be trusted is its degrees of freedom nu = 2 sigma^4 / Var(s^2). For m draws of kurtosis kappa,
Var(s^2) / sigma^4 = kappa / m - (m - 3) / (m (m - 1)) (Cramer 1946, Sec. 27.4): nu = m - 1 for normal draws, but
about twice the number of hits for a rare event (Bernoulli draws with p small have kappa ~ 1 / p), however many draws
were made. A group's nu is that of its own draws (kappa from m4, the sample kurtosis m m4 / m2^2), at most m - 1,
plus the weight of its priors (p + g draws): the sample kurtosis of a few draws is biased low (at most 1.5 for m = 3
draws of any law), so alone it gave normal draws about 4 degrees of freedom at m = 3 and a median of 11 at m = 8. The
kurtosis may lower nu below the normal draws' m - 1 (a rare event), never raise it. An index's standard error
combines its groups' by Welch-Satterthwaite (Satterthwaite 1946), nu_i = (sum_g t_g)^2 / sum_g (t_g^2 / nu_g)
with t_g = c_g^2 sigma~_g^2 / m_g, at most the sum of the groups' nu_g less their pooled priors (`index_dof`): those
are the index's other groups' draws again, and counted in every group they doubled nu at two draws a group. Below
`TRUSTED_DOF` the standard error is a rough guess (a handful of hits decide it, and z-scores have heavy tails:
docs/games.md, "Calibration"), and the index does not count as converged.
`judged` is the one place that says whether an index is converged and why: a result's flags and its verdicts in
words both come from it.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

PRIOR_DRAWS = 1.0  # k: the prior's weight in draws
TRUSTED_DOF = 10.0  # degrees of freedom from which a standard error is an estimate, not a guess
ROUNDING = 1e-12  # draws closer than this, relative to their size, are equal: a marginal v(S u i) - v(S) rounds
MAX_VALUE = 1e60  # |v| of a coalition: the fourth powers of marginals (m4) over 1e12 draws stay below 1.8e308


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


def one_valued(state) -> np.ndarray:
    """Groups (G, n) of a single coalition (`state.exact`) of a utility that gives a coalition one value (not
    `state.keyed`), drawn and valued the same each time: exact, with variance 0 known exactly. The other
    single-coalition groups (a keyed utility's, or one whose values differed) vary by the utility's noise."""
    constant = (state.counts >= 1) & (spread(state.low, state.high) == 0)
    return state.exact[:, None] & (not state.keyed) & constant


def exact_indices(state) -> np.ndarray:
    """Indices (n,) whose every weighted group is a single coalition valued the same each time: exact values."""
    return (~(state.coefficients != 0)[:, None] | one_valued(state)).all(axis=0)


class GroupVariances(NamedTuple):
    """The honest variance of one draw of each group and index (module docstring), all (G, n)."""

    variances: np.ndarray  # sigma~^2
    dof: np.ndarray  # nu, its degrees of freedom: inf where it is known exactly, 0 below two draws
    borrowed: np.ndarray  # the part of nu that is the index's other groups' draws again (the pooled prior's weight)


def draw_variances(state) -> np.ndarray:
    """sigma~^2 (G, n): the honest variance of one draw of each group and index (module docstring)."""
    return variances_and_dof(state).variances


def variances_and_dof(state) -> GroupVariances:
    """sigma~^2 (G, n), nu (G, n), the degrees of freedom of each group's sigma~^2 (module docstring): inf where it
    is known exactly (`one_valued`), 0 where a group has fewer than two draws, and the part of nu borrowed from the
    index's other groups."""
    variances, prior_weight, borrowed = _shrunk(state)
    counts = state.counts.astype(np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        kurtosis = counts * state.m4 / state.m2**2
        relative = kurtosis / counts - (counts - 3) / (counts * (counts - 1))  # Var(s^2) / sigma^4
        own = np.where((state.m2 > 0) & (counts >= 2), np.minimum(2 / relative, counts - 1), 0.0)
    dof = np.where(one_valued(state), np.inf, own + prior_weight)
    return GroupVariances(variances, np.where(counts >= 2, dof, 0.0), np.where(counts >= 2, borrowed, 0.0))


def trusted(exact: np.ndarray, stderr: np.ndarray, dof: np.ndarray) -> np.ndarray:
    """Indices whose standard error can be trusted: exact values with no error left (stderr 0), or at least
    `TRUSTED_DOF` degrees of freedom. An exact value of estimates that carry an error of their own (the spread of a
    utility's independent estimates, an estimated control) is judged by that error's degrees of freedom: with one,
    a leave-one-out value whose two estimates happened to agree was converged at a standard error 117 times too
    small."""
    return (np.asarray(exact, bool) & (np.asarray(stderr) == 0)) | (np.asarray(dof) >= TRUSTED_DOF)


class Judgement(NamedTuple):
    """Per index of a sampled semivalue: whether it is converged (n,) and why, in words (n,)."""

    converged: np.ndarray
    verdicts: list[str]


ALL_EQUAL = "not converged: all draws equal, so the error is unknown (a floor from the game's range)"


def judged(exact, ranges, dof, stderr, held) -> Judgement:
    """Whether each index is converged, and why in words: the flags and the verdicts of every sampled result.

    exact   (n,) values exact by construction (every weighted group one coalition, valued the same each time)
    ranges  (n,) the range of each index's draws (0: all equal)
    dof     (n,) the degrees of freedom of each standard error
    stderr  (n,) the standard errors
    held    (n,) the stopping rule's own flags (`StoppingRule.converged`)

    An exact value with no error left (stderr 0) is converged whatever the rule; any other index only where the rule
    says so, its draws varied (or its value is exact) and its standard error is trusted (`TRUSTED_DOF`). Draws that
    were all equal never converge an index that is not exact: they show nothing of the coalitions not drawn
    (docs/games.md, "Stopping")."""
    exact, held = np.asarray(exact, bool), np.asarray(held, bool)
    known = exact & (np.asarray(stderr) == 0)
    varied = np.asarray(ranges) > 0
    is_trusted = trusted(exact, stderr, dof)
    converged = known | (held & (exact | varied) & is_trusted)
    words = []
    for i, index_dof in enumerate(np.asarray(dof, np.float64)):
        if known[i]:
            words.append("exact")
        elif converged[i]:
            words.append("converged")
        elif not exact[i] and not varied[i]:
            words.append(ALL_EQUAL)
        elif exact[i] and not is_trusted[i]:
            words.append(
                f"not converged: the value is exact for these estimates, but their own error has {index_dof:.1f} "
                f"degrees of freedom, fewer than {TRUSTED_DOF:g}, so the standard error is a rough guess"
            )
        elif not is_trusted[i]:
            words.append(
                f"not converged: the draws varied too rarely to show their spread ({index_dof:.1f} degrees of "
                f"freedom, fewer than {TRUSTED_DOF:g}), so the standard error is a rough guess"
            )
        else:
            words.append("not converged: the rule did not hold before the run stopped")
    return Judgement(converged, words)


def _shrunk(state) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """sigma~^2 (G, n), the weight in draws of its priors (G, n) and the part of that weight that is the index's
    other groups' draws (G, n)."""
    counts = state.counts.astype(np.float64)
    free = ((state.coefficients != 0) & ~state.exact)[:, None] & (counts >= 2)
    dof = np.where(free, counts - 1, 0.0)
    squares = np.where(free, state.m2, 0.0)
    other_dof, other_squares = dof.sum(axis=0) - dof, squares.sum(axis=0) - squares
    ranges = index_ranges(state)
    index_guard = np.where(ranges > 0, ranges, game_scale(state, ranges))  # (n,)
    own = spread(state.low, state.high)  # a layer's own range where it varied: its spread is within one size
    guard = (np.where(state.layers[:, None] & (own > 0), own, index_guard[None]) / 2) ** 2  # (G, n)
    with np.errstate(invalid="ignore", divide="ignore"):
        share = np.where(free, counts, 0.0) / np.where(free, counts, 0.0).sum(axis=0)  # (G, n)
        pooling = ((other_dof > 0) & (other_squares > 0)).astype(np.float64)
        pooled = np.where(pooling > 0, other_squares / other_dof, 0.0)
        guarded = PRIOR_DRAWS * share
        prior = np.where(guarded > 0, guarded * guard, 0.0)  # an inf guard (no scale known) only where it weighs
        shrunk = (state.m2 + pooling * pooled + prior) / (counts - 1 + pooling + guarded)
        noisy = state.exact[:, None] & ~one_valued(state)  # one coalition each: their spread is the utility's noise
        own_guard = (np.where(own > 0, own, index_guard[None]) / 2) ** 2
        noise = (state.m2 + PRIOR_DRAWS * own_guard) / (counts - 1 + PRIOR_DRAWS)
    variances = np.where(state.exact[:, None], np.where(noisy, noise, 0.0), shrunk)
    prior_weight = np.where(free, pooling + guarded, np.where(noisy, PRIOR_DRAWS, 0.0))
    return np.where(counts >= 2, variances, np.inf), prior_weight, np.where(free, pooling, 0.0)


def game_scale(state, ranges: np.ndarray) -> float:
    """The range that guards an index whose draws never varied (module docstring): the largest range of any index's
    draws, else of the coalition values seen, else of the control variate's surrogate, else inf (no scale known)."""
    game = ranges.max(initial=0.0)
    if game == 0 and state.value_high > -np.inf:  # no index's draws varied: the scale of the values seen
        game = float(spread(np.array(state.value_low), np.array(state.value_high)))
    control = getattr(state, "control_table", None)
    if game == 0 and control is not None:  # v - u was the same everywhere seen: the surrogate's own scale
        game = float(spread(np.array(control.min()), np.array(control.max())))
    return game if game > 0 else np.inf


def index_dof(terms: np.ndarray, dofs: np.ndarray, borrowed: np.ndarray) -> np.ndarray:
    """nu (n,) of an index's sampling variance, the sum of its groups' terms t_g = c_g^2 sigma~_g^2 / m_g (K, n)
    with degrees of freedom `dofs` (K, n): Welch-Satterthwaite, at most what the draws hold, the groups' nu_g less
    the part `borrowed` (K, n) from the index's other groups. The pooled prior is those groups' draws again: counted
    in every group, it gave an index of 6 sampled groups of 2 draws a median of 11 degrees of freedom where they hold
    6, and the guard prior 1 (docs/benchmarks.md)."""
    dof = satterthwaite_dof(terms, dofs)
    held = np.where(terms > 0, dofs - borrowed, 0.0).sum(axis=0)
    return np.where(np.isfinite(dof) & (dof > 0), np.minimum(dof, held), dof)


def satterthwaite_dof(terms: np.ndarray, dofs: np.ndarray) -> np.ndarray:
    """nu (n,) of a sum of independent variance estimates `terms` (K, n) with degrees of freedom `dofs` (K, n)
    (Satterthwaite 1946): (sum t)^2 / sum (t^2 / nu); inf where every term is 0 (an exact value), 0 where a term is
    inf (nothing is known of that variance)."""
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        parts = np.where(terms > 0, terms**2 / dofs, 0.0)
        total = terms.sum(axis=0)
        dof = np.where(total > 0, total**2 / parts.sum(axis=0), np.inf)
        return np.where(np.isfinite(total), dof, 0.0)
