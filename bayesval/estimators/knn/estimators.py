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
from bayesval.estimators.knn.distances import check_distance, check_tau, prepare_features
from bayesval.estimators.knn.values import (
    knn_shapley_values,
    noisy_knn_shapley_values,
    private_tknn_shapley_values,
    tknn_shapley_values,
)
from bayesval.privacy import PrivacyLedger
from bayesval.privacy.release import PrivateRelease, check_noise_options, check_privacy
from bayesval.results.result import ValuationResult


def _check_count(name: str, value: int, minimum: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")
    return int(value)


class _NearestNeighbourValuation(PointEstimator):
    """The KNN family on the shared base: fit keeps the training rows (L2-normalised for the cosine distance) and
    their label codes; subclasses implement `_values(x_val, y_val, batch_size) -> (values, ledger, diagnostics)`,
    a private one releasing through its `PrivateRelease` (`bayesval.privacy.release`)."""

    needs = "KNN valuation"

    def __init__(self, distance: str, batch_size: int | None) -> None:
        self.distance = check_distance(distance)
        self.batch_size = None if batch_size is None else _check_count("batch_size", batch_size)

    def _store(self, features, labels) -> None:
        self.x_train_ = jnp.asarray(prepare_features("X", features, self.distance))
        self.y_train_ = jnp.asarray(labels)

    def _value(self, x_val, y_val) -> ValuationResult:
        x_val = prepare_features("X_val", x_val, self.distance)
        batch = auto_batch_size(self.x_train_.shape[0], x_val.shape[0], self.batch_size)
        values, ledger, diagnostics = self._values(x_val, y_val, batch)
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

    def _values(self, x_val, y_val, batch_size):
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
        batch_size: int | None = None,
    ) -> None:
        super().__init__(distance, batch_size)
        self.n_neighbors = _check_count("n_neighbors", n_neighbors)
        if variant not in ("soft", "original"):
            raise ValueError(f"variant must be 'soft' or 'original', got {variant!r}")
        self.variant = variant
        self.method = "knn_shapley" if variant == "soft" else "knn_shapley_original"

    def _values(self, x_val, y_val, batch_size):
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
        noise_seed: int | None = None,
        allow_seed_reuse: bool = False,
    ) -> None:
        super().__init__(distance, batch_size)
        self.tau = check_tau(tau, distance)
        self.epsilon, self.delta, self.sampling_probability = epsilon, delta, sampling_probability
        private = check_privacy(epsilon, delta, required=False) is not None
        self.privacy = (
            PrivateRelease(epsilon, delta, sampling_probability, noise_seed, allow_seed_reuse) if private else None
        )
        check_noise_options(private, noise_seed, allow_seed_reuse, "DP-TKNN-Shapley")
        self.method = "tknn_shapley" if self.privacy is None else "dp_tknn_shapley"

    def _values(self, x_val, y_val, batch_size):
        if self.privacy is None:
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
                    "tau": self.tau,
                    "mean_neighbours": float(neighbours.mean()),
                    "validation_points_without_neighbours": int((neighbours == 0).sum()),
                },
            )
        inputs = (self.x_train_, self.y_train_, x_val, y_val, self.tau, self._inv_classes, self.sampling_probability)
        (values, released), ledger, diagnostics = self.privacy.release(
            partial(private_tknn_shapley_values, distance=self.distance, batch_size=batch_size),
            inputs,
            sensitivity=math.sqrt(3.0),
            compositions=len(y_val),
            what="TKNN counts (|B|, |NB(B)|, same-label |NB(B)|) on a Poisson subsample B, per validation point",
            dimension=3,
        )
        mean_released = float(np.asarray(released)[:, 1].mean())
        return values, ledger, {"tau": self.tau, **diagnostics, "mean_released_neighbours": mean_released}


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
        noise_seed: int | None = None,
        allow_seed_reuse: bool = False,
    ) -> None:
        super().__init__(distance, batch_size)
        self.n_neighbors = _check_count("n_neighbors", n_neighbors)
        self.epsilon, self.delta, self.sampling_probability = epsilon, delta, sampling_probability
        self.privacy = PrivateRelease(epsilon, delta, sampling_probability, noise_seed, allow_seed_reuse)

    def _values(self, x_val, y_val, batch_size):
        k = self.n_neighbors
        inputs = (self.x_train_, self.y_train_, x_val, y_val, self.sampling_probability)
        values, ledger, diagnostics = self.privacy.release(
            partial(
                noisy_knn_shapley_values,
                k=k,
                subsample=self.sampling_probability < 1,
                distance=self.distance,
                batch_size=batch_size,
            ),
            inputs,
            sensitivity=1.0 / (k * (k + 1)),
            compositions=len(y_val),
            what="own KNN-Shapley value per validation point",
            dimension=1,
        )
        return values, ledger, {"n_neighbors": k, **diagnostics}


__all__ = ["DPKNNShapley", "KNNShapley", "TKNNShapley"]
