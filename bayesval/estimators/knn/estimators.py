"""Nearest-neighbour data valuation as scikit-learn-style estimators: fit on training data, then value.

* :class:`KNNShapley`: KNN-Shapley, soft-label (Wang & Jia 2023; Wang et al. 2023, Thm 7) or the
  original of Jia et al. (2019) (Thm 8).
* :class:`TKNNShapley`: Threshold-KNN-Shapley (Wang et al. 2023, Thm 13); with `epsilon` and
  `delta`, DP-TKNN-Shapley (Sec. 5, Thm 14/16).
* :class:`DPKNNShapley`: the naive DP-KNN-Shapley baseline (App. B.4), with or without subsampling.

All follow ``estimator.fit(X, y).value(X_val, y_val) -> ValuationResult``. A point's value
is the sum of its values over the validation points (Thm 1); names are the training-row indices.
"""

from __future__ import annotations

import math
from functools import partial

import jax.numpy as jnp
import numpy as np

from bayesval.batching import auto_batch_size
from bayesval.estimators.base import PointEstimator
from bayesval.estimators.knn.distances import centre_features, check_distance, check_tau, prepare_features
from bayesval.estimators.knn.values import (
    knn_shapley_values,
    noisy_knn_shapley_values,
    private_tknn_shapley_values,
    tknn_shapley_values,
)
from bayesval.privacy import PrivacyLedger
from bayesval.privacy.release import PrivateRelease, check_noise_options, check_privacy, check_sampling_probability
from bayesval.results.result import ValuationResult
from bayesval.validation import check_labels


def _check_count(name: str, value: int, minimum: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")
    return int(value)


def check_public_classes(classes) -> np.ndarray | None:
    """The public label set `classes` (None: none given), sorted: a 1-D list of at least two distinct labels, numbers
    or strings, each named once."""
    if classes is None:
        return None
    if np.ndim(classes) != 1 or isinstance(classes, (str, bytes)):
        raise ValueError(f"classes must be a 1-D list of the class labels, e.g. classes=[0, 1], got {classes!r}")
    labels = check_labels("classes", list(classes), len(classes), rows_name="classes")
    distinct = np.unique(labels)
    if distinct.size != labels.size:
        raise ValueError(f"classes must name each class once, got {labels.tolist()}")
    if distinct.size < 2:
        raise ValueError(f"classes must hold at least 2 labels, got {labels.tolist()}")
    return distinct


def _public_codes(name: str, labels: np.ndarray, classes: np.ndarray) -> np.ndarray:
    """`labels` as codes 0 .. C-1 of the public `classes`; a label outside them is an error."""
    same_kind = (labels.dtype.kind in "US") == (classes.dtype.kind in "US")
    codes = np.searchsorted(classes, labels).clip(0, classes.size - 1) if same_kind else None
    unknown = np.ones(labels.shape, bool) if codes is None else classes[codes] != labels
    if unknown.any():
        outside = sorted(set(labels[unknown].tolist()))
        raise ValueError(f"{name} has labels outside classes: {outside[:6]}; classes: {classes.tolist()}")
    return codes


_PRIVATE_CLASSES = (
    "needs classes=, the public list of class labels (e.g. classes=[0, 1]): the number of classes C enters every "
    "value through v(empty set) = 1/C, and C counted from the private training labels would change every owner's "
    "value when the only point of a class is added or removed, which no noise covers"
)


class _NearestNeighbourValuation(PointEstimator):
    """The KNN family on the shared base: fit keeps the training rows (L2-normalised for the cosine distance) and
    their label codes; subclasses implement `_values(x_train, x_val, y_val, batch_size) -> (values, ledger,
    diagnostics)` on the rows `centre_features` returns, a private one releasing through its `PrivateRelease`
    (`bayesval.privacy.release`). With public `classes` the label codes and C are those of `classes`, not of the
    training labels (docs/knn.md, "Public classes")."""

    needs = "KNN valuation"

    def __init__(self, distance: str, batch_size: int | None, classes=None) -> None:
        self.distance = check_distance(distance)
        self.batch_size = None if batch_size is None else _check_count("batch_size", batch_size)
        self.classes = check_public_classes(classes)

    def _training_codes(self, features: np.ndarray, y) -> np.ndarray:
        """With public `classes`: codes of those (C = their number, whatever labels y holds); else the base's codes
        of the classes seen in y."""
        if self.classes is None:
            return super()._training_codes(features, y)
        self.classes_ = self.classes
        return _public_codes("y", check_labels("y", y, features.shape[0]), self.classes)

    def _validation_codes(self, features: np.ndarray, y_val) -> np.ndarray:
        if self.classes is None:
            return super()._validation_codes(features, y_val)
        labels = check_labels("y_val", y_val, features.shape[0], rows_name="X_val")
        return _public_codes("y_val", labels, self.classes)

    def _store(self, features, labels) -> None:
        self.x_train_ = jnp.asarray(prepare_features("X", features, self.distance))
        self.y_train_ = jnp.asarray(labels)

    def _value(self, x_val, y_val) -> ValuationResult:
        x_val = prepare_features("X_val", x_val, self.distance)
        x_train, x_val = centre_features(self.x_train_, x_val, self.distance)
        batch = auto_batch_size(x_train.shape[0], x_val.shape[0], self.batch_size)
        values, ledger, diagnostics = self._values(x_train, x_val, y_val, batch)
        diagnostics = {
            "n_train": values.shape[0],
            "n_val": int(x_val.shape[0]),
            "n_classes": int(self.classes_.size),
            "distance": self.distance,
            "batch_size": batch,
            **diagnostics,
        }
        return self._result(values, np.zeros(values.shape[0]), ledger=self._record(ledger), diagnostics=diagnostics)

    @property
    def _inv_classes(self) -> float:
        return 1.0 / self.classes_.size

    def _values(self, x_train, x_val, y_val, batch_size):
        raise NotImplementedError


class KNNShapley(_NearestNeighbourValuation):
    """Exact KNN-Shapley of each training point (O(N log N) per validation point).

    variant='soft': utility = fraction of the K nearest with the validation label, 1/C for the
    empty set (Wang et al. 2023, Eq. 2, Thm 7). variant='original': Jia et al. (2019), utility
    divided by K and 0 for the empty set (Eq. 5, Thm 8; equal to pyDVL's KNN-Shapley for N >= K).
    """

    def __init__(
        self,
        n_neighbors: int = 5,
        *,
        variant: str = "soft",
        distance: str = "cosine",
        classes=None,
        batch_size: int | None = None,
    ) -> None:
        super().__init__(distance, batch_size, classes)
        self.n_neighbors = _check_count("n_neighbors", n_neighbors)
        if variant not in ("soft", "original"):
            raise ValueError(f"variant must be 'soft' or 'original', got {variant!r}")
        self.variant = variant
        self.method = "knn_shapley" if variant == "soft" else "knn_shapley_original"

    def _values(self, x_train, x_val, y_val, batch_size):
        values = knn_shapley_values(
            x_train,
            self.y_train_,
            x_val,
            y_val,
            self._inv_classes,
            k=self.n_neighbors,
            variant=self.variant,
            distance=self.distance,
            batch_size=batch_size,
        )
        return values, PrivacyLedger(), {"n_neighbors": self.n_neighbors}


class TKNNShapley(_NearestNeighbourValuation):
    """Threshold-KNN-Shapley (Wang et al. 2023, Thm 13), private when `epsilon` and `delta` are set.

    Neighbours of a validation point are the training points with d(x_i, x_val) <= tau; tau must
    lie in [-1, 1] for the cosine distance (d = -cos; -0.5 means cosine >= 0.5) and in [0, inf) for
    the euclidean one. With (epsilon, delta): DP-TKNN-Shapley (Sec. 5), where each validation
    point releases its three counts on a Poisson subsample of rate `sampling_probability` with
    Gaussian noise (l2 sensitivity sqrt(3)), rounded and clamped, shared by all owners (joint DP,
    Thm 16); the noise is calibrated for N_val compositions and the spent epsilon is in the ledger.

    `classes` is the public label set. The private path requires it: C enters every value through v(empty set) = 1/C
    (Eq. 3), so C counted from the private training labels would move every owner's value, un-noised, when the
    only point of a class joins or leaves (docs/knn.md, "Public classes"). Without epsilon it is optional (default:
    the classes seen in y). `sampling_probability` must lie in (0, 1] either way; only the private path uses it.
    """

    def __init__(
        self,
        tau: float = -0.5,
        *,
        distance: str = "cosine",
        epsilon: float | None = None,
        delta: float | None = None,
        sampling_probability: float = 0.01,
        classes=None,
        batch_size: int | None = None,
        noise_seed: int | None = None,
        allow_seed_reuse: bool = False,
    ) -> None:
        super().__init__(distance, batch_size, classes)
        self.tau = check_tau(tau, distance)
        self.epsilon, self.delta = epsilon, delta
        self.sampling_probability = check_sampling_probability(sampling_probability)
        private = check_privacy(epsilon, delta, required=False) is not None
        self.privacy = (
            PrivateRelease(epsilon, delta, sampling_probability, noise_seed, allow_seed_reuse) if private else None
        )
        check_noise_options(private, noise_seed, allow_seed_reuse, "DP-TKNN-Shapley")
        if private and self.classes is None:
            raise ValueError(f"DP-TKNN-Shapley (epsilon and delta set) {_PRIVATE_CLASSES}")
        self.method = "tknn_shapley" if self.privacy is None else "dp_tknn_shapley"

    def _values(self, x_train, x_val, y_val, batch_size):
        if self.privacy is None:
            values, neighbours = tknn_shapley_values(
                x_train,
                self.y_train_,
                x_val,
                y_val,
                self.tau,
                self._inv_classes,
                distance=self.distance,
                batch_size=batch_size,
            )
            neighbours = np.asarray(neighbours)
            return (
                values,
                PrivacyLedger(),
                {
                    "tau": self.tau,
                    "mean_neighbours": float(neighbours.mean()),
                    "validation_points_without_neighbours": int((neighbours == 0).sum()),
                },
            )
        inputs = (x_train, self.y_train_, x_val, y_val, self.tau, self._inv_classes, self.sampling_probability)
        (values, released), ledger, diagnostics = self.privacy.release(
            partial(_private_tknn, batch_size=batch_size, distance=self.distance),
            inputs,
            sensitivity=math.sqrt(3.0),
            compositions=len(y_val),
            what="TKNN counts (|B|, |NB(B)|, same-label |NB(B)|) on a Poisson subsample B, per validation point",
            noise_shape=(len(y_val), 3),
            integer_statistic=True,
        )
        mean_released = float(np.asarray(released)[:, 1].mean())
        return values, ledger, {"tau": self.tau, **diagnostics, "mean_released_neighbours": mean_released}


class DPKNNShapley(_NearestNeighbourValuation):
    """Naive DP-KNN-Shapley baseline (Wang et al. 2023, App. B.4): KNN-OLD values plus Gaussian noise.

    The original KNN-Shapley has sensitivity 1/(K(K+1)) per validation point (Thm 10); each
    owner's value gets independent noise of std multiplier/(K(K+1)) per validation point,
    calibrated for N_val compositions. sampling_probability < 1 values each owner on a Poisson
    subsample of the others (App. B.3.2). Not collusion-resistant; see TKNNShapley for that. `classes`, the public
    label set, is required: labels are checked against it, never against the private training labels (docs/knn.md,
    "Public classes").
    """

    method = "dp_knn_shapley"

    def __init__(
        self,
        n_neighbors: int = 5,
        *,
        epsilon: float,
        delta: float,
        sampling_probability: float = 1.0,
        distance: str = "cosine",
        classes=None,
        batch_size: int | None = None,
        noise_seed: int | None = None,
        allow_seed_reuse: bool = False,
    ) -> None:
        super().__init__(distance, batch_size, classes)
        self.n_neighbors = _check_count("n_neighbors", n_neighbors)
        self.epsilon, self.delta, self.sampling_probability = epsilon, delta, sampling_probability
        self.privacy = PrivateRelease(epsilon, delta, sampling_probability, noise_seed, allow_seed_reuse)
        if self.classes is None:
            raise ValueError(
                "DPKNNShapley needs classes=, the public list of class labels (e.g. classes=[0, 1]): the number of "
                "classes counted from the private training labels, and a refusal of validation labels they lack, "
                "would reveal the training labels un-noised"
            )

    def _values(self, x_train, x_val, y_val, batch_size):
        k = self.n_neighbors
        inputs = (x_train, self.y_train_, x_val, y_val, self.sampling_probability)
        sensitivity = 1.0 / (k * (k + 1))
        values, ledger, diagnostics = self.privacy.release(
            partial(
                _noisy_knn,
                k=k,
                subsample=self.sampling_probability < 1,
                distance=self.distance,
                batch_size=batch_size,
            ),
            inputs,
            sensitivity=sensitivity,
            compositions=len(y_val),
            what="own KNN-Shapley value per validation point (each owner's value alone; the vector of every "
            'owner\'s values is not jointly private: docs/knn.md, "Naive DP-KNN-Shapley baseline")',
            noise_shape=(len(y_val), len(self.y_train_)),
        )
        return values, ledger, {"n_neighbors": k, **diagnostics}


def _private_tknn(key, noise, *inputs, grid, noise_std, distance, batch_size):
    """DP-TKNN-Shapley on the counts' exact noise (`Mechanism.run_on_grid`: `noise` in steps of `grid`)."""
    del noise_std  # the counts' noise std is the ledger's
    return private_tknn_shapley_values(key, noise * grid, *inputs, distance=distance, batch_size=batch_size)


def _noisy_knn(key, noise, *inputs, grid, noise_std, **settings):
    """Naive DP-KNN-Shapley on the values' exact noise in steps of `grid` (`Mechanism.run_on_grid`)."""
    del noise_std
    return noisy_knn_shapley_values(key, noise, *inputs, grid, **settings)


__all__ = ["DPKNNShapley", "KNNShapley", "TKNNShapley"]
