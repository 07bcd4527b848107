"""Fair reward values: rho-Shapley targets r*_i = v_N (phi_i / max_k phi_k)^rho (Sim et al. 2023, Sec. 4), the
bound on rho under which every party does at least as well as alone (individual rationality, Sim et al. 2020,
Thm 1), and the repair of negative Shapley values the paper leaves open (Sec. 4: "upweighting non-negative
marginal contributions such as to the empty set")."""

from __future__ import annotations

import warnings

import numpy as np

from bayesval.validation import check_finite_array, check_real, user_stacklevel

FINITE_VALUES = "rewards are computed from finite values"


def check_rho(rho) -> float:
    """rho in (0, 1]: 0 would reward every party equally with v_N, above 1 over-rewards the top party."""
    rho = check_real("rho", rho)
    if not 0 < rho <= 1:
        raise ValueError(f"rho must be in (0, 1] (Sim et al. 2023, Sec. 4), got {rho!r}")
    return rho


def _vectors(shapley, singleton_values) -> tuple[np.ndarray, np.ndarray]:
    shapley = check_finite_array("shapley", shapley, ndim=1, remedy=FINITE_VALUES)
    singleton_values = check_finite_array("singleton_values", singleton_values, ndim=1, remedy=FINITE_VALUES)
    if shapley.shape != singleton_values.shape or shapley.size < 2:
        raise ValueError(
            f"rewards need the Shapley values (shapley) and own values (singleton_values) of 2 or more parties, one "
            f"each, got shapes {shapley.shape} and {singleton_values.shape}"
        )
    return shapley, singleton_values


def nonnegative_shapley(shapley, singleton_values, names=None) -> tuple[np.ndarray, float]:
    """Shapley values with the marginal contribution to the empty set upweighted until none is negative.

    phi'_i = (1 - w) phi_i + w v_i with the smallest w in [0, 1] that makes every phi'_i >= 0 (w = 0 when none is
    negative). v_i = KL(p(theta | o_i) || p(theta)) >= 0 is each party's contribution to the empty coalition, so
    phi' keeps F1-F3 (a useless party has phi_i = v_i = 0; a symmetric or dominating party keeps its order) while
    making r*_i = v_N (phi'_i / max phi')^rho defined. Warns, naming the parties, whenever it changes anything.
    Returns (phi', w).
    """
    shapley, singleton_values = _vectors(shapley, singleton_values)
    negative = shapley < 0
    if not negative.any():
        return shapley, 0.0
    own = np.maximum(singleton_values, 0.0)
    weight = float(np.max(-shapley[negative] / (own[negative] - shapley[negative])))
    adjusted = np.maximum((1 - weight) * shapley + weight * own, 0.0)
    shown = [str(names[i]) if names is not None else str(i) for i in np.flatnonzero(negative)]
    warnings.warn(
        f"negative Shapley values for {shown}: their rho-Shapley targets are undefined, so the marginal contribution "
        f"to the empty set is upweighted (phi' = (1 - w) phi + w v_i with w = {weight:.3g}); these parties cannot be "
        "individually rational",
        stacklevel=user_stacklevel(),
    )
    return adjusted, weight


class UndefinedTargets(ValueError):
    """The valuation's numbers leave the rho-Shapley targets undefined: every (repaired) Shapley value 0, or an
    estimated v_N below 0 (releases that carry nothing measurable)."""


def rho_shapley_targets(shapley, grand_value: float, rho: float) -> np.ndarray:
    """r*_i = v_N (phi_i / max_k phi_k)^rho (Sim et al. 2023, Sec. 4): the top party's target is v_N (efficiency,
    P2), the others' shrink with their Shapley share, less so for smaller rho (more equal rewards)."""
    rho = check_rho(rho)
    shapley = check_finite_array("shapley", shapley, ndim=1, remedy=FINITE_VALUES)
    if (shapley < 0).any():
        raise ValueError(
            f"rho-Shapley targets need non-negative Shapley values, got {shapley.tolist()}; "
            "bayesval.rewards.nonnegative_shapley repairs them"
        )
    top = shapley.max()
    if not top > 0:
        raise UndefinedTargets("rho-Shapley targets need some party with a positive Shapley value; every value is 0")
    grand_value = check_real("grand_value", grand_value)
    if grand_value < 0:
        raise UndefinedTargets(f"grand_value (v_N, a KL divergence) must be >= 0, got {grand_value!r}")
    return grand_value * (shapley / top) ** rho


def rationality_bound(shapley, singleton_values, grand_value: float) -> float:
    """The largest rho for which every target is at least the party's own value, r*_i >= v_i (individual
    rationality, P4): min over parties below the top of log(v_i / v_N) / log(phi_i / max phi) (Sim et al. 2020,
    Thm 1). inf when no party constrains rho; <= 0 when some v_i > v_N, which no rho can reward."""
    shapley, singleton_values = _vectors(shapley, singleton_values)
    top = shapley.max()
    bound = np.inf
    for phi, own in zip(shapley, singleton_values):
        if phi >= top or own <= 0:
            continue
        if own >= grand_value or phi <= 0:
            return 0.0  # r*_i < v_N <= v_i, or r*_i = 0 < v_i, whatever rho
        bound = min(bound, np.log(own / grand_value) / np.log(phi / top))
    return float(bound)
