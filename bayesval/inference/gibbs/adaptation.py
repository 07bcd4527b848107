"""Proposal adaptation of the collapsed moves: the Gaussian the independence moves propose from, fitted to the
chains' warm-up draws in windows.

The collapsed moves (`bayesval.inference.gibbs.moves`) propose theta and each data model omega_i from block
conditionals of a Gaussian over u = (phi, psi_1, ..., psi_m) (`theta_coordinates`, `omega_coordinates`). Its
moments are gathered by Welford's running mean and scatter (`RunningMoments`) during warm-up, in windows that end
at `WINDOW_ENDS` and at the end of warm-up (`end_window`), each window's draws pooled over the chains of one
posterior (Chan et al.'s parallel merge) and frozen for sampling: windowed adaptation in the manner of Stan's and
NumPyro's mass-matrix windows (Carpenter et al. 2017; Phan et al. 2019), with the fit frozen after warm-up so
that each move is an exact Metropolis kernel. Everything here is pure and jittable; the driver decides when a
window ends.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

from bayesval.inference.linalg import cholesky, spd_solve, unconstrained_from_pd

MIN_PROPOSAL_DRAWS = 50
ADAPT_FROM_SEGMENT = 1  # warm-up segments (of 10) before the collapsed moves start gathering proposal moments
WINDOW_ENDS = (3, 6)  # warm-up segments at which the proposal is refitted to the window's draws (and at the end)
PROPOSAL_INFLATION = 1.5
PROPOSAL_DOF = 5  # the independence moves propose from a Student t of this many degrees of freedom (`moves`)


class RunningMoments(NamedTuple):
    """Running mean and scatter (Welford) of a block's coordinates, gathered in the second half of warm-up
    and frozen afterwards: the independence proposal of that block's collapsed moves."""

    count: jnp.ndarray  # ()
    mean: jnp.ndarray  # (d,)
    scatter: jnp.ndarray  # (d, d)

    @classmethod
    def empty(cls, dim: int) -> RunningMoments:
        return cls(jnp.zeros(()), jnp.zeros(dim), jnp.zeros((dim, dim)))

    def add(self, point: jnp.ndarray) -> RunningMoments:
        count = self.count + 1
        delta = point - self.mean
        mean = self.mean + delta / count
        return RunningMoments(count, mean, self.scatter + jnp.outer(delta, point - mean))

    def pooled(self, axis: int) -> RunningMoments:
        """The moments of all points gathered along `axis` (e.g. the chains of one posterior), broadcast back
        to every entry of that axis (Chan et al.'s parallel merge of counts, means and scatters)."""
        count = jnp.sum(self.count, axis=axis, keepdims=True)
        weight = (self.count / jnp.maximum(count, 1))[..., None]
        mean = jnp.sum(weight * self.mean, axis=axis, keepdims=True)
        offset = self.mean - mean
        between = self.count[..., None, None] * offset[..., :, None] * offset[..., None, :]
        scatter = jnp.sum(self.scatter + between, axis=axis, keepdims=True)
        shape = self.count.shape
        return RunningMoments(
            jnp.broadcast_to(count, shape),
            jnp.broadcast_to(mean, self.mean.shape),
            jnp.broadcast_to(scatter, self.scatter.shape),
        )


def theta_coordinates(weights: jnp.ndarray, noise_var: jnp.ndarray) -> jnp.ndarray:
    """phi = (w / sigma, log sigma^2): the NIG prior's non-centred coordinates, where the posterior is
    close to Gaussian both when the data pin w down and when w stays at its prior scale sigma."""
    return jnp.append(weights / jnp.sqrt(noise_var), jnp.log(noise_var))


def omega_coordinates(x_mean: jnp.ndarray, x_cov: jnp.ndarray) -> jnp.ndarray:
    """psi = (mu, unconstrained Sigma): mu and the log-diagonal Cholesky entries of Sigma."""
    return jnp.concatenate([x_mean, unconstrained_from_pd(x_cov)])


def joint_coordinates(state, num_blocks: int) -> jnp.ndarray:
    """u = (phi, psi_1, ..., psi_m): theta's and the first m data models' coordinates (m = 1 if shared), of a
    `GibbsState` (or anything with its weights, noise_var, x_mean and x_cov)."""
    psi = jax.vmap(omega_coordinates)(state.x_mean[:num_blocks], state.x_cov[:num_blocks])
    return jnp.concatenate([theta_coordinates(state.weights, state.noise_var), psi.ravel()])


def gather_moments(state, num_blocks: int):
    """Add the state's coordinates to its current warm-up window's moments (`state.window`)."""
    return state._replace(window=state.window.add(joint_coordinates(state, num_blocks)))


@jax.jit
def end_window(states):
    """Refit the collapsed moves' proposal to the warm-up window just ended, pooled over the chains of each
    posterior (axis 1 of (rows, chains, ...)), and open an empty window. Early windows give the moves a rough
    fit while the chains still travel from their prior draws; the last one, from chains near the posterior,
    is the fit kept for sampling. Pooling gives every chain the draws of all, so a chain that arrived late
    still proposes well."""
    return states._replace(proposal=states.window.pooled(axis=1), window=jax.tree.map(jnp.zeros_like, states.window))


def joint_dimension(dim_theta: int, num_features: int, num_blocks: int) -> int:
    """The length of u: theta's D + 1 coordinates and, per block, w means and w (w + 1) / 2 factor entries."""
    return dim_theta + num_blocks * (num_features + num_features * (num_features + 1) // 2)


class Proposal(NamedTuple):
    """A Gaussian independence proposal: mean and (inflated) Cholesky factor of its covariance."""

    mean: jnp.ndarray
    lower: jnp.ndarray


class ConditionalFit(NamedTuple):
    """The collapsed moves' proposals: block conditionals of a Gaussian fitted to the joint warm-up draws of
    u = (phi, psi_1, ..., psi_m), as intercepts, regressions on the conditioning block and (inflated) Cholesky
    factors. Fitted once per sampler call (`fit_proposals`), so a sweep only evaluates the regressions."""

    theta_mean: jnp.ndarray  # (d_theta,)
    theta_regression: jnp.ndarray  # (d_theta, m d_psi)
    theta_lower: jnp.ndarray  # (d_theta, d_theta)
    omega_mean: jnp.ndarray  # (m, d_psi)
    omega_regression: jnp.ndarray  # (m, d_psi, d_theta)
    omega_lower: jnp.ndarray  # (m, d_psi, d_psi)
    ready: jnp.ndarray  # () enough draws for a full-rank fit; until then every move is rejected

    def theta(self, psi: jnp.ndarray) -> Proposal:
        """phi | psi (psi: (m, d_psi))."""
        return Proposal(self.theta_mean + self.theta_regression @ psi.ravel(), self.theta_lower)

    def omega(self, phi: jnp.ndarray) -> Proposal:
        """psi_i | phi for every block i: (m, d_psi) means and factors."""
        return Proposal(self.omega_mean + self.omega_regression @ phi, self.omega_lower)


def fit_proposals(moments: RunningMoments, informative: jnp.ndarray, dim_theta: int) -> ConditionalFit:
    """The conditionals of the Gaussian with the moments' mean and covariance. theta is conditioned only on the
    data-model blocks that inform it in this coalition (`informative`, (m,)): the others are decoupled first,
    so they move neither its mean nor its covariance. Each block psi_i is conditioned on phi alone: the blocks
    are independent given theta in the target."""
    num_blocks = informative.shape[0]
    cov = moments.scatter / jnp.maximum(moments.count - 1, 1) + 1e-12 * jnp.eye(moments.mean.shape[0])
    mean_theta, mean_psi = moments.mean[:dim_theta], moments.mean[dim_theta:]
    dim_psi = mean_psi.shape[0] // num_blocks
    keep = jnp.concatenate([jnp.ones(dim_theta, bool), jnp.repeat(informative, dim_psi)])
    decoupled = jnp.where(keep[:, None] & keep[None, :], cov, jnp.eye(cov.shape[0]))
    cov_tt, cov_tp, cov_pp = (
        decoupled[:dim_theta, :dim_theta],
        decoupled[:dim_theta, dim_theta:],
        decoupled[dim_theta:, dim_theta:],
    )
    theta_regression = spd_solve(cov_pp, cov_tp.T).T
    theta_lower = PROPOSAL_INFLATION * cholesky(cov_tt - theta_regression @ cov_tp.T)

    cov_tt = cov[:dim_theta, :dim_theta]
    cross = cov[dim_theta:, :dim_theta].reshape(num_blocks, dim_psi, dim_theta)
    own = jax.vmap(lambda i: jax.lax.dynamic_slice(cov, (dim_theta + i * dim_psi,) * 2, (dim_psi, dim_psi)))(
        jnp.arange(num_blocks)
    )
    omega_regression = jax.vmap(lambda c: spd_solve(cov_tt, c.T).T)(cross)  # (m, d_psi, d_theta)
    omega_lower = PROPOSAL_INFLATION * jax.vmap(cholesky)(own - jnp.einsum("mij,mkj->mik", omega_regression, cross))
    return ConditionalFit(
        theta_mean=mean_theta - theta_regression @ mean_psi,
        theta_regression=theta_regression,
        theta_lower=theta_lower,
        omega_mean=mean_psi.reshape(num_blocks, dim_psi) - omega_regression @ mean_theta,
        omega_regression=omega_regression,
        omega_lower=omega_lower,
        ready=moments.count >= MIN_PROPOSAL_DRAWS + 2 * moments.mean.shape[0],
    )


def fit_for(state, mask: jnp.ndarray, shared_data_model: bool) -> ConditionalFit:
    """The collapsed moves' proposals for one chain's coalition `mask`, from its frozen proposal moments
    (`state.proposal`): with a shared data model its one block always informs theta."""
    informative = jnp.ones(1, bool) if shared_data_model else mask
    return fit_proposals(state.proposal, informative, state.weights.shape[0] + 1)


def is_window_end(index: int, num_warmup_segments: int) -> bool:
    """Whether the warm-up window closes before segment `index` (counted over warm-up then sampling): at
    `WINDOW_ENDS` and when warm-up ends, never during sampling."""
    return (index in WINDOW_ENDS or index == num_warmup_segments) and index <= num_warmup_segments


def is_adapting(index: int, num_warmup_segments: int) -> bool:
    """Whether segment `index` gathers proposal moments: warm-up segments from `ADAPT_FROM_SEGMENT` on."""
    return index < num_warmup_segments and index >= ADAPT_FROM_SEGMENT
