"""Distances from one validation point to every training point, for the nearest-neighbour valuations.

Two metrics (Wang et al. 2023, Sec. 6 and App. E.3.1, where "cosine distance in [-1, 1]" with tau = -0.5 can only
mean the negated cosine similarity; docs/knn.md, "Where we depart from the paper"):

* ``"cosine"``: d(x, x') = -cos(x, x'), in [-1, 1]. Rows are L2-normalised once in
  :func:`prepare_features`, so the distance is a dot product. tau = -0.5 means "cosine
  similarity >= 0.5".
* ``"euclidean"``: d(x, x') = ||x - x'||, in [0, inf).
"""

from __future__ import annotations

import math

import jax.numpy as jnp
import numpy as np

from bayesval.validation import row_norms, to_float

DISTANCES = ("cosine", "euclidean")
_TAU_RANGE = {"cosine": (-1.0, 1.0), "euclidean": (0.0, math.inf)}


def check_distance(distance: str) -> str:
    """`distance` must name a supported metric: a string, one of `DISTANCES`."""
    if not isinstance(distance, str):
        raise TypeError(f"distance must be a string, one of {DISTANCES}, got {distance!r} ({type(distance).__name__})")
    if distance not in DISTANCES:
        raise ValueError(f"distance must be one of {DISTANCES}, got {distance!r}")
    return str(distance)


def check_tau(tau: float, distance: str) -> float:
    """The threshold tau must lie in the range of `distance`: [-1, 1] (cosine) or [0, inf) (euclidean)."""
    low, high = _TAU_RANGE[check_distance(distance)]
    number = to_float("tau", tau)  # TypeError for a bool, a string, None
    if not (math.isfinite(number) and low <= number <= high):
        raise ValueError(f"tau must lie in [{low:g}, {high:g}] for the {distance} distance, got {tau!r}")
    return number


# Rows longer than this make the squared norms and inner products of the euclidean distance overflow.
_MAX_EUCLIDEAN_NORM = 1e150


def prepare_features(name: str, features: np.ndarray, distance: str) -> np.ndarray:
    """Rows ready for :func:`distance_row`: L2-normalised for cosine, unchanged for euclidean.

    Cosine: each row is divided by its largest |entry| before its norm is taken (`row_norms`), so rows
    of 1e200 or 1e-200 keep their direction instead of becoming inf / zero rows; all-zero rows are an
    error. Euclidean: rows so long that squared distances would overflow float64 are an error.
    """
    features = np.asarray(features, dtype=np.float64)
    if check_distance(distance) == "euclidean":
        norms = row_norms(features)
        too_long = np.flatnonzero(norms > _MAX_EUCLIDEAN_NORM)
        if too_long.size:
            raise ValueError(
                f"{name} has {too_long.size} rows with norm > {_MAX_EUCLIDEAN_NORM:g} (first at row "
                f"{too_long[0]}, norm {norms[too_long[0]]:.3g}): their squared euclidean distances overflow "
                "float64; rescale the features (or use distance='cosine')"
            )
        return features
    scale = np.max(np.abs(features), axis=1, keepdims=True, initial=0.0)
    zero = np.flatnonzero(scale[:, 0] == 0)
    if zero.size:
        raise ValueError(
            f"{name} has {zero.size} all-zero rows (first at row {zero[0]}); the cosine distance "
            "is undefined for them: drop them or use distance='euclidean'"
        )
    scaled = features / scale
    return scaled / row_norms(scaled)[:, None]


# Rounding moves the cosine of a row and a copy of it (or of its opposite) up to 2.5 eps from +-1 (measured for 2 to
# 1,000 features); a distance this many eps (relative to max(1, |tau|)) above tau still counts as within it.
BALL_TOLERANCE_EPS = 8


def within(dist, tau) -> jnp.ndarray:
    """d <= tau up to rounding: the ball of Threshold-KNN (Wang et al. 2023, Eq. 3), with a tolerance of
    `BALL_TOLERANCE_EPS` ulps so that at tau = -1 (cosine) an exact copy of the validation row is inside, and at
    tau = 1 its opposite (docs/knn.md, "Distances")."""
    slack = BALL_TOLERANCE_EPS * jnp.finfo(dist.dtype).eps * jnp.maximum(1.0, jnp.abs(tau))
    return dist <= tau + slack


def centre_features(x_train, x_val: np.ndarray, distance: str):
    """(x_train, x_val) both less the mean of x_val for the euclidean distance; unchanged for cosine.

    `distance_row` computes ||x - v||^2 as ||x||^2 - 2 x.v + ||v||^2, whose rounding error grows with ||x||^2 +
    ||v||^2: a common offset of 1.7e9 (a unix-time column) left no significant digit of distances of about 1. A
    translation leaves every euclidean distance unchanged and shrinks the norms to the data's spread. The shift is
    the validation rows' mean, so that no training statistic reaches the (private) values, even through rounding.
    """
    if distance != "euclidean":
        return x_train, x_val
    centre = np.mean(x_val, axis=0)
    return jnp.asarray(x_train) - centre, x_val - centre


def squared_norms(features) -> jnp.ndarray:
    """Row-wise squared L2 norms, computed once per training set for the euclidean metric."""
    return jnp.sum(jnp.square(features), axis=1)


def distance_row(x_val, x_train, train_sq_norms, distance: str) -> jnp.ndarray:
    """d(x_train[i], x_val) for every training row i (shape (N,)); rows prepared by `prepare_features`."""
    inner = x_train @ x_val
    if distance == "cosine":
        return -jnp.clip(inner, -1.0, 1.0)  # rounding leaves |cos| up to a few eps above 1
    return jnp.sqrt(jnp.maximum(train_sq_norms - 2.0 * inner + jnp.dot(x_val, x_val), 0.0))


__all__ = [
    "DISTANCES",
    "centre_features",
    "check_distance",
    "check_tau",
    "distance_row",
    "prepare_features",
    "within",
    "squared_norms",
]
