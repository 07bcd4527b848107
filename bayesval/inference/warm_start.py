"""A Laplace fit of a posterior in NUTS's unconstrained space: its mode, found by damped Newton steps
(Levenberg-Marquardt), and the inverse of the potential's Hessian there, for NUTS to start near the mode with that
covariance as its dense inverse mass matrix (Neal 2011, Sec. 5.4.1: a mass matrix that matches the posterior's
covariance makes the Hamiltonian dynamics isotropic; Laplace's approximation, MacKay 2003, ch. 27). The sampler
then adapts only its step size during warm-up, and its trees stay shallow on a correlated posterior
(docs/benchmarks.md, "A warm start for NUTS").

The fit only chooses where chains start and the kinetic energy: NUTS with any fixed mass matrix leaves the posterior
invariant, so the draws target the same posterior as from prior draws with a diagonal mass matrix adapted in
warm-up. The Hessian is the central difference of the potential's gradient, one gradient per coordinate and
direction (all of them in one batch): NumPyro models may hold `jax.custom_vjp` likelihoods (as
`bayesval.inference.gaussian`), whose exact second derivatives compile for close to a minute at 45 coordinates.
The fit works on one flat vector; `vmap` batches it over posteriors.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp

from bayesval.inference.linalg import cholesky_and_inverse

MAX_STEPS = 40  # Levenberg-Marquardt steps at most
GRADIENT_TOLERANCE = 1e-6  # the steps stop once no partial derivative of the potential is larger
CONVERGED = 1e-3  # a fit whose largest partial derivative of the potential is above this has not converged
MAX_STEP = 2.0  # the largest move of an unconstrained coordinate in one step
INITIAL_DAMPING = 1.0  # the damping of the first step (divided by 4 on success, times 4 if not)
MAX_DAMPING = 1e10  # the steps stop once the damping has grown past this: no step lowers the potential
DIFFERENCE_STEP = 1e-5  # the central difference's step, in unconstrained coordinates


class LaplaceFit(NamedTuple):
    """A Laplace fit of one posterior in unconstrained coordinates: the mode (k,), the inverse Hessian of the
    potential there (k, k), the largest absolute partial derivative of the potential left at the mode, the steps
    taken, and whether it is usable (converged, finite, its covariance positive definite)."""

    mode: jnp.ndarray
    cov: jnp.ndarray
    gradient: jnp.ndarray
    steps: jnp.ndarray
    fitted: jnp.ndarray


def derivatives_by_differences(potential: Callable, point: jnp.ndarray) -> tuple[jnp.ndarray, ...]:
    """The value, gradient and Hessian of `potential` (k,) -> scalar at `point` (k,): the Hessian the symmetric part
    of the central differences of the gradient. One batch of 2k + 1 gradients, so that a program holds the model's
    gradient once."""
    shifts = DIFFERENCE_STEP * jnp.eye(point.shape[-1], dtype=point.dtype)
    values, gradients = jax.vmap(jax.value_and_grad(potential))(
        point + jnp.concatenate([shifts[:1] * 0, shifts, -shifts])
    )
    forward, backward = jnp.split(gradients[1:], 2)
    columns = (forward - backward) / (2 * DIFFERENCE_STEP)  # row j: the derivative along coordinate j
    return values[0], gradients[0], 0.5 * (columns + columns.T)


def laplace_fit(potential: Callable, start: jnp.ndarray) -> LaplaceFit:
    """The mode of `potential` (k,) -> scalar (a negative log density) from `start` by Levenberg-Marquardt steps
    (Nocedal & Wright 2006, Sec. 10.3) on its Hessian by central differences, each move capped at MAX_STEP per
    coordinate, and the inverse Hessian there. The first pass of the loop evaluates the start (a move of 0 from a
    point of infinite potential), so that the program holds the derivatives once."""
    identity = jnp.eye(start.shape[-1], dtype=start.dtype)

    def going(carry):
        _, _, slope, _, damping, step = carry
        converged = jnp.max(jnp.abs(slope)) <= GRADIENT_TOLERANCE
        return (step == 0) | ((step <= MAX_STEPS) & ~converged & (damping < MAX_DAMPING))

    def newton_step(carry):
        point, value, slope, hessian, damping, step = carry
        _, inverse_lower = cholesky_and_inverse(hessian + damping * identity)  # NaN where not positive definite
        move = -inverse_lower.T @ (inverse_lower @ slope)
        move = move * jnp.minimum(1.0, MAX_STEP / jnp.maximum(jnp.max(jnp.abs(move)), 1e-300))
        candidate = point + move
        new = derivatives_by_differences(potential, candidate)
        better = jnp.isfinite(new[0]) & jnp.all(jnp.isfinite(new[1])) & (new[0] < value) & jnp.all(jnp.isfinite(move))
        kept = jax.tree.map(
            lambda fresh, old: jnp.where(better, fresh, old), (candidate, *new), (point, value, slope, hessian)
        )
        return (*kept, jnp.where(better & (step > 0), damping / 4, jnp.where(better, damping, damping * 4)), step + 1)

    infinite, zeros = jnp.asarray(jnp.inf, start.dtype), jnp.zeros_like(start)
    carry = (start, infinite, zeros, identity, jnp.asarray(INITIAL_DAMPING, start.dtype), 0)
    point, value, slope, hessian, _, steps = jax.lax.while_loop(going, newton_step, carry)
    _, inverse_lower = cholesky_and_inverse(hessian)
    cov = inverse_lower.T @ inverse_lower
    largest = jnp.max(jnp.abs(slope))
    fitted = jnp.isfinite(value) & (largest <= CONVERGED) & jnp.all(jnp.isfinite(cov))
    return LaplaceFit(point, cov, largest, steps - 1, fitted)
