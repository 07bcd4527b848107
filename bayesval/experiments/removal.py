"""Point-removal curves (Watson et al., Fig. 1; Ghorbani & Zou 2019): remove the highest- or lowest-valued training
points first, or random ones, refit on the rest, and score the test accuracy after each removal.

Every refit of every order is one coalition of the utility (the points kept), so a whole figure is one batched call.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import numpy as np

from bayesval.estimators.layered.utilities import LogisticRegressionUtility
from bayesval.validation import check_count, check_count_array, check_finite_array, check_key


class RemovalCurves(NamedTuple):
    """Test accuracy after removing `removed[r]` points: highest values first, lowest first, random (mean over
    orders, with its standard error)."""

    removed: np.ndarray
    high_first: np.ndarray
    low_first: np.ndarray
    random: np.ndarray
    random_stderr: np.ndarray


def removal_curves(
    values,
    X,
    y,
    X_test,
    y_test,
    *,
    removed=None,
    random_orders: int = 10,
    key=0,
    utility=None,
) -> RemovalCurves:
    """Accuracy curves of removing points by `values` (n,) from (X, y), scored on (X_test, y_test).

    removed        removal counts, whole numbers in [0, n - 1]: a refit needs a point left (default DataShapley's:
                   0, n/20, ... below min(max(n - 10, 20), n))
    random_orders  random orders averaged for the random line (DataShapley: 10)
    utility        a factory utility(X, y, X_test, y_test) (default: scikit-learn's LogisticRegression(C=1) with
                   an intercept, scored by accuracy, as DataShapley's experiments)"""
    values = check_finite_array("values", values, ndim=1)
    features = check_finite_array("X", X, ndim=2)
    num_points = len(features)
    if len(values) != num_points:
        raise ValueError(f"values must have one entry per row of X ({num_points}), got {len(values)}")
    if removed is None:
        removed = np.arange(0, max(num_points - 10, 20), max(num_points // 20, 1))
        removed = removed[removed < num_points]
    else:
        removed = check_count_array("removed", removed, maximum=num_points - 1)
        if removed.size == 0:
            raise ValueError("removed is empty: give at least one count of points to remove")
    random_orders = check_count("random_orders", random_orders, minimum=1)
    key = check_key("key", key)
    test_features = check_finite_array("X_test", X_test, ndim=2)
    if test_features.shape[1] != features.shape[1]:
        raise ValueError(f"X_test has {test_features.shape[1]} features but X has {features.shape[1]}")
    if utility is not None and not callable(utility):
        raise TypeError(
            "utility must be callable as utility(X, y, X_test, y_test), e.g. LogisticRegressionUtility, got "
            f"{utility!r}"
        )
    if utility is None:
        utility = LogisticRegressionUtility(
            features, y, X_test, y_test, penalty="sum", fit_intercept=True, metric="accuracy"
        )
    else:
        utility = utility(features, y, X_test, y_test)
    shuffles = np.asarray(
        jax.vmap(lambda k: jax.random.permutation(k, num_points))(jax.random.split(key, random_orders))
    )
    orders = np.vstack([np.argsort(-values, kind="stable"), np.argsort(values, kind="stable"), shuffles])
    positions = np.argsort(orders, axis=1)  # where each point comes in each order
    masks = positions[:, None, :] >= removed[None, :, None]  # (orders, R, n): the points kept
    accuracy = np.asarray(utility(key, masks.reshape(-1, num_points))).reshape(len(orders), len(removed))
    random = accuracy[2:]
    stderr = random.std(axis=0, ddof=1) / np.sqrt(random_orders) if random_orders > 1 else np.zeros(len(removed))
    return RemovalCurves(removed, accuracy[0], accuracy[1], random.mean(axis=0), stderr)


__all__ = ["RemovalCurves", "removal_curves"]
