"""Sufficient statistics of Bayesian linear regression and their l2 sensitivity.

Sim et al. (2023, App. A.1): s = (y^T y, X~^T y, X~^T X~) with the bias-augmented x~ = [x; 1].
We write one record as z = [x; 1; y] in R^(w+2); its statistic is the upper triangle of z z^T
without the constant bias*bias entry (= 1 per record; the count c is public). Every entry of
s is thus a pair (a, b) of coordinates of z, which is what the Gibbs sampler's CLT moments and
the mediator's matrix assembly index by.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property

import jax.numpy as jnp
import numpy as np


@dataclass(frozen=True)
class Bounds:
    """Declared data bounds every party clips to: ||x||_2 <= x_norm and |y| <= y_abs."""

    x_norm: float
    y_abs: float

    def __post_init__(self) -> None:
        for name in ("x_norm", "y_abs"):
            value = getattr(self, name)
            if not (isinstance(value, (int, float)) and math.isfinite(value) and value > 0):
                raise ValueError(f"Bounds.{name} must be a finite number > 0, got {value!r}")


@dataclass(frozen=True)
class LinearRegressionStatistic:
    """Layout, computation and sensitivity of the BLR sufficient statistic for `num_features` inputs."""

    num_features: int

    @property
    def bias_index(self) -> int:
        return self.num_features

    @property
    def target_index(self) -> int:
        return self.num_features + 1

    @property
    def record_dim(self) -> int:
        """Length of z = [x; 1; y]."""
        return self.num_features + 2

    @cached_property
    def pairs(self) -> tuple[np.ndarray, np.ndarray]:
        """Row and column index into z z^T of each statistic entry (upper triangle, no bias*bias)."""
        rows, cols = np.triu_indices(self.record_dim)
        keep = ~((rows == self.bias_index) & (cols == self.bias_index))
        return rows[keep], cols[keep]

    @property
    def size(self) -> int:
        return len(self.pairs[0])

    def records(self, X: np.ndarray, y: np.ndarray) -> np.ndarray:
        """z = [x; 1; y] for every row: shape (c, w + 2)."""
        return np.column_stack([X, np.ones(len(X)), y])

    def compute(self, X: np.ndarray, y: np.ndarray) -> np.ndarray:
        """The exact statistic s = sum over records of vech(z z^T) without the constant entry."""
        z = self.records(X, y)
        rows, cols = self.pairs
        return np.einsum("ni,ni->i", z[:, rows], z[:, cols])

    def sensitivity(self, bounds: Bounds) -> float:
        """l2 sensitivity under replace-one neighbours: 2 max_z ||t(z)||_2 over the bounded records.

        With r = ||x||, sum_{a<=b} x~_a^2 x~_b^2 = (||x~||^4 + sum_a x~_a^4) / 2 is largest when x lies
        on one axis, so ||t||^2 <= ((r^2+1)^2 + r^4 + 1)/2 - 1 + (r^2+1) y^2 + y^4 (Sim et al. 2023,
        Sec. 5.1 leave the bound open; spec Sec. 1.3 gives the looser vec() version).
        """
        r2, y2 = bounds.x_norm**2, bounds.y_abs**2
        squared = ((r2 + 1) ** 2 + r2**2 + 1) / 2 - 1 + (r2 + 1) * y2 + y2**2
        return 2.0 * math.sqrt(squared)

    def to_matrix(self, statistic: jnp.ndarray, count: jnp.ndarray) -> jnp.ndarray:
        """The symmetric (w+2)x(w+2) matrix sum z z^T from a statistic vector and its count."""
        rows, cols = self.pairs
        upper = jnp.zeros((self.record_dim, self.record_dim), statistic.dtype)
        upper = upper.at[rows, cols].set(statistic).at[self.bias_index, self.bias_index].set(count)
        return upper + jnp.triu(upper, 1).T
