"""Noise-aware Gibbs sampler for Bayesian linear regression (Sim et al. 2023, Algorithm 1;
Bernstein & Sheldon 2019), batched over coalitions and chains.

The latent exact statistics s_i, the data models omega_i = (mu_i, Sigma_i) and theta = (w, sigma^2)
are updated in turn:
  s_i | theta, omega_i, o_i  ~  N(c_i mu_t, c_i Sigma_t) x N(o_i; s_i, sigma_z,i^2 I)   (step 7)
  omega_i | s_i              ~  NIW posterior from sum x, sum x x^T                     (steps 9/13)
  theta | s_C                ~  NIG posterior from sum over the coalition of s_i          (steps 15-16)
A coalition is a boolean mask over parties: every party's s_i is sampled, but only members enter
the theta update (and, for a shared data model, the omega update). One jitted program therefore
serves all 2^n coalitions, vmapped over (coalition, chain); `lax.scan` runs the iterations.
By default (`collapsed_moves`, 8 in `LinearRegression`) each sweep opens with independence moves of
theta and of each omega_i with s integrated out, proposing from conditionals of a Gaussian fitted to
the chains' joint warm-up draws: partially collapsed steps that cure Algorithm 1's slow mixing where
DP noise dominates (see `_collapsed_moves`), while the conjugate theta | s draw that ends the sweep
keeps the exact likelihood. Optional interweaving moves (Yu & Meng 2011) move theta in the ancillary
parameterisation. `interweaving_moves=0, collapsed_moves=0` give Algorithm 1 as printed.
"""

from __future__ import annotations

from functools import partial
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from tqdm.auto import tqdm

from bayesval.inference.batching import row_keys
from bayesval.inference.clt import linear_regression_record_moments, pair_product_moments
from bayesval.inference.conjugate import (
    NIG,
    NIW,
    nig_log_density,
    nig_update,
    niw_log_density,
    niw_update,
    sample_nig,
    sample_niw,
)
from bayesval.inference.data import NoiseAwareData
from bayesval.inference.linalg import (
    cholesky,
    mvn_log_prob,
    mvn_log_prob_cholesky,
    pd_from_unconstrained,
    pd_log_abs_det_jacobian,
    solve_lower,
    spd_inverse,
    spd_solve,
    unconstrained_from_pd,
)
from bayesval.progress import describe
from bayesval.statistics import LinearRegressionStatistic

# XLA's backend optimisation level 1 compiles the sweep program ~30 % faster (Syn, 84 chains: 9.1 s against 13.0 s)
# and runs it as fast (23.1 against 23.6 ms per sweep): its small matrices leave level 2's passes nothing to gain.
_COMPILER_OPTIONS = {"xla_backend_optimization_level": 1}


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


class GibbsState(NamedTuple):
    weights: jnp.ndarray  # (D,) slope then bias
    noise_var: jnp.ndarray  # ()
    x_mean: jnp.ndarray  # (n, w)
    x_cov: jnp.ndarray  # (n, w, w)
    proposal: RunningMoments  # of joint_coordinates: the fit the collapsed moves propose from
    window: RunningMoments  # of joint_coordinates: the draws of the current warm-up window

    @property
    def theta(self) -> jnp.ndarray:
        return jnp.append(self.weights, self.noise_var)


class BLRPriors(NamedTuple):
    model: NIG
    data: NIW


def _clt_moments(statistic, weights, noise_var, x_mean, x_cov, count):
    """c mu_t and a Cholesky factor of c Sigma_t (plus a relative jitter) for one party."""
    rows, cols = statistic.pairs
    z_mean, z_cov = linear_regression_record_moments(weights, noise_var, x_mean, x_cov)
    t_mean, t_cov = pair_product_moments(z_mean, z_cov, rows, cols)
    clt_cov = count * t_cov
    jitter = 1e-10 * jnp.trace(clt_cov) / clt_cov.shape[0]
    return count * t_mean, clt_cov + jitter * jnp.eye(clt_cov.shape[0])


def _sample_latent_statistic(key, statistic, state_i, perturbed, count, noise_std):
    """Step 7: draw s_i from the product of its CLT prior N(c mu_t, A = c Sigma_t) and the DP-noise
    likelihood N(o_i; s_i, sigma_z^2 I), by Matheron's rule: with s0 ~ N(c mu_t, A) and
    e ~ N(0, sigma_z^2 I), s0 + A (A + sigma_z^2 I)^-1 (o_i - s0 - e) has exactly that law.
    Two Cholesky factorisations replace the eigendecomposition of the direct form.
    """
    clt_mean, clt_cov = _clt_moments(statistic, *state_i, count)
    eye = jnp.eye(clt_cov.shape[0])
    key_prior, key_noise = jax.random.split(key)
    prior_draw = clt_mean + cholesky(clt_cov) @ jax.random.normal(key_prior, clt_mean.shape)
    residual = perturbed - prior_draw - noise_std * jax.random.normal(key_noise, clt_mean.shape)
    return prior_draw + clt_cov @ spd_solve(clt_cov + noise_std**2 * eye, residual)


def _interweaving_moves(key, num_moves, weights, noise_var, x_mean, x_cov, stats, data, mask, prior, statistic):
    """Metropolis moves of theta with the standardised statistics eta_i = L_i^-1 (s_i - c_i mu_t) held
    fixed: the ancillary parameterisation of Yu & Meng's (2011) interweaving. When DP noise dominates,
    p(o | s) is flat, so theta moves far where the conjugate update (s held fixed) barely moves; when
    noise is small the moves are rejected and the conjugate update mixes well. Random-walk scales are
    drawn log-uniformly in [0.01, 1] of the prior's (state-independent, so the proposal is symmetric).
    Since s is redrawn at the start of the next sweep, only theta is returned.
    """

    def standardise(w, v):
        means, covs = jax.vmap(lambda mu, cov, c: _clt_moments(statistic, w, v, mu, cov, c))(x_mean, x_cov, data.counts)
        return means, jax.vmap(cholesky)(covs)

    def log_target(w, v, means, chols):
        log_prior = nig_log_density(prior, w, v)
        moved = means + jnp.einsum("nij,nj->ni", chols, eta)
        misfit = jnp.sum((data.perturbed - moved) ** 2, axis=1) / data.noise_std**2
        return log_prior - 0.5 * jnp.sum(jnp.where(mask, misfit, 0.0))

    means, chols = standardise(weights, noise_var)
    eta = jax.vmap(solve_lower)(chols, stats - means)
    prior_chol = cholesky(spd_inverse(prior.precision))

    def move(carry, key):
        w, v, current = carry
        key_scale, key_w, key_v, key_accept = jax.random.split(key, 4)
        scale = 10.0 ** jax.random.uniform(key_scale, minval=-2.0, maxval=0.0)
        new_v = v * jnp.exp(scale * 0.5 * jax.random.normal(key_v))
        new_w = w + scale * jnp.sqrt(v) * prior_chol @ jax.random.normal(key_w, w.shape)
        proposed = log_target(new_w, new_v, *standardise(new_w, new_v))
        accept = jnp.log(jax.random.uniform(key_accept)) < proposed - current + jnp.log(new_v / v)
        return (jnp.where(accept, new_w, w), jnp.where(accept, new_v, v), jnp.where(accept, proposed, current)), None

    initial = (weights, noise_var, log_target(weights, noise_var, means, chols))
    (weights, noise_var, _), _ = jax.lax.scan(move, initial, jax.random.split(key, num_moves))
    return weights, noise_var


MIN_PROPOSAL_DRAWS = 50
ADAPT_FROM_SEGMENT = 1  # warm-up segments (of 10) before the collapsed moves start gathering proposal moments
WINDOW_ENDS = (3, 6)  # warm-up segments at which the proposal is refitted to the window's draws (and at the end)
PROPOSAL_INFLATION = 1.5


def theta_coordinates(weights: jnp.ndarray, noise_var: jnp.ndarray) -> jnp.ndarray:
    """phi = (w / sigma, log sigma^2): the NIG prior's non-centred coordinates, where the posterior is
    close to Gaussian both when the data pin w down and when w stays at its prior scale sigma."""
    return jnp.append(weights / jnp.sqrt(noise_var), jnp.log(noise_var))


def omega_coordinates(x_mean: jnp.ndarray, x_cov: jnp.ndarray) -> jnp.ndarray:
    """psi = (mu, unconstrained Sigma): mu and the log-diagonal Cholesky entries of Sigma."""
    return jnp.concatenate([x_mean, unconstrained_from_pd(x_cov)])


def _marginal_log_likelihood(statistic, weights, noise_var, x_mean, x_cov, perturbed, count, noise_std):
    """log N(o_i; c_i mu_t, c_i Sigma_t + sigma_z,i^2 I): one party's perturbed statistic with its exact
    statistic integrated out (the likelihood NUTS uses)."""
    clt_mean, clt_cov = _clt_moments(statistic, weights, noise_var, x_mean, x_cov, count)
    total = clt_cov + noise_std**2 * jnp.eye(clt_cov.shape[0])
    return mvn_log_prob(perturbed, clt_mean, total)


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


def _independence_moves(key, num_moves, position, log_target, proposal: Proposal, ready):
    """`num_moves` independence Metropolis moves from the Gaussian `proposal`; every move is rejected until
    `ready` (enough warm-up draws gathered). The proposals do not depend on the chain's state, so all of them
    and the current position are scored in one batched call, and only the accept / reject pass runs in
    sequence: the batch is what the small-matrix kernels need to run at speed on CPU."""
    dim = position.shape[0]
    key_propose, key_accept = jax.random.split(key)
    proposed = proposal.mean + jax.random.normal(key_propose, (num_moves, dim)) @ proposal.lower.T
    points = jnp.concatenate([position[None], proposed])
    log_targets = jax.vmap(log_target)(points)
    log_weights = log_targets - jax.vmap(partial(mvn_log_prob_cholesky, mean=proposal.mean, lower=proposal.lower))(
        points
    )
    log_uniforms = jnp.log(jax.random.uniform(key_accept, (num_moves,)))

    def move(current, inputs):
        candidate, log_uniform = inputs
        accept = ready & (log_uniform < log_weights[candidate] - log_weights[current])
        return jnp.where(accept, candidate, current), None

    chosen, _ = jax.lax.scan(move, jnp.asarray(0), (jnp.arange(1, num_moves + 1), log_uniforms))
    return points[chosen]


def _collapsed_moves(key, num_moves, state, fit, data, mask, priors, statistic, shared_data_model):
    """Independence Metropolis moves of theta given omega, then of each data model omega_i given theta, with
    the statistics integrated out (`_marginal_log_likelihood`). Each block proposes from the conditional, given
    the other blocks' current values, of a Gaussian fitted to the chains' joint warm-up draws of
    u = (phi, psi_1, ..., psi_m) (`theta_coordinates`, `omega_coordinates`): theta and the data models are
    strongly coupled (the slope a statistic implies scales with the inputs' covariance), so marginal proposals
    are far wider than the conditionals they must hit. With the draw of s | theta, omega, o that follows
    these are partially collapsed Gibbs steps (van Dyk & Park 2008); with the fit frozen after warm-up each is
    an exact Metropolis kernel. They cure the slow data augmentation of Algorithm 1 when DP noise dominates:
    p(theta | s) and p(omega | s) are far narrower than p(. | o). Their target is the CLT-marginal model, as
    NUTS's; the conjugate step that ends each sweep restores Algorithm 1's exact likelihood given s.
    """
    dim = state.weights.shape[0]
    key_theta, key_omega = jax.random.split(key)
    ready = fit.ready
    num_blocks = 1 if shared_data_model else data.counts.shape[0]

    def party_log_likelihoods(w, v, x_mean, x_cov):
        return jax.vmap(partial(_marginal_log_likelihood, statistic, w, v))(
            x_mean, x_cov, data.perturbed, data.counts, data.noise_std
        )

    def theta_log_target(phi):
        v = jnp.exp(phi[dim])
        w = phi[:dim] * jnp.sqrt(v)
        log_jacobian = (dim / 2 + 1) * phi[dim]  # d(w, v) / d(phi) = v^(D/2) * v
        likelihood = party_log_likelihoods(w, v, state.x_mean, state.x_cov)
        return nig_log_density(priors.model, w, v) + log_jacobian + jnp.sum(jnp.where(mask, likelihood, 0.0))

    psi = jax.vmap(omega_coordinates)(state.x_mean, state.x_cov)[:num_blocks]
    phi = theta_coordinates(state.weights, state.noise_var)
    phi = _independence_moves(key_theta, num_moves, phi, theta_log_target, fit.theta(psi), ready)
    noise_var = jnp.exp(phi[dim])
    weights = phi[:dim] * jnp.sqrt(noise_var)

    num_features = state.x_mean.shape[-1]

    def omega_log_target(psi, perturbed, counts, noise_std, included):
        """One data model psi for the parties `included` among those observed (leading axis)."""
        x_mean, unconstrained = psi[:num_features], psi[num_features:]
        x_cov = pd_from_unconstrained(unconstrained, num_features)
        likelihood = jax.vmap(partial(_marginal_log_likelihood, statistic, weights, noise_var, x_mean, x_cov))(
            perturbed, counts, noise_std
        )
        log_jacobian = pd_log_abs_det_jacobian(unconstrained, num_features)
        log_prior = niw_log_density(priors.data, x_mean, x_cov) + log_jacobian
        return log_prior + jnp.sum(jnp.where(included, likelihood, 0.0))

    proposals = fit.omega(phi)
    if shared_data_model:
        target = partial(omega_log_target, perturbed=data.perturbed, counts=data.counts, noise_std=data.noise_std)
        proposal = jax.tree.map(lambda p: p[0], proposals)
        psi = _independence_moves(key_omega, num_moves, psi[0], partial(target, included=mask), proposal, ready)
        psi = jnp.broadcast_to(psi, (data.counts.shape[0],) + psi.shape)
    else:  # each party's own data model, from its own statistic alone

        def own_moves(key, psi_i, proposal_i, perturbed, count, noise_std):
            observed = dict(perturbed=perturbed[None], counts=count[None], noise_std=noise_std[None])
            target = partial(omega_log_target, **observed, included=True)
            return _independence_moves(key, num_moves, psi_i, target, proposal_i, ready)

        keys = jax.random.split(key_omega, data.counts.shape[0])
        psi = jax.vmap(own_moves)(keys, psi, proposals, data.perturbed, data.counts, data.noise_std)
    x_cov = jax.vmap(partial(pd_from_unconstrained, dim=num_features))(psi[:, num_features:])
    return weights, noise_var, psi[:, :num_features], x_cov


def gibbs_step(
    key: jax.Array,
    state: GibbsState,
    data: NoiseAwareData,
    mask: jnp.ndarray,
    priors: BLRPriors,
    statistic: LinearRegressionStatistic,
    shared_data_model: bool,
    interweaving_moves: int = 0,
    collapsed_moves: int = 8,
    adapt: jnp.ndarray | bool = False,
    fit: ConditionalFit | None = None,
) -> GibbsState:
    """One sweep for the coalition `mask`: `collapsed_moves` independence moves of theta and of each data model
    with the statistics integrated out, proposing from `fit` (see `_collapsed_moves`; fitted to the state's
    proposal moments if not given), then Algorithm 1's steps 5-16 (s | theta,
    omega, o; omega | s; theta | s), then `interweaving_moves` Metropolis moves of theta in the ancillary
    parameterisation (see `_interweaving_moves`). With `adapt` the sweep's draws also update the moments the
    collapsed moves propose from.

    The order is the exactness correction of the collapsed moves: they carry the chain across the wide
    posterior p(theta, omega | o) that the conjugate steps cross slowly, and the theta a sweep ends with
    is then drawn by Algorithm 1's exact conditional p(theta | s) given statistics s imputed from o. At
    negligible noise s = o, so the draws follow the exact-statistics NIG posterior whatever the collapsed
    moves' CLT target; where noise dominates, the collapsed moves set the mixing (docs/architecture.md).
    """
    n = data.counts.shape[0]
    w = statistic.num_features
    key_s, key_omega, key_theta, key_move = jax.random.split(key, 4)
    if collapsed_moves:
        if fit is None:
            fit = _fit_for(state, mask, shared_data_model)
        moved = _collapsed_moves(
            jax.random.fold_in(key_move, 1),
            collapsed_moves,
            state,
            fit,
            data,
            mask,
            priors,
            statistic,
            shared_data_model,
        )
        state = state._replace(**dict(zip(("weights", "noise_var", "x_mean", "x_cov"), moved)))
        num_blocks = 1 if shared_data_model else n
        state = jax.lax.cond(adapt, partial(_gather_moments, num_blocks=num_blocks), lambda state: state, state)
    stats = jax.vmap(
        lambda k, mu, cov, o, c, sz: _sample_latent_statistic(
            k, statistic, (state.weights, state.noise_var, mu, cov), o, c, sz
        )
    )(jax.random.split(key_s, n), state.x_mean, state.x_cov, data.perturbed, data.counts, data.noise_std)
    matrices = jax.vmap(statistic.to_matrix)(stats, data.counts)

    def data_model_draw(k, matrix, count):
        posterior = niw_update(priors.data, matrix[:w, w], matrix[:w, :w], count)
        return sample_niw(k, posterior)

    weight = mask.astype(matrices.dtype)
    if shared_data_model:
        x_mean, x_cov = data_model_draw(key_omega, jnp.tensordot(weight, matrices, 1), weight @ data.counts)
        x_mean, x_cov = jnp.broadcast_to(x_mean, (n, w)), jnp.broadcast_to(x_cov, (n, w, w))
    else:
        x_mean, x_cov = jax.vmap(data_model_draw)(jax.random.split(key_omega, n), matrices, data.counts)

    posterior = nig_update(priors.model, jnp.tensordot(weight, matrices, 1), weight @ data.counts)
    weights, noise_var = sample_nig(key_theta, posterior)
    if interweaving_moves:
        weights, noise_var = _interweaving_moves(
            key_move, interweaving_moves, weights, noise_var, x_mean, x_cov, stats, data, mask, priors.model, statistic
        )
    return state._replace(weights=weights, noise_var=noise_var, x_mean=x_mean, x_cov=x_cov)


def joint_coordinates(state: GibbsState, num_blocks: int) -> jnp.ndarray:
    """u = (phi, psi_1, ..., psi_m): theta's and the first m data models' coordinates (m = 1 if shared)."""
    psi = jax.vmap(omega_coordinates)(state.x_mean[:num_blocks], state.x_cov[:num_blocks])
    return jnp.concatenate([theta_coordinates(state.weights, state.noise_var), psi.ravel()])


def _gather_moments(state: GibbsState, num_blocks: int) -> GibbsState:
    """Add the state's coordinates to the current warm-up window's moments."""
    return state._replace(window=state.window.add(joint_coordinates(state, num_blocks)))


def initial_state(key: jax.Array, priors: BLRPriors, num_parties: int, shared_data_model: bool = False) -> GibbsState:
    """theta^(0) from the NIG prior and omega_i^(0) from the NIW prior (Algorithm 1, lines 1-2)."""
    key_theta, key_omega = jax.random.split(key)
    weights, noise_var = sample_nig(key_theta, priors.model)
    x_mean, x_cov = jax.vmap(lambda k: sample_niw(k, priors.data))(jax.random.split(key_omega, num_parties))
    if shared_data_model:
        x_mean, x_cov = jnp.broadcast_to(x_mean[0], x_mean.shape), jnp.broadcast_to(x_cov[0], x_cov.shape)
    num_features = x_mean.shape[-1]
    num_blocks = 1 if shared_data_model else num_parties
    dim = weights.shape[0] + 1 + num_blocks * (num_features + num_features * (num_features + 1) // 2)
    return GibbsState(weights, noise_var, x_mean, x_cov, RunningMoments.empty(dim), RunningMoments.empty(dim))


@jax.jit
def _end_window(states: GibbsState) -> GibbsState:
    """Refit the collapsed moves' proposal to the warm-up window just ended, pooled over the chains of each
    posterior (axis 1 of (rows, chains, ...)), and open an empty window. Early windows give the moves a rough
    fit while the chains still travel from their prior draws; the last one, from chains near the posterior,
    is the fit kept for sampling. Pooling gives every chain the draws of all, so a chain that arrived late
    still proposes well."""
    return states._replace(proposal=states.window.pooled(axis=1), window=jax.tree.map(jnp.zeros_like, states.window))


@partial(jax.jit, static_argnames=("num_parties", "shared_data_model"), compiler_options=_COMPILER_OPTIONS)
def _initial_states(keys: jax.Array, priors: BLRPriors, num_parties: int, shared_data_model: bool) -> GibbsState:
    """`initial_state` for keys of any batch shape."""
    draw = partial(initial_state, priors=priors, num_parties=num_parties, shared_data_model=shared_data_model)
    for _ in range(keys.ndim):
        draw = jax.vmap(draw)
    return draw(keys)


def _fit_for(state: GibbsState, mask: jnp.ndarray, shared_data_model: bool) -> ConditionalFit:
    """The collapsed moves' proposals for this chain's coalition, from its current proposal moments."""
    informative = jnp.ones(1, bool) if shared_data_model else mask
    return fit_proposals(state.proposal, informative, state.weights.shape[0] + 1)


def _sweeps(key, state, data, mask, priors, statistic, moves, adapt, num_sweeps):
    """`num_sweeps` Gibbs sweeps (a traced count, so any length reuses one compiled program). The proposal
    moments change only between calls (at the ends of warm-up windows), so the proposals are fitted once here."""
    shared_data_model, interweaving_moves, collapsed_moves = moves
    fit = _fit_for(state, mask, shared_data_model) if collapsed_moves else None

    def body(i, state):
        return gibbs_step(
            jax.random.fold_in(key, i),
            state,
            data,
            mask,
            priors,
            statistic,
            shared_data_model,
            interweaving_moves,
            collapsed_moves,
            adapt,
            fit,
        )

    return jax.lax.fori_loop(0, num_sweeps, body, state)


@partial(jax.jit, static_argnames=("statistic", "moves"), compiler_options=_COMPILER_OPTIONS)
def _advance(keys, states, data, masks, priors, statistic, moves, adapt, sweeps):
    """Run every (coalition, chain) for sweeps[0], then sweeps[1], ... sweeps, returning theta after each
    (K, chains, len(sweeps), D + 1). The counts are traced, so warm-up (one count, the rest 0) and
    sampling (every count the thinning) share one compiled program.
    moves = (shared_data_model, interweaving_moves, collapsed_moves)."""

    def run_chain(key, state, data, mask):
        def kept(state, inputs):
            key, num_sweeps = inputs
            state = _sweeps(key, state, data, mask, priors, statistic, moves, adapt, num_sweeps)
            return state, state.theta

        return jax.lax.scan(kept, state, (jax.random.split(key, sweeps.shape[0]), sweeps))

    per_coalition = jax.vmap(run_chain, in_axes=(0, 0, None, None))
    return jax.vmap(per_coalition, in_axes=(0, 0, data.row_axis, 0))(keys, states, data, masks)


def sample_coalition_posteriors(
    key: jax.Array,
    data: NoiseAwareData,
    masks: np.ndarray,
    priors: BLRPriors,
    statistic: LinearRegressionStatistic,
    *,
    shared_data_model: bool = False,
    interweaving_moves: int = 0,
    collapsed_moves: int = 8,
    num_chains: int = 4,
    num_warmup: int = 500,
    num_samples: int = 2000,
    thinning: int = 1,
    segments: int = 10,
    progress_bar: bool = True,
) -> np.ndarray:
    """Posterior draws of theta = (w, sigma^2) for every coalition mask: (K, chains, kept, D + 1).

    `key` is one key, or one key per mask (K,): each row's draws then depend on its key alone. `data` is shared by
    every row, or one set of releases per row (`NoiseAwareData.per_row`).

    `num_samples` sweeps follow `num_warmup` burn-in sweeps and every `thinning`-th is kept, as in
    NumPyro's MCMC. The sweeps run as `segments` calls of one compiled program, to show progress.
    """
    masks = jnp.asarray(masks, dtype=bool)
    num_coalitions, num_parties = masks.shape
    if num_samples % thinning:
        raise ValueError(f"num_samples={num_samples} must be a multiple of thinning={thinning}")
    total_kept = num_samples // thinning
    per_segment = -(-total_kept // segments)
    key_init, key_run = jnp.moveaxis(jax.vmap(jax.random.split)(row_keys(key, num_coalitions)), 1, 0)
    chain_keys = jax.vmap(lambda k: jax.random.split(k, num_chains))
    states = _initial_states(chain_keys(key_init), priors, num_parties, shared_data_model)
    # Warm-up: exactly num_warmup sweeps in `segments` calls; from segment ADAPT_FROM_SEGMENT on, windows
    # ending at WINDOW_ENDS and at the end of warm-up refit the collapsed moves' proposal. Sampling: calls of
    # per_segment kept draws.
    warmup = [len(b) for b in np.array_split(np.arange(num_warmup), segments) if len(b)]
    sampling = -(-total_kept // per_segment)
    moves = (shared_data_model, interweaving_moves, collapsed_moves)
    kept = []
    with tqdm(total=len(warmup) + sampling, desc=describe("Gibbs"), disable=not progress_bar, unit="segment") as bar:
        for index in range(len(warmup) + sampling):
            keys = chain_keys(jax.vmap(jax.random.fold_in, in_axes=(0, None))(key_run, index))
            warming = index < len(warmup)
            sweeps = np.full(per_segment, thinning)
            if warming:
                sweeps[:] = 0
                sweeps[0] = warmup[index]
            adapt = jnp.asarray(warming and index >= ADAPT_FROM_SEGMENT)
            if collapsed_moves and (index in WINDOW_ENDS or index == len(warmup)) and index <= len(warmup):
                states = _end_window(states)
            states, draws = _advance(keys, states, data, masks, priors, statistic, moves, adapt, jnp.asarray(sweeps))
            if not warming:
                kept.append(np.asarray(draws))
            bar.update()
    return np.concatenate(kept, axis=2)[:, :, :total_kept]
