"""A cheap surrogate of the Laplace surprise of any coalition: each party's likelihood summarised once as a quadratic
in theta = (w, log sigma^2) around its own posterior mode, a coalition's posterior the exact prior times its
members' quadratics, fitted by a few Newton steps in theta alone.

Party i's Laplace fit alone (`bayesval.inference.laplace`) has mode m_i and theta covariance C_i, with its data model
omega_i integrated out. With U_0 = -log p(theta) the prior's potential (`theta_prior_potential`), the party's negative
log likelihood V_i = U_i - U_0 has gradient -grad U_0(m_i) at m_i (the posterior's is 0 there) and Hessian
L_i = C_i^-1 - hess U_0(m_i), so to second order V_i(theta) = -grad U_0(m_i) . (theta - m_i) + (theta - m_i)^T L_i
(theta - m_i) / 2: the Gaussian summary of a likelihood that the Bayesian committee machine (Tresp 2000, Neural
Computation 12(11), eq. 5) and consensus Monte Carlo (Scott et al. 2016, Sec. 2) combine subset posteriors by, here
about each party's own mode and under the exact prior. A coalition S has the potential U_0(theta) - r_S . theta +
theta^T A_S theta / 2 (A_S = sum_{i in S} L_i, r_S = sum_{i in S} grad U_0(m_i) + L_i m_i), whose mode is found by
NEWTON_STEPS Newton steps in the D + 1 coordinates of theta (the Hessian's eigenvalues taken in absolute value, as
U_0 is not convex everywhere, and the best of a halving step kept); its surprise is the closed-form KL of the Gaussian
there from the NIG prior (`gaussian_surprise`). A party's coalition alone is its own Laplace fit exactly; a larger
one costs a few (D + 1)-square solves, against a Levenberg-Marquardt fit of every member's data model for the Laplace
surprise itself.

It ignores how the members' data models move as the coalition's theta moves away from each party's own mode, so it is
not the Laplace surprise; it tracks it (docs/benchmarks.md, "Many parties: a cheap surrogate beneath the Laplace
fits"), and what a control variate needs is a fixed function of the coalition close to the game, which this is at
almost no cost: beyond 12 parties it is the party route's control (`LinearRegression.surrogate_game`), closer to the
sampled surprise than the coalitions' own Laplace fits were (docs/benchmarks.md, "A control without fits beyond 12
parties").
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from bayesval.inference.conjugate import NIG, NIW
from bayesval.inference.data import NoiseAwareData
from bayesval.inference.laplace import (
    CONVERGED,
    MAX_STEP,
    gaussian_surprise,
    laplace_surprises,
    prior_start,
    theta_prior_potential,
)
from bayesval.inference.linalg import cho_solve, cholesky, eigh, inverse, psd_project, solve
from bayesval.statistics import LinearRegressionStatistic

# Newton steps of a coalition's theta (D + 1 coordinates): every coalition of 12 Syn parties had converged after 5
NEWTON_STEPS = 10
HALVINGS = 4  # a step is tried at 1, 1/2, ..., 1/2^(HALVINGS - 1) of its length and the lowest potential kept
FLOOR = 1e-8  # the smallest absolute eigenvalue of a Newton step's Hessian
PARTY_PRODUCT = "the party product"  # the surrogate's name as a control variate in a result's method


class PartyMessages(NamedTuple):
    """Each party's likelihood as a quadratic in theta (T = D + 1 coordinates): its Hessian L_i (n, T, T), projected
    onto the positive semi-definite matrices, and r_i = grad U_0(m_i) + L_i m_i (n, T), with the prior's mode (T,)
    where a coalition's steps start. A party whose own fit did not converge sends none (zeros): its coalitions'
    surrogate is then the rest's, still a fixed function of the coalition."""

    precisions: jnp.ndarray
    shifts: jnp.ndarray
    start: jnp.ndarray


def party_messages(
    data: NoiseAwareData, prior: NIG, data_prior: NIW, statistic: LinearRegressionStatistic
) -> PartyMessages:
    """The parties' messages from one Laplace fit each, of each party's own release (`laplace_surprises`: one
    compiled program of one party serves all n, where a program carrying all n releases compiles for each n; that one
    stalled at 36 and 50 parties while the fits called LAPACK, docs/benchmarks.md, "Fifty parties stall on the CPU"):
    a deterministic function of the releases."""
    alone = [data.members(mask, 1) for mask in np.eye(len(data.counts), dtype=bool)]  # each party's own release
    fits = [laplace_surprises(release, mask[None], prior, data_prior, statistic) for release, mask in alone]
    modes, covs, gradients = (
        jnp.concatenate([getattr(fit, part) for fit in fits]) for part in ("mode", "cov", "gradient")
    )
    return _messages(prior, modes, covs, gradients <= CONVERGED)


@jax.jit
def _messages(prior: NIG, modes, covs, fitted) -> PartyMessages:
    """The messages of parties whose own fits have these modes (n, T) and covariances (n, T, T), where they
    converged (`fitted` (n,)), in one compiled program."""
    gradient = jax.vmap(jax.grad(theta_prior_potential, argnums=1), (None, 0))(prior, modes)
    curvature = jax.vmap(jax.hessian(theta_prior_potential, argnums=1), (None, 0))(prior, modes)
    precisions = jax.vmap(lambda cov, bend: psd_project(inverse(cov) - bend))(covs, curvature)
    shifts = gradient + jnp.einsum("bij,bj->bi", precisions, modes)
    converged = fitted & jnp.isfinite(shifts).all(axis=1)
    precisions = jnp.where(converged[:, None, None], precisions, 0.0)
    shifts = jnp.where(converged[:, None], shifts, 0.0)
    return PartyMessages(precisions, shifts, prior_start(prior))


class ProductFit(NamedTuple):
    """The surrogate of a batch of coalitions: the surprise (B,), and the largest absolute gradient of the
    coalition's potential left at its mode (B,), inf where its Hessian there is not positive definite."""

    surprise: jnp.ndarray
    gradient: jnp.ndarray


@jax.jit
def product_surprises(messages: PartyMessages, prior: NIG, masks: jnp.ndarray) -> ProductFit:
    """The surrogate (module docstring) of each coalition of `masks` (B, n); the empty coalition's is the prior's
    Laplace surprise, not 0."""
    weights = masks.astype(messages.shifts.dtype)
    precisions = jnp.tensordot(weights, messages.precisions, 1)
    shifts = weights @ messages.shifts
    return jax.vmap(lambda a, r: _fit(prior, a, r, messages.start))(precisions, shifts)


def _fit(prior: NIG, precision, shift, start) -> ProductFit:
    def potential(theta):
        return theta_prior_potential(prior, theta) - shift @ theta + 0.5 * theta @ precision @ theta

    def step(_, theta):
        gradient, hessian = jax.grad(potential)(theta), jax.hessian(potential)(theta)
        values, vectors = eigh(hessian)
        move = vectors @ ((vectors.T @ gradient) / jnp.maximum(jnp.abs(values), FLOOR))
        move = move * jnp.minimum(1.0, MAX_STEP / jnp.abs(move).max())
        tries = theta - move / (2.0 ** jnp.arange(HALVINGS))[:, None]
        scores = jax.vmap(potential)(tries)
        best = jnp.argmin(jnp.where(jnp.isfinite(scores), scores, jnp.inf))
        # near the mode of a sharp posterior the potential's fall (about g^T H^-1 g / 2) is below its rounding, and
        # no try lowers it: there the whole step is taken where it lowers the gradient, which Newton's steps do
        # quadratically (at epsilon = 1e7 a grand coalition of Syn stopped at a gradient of 1.1e-4 otherwise)
        flatter = jnp.abs(jax.grad(potential)(tries[0])).max() < jnp.abs(gradient).max()
        fallen = jnp.where(flatter & jnp.isfinite(scores[0]), tries[0], theta)
        return jnp.where(scores[best] < potential(theta), tries[best], fallen)

    # a plain Newton step from `start` first (the members' quadratics are exact, only the prior is expanded), the
    # guarded steps from there
    theta = start - solve(jax.hessian(potential)(start), jax.grad(potential)(start))
    theta = jax.lax.fori_loop(0, NEWTON_STEPS, step, jnp.where(jnp.isfinite(theta).all(), theta, start))
    hessian = jax.hessian(potential)(theta)
    factor = cholesky(hessian)  # NaN where the Hessian is not positive definite
    cov = cho_solve(factor, jnp.eye(theta.shape[0]))
    cov = 0.5 * (cov + cov.T)
    gradient = jnp.where(jnp.isfinite(factor).all(), jnp.abs(jax.grad(potential)(theta)).max(), jnp.inf)
    return ProductFit(gaussian_surprise(prior, theta, cov), gradient)
