"""Retraining utilities of data points: v(C) = the validation score of a model trained on coalition C.

Both follow the game layer's protocol `utility(key, masks (B, n)) -> values (B,)` (`bayesval.games.utilities`); the
logistic fit is deterministic, so `MonteCarloShapley` hands it to the game layer as a `KeylessUtility`:

* :class:`LogisticRegressionUtility`: L2-regularised logistic regression, every coalition of a batch trained at once
  in one compiled program: the coalition's rows gathered into a padded (B, K, d) block (K the batch's largest
  coalition, rounded up to a power of two, so the solver compiles once per K), a fixed number of Newton steps with a
  capped step length, for all coalitions at once. Its optimum is scikit-learn's
  `LogisticRegression(C=...)` on the same rows (tests/test_utilities.py, 1e-4 on the score).
* :class:`SklearnUtility`: any scikit-learn classifier refitted per coalition, one fit at a time: the slow path for
  users' own models.

A coalition that cannot be fitted (the empty one; one with a single class where the model has an unpenalised
intercept, for which no finite optimum exists; a scikit-learn fit that raises) gets the `fallback` value, the score
of an uninformed model: -ln 2 for the log-loss, the majority-class rate of the validation labels for accuracy (the
"random score" of Ghorbani & Zou's 2019 Data Shapley code; Watson et al. 2023 do not say how they handled such
coalitions, docs/layered.md, "Where we depart from the paper"). `fallbacks` counts them over the utility's lifetime.
"""

from __future__ import annotations

import math
import warnings
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np

from bayesval.validation import (
    check_bool,
    check_count,
    check_finite_array,
    check_labels,
    check_magnitude,
    check_positive,
    row_norms,
)

METRICS = ("log_loss", "accuracy")
PENALTIES = ("mean", "sum")
MAX_MARGIN_STEP = 4.0  # the most a Newton step may move any training margin x_j w
MAX_FEATURE = 1e100  # |x| of a feature: the Hessian sums x_j x_j^T over the rows, finite while n d |x|^2 < 1.8e308
OVERFLOW = "a model fitted on them sums squared features over the rows (a Newton step, a solver), which overflows"


def _binary_codes(name: str, labels: np.ndarray, classes: np.ndarray) -> np.ndarray:
    codes = np.searchsorted(classes, labels).clip(0, len(classes) - 1)
    unknown = classes[codes] != labels
    if unknown.any():
        raise ValueError(f"{name} has labels not seen in y: {sorted(set(labels[unknown].tolist()))[:6]}")
    return codes.astype(np.float64)


class _CoalitionData:
    """Checked training and validation data: features float64, labels as 0/1 codes of the two classes of y."""

    def __init__(self, X, y, X_val, y_val) -> None:
        self.x = check_finite_array("X", X, ndim=2)
        labels = check_labels("y", y, self.x.shape[0])
        self.classes = np.unique(labels)
        if self.classes.size != 2:
            raise ValueError(f"y must hold exactly 2 classes for a binary classifier's utility, got {self.classes}")
        self.x_val = check_finite_array("X_val", X_val, ndim=2)
        if self.x_val.shape[1] != self.x.shape[1]:
            raise ValueError(f"X_val has {self.x_val.shape[1]} features but X has {self.x.shape[1]}")
        val_labels = check_labels("y_val", y_val, self.x_val.shape[0], rows_name="X_val")
        self.y = _binary_codes("y", labels, self.classes)
        self.y_val = _binary_codes("y_val", val_labels, self.classes)

    @property
    def num_players(self) -> int:
        return self.x.shape[0]

    def check_magnitudes(self, x: np.ndarray, x_val: np.ndarray, clipped: str = "") -> None:
        """Refuse features `x`, `x_val` (as the model will see them: `clipped` says how) of which a model's sums of
        squares would overflow (`MAX_FEATURE`)."""
        check_magnitude(f"X{clipped}", x, MAX_FEATURE, OVERFLOW)
        check_magnitude(f"X_val{clipped}", x_val, MAX_FEATURE, OVERFLOW)

    def fallback_value(self, metric: str) -> float:
        """The score of an uninformed model: predict 1/2 (log-loss -ln 2), or the validation majority class."""
        if metric == "log_loss":
            return -math.log(2.0)
        return float(max(self.y_val.mean(), 1.0 - self.y_val.mean()))


def _check_metric(metric: str) -> str:
    if metric not in METRICS:
        raise ValueError(f"metric must be one of {METRICS}, got {metric!r}")
    return metric


def power_of_two(count: int) -> int:
    """The smallest power of two >= count (1 for 0): padded shapes, so that a jitted program compiles rarely."""
    return 1 << max(count - 1, 0).bit_length()


def _check_masks(masks, num_players: int) -> np.ndarray:
    masks = np.asarray(masks)
    if masks.ndim != 2 or masks.shape[1] != num_players or masks.dtype != bool:
        raise ValueError(f"masks must be boolean of shape (B, {num_players}), got {masks.dtype} {masks.shape}")
    return masks


class LogisticRegressionUtility:
    """v(C) = validation score of L2 logistic regression trained on coalition C, batched over coalitions.

    X, y             the n training points (the players); y binary
    X_val, y_val     the validation set scoring every coalition's model
    l2               the L2 strength lambda
    penalty          'mean': minimise (1/|C|) sum_C loss + lambda ||w||^2, the stability analysis's objective
                     (Bousquet & Elisseeff 2002; Watson et al. 2023, Sec. 3.1), i.e. scikit-learn's
                     C = 1 / (2 lambda |C|), whose marginals shrink like 1 / |C|; 'sum': minimise
                     sum_C loss + (lambda / 2) ||w||^2, scikit-learn's C = 1 / lambda for every coalition
    fit_intercept    an unpenalised intercept, as scikit-learn's; off by default, since the stability bound (and so
                     DP Layered Shapley) holds for penalised weights only: append a constant column to X for a
                     penalised one (and count it in kappa)
    metric           'log_loss' (v = minus the mean validation log-loss, Lipschitz: the DP analysis needs it) or
                     'accuracy'
    norm_bound       kappa: rows of X and X_val with a larger L2 norm are scaled down to it, the declared bound the
                     sensitivity of DP Layered Shapley rests on (None: no bound, no DP)
    iterations       Newton steps from w = 0 (fixed, so the program compiles once); 12 meet scikit-learn to 1e-8
    batch_size       coalitions per compiled call (a batch is padded with empty coalitions)
    """

    def __init__(
        self,
        X,
        y,
        X_val,
        y_val,
        *,
        l2: float = 1.0,
        penalty: str = "mean",
        fit_intercept: bool = False,
        metric: str = "log_loss",
        norm_bound: float | None = None,
        iterations: int = 12,
        batch_size: int = 2048,
    ) -> None:
        self.l2 = check_positive("l2", l2)
        if penalty not in PENALTIES:
            raise ValueError(f"penalty must be one of {PENALTIES}, got {penalty!r}")
        self.penalty = penalty
        self.fit_intercept = check_bool("fit_intercept", fit_intercept)
        self.metric = _check_metric(metric)
        self.norm_bound = None if norm_bound is None else check_positive("norm_bound", norm_bound)
        self.iterations = check_count("iterations", iterations, minimum=1)
        self.batch_size = check_count("batch_size", batch_size, minimum=1)
        data = _CoalitionData(X, y, X_val, y_val)
        self.num_players, self.classes = data.num_players, data.classes
        self.fallback = data.fallback_value(self.metric)
        x, x_val = data.x, data.x_val
        if self.norm_bound is not None:
            x, x_val = self._clip(x), self._clip(x_val)
        data.check_magnitudes(
            x, x_val, "" if self.norm_bound is None else f" (rows clipped to norm_bound={norm_bound:g})"
        )
        if self.fit_intercept:
            x, x_val = (np.hstack([a, np.ones((len(a), 1))]) for a in (x, x_val))
        self._features = x.shape[1]
        outer = (x[:, :, None] * x[:, None, :]).reshape(len(x), -1)  # x_j x_j^T, for the Hessians
        self._arrays = tuple(jnp.asarray(a) for a in (x, outer, data.y, x_val, data.y_val))
        self.fallbacks = 0

    def _clip(self, x: np.ndarray) -> np.ndarray:
        norms = row_norms(x)
        return x * np.minimum(1.0, self.norm_bound / np.where(norms > 0, norms, 1.0))[:, None]

    def stability(self) -> tuple[float, float, float]:
        """(L, kappa, lambda) of the uniform-stability bound gamma_m = L^2 kappa^2 / (2 lambda m) on |v_i(C)|
        (Bousquet & Elisseeff 2002; Watson et al. 2023, Def. 3.2), or a ValueError saying which setting voids it."""
        reasons = [
            why
            for bad, why in (
                (self.metric != "log_loss", "metric='log_loss' (accuracy is not Lipschitz)"),
                (self.penalty != "mean", "penalty='mean' (with a fixed C the bound does not shrink with |C|)"),
                (self.fit_intercept, "fit_intercept=False (an unpenalised intercept is not stable)"),
                (self.norm_bound is None, "a norm_bound kappa on the rows"),
            )
            if bad
        ]
        if reasons:
            raise ValueError("the stability bound behind DP Layered Shapley needs " + "; ".join(reasons))
        return 1.0, float(self.norm_bound), self.l2

    def unfittable(self, masks) -> np.ndarray:
        """(B,) which coalitions get the fallback value: the empty one, and single-class ones with an intercept."""
        masks = _check_masks(masks, self.num_players)
        positives = masks @ np.asarray(self._arrays[2])
        sizes = masks.sum(axis=1)
        if self.fit_intercept:
            return (positives == 0) | (positives == sizes)
        return sizes == 0

    def __call__(self, key, masks) -> jax.Array:
        """Values (B,) of the coalitions `masks` (B, n); the key is unused (the fit is deterministic)."""
        masks = _check_masks(masks, self.num_players)
        self.fallbacks += int(self.unfittable(masks).sum())
        order = np.argsort(masks.sum(axis=1), kind="stable")  # similar sizes share a chunk
        values = np.empty(len(masks))
        for start in range(0, len(masks), self.batch_size):
            rows = order[start : start + self.batch_size]
            padded = np.zeros((min(self.batch_size, power_of_two(len(rows))), self.num_players), bool)
            padded[: len(rows)] = masks[rows]
            width = power_of_two(int(padded.sum(axis=1).max()))
            small = width < self._features and not self.fit_intercept  # the K x K Woodbury solve pays
            members = np.argsort(~padded, axis=1, kind="stable")[:, :width] if small else None
            values[rows] = np.asarray(
                _coalition_scores(
                    jnp.asarray(padded),
                    None if members is None else jnp.asarray(members),
                    *self._arrays,
                    l2=self.l2,
                    fallback=self.fallback,
                    mean_penalty=self.penalty == "mean",
                    fit_intercept=self.fit_intercept,
                    metric=self.metric,
                    iterations=self.iterations,
                )
            )[: len(rows)]
        return jnp.asarray(values)


@partial(jax.jit, static_argnames=("mean_penalty", "fit_intercept", "metric", "iterations"))
def _coalition_scores(
    masks, members, x, outer, y, x_val, y_val, l2, fallback, mean_penalty, fit_intercept, metric, iterations
):
    """Validation scores (B,) of the models fitted on each coalition (row of `masks`), all at once. With `members`
    (B, K), the indices of each coalition's points first (K at least its size and below d), the fit runs on those K
    rows only (Woodbury); else on all n with weights 0 and 1."""
    weights = masks.astype(x.dtype)
    sizes = weights.sum(axis=1)
    positives = weights @ y
    strength = jnp.where(mean_penalty, 2.0 * l2 * jnp.maximum(sizes, 1.0), l2)  # of (1/2) ||w||^2
    ridge = jnp.ones(x.shape[1]).at[-1].set(0.0 if fit_intercept else 1.0)  # the intercept is not penalised
    penalty = strength[:, None] * ridge
    if members is None:
        coefficients = _newton(_full_products(x, outer), x, y, weights, penalty, iterations)
    else:
        gathered = x[members]
        kept = jnp.take_along_axis(weights, members, axis=1)
        products = _gathered_products(gathered)
        coefficients = _newton(products, gathered, y[members], kept, penalty, iterations)
    margins = coefficients @ x_val.T  # (B, V)
    if metric == "log_loss":
        scores = -jnp.mean(jax.nn.softplus(margins) - y_val * margins, axis=1)
    else:
        scores = jnp.mean((margins > 0) == (y_val > 0.5), axis=1)
    unfittable = (sizes == 0) | (fit_intercept & ((positives == 0) | (positives == sizes)))
    return jnp.where(unfittable, fallback, scores)


def _full_products(x, outer):
    """Margins, gradient sums and Newton directions over all n points (shared x (n, d)): plain matrix products, the
    Hessian through the points' outer products x_j x_j^T, `outer` (n, d * d)."""
    features = x.shape[1]

    def direction(curvatures, penalty, gradients):
        hessians = (curvatures @ outer).reshape(len(curvatures), features, features) + jax.vmap(jnp.diag)(penalty)
        return jnp.linalg.solve(hessians, gradients[..., None])[..., 0]

    return lambda w: w @ x.T, lambda r: r @ x, direction


def _gathered_products(x):
    """The same over each coalition's own gathered rows x (B, K, d), K < d, every weight penalised: the direction
    solves the K x K system of H = P + U^T U, U = diag(s)^(1/2) x, as H^-1 g = P^-1 g - P^-1 U^T (I + U P^-1 U^T)^-1
    U P^-1 g (Woodbury), far cheaper than the d x d one for a small coalition of many features."""

    def direction(curvatures, penalty, gradients):
        scaled = jnp.sqrt(curvatures)[..., None] * x  # U (B, K, d)
        inverse_penalty = 1.0 / penalty
        inner = jnp.eye(x.shape[1]) + jnp.einsum("bkd,bd,bld->bkl", scaled, inverse_penalty, scaled)
        projected = jnp.einsum("bkd,bd->bk", scaled, inverse_penalty * gradients)
        correction = jnp.einsum("bkd,bk->bd", scaled, jnp.linalg.solve(inner, projected[..., None])[..., 0])
        return inverse_penalty * (gradients - correction)

    return lambda w: jnp.einsum("bkd,bd->bk", x, w), lambda r: jnp.einsum("bk,bkd->bd", r, x), direction


def _newton(products, x, y, weights, penalty, iterations: int):
    """argmin_w sum_j weights_bj logloss(y_bj, x_bj w) + (1/2) sum_f penalty_bf w_f^2 for every coalition b, by
    Newton steps from 0; `products` (margins, gradient sums, Newton direction) hide whether the rows are shared or
    gathered. A step moves no margin by more than MAX_MARGIN_STEP, which keeps Newton from overshooting where the
    loss is flat (no line search, whose log-sigmoids cost more than the step)."""
    margins_of, gradient_of, direction_of = products
    batch, features = penalty.shape

    def step(coefficients, _):
        probabilities = jax.nn.sigmoid(margins_of(coefficients))
        gradients = gradient_of(weights * (probabilities - y)) + penalty * coefficients
        directions = direction_of(weights * probabilities * (1 - probabilities), penalty + 1e-12, gradients)
        largest = jnp.max(jnp.abs(margins_of(directions)) * (weights > 0), axis=1, keepdims=True)
        return coefficients - directions * jnp.minimum(1.0, MAX_MARGIN_STEP / jnp.maximum(largest, 1e-300)), None

    coefficients, _ = jax.lax.scan(step, jnp.zeros((batch, features), x.dtype), None, length=iterations)
    return coefficients


def _check_classifier(estimator, metric: str):
    """`estimator`: an instance of a scikit-learn classifier (a regressor's predictions are not class labels, so its
    accuracy would be 0 for every coalition); for 'log_loss' one with `predict_proba`. A model without scikit-learn's
    estimator type counts as a classifier when it has `predict_proba`."""
    from sklearn.base import is_classifier, is_regressor

    if isinstance(estimator, type):
        raise TypeError(
            f"estimator must be an instance, e.g. {estimator.__name__}(), not the class {estimator.__name__}"
        )
    if not all(hasattr(estimator, method) for method in ("fit", "predict", "get_params")):
        raise TypeError(
            f"estimator must be a scikit-learn classifier with fit/predict (and get_params, to be cloned), got "
            f"{estimator!r}"
        )
    try:
        regressor, classifier = is_regressor(estimator), is_classifier(estimator)
    except AttributeError:  # no scikit-learn tags: a model of the user's own
        regressor, classifier = False, False
    if regressor or not (classifier or hasattr(estimator, "predict_proba")):
        kind = "a regressor" if regressor else "not marked as a classifier and has no predict_proba"
        raise TypeError(
            f"estimator must be a classifier (scikit-learn's is_classifier, or a model with predict_proba): "
            f"{type(estimator).__name__} is {kind}"
        )
    if metric == "log_loss" and not hasattr(estimator, "predict_proba"):
        raise TypeError(
            f"metric='log_loss' needs predicted probabilities, but {type(estimator).__name__} has no predict_proba "
            "(for SVC: probability=True); use metric='accuracy'"
        )
    return estimator


class SklearnUtility:
    """v(C) = validation score of a clone of a scikit-learn classifier fitted on coalition C, one fit at a time.

    estimator    any scikit-learn classifier instance (cloned per coalition; `predict_proba` needed for 'log_loss');
                 a regressor is refused
    metric       'accuracy' (default) or 'log_loss' (minus the mean validation log-loss)
    A fit that raises (a single-class coalition, say) gives the `fallback` value and is counted in `fallbacks`.
    """

    def __init__(self, estimator, X, y, X_val, y_val, *, metric: str = "accuracy") -> None:
        self.metric = _check_metric(metric)
        self.estimator = _check_classifier(estimator, self.metric)
        data = _CoalitionData(X, y, X_val, y_val)
        data.check_magnitudes(data.x, data.x_val)
        self.num_players, self.classes = data.num_players, data.classes
        self.fallback = data.fallback_value(self.metric)
        self._data = data
        self.fallbacks = 0

    def __call__(self, key, masks) -> np.ndarray:
        masks = _check_masks(masks, self.num_players)
        return np.array([self._value(mask) for mask in masks])

    def _value(self, mask: np.ndarray) -> float:
        from sklearn.base import clone

        data = self._data
        if not mask.any():
            self.fallbacks += 1
            return self.fallback
        model = clone(self.estimator)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                model.fit(data.x[mask], data.y[mask])
        except ValueError:
            self.fallbacks += 1
            return self.fallback
        if self.metric == "accuracy":
            return float(np.mean(model.predict(data.x_val) == data.y_val))
        probabilities = np.clip(model.predict_proba(data.x_val)[:, list(model.classes_).index(1.0)], 1e-15, 1 - 1e-15)
        return float(np.mean(data.y_val * np.log(probabilities) + (1 - data.y_val) * np.log1p(-probabilities)))


__all__ = ["LogisticRegressionUtility", "SklearnUtility"]
