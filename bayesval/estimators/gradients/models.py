"""Small models in pure JAX on a flat parameter vector, for the gradient-trajectory game.

Zhou et al. (2024), Sec. 6: logistic regression (multinomial, softmax cross-entropy on the logits, where the paper's
head applies a sigmoid to multi-class outputs; docs/gradients.md, "Where we depart from the paper") and a
small network; least-squares regression for the theory's check (App. C, Prop. 5.1 (a)). Parameters are one flat
vector of length `num_parameters`, so a party's released gradient and its running-mean buffer are plain (d,)
arrays. Each model has `init(key)` (a fresh random model, one per permutation: Sec. 4) and
`loss(params, x, y)`; the classifiers also `accuracy(params, x, y)`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import jax
import jax.numpy as jnp

from bayesval.validation import check_int, check_non_negative


def _cross_entropy(logits: jax.Array, y: jax.Array) -> jax.Array:
    own = jnp.sum(jnp.where(jnp.arange(logits.shape[-1]) == y[:, None], logits, 0.0), axis=-1)  # no gather: faster
    return jnp.mean(jax.nn.logsumexp(logits, axis=-1) - own)


@dataclass(frozen=True)
class _Classifier:
    """Shared loss and accuracy of a classifier with `logits(params, x)`."""

    def loss(self, params: jax.Array, x: jax.Array, y: jax.Array) -> jax.Array:
        """Mean softmax cross-entropy of the labels y (ints in [0, num_classes)) at the rows x."""
        return _cross_entropy(self.logits(params, x), y)

    def accuracy(self, params: jax.Array, x: jax.Array, y: jax.Array) -> jax.Array:
        """Fraction of rows whose largest logit is their label."""
        return jnp.mean(jnp.argmax(self.logits(params, x), axis=-1) == y)


@dataclass(frozen=True)
class LinearModel:
    """Least-squares linear regression, prediction = x w + b, for the theory's strongly concave utility
    V = -MSE (Prop. 5.1 (a); the check of Table 1's scaling in k); w initialised N(0, init_scale^2), b = 0."""

    num_features: int
    init_scale: float = 0.01

    def __post_init__(self) -> None:
        check_int("num_features", self.num_features, minimum=1)
        check_non_negative("init_scale", self.init_scale)

    @property
    def num_parameters(self) -> int:
        return self.num_features + 1

    def init(self, key: jax.Array) -> jax.Array:
        return jnp.append(self.init_scale * jax.random.normal(key, (self.num_features,)), 0.0)

    def loss(self, params: jax.Array, x: jax.Array, y: jax.Array) -> jax.Array:
        """Mean squared error of the targets y at the rows x."""
        return jnp.mean((x @ params[:-1] + params[-1] - y) ** 2)


@dataclass(frozen=True)
class LogisticModel(_Classifier):
    """Multinomial logistic regression, logits = x W + b (the paper's `LR`, Sec. 6), W initialised
    N(0, init_scale^2) and b = 0."""

    num_features: int
    num_classes: int
    init_scale: float = 0.01

    def __post_init__(self) -> None:
        check_int("num_features", self.num_features, minimum=1)
        check_int("num_classes", self.num_classes, minimum=2)
        check_non_negative("init_scale", self.init_scale)

    @property
    def num_parameters(self) -> int:
        return (self.num_features + 1) * self.num_classes

    def init(self, key: jax.Array) -> jax.Array:
        weights = self.init_scale * jax.random.normal(key, (self.num_features * self.num_classes,))
        return jnp.concatenate([weights, jnp.zeros(self.num_classes)])

    def logits(self, params: jax.Array, x: jax.Array) -> jax.Array:
        split = self.num_features * self.num_classes
        return x @ params[:split].reshape(self.num_features, self.num_classes) + params[split:]


@dataclass(frozen=True)
class MLPModel(_Classifier):
    """A one-hidden-layer ReLU network, logits = relu(x W1 + b1) W2 + b2, with He-scaled normal weights."""

    num_features: int
    num_classes: int
    hidden: int = 16

    def __post_init__(self) -> None:
        check_int("num_features", self.num_features, minimum=1)
        check_int("num_classes", self.num_classes, minimum=2)
        check_int("hidden", self.hidden, minimum=1)

    @property
    def _shapes(self) -> tuple[tuple[int, ...], ...]:
        f, h, c = self.num_features, self.hidden, self.num_classes
        return (f, h), (h,), (h, c), (c,)

    @property
    def num_parameters(self) -> int:
        f, h, c = self.num_features, self.hidden, self.num_classes
        return f * h + h + h * c + c

    def init(self, key: jax.Array) -> jax.Array:
        k1, k2 = jax.random.split(key)
        f, h, c = self.num_features, self.hidden, self.num_classes
        w1 = jax.random.normal(k1, (f * h,)) * jnp.sqrt(2.0 / f)
        w2 = jax.random.normal(k2, (h * c,)) * jnp.sqrt(2.0 / h)
        return jnp.concatenate([w1, jnp.zeros(h), w2, jnp.zeros(c)])

    def logits(self, params: jax.Array, x: jax.Array) -> jax.Array:
        parts, start = [], 0
        for shape in self._shapes:
            size = math.prod(shape)
            parts.append(params[start : start + size].reshape(shape))
            start += size
        w1, b1, w2, b2 = parts
        return jax.nn.relu(x @ w1 + b1) @ w2 + b2


__all__ = ["LinearModel", "LogisticModel", "MLPModel"]
