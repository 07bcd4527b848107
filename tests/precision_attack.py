"""A precision attack on released noisy values (after Mironov 2012, "On significance of the least significant bits
for differential privacy", Sec. 4; on the Gaussian, and on the Laplace noise of his paper): which of two candidate
exact statistics can a release have come from?

The float mechanism releases o = fl(s + fl(sigma * n)) with n = sqrt(2) erfinv(u) and u one of the 2^52 evenly spaced
doubles jax's float64 uniform sampler makes. Given o and a candidate s, the noise must have been n ~ (o - s) / sigma,
so u ~ erf(n / sqrt(2)): the attack recomputes, with the sampler's own operations, the few uniform values around it
and asks whether any of them reproduces o bit for bit. For the true s one does; for a wrong s usually none does,
because the doubles near o that s + sigma * N can reach are a sparse subset. When both (or neither) candidates are
consistent, the attack falls back on the likelihood ratio (the best test that ignores the low-order bits).

Used by tests/test_discrete_gaussian.py and benchmarks/bench_release.py.
"""

from __future__ import annotations

import math
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.scipy import special as jax_special
from scipy import special

import bayesval  # noqa: F401  (float64 in JAX, as in every release)

_MANTISSA_BITS = 52
_ONE_BITS = np.array(1.0, np.float64).view(np.uint64)
_WINDOW = 16  # uniform values tried on each side of the inverted one


def _uniform_from_mantissas(mantissas: jax.Array, lo: float) -> jax.Array:
    """jax.random.uniform's float64 values on [lo, 1) from the 52 random mantissa bits it keeps
    (jax/_src/random/core.py)."""
    low, hi = jnp.array(lo, jnp.float64), jnp.array(1.0, jnp.float64)
    bits = lax.bitwise_or(mantissas, jnp.asarray(_ONE_BITS, jnp.uint64))
    floats = lax.bitcast_convert_type(bits, jnp.float64) - jnp.array(1.0, jnp.float64)
    return lax.max(low, floats * (hi - low) + low)


# Each noise: the lower end of its uniform, the uniform a standard draw n came from, and the draw from the uniform,
# as jax's sampler computes it (jax/_src/random/core.py: `normal` and `_laplace`).
_NOISES = {
    "gaussian": (
        np.nextafter(np.float64(-1.0), np.float64(0.0)),
        lambda n: special.erf(n / math.sqrt(2.0)),
        lambda u: lax.mul(jnp.array(math.sqrt(2), jnp.float64), jax_special.erfinv(u)),
    ),
    "laplace": (
        -1.0 + np.finfo(np.float64).epsneg,
        lambda n: -np.sign(n) * -np.expm1(-np.abs(n)),
        lambda u: lax.mul(lax.sign(u), lax.log1p(lax.neg(lax.abs(u)))),
    ),
}


@partial(jax.jit, static_argnames="noise")
def _draws_from_mantissas(mantissas: jax.Array, noise: str) -> jax.Array:
    """jax.random's float64 `noise` draws from the 52 random mantissa bits each keeps."""
    lo, _, draw = _NOISES[noise]
    return draw(_uniform_from_mantissas(mantissas, lo))


def consistent_with(outputs: np.ndarray, candidates: np.ndarray, sigma: float, noise: str = "gaussian") -> np.ndarray:
    """For each release o and candidate s (arrays of one shape), whether some float64 draw n of jax's `noise`
    sampler gives exactly o = s + sigma * n (the float mechanism's `value + scale * draw`; sigma is the Laplace
    scale b for Laplace noise)."""
    outputs, candidates = np.asarray(outputs, np.float64), np.asarray(candidates, np.float64)
    lo, uniform_of, _ = _NOISES[noise]
    uniform = uniform_of((outputs - candidates) / sigma)
    centre = np.round((uniform - lo) / (1.0 - lo) * 2.0**_MANTISSA_BITS).astype(np.int64)
    offsets = np.arange(-_WINDOW, _WINDOW + 1)
    mantissas = np.clip(centre[:, None] + offsets[None, :], 0, 2**_MANTISSA_BITS - 1).astype(np.uint64)
    draws = np.asarray(_draws_from_mantissas(jnp.asarray(mantissas), noise))
    reproduced = candidates[:, None] + sigma * draws  # numpy float64: the same two IEEE operations, unfused
    return np.any(reproduced == outputs[:, None], axis=1)


def guess(outputs: np.ndarray, first: float, second: float, sigma: float, noise: str = "gaussian") -> np.ndarray:
    """The attack's guess (0: `first`, 1: `second`) for each release: the candidate its low-order bits are
    consistent with; the likelihood ratio (the nearer candidate) where the bits leave both or neither."""
    outputs = np.asarray(outputs, np.float64)
    with_first = consistent_with(outputs, np.full(outputs.shape, first), sigma, noise)
    with_second = consistent_with(outputs, np.full(outputs.shape, second), sigma, noise)
    nearer_second = np.abs(outputs - second) < np.abs(outputs - first)
    return np.where(with_first == with_second, nearer_second, with_second).astype(int)


def success_bound(epsilon: float, delta: float) -> float:
    """The largest probability of guessing which of two neighbouring datasets (equally likely a priori) produced an
    (epsilon, delta)-DP release: (e^eps + delta) / (1 + e^eps) (from TPR <= e^eps FPR + delta, both ways)."""
    return (math.exp(epsilon) + delta) / (1.0 + math.exp(epsilon))
