"""Mean negative log predictive probability (MNLP) of posterior draws on a held-out, non-private test set.

Sim et al. (2023, App. H.2): MNLP = |D*|^-1 sum_{(x*, y*) in D*} -log p(y* | x*, o), with the predictive
p(y* | x*, o) averaged over m posterior (or reward) draws theta_j. Evaluation only: the test set is never
released, so nothing here touches privacy.
"""

from __future__ import annotations

import numpy as np
from scipy.special import log_expit, logsumexp

from bayesval.validation import check_finite_array


def _rows(name: str, value) -> np.ndarray:
    """A non-empty 2-D array of finite numbers."""
    array = check_finite_array(name, value, ndim=2, remedy="MNLP needs finite numbers")
    if array.shape[0] == 0:
        raise ValueError(f"{name} must be a non-empty 2-D array, got shape {array.shape}")
    return array


def _draws_and_inputs(draws_name: str, draws, X, extra: int, layout: str) -> tuple[np.ndarray, np.ndarray]:
    """Draws (m, w + extra) and the test inputs X (n, w) they predict. The draws' layout fixes w, so a width that does
    not fit is blamed on X."""
    draws = _rows(draws_name, draws)
    if draws.shape[1] < extra:
        raise ValueError(f"{draws_name} must have at least {extra} columns ({layout}), got shape {draws.shape}")
    X = _rows("X", X)
    width = draws.shape[1] - extra
    if X.shape[1] != width:
        raise ValueError(
            f"X has {X.shape[1]} columns, but the draws of shape {draws.shape} hold {width} weights ({layout}): X "
            f"needs {width} columns, one per weight"
        )
    return draws, X


def _targets(name: str, value, rows: int | None = None) -> np.ndarray:
    array = check_finite_array(name, value, ndim=1, remedy="MNLP needs finite numbers")
    if array.size == 0:
        raise ValueError(f"{name} must be a non-empty 1-D array, got shape {array.shape}")
    if rows is not None and array.size != rows:
        raise ValueError(f"{name} has {array.size} entries but X has {rows} rows")
    return array


def binary_labels(y, name: str = "y", rows: int | None = None) -> np.ndarray:
    """Labels as 1.0 (positive) / 0.0 (negative); accepts +-1 or 0/1 labels, not a mix of the two."""
    array = _targets(name, y, rows)
    values = np.unique(array)
    if np.all(np.isin(values, (-1.0, 1.0))):
        return (array > 0).astype(np.float64)
    if np.all(np.isin(values, (0.0, 1.0))):
        return array
    bad = values[~np.isin(values, (-1.0, 0.0, 1.0))]
    shown = bad.tolist() if bad.size else values.tolist()
    raise ValueError(
        f"{name} must hold class labels +-1 or 0/1 (not both conventions at once); got values {shown[:10]}"
    )


def mnlp_classification(theta_draws, X, y) -> float:
    """MNLP of logistic-regression draws: the cross-entropy of the posterior-averaged predictive.

    Sim et al. (2023, App. H.2): p(y*=1 | x*, o) ~= m^-1 sum_j sigmoid(theta_j^T x~*), MNLP = mean over
    the test set of -log p(y* | x*, o).

    theta_draws: (m, w+1) laid out (w_1..w_w, bias), so logit_j(x) = x @ theta_j[:w] + theta_j[w].
    X: (n, w) test inputs. y: (n,) labels, +-1 or 0/1.
    The average is taken in log space (log-sum-exp of log-sigmoids), so no probability underflows to 0.
    """
    draws, X = _draws_and_inputs("theta_draws", theta_draws, X, 1, "w weights, bias")
    positive = binary_labels(y, "y", X.shape[0])
    logits = X @ draws[:, :-1].T + draws[:, -1]  # (n, m)
    log_m = np.log(draws.shape[0])
    log_p1 = logsumexp(log_expit(logits), axis=1) - log_m
    log_p0 = logsumexp(log_expit(-logits), axis=1) - log_m
    return float(-np.mean(np.where(positive == 1.0, log_p1, log_p0)))


def mnlp_regression(draws, X, y) -> float:
    """MNLP of Bayesian linear-regression draws under the Gaussian predictive of Sim et al. (2023, App. H.2).

    mu(x*) = m^-1 sum_j w_j^T x~*, sigma^2(x*) = m^-1 sum_j sigma_j^2 + m^-1 sum_j (w_j^T x~*)^2 - mu(x*)^2,
    MNLP = mean over the test set of 1/2 [log(2 pi sigma^2(x*)) + (mu(x*) - y*)^2 / sigma^2(x*)].

    draws: (m, w+2) laid out (w_1..w_w, bias, noise_var). X: (n, w). y: (n,) real targets.
    """
    draws, X = _draws_and_inputs("draws", draws, X, 2, "w weights, bias, noise variance")
    y = _targets("y", y, X.shape[0])
    noise_var = draws[:, -1]
    if np.any(noise_var <= 0):
        raise ValueError(f"draws[:, -1] (noise variance) must be > 0; {int(np.sum(noise_var <= 0))} draws are not")
    means = X @ draws[:, :-2].T + draws[:, -2]  # (n, m)
    mu = means.mean(axis=1)
    var = noise_var.mean() + means.var(axis=1)
    return float(np.mean(0.5 * (np.log(2 * np.pi * var) + (mu - y) ** 2 / var)))


def base_rate_mnlp(y_train, y_test) -> float:
    """Cross-entropy on y_test of always predicting the training positive rate p: the MNLP of a model that
    ignores x, -mean(y* log p + (1 - y*) log(1 - p)). Labels +-1 or 0/1. For Diab (Sim et al. 2023,
    Sec. 6) -(0.318 ln 0.356 + 0.682 ln 0.644) = 0.629."""
    train = binary_labels(y_train, "y_train")
    test = binary_labels(y_test, "y_test")
    rate = float(train.mean())
    if rate in (0.0, 1.0):
        raise ValueError(
            f"y_train holds a single class (positive rate {rate}); the base-rate cross-entropy is infinite"
        )
    return float(-np.mean(test * np.log(rate) + (1.0 - test) * np.log1p(-rate)))


__all__ = ["base_rate_mnlp", "binary_labels", "mnlp_classification", "mnlp_regression"]
