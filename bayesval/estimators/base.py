"""One base for every data-point estimator: ``estimator.fit(X, y).value(X_val, y_val) -> ValuationResult``.

The three families (`knn`: Jia et al. 2019, Wang et al. 2023; `layered`: Watson et al. 2023; `gradients`: Zhou et
al. 2024) share one contract, and :class:`PointEstimator` holds all of it but the valuation itself:

* ``fit(X, y)`` checks the training data (finite, 2-D; the family's own row rule in `_check_rows`), codes the labels
  as 0 .. C-1 of the sorted classes `classes_` where the family needs codes (`codes_labels`; a retraining utility
  checks its own), lets the family store what it needs (`_store`), and opens the estimator's privacy ledger
  `ledger_`: every release valuing the fitted data is recorded there (`bayesval.privacy.release`).
* ``value(X_val, y_val)`` checks the validation set against the fitted data (finite, the same width, not empty,
  labels seen in y), has the family value every training point (`_value`), and returns the result built in one
  place (`_result`): one value per training point (or party) named by its row index, one standard error each.

The sampling randomness of a sampling estimator is its `key` (an int seed or a jax.random.key, `sampling_key`);
privacy noise never comes from it, but from the estimator's `noise_seed` or OS entropy (docs/privacy.md).
"""

from __future__ import annotations

import warnings
from abc import ABC, abstractmethod

import jax
import numpy as np

from bayesval.privacy import PrivacyLedger
from bayesval.results.result import ValuationResult
from bayesval.validation import check_finite_array, check_key, check_labels, user_stacklevel


def sampling_key(key, seed=None, owner: str = "the estimator") -> jax.Array:
    """The sampling key from `key` (an int seed or a jax.random.key, `check_key`), or from `seed=`, its name before
    the estimators shared one (kept for one release, with a DeprecationWarning pointing at the caller of the
    estimator's constructor, two calls up from its base's)."""
    if seed is None:
        return check_key("key", key)
    warnings.warn(
        f"seed= of {owner} is deprecated and will be removed in the next release: pass key= (an int seed or a "
        "jax.random.key; privacy noise still comes from noise_seed)",
        DeprecationWarning,
        stacklevel=user_stacklevel(),
    )
    if not (isinstance(key, int) and key == 0):
        raise TypeError(f"{owner} got both key= and seed=: pass key= only")
    return check_key("seed", seed)


class PointEstimator(ABC):
    """The fit / value contract of a data-point estimator, and its privacy ledger (see the module docstring).

    A subclass sets `method` (the result's method name) and implements `_value(x_val, y_val)`, returning the result
    through `_result`; it may refine `_check_rows` (which rows can be valued) and `_store` (what fit keeps; by
    default the features and label codes). With `codes_labels` False the labels reach `_store` and `_value` as
    given, for a family whose utility checks them itself."""

    method: str
    codes_labels: bool = True  # label codes 0 .. C-1 of `classes_` (at least two classes)
    needs: str = "data-point valuation"  # what needs two classes, for the single-class error

    def fit(self, X, y) -> PointEstimator:
        """Check and store the training points to be valued; a new, empty privacy ledger `ledger_`."""
        features = check_finite_array("X", X, ndim=2)
        self._check_rows(features)
        labels = self._training_codes(features, y) if self.codes_labels else y
        self.n_features_in_ = features.shape[1]
        self._store(features, labels)
        self.ledger_ = PrivacyLedger()
        return self

    def value(self, X_val, y_val) -> ValuationResult:
        """Value every training point against the validation set (X_val, y_val); a private estimator makes one new
        release per call (recorded in the result's ledger and in `ledger_`)."""
        if not hasattr(self, "ledger_"):
            raise RuntimeError(f"call {type(self).__name__}.fit(X, y) before .value(...)")
        features = check_finite_array("X_val", X_val, ndim=2)
        if features.shape[1] != self.n_features_in_:
            raise ValueError(f"X_val has {features.shape[1]} features but X had {self.n_features_in_}")
        if features.shape[0] == 0:
            raise ValueError("X_val has no rows: a value is measured on validation points")
        labels = self._validation_codes(features, y_val) if self.codes_labels else y_val
        return self._value(features, labels)

    def _check_rows(self, features: np.ndarray) -> None:
        """Refuse training data of no rows (a family may ask for more)."""
        if features.shape[0] == 0:
            raise ValueError("X has no rows: there is nothing to value")

    def _training_codes(self, features: np.ndarray, y) -> np.ndarray:
        """The training labels as codes 0 .. C-1 of the sorted classes `classes_`, of which there must be two."""
        labels = check_labels("y", y, features.shape[0])
        self.classes_ = np.unique(labels)
        if self.classes_.size < 2:
            raise ValueError(f"y has a single class ({self.classes_[0]!r}); {self.needs} needs at least 2 classes")
        return np.searchsorted(self.classes_, labels)

    def _validation_codes(self, features: np.ndarray, y_val) -> np.ndarray:
        """The validation labels as codes of `classes_`, every one a class seen in y."""
        labels = check_labels("y_val", y_val, features.shape[0], rows_name="X_val")
        if (labels.dtype.kind in "US") != (self.classes_.dtype.kind in "US"):
            raise ValueError(
                f"y_val has labels not seen in y: {_some(set(labels.tolist()))}; known: {_some(self.classes_.tolist())}"
            )
        codes = np.searchsorted(self.classes_, labels).clip(0, self.classes_.size - 1)
        unknown = self.classes_[codes] != labels
        if unknown.any():
            raise ValueError(
                f"y_val has labels not seen in y: {_some(set(labels[unknown].tolist()))}; "
                f"known: {_some(self.classes_.tolist())}"
            )
        return codes

    def _store(self, features: np.ndarray, labels) -> None:
        """Keep what `_value` needs (by default the features and labels as checked)."""
        self.X_, self.y_ = features, labels

    @abstractmethod
    def _value(self, x_val: np.ndarray, y_val) -> ValuationResult:
        """Value every training point on the checked validation set (labels coded where `codes_labels`)."""

    def _record(self, ledger: PrivacyLedger) -> PrivacyLedger:
        """Add one valuation's releases to `ledger_` (also where the run then fails: its noise was drawn)."""
        self.ledger_.merge(ledger)
        return ledger

    def _result(self, values, stderr, *, ledger=None, diagnostics=None, counts=None) -> ValuationResult:
        """The result of one valuation: a value and standard error per training point (or party), named by its
        index, with the releases made for it (already recorded in `ledger_`)."""
        values = np.asarray(values)
        return ValuationResult(
            method=self.method,
            values=values,
            stderr=np.asarray(stderr),
            names=[str(i) for i in range(values.shape[0])],
            counts=counts,
            privacy=PrivacyLedger() if ledger is None else ledger,
            diagnostics={} if diagnostics is None else diagnostics,
        )


def _some(labels, shown: int = 6) -> str:
    """Labels as an error shows them: sorted, the first `shown` and how many there are in all (a continuous target
    read as labels has as many classes as rows)."""
    labels = sorted(labels)
    more = f" ... ({len(labels)} in all)" if len(labels) > shown else ""
    return f"{labels[:shown]}{more}"


__all__ = ["PointEstimator", "sampling_key"]
