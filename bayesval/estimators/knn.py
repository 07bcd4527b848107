"""Nearest-neighbour data valuation as scikit-learn-style estimators: fit on training data, then value.

* :class:`KNNShapley`: KNN-Shapley, soft-label (Wang & Jia 2023; Wang et al. 2023, Thm 7) or the
  original of Jia et al. (2019) (Thm 8).
* :class:`TKNNShapley`: Threshold-KNN-Shapley (Wang et al. 2023, Thm 13); with `epsilon` and
  `delta`, DP-TKNN-Shapley (Sec. 5, Thm 14/16).
* :class:`DPKNNShapley`: the naive DP-KNN-Shapley baseline (App. B.4), with or without subsampling.

All follow ``estimator.fit(X, y).value(X_val, y_val, key=key) -> ValuationResult``. A point's value
is the sum of its values over the validation points (Thm 1); names are the training-row indices.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np

from bayesval.estimators.batching import auto_batch_size
from bayesval.estimators.distances import check_distance, check_tau, prepare_features
from bayesval.estimators.knn_values import (
    knn_shapley_values,
    noisy_knn_shapley_values,
    private_tknn_shapley_values,
    tknn_shapley_values,
)
from bayesval.estimators.noise import calibrate_noise
from bayesval.privacy.ledger import PrivacyLedger
from bayesval.results import ValuationResult
from bayesval.validation import check_finite_array, check_positive, check_probability

_OWNERS = "each training point"


def _check_count(name: str, value: int, minimum: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")
    return int(value)


def _check_sampling_probability(value: float) -> float:
    if not (isinstance(value, (int, float, np.floating)) and 0 < value <= 1):
        raise ValueError(f"sampling_probability must lie in (0, 1], got {value!r}")
    return float(value)


def _check_privacy(epsilon: float | None, delta: float | None, *, required: bool) -> tuple[float, float] | None:
    """(epsilon, delta) checked: epsilon > 0 and delta in (0, 1), both or neither (unless `required`)."""
    if epsilon is None and delta is None and not required:
        return None
    if epsilon is None or delta is None:
        raise ValueError(
            f"epsilon and delta must be given together (epsilon > 0, delta in (0, 1)), got "
            f"epsilon={epsilon!r}, delta={delta!r}"
        )
    return check_positive("epsilon", epsilon), check_probability("delta", delta)


class _NearestNeighbourValuation:
    """Shared fit / input checks; subclasses implement `_values(x_val, y_val, key)`."""

    method: str

    def __init__(self, distance: str, batch_size: int | None) -> None:
        self.distance = check_distance(distance)
        self.batch_size = None if batch_size is None else _check_count("batch_size", batch_size)

    def fit(self, X, y) -> _NearestNeighbourValuation:
        """Store the training points to be valued (rows L2-normalised for the cosine distance)."""
        features = check_finite_array("X", X, ndim=2)
        labels = np.asarray(y)
        if labels.ndim != 1 or labels.shape[0] != features.shape[0]:
            raise ValueError(
                f"y must be 1-D with one label per row of X ({features.shape[0]}), got shape {labels.shape}"
            )
        if features.shape[0] == 0:
            raise ValueError("X has no rows: there is nothing to value")
        self.classes_ = np.unique(labels)
        if self.classes_.size < 2:
            raise ValueError(
                f"y has a single class ({self.classes_[0]!r}); KNN valuation needs labels of at least 2 classes"
            )
        self.n_features_in_ = features.shape[1]
        self.x_train_ = jnp.asarray(prepare_features("X", features, self.distance))
        self.y_train_ = jnp.asarray(np.searchsorted(self.classes_, labels))
        return self

    def value(self, X_val, y_val, *, key: jax.Array | None = None) -> ValuationResult:
        """Value every training point against the validation set (X_val, y_val)."""
        if not hasattr(self, "x_train_"):
            raise RuntimeError(f"call {type(self).__name__}.fit(X, y) before .value(...)")
        features = check_finite_array("X_val", X_val, ndim=2)
        if features.shape[1] != self.n_features_in_:
            raise ValueError(f"X_val has {features.shape[1]} features but X had {self.n_features_in_}")
        labels = np.asarray(y_val)
        if labels.ndim != 1 or labels.shape[0] != features.shape[0] or labels.size == 0:
            raise ValueError(
                f"y_val must be 1-D with one label per row of X_val ({features.shape[0]} >= 1), "
                f"got shape {labels.shape}"
            )
        codes = np.searchsorted(self.classes_, labels).clip(0, self.classes_.size - 1)
        unknown = self.classes_[codes] != labels
        if unknown.any():
            raise ValueError(
                f"y_val has labels not seen in y: {sorted(set(labels[unknown].tolist()))}; "
                f"known: {self.classes_.tolist()}"
            )
        x_val = prepare_features("X_val", features, self.distance)
        batch = auto_batch_size(self.x_train_.shape[0], x_val.shape[0], self.batch_size)
        values, ledger, diagnostics = self._values(x_val, codes, key, batch)
        n = values.shape[0]
        diagnostics = {
            "n_train": n,
            "n_val": int(x_val.shape[0]),
            "n_classes": int(self.classes_.size),
            "distance": self.distance,
            "batch_size": batch,
            **diagnostics,
        }
        return ValuationResult(
            method=self.method,
            values=np.asarray(values),
            stderr=np.zeros(n),
            names=[str(i) for i in range(n)],
            privacy=ledger,
            diagnostics=diagnostics,
        )

    @property
    def _inv_classes(self) -> float:
        return 1.0 / self.classes_.size

    def _values(self, x_val, y_val, key, batch_size):
        raise NotImplementedError

    @staticmethod
    def _require_key(key: jax.Array | None, method: str) -> jax.Array:
        if key is None:
            raise ValueError(f"{method} draws privacy noise: pass key=jax.random.PRNGKey(...) to value()")
        return key


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
        batch_size: int | None = None,
    ) -> None:
        super().__init__(distance, batch_size)
        self.n_neighbors = _check_count("n_neighbors", n_neighbors)
        if variant not in ("soft", "original"):
            raise ValueError(f"variant must be 'soft' or 'original', got {variant!r}")
        self.variant = variant
        self.method = "knn_shapley" if variant == "soft" else "knn_shapley_original"

    def _values(self, x_val, y_val, key, batch_size):
        values = knn_shapley_values(
            self.x_train_,
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
    """

    def __init__(
        self,
        tau: float = -0.5,
        *,
        distance: str = "cosine",
        epsilon: float | None = None,
        delta: float | None = None,
        sampling_probability: float = 0.01,
        batch_size: int | None = None,
    ) -> None:
        super().__init__(distance, batch_size)
        self.tau = check_tau(tau, distance)
        self.epsilon, self.delta = _check_privacy(epsilon, delta, required=False) or (None, None)
        self.sampling_probability = _check_sampling_probability(sampling_probability)
        self.method = "tknn_shapley" if self.epsilon is None else "dp_tknn_shapley"

    def _values(self, x_val, y_val, key, batch_size):
        settings = {"tau": self.tau}
        if self.epsilon is None:
            values, neighbours = tknn_shapley_values(
                self.x_train_,
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
                    **settings,
                    "mean_neighbours": float(neighbours.mean()),
                    "validation_points_without_neighbours": int((neighbours == 0).sum()),
                },
            )
        key = self._require_key(key, "DP-TKNN-Shapley")
        calibration = calibrate_noise(self.epsilon, self.delta, math.sqrt(3.0), len(y_val), self.sampling_probability)
        values, released = private_tknn_shapley_values(
            key,
            self.x_train_,
            self.y_train_,
            x_val,
            y_val,
            self.tau,
            self._inv_classes,
            self.sampling_probability,
            calibration.noise_std,
            distance=self.distance,
            batch_size=batch_size,
        )
        ledger = PrivacyLedger()
        ledger.record(
            calibration.release(
                owner=_OWNERS,
                what="TKNN counts (|B|, |NB(B)|, same-label |NB(B)|) on a Poisson subsample B, per validation point",
                dimension=3,
            )
        )
        return (
            values,
            ledger,
            {
                **settings,
                "epsilon_target": self.epsilon,
                "epsilon_spent": calibration.epsilon_spent,
                "delta": self.delta,
                "sampling_probability": self.sampling_probability,
                "noise_std": calibration.noise_std,
                "noise_multiplier": calibration.noise_multiplier,
                "mean_released_neighbours": float(np.asarray(released)[:, 1].mean()),
            },
        )


class DPKNNShapley(_NearestNeighbourValuation):
    """Naive DP-KNN-Shapley baseline (Wang et al. 2023, App. B.4): KNN-OLD values plus Gaussian noise.

    The original KNN-Shapley has sensitivity 1/(K(K+1)) per validation point (Thm 10); each
    owner's value gets independent noise of std multiplier/(K(K+1)) per validation point,
    calibrated for N_val compositions. sampling_probability < 1 values each owner on a Poisson
    subsample of the others (App. B.3.2). Not collusion-resistant; see TKNNShapley for that.
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
        batch_size: int | None = None,
    ) -> None:
        super().__init__(distance, batch_size)
        self.n_neighbors = _check_count("n_neighbors", n_neighbors)
        self.epsilon, self.delta = _check_privacy(epsilon, delta, required=True)
        self.sampling_probability = _check_sampling_probability(sampling_probability)

    def _values(self, x_val, y_val, key, batch_size):
        k = self.n_neighbors
        key = self._require_key(key, "DP-KNN-Shapley")
        calibration = calibrate_noise(
            self.epsilon, self.delta, 1.0 / (k * (k + 1)), len(y_val), self.sampling_probability
        )
        values = noisy_knn_shapley_values(
            key,
            self.x_train_,
            self.y_train_,
            x_val,
            y_val,
            self.sampling_probability,
            calibration.noise_std,
            k=k,
            subsample=self.sampling_probability < 1,
            distance=self.distance,
            batch_size=batch_size,
        )
        ledger = PrivacyLedger()
        ledger.record(
            calibration.release(owner=_OWNERS, what="own KNN-Shapley value per validation point", dimension=1)
        )
        return (
            values,
            ledger,
            {
                "n_neighbors": k,
                "epsilon_target": self.epsilon,
                "epsilon_spent": calibration.epsilon_spent,
                "delta": self.delta,
                "sampling_probability": self.sampling_probability,
                "noise_std": calibration.noise_std,
                "noise_multiplier": calibration.noise_multiplier,
            },
        )


__all__ = ["DPKNNShapley", "KNNShapley", "TKNNShapley"]
