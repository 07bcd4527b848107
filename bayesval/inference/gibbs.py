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
Each sweep ends with Metropolis moves of theta in the ancillary parameterisation (interweaving,
Yu & Meng 2011, default 4), which leave the same posterior invariant and mix where DP noise
dominates, and optionally (`collapsed_moves`) independence moves given omega with s integrated out,
a partially collapsed step that mixes ~19x faster but targets the CLT-marginal model NUTS samples
(see `_collapsed_moves`). `interweaving_moves=0, collapsed_moves=0` give Algorithm 1 as printed.
"""

from __future__ import annotations

from functools import partial
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import numpyro.distributions as dist
from tqdm.auto import tqdm

from bayesval.inference.clt import linear_regression_record_moments, pair_product_moments
from bayesval.inference.conjugate import NIG, NIW, nig_update, niw_update, sample_nig, sample_niw
from bayesval.statistics import LinearRegressionStatistic


class NoiseAwareData(NamedTuple):
    """What the mediator holds per party: perturbed statistic (n, P), count (n,), noise std (n,)."""

    perturbed: jnp.ndarray
    counts: jnp.ndarray
    noise_std: jnp.ndarray

    @classmethod
    def from_releases(cls, releases) -> NoiseAwareData:
        """Stack released statistics (anything with .perturbed, .count, .noise_std), one row per party."""
        return cls(
            jnp.asarray(np.stack([r.perturbed for r in releases])),
            jnp.asarray([float(r.count) for r in releases]),
            jnp.asarray([r.noise_std for r in releases]),
        )

    def tempered(self, kappa: float) -> NoiseAwareData:
        """Inputs of the kappa-tempered posterior: kappa c, kappa o, kappa Z (Sim et al. 2023, App. E.3)."""
        return NoiseAwareData(kappa * self.perturbed, kappa * self.counts, kappa * self.noise_std)


class ThetaMoments(NamedTuple):
    """Running mean and scatter (Welford) of phi = (w / sigma, log sigma^2), gathered in the second half of warm-up
    and frozen afterwards: the independence proposal of the collapsed theta move."""

    count: jnp.ndarray  # ()
    mean: jnp.ndarray  # (D + 1,)
    scatter: jnp.ndarray  # (D + 1, D + 1)

    @classmethod
    def empty(cls, dim: int) -> ThetaMoments:
        return cls(jnp.zeros(()), jnp.zeros(dim), jnp.zeros((dim, dim)))

    def add(self, phi: jnp.ndarray) -> ThetaMoments:
        count = self.count + 1
        delta = phi - self.mean
        mean = self.mean + delta / count
        return ThetaMoments(count, mean, self.scatter + jnp.outer(delta, phi - mean))


class GibbsState(NamedTuple):
    weights: jnp.ndarray  # (D,) slope then bias
    noise_var: jnp.ndarray  # ()
    x_mean: jnp.ndarray  # (n, w)
    x_cov: jnp.ndarray  # (n, w, w)
    moments: ThetaMoments

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
    prior_draw = clt_mean + jnp.linalg.cholesky(clt_cov) @ jax.random.normal(key_prior, clt_mean.shape)
    residual = perturbed - prior_draw - noise_std * jax.random.normal(key_noise, clt_mean.shape)
    total = jax.scipy.linalg.cho_factor(clt_cov + noise_std**2 * eye, lower=True)
    return prior_draw + clt_cov @ jax.scipy.linalg.cho_solve(total, residual)


def _nig_log_density(prior: NIG, weights: jnp.ndarray, noise_var: jnp.ndarray) -> jnp.ndarray:
    """log NIG(w, sigma^2): sigma^2 ~ InvGamma(a0, b0), w | sigma^2 ~ N(mu0, sigma^2 Lambda0^-1)."""
    return dist.InverseGamma(prior.shape, prior.scale).log_prob(noise_var) + dist.MultivariateNormal(
        prior.mean, precision_matrix=prior.precision / noise_var
    ).log_prob(weights)


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
        return means, jnp.linalg.cholesky(covs)

    def log_target(w, v, means, chols):
        log_prior = _nig_log_density(prior, w, v)
        moved = means + jnp.einsum("nij,nj->ni", chols, eta)
        misfit = jnp.sum((data.perturbed - moved) ** 2, axis=1) / data.noise_std**2
        return log_prior - 0.5 * jnp.sum(jnp.where(mask, misfit, 0.0))

    means, chols = standardise(weights, noise_var)
    eta = jax.vmap(lambda chol, r: jax.scipy.linalg.solve_triangular(chol, r, lower=True))(chols, stats - means)
    prior_chol = jnp.linalg.cholesky(jnp.linalg.inv(prior.precision))

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
PROPOSAL_INFLATION = 1.5


def theta_coordinates(weights: jnp.ndarray, noise_var: jnp.ndarray) -> jnp.ndarray:
    """phi = (w / sigma, log sigma^2): the NIG prior's non-centred coordinates, where the posterior is
    close to Gaussian both when the data pin w down and when w stays at its prior scale sigma."""
    return jnp.append(weights / jnp.sqrt(noise_var), jnp.log(noise_var))


def _collapsed_moves(key, num_moves, weights, noise_var, x_mean, x_cov, data, mask, prior, statistic, moments):
    """Independence Metropolis moves of theta targeting p(theta | omega, o_C), the statistics integrated out
    (o_i ~ N(c_i mu_t, c_i Sigma_t + sigma_z,i^2 I), the likelihood NUTS uses). The proposal is a Gaussian
    in phi (`theta_coordinates`) with the warm-up moments, inflated. Together with the draw of s | theta,
    omega, o that opens the next sweep this is a partially collapsed Gibbs block (van Dyk & Park 2008), so
    the joint posterior stays invariant; with the proposal frozen after warm-up it is an exact MCMC kernel.
    Its target is the CLT-marginal model; Algorithm 1's conjugate theta | s update uses the exact
    likelihood instead, so with both the negligible-noise posterior is that of the CLT model (about 10 %
    wider than the exact-statistics NIG posterior on Syn), which is why these moves are opt-in.
    """
    dim = weights.shape[0]

    def log_target(phi):
        v = jnp.exp(phi[dim])
        w = phi[:dim] * jnp.sqrt(v)
        means, covs = jax.vmap(lambda mu, cov, c: _clt_moments(statistic, w, v, mu, cov, c))(x_mean, x_cov, data.counts)
        covs = covs + (data.noise_std**2)[:, None, None] * jnp.eye(covs.shape[-1])
        likelihood = dist.MultivariateNormal(means, covs).log_prob(data.perturbed)
        log_prior = _nig_log_density(prior, w, v)
        log_jacobian = (dim / 2 + 1) * phi[dim]  # d(w, v) / d(phi) = v^(D/2) * v
        return log_prior + log_jacobian + jnp.sum(jnp.where(mask, likelihood, 0.0))

    cov = moments.scatter / jnp.maximum(moments.count - 1, 1) + 1e-12 * jnp.eye(dim + 1)
    proposal = dist.MultivariateNormal(moments.mean, PROPOSAL_INFLATION**2 * cov)
    ready = moments.count >= MIN_PROPOSAL_DRAWS

    def move(carry, key):
        phi, current = carry
        key_propose, key_accept = jax.random.split(key)
        new_phi = proposal.sample(key_propose)
        proposed = log_target(new_phi)
        log_ratio = proposed - current + proposal.log_prob(phi) - proposal.log_prob(new_phi)
        accept = ready & (jnp.log(jax.random.uniform(key_accept)) < log_ratio)
        return (jnp.where(accept, new_phi, phi), jnp.where(accept, proposed, current)), None

    phi = theta_coordinates(weights, noise_var)
    (phi, _), _ = jax.lax.scan(move, (phi, log_target(phi)), jax.random.split(key, num_moves))
    noise_var = jnp.exp(phi[dim])
    return phi[:dim] * jnp.sqrt(noise_var), noise_var


def gibbs_step(
    key: jax.Array,
    state: GibbsState,
    data: NoiseAwareData,
    mask: jnp.ndarray,
    priors: BLRPriors,
    statistic: LinearRegressionStatistic,
    shared_data_model: bool,
    interweaving_moves: int = 4,
    collapsed_moves: int = 0,
    adapt: jnp.ndarray | bool = False,
) -> GibbsState:
    """One sweep of Algorithm 1 for the coalition `mask` (steps 5-16), then `interweaving_moves`
    Metropolis moves of theta in the ancillary parameterisation (see `_interweaving_moves`) and
    `collapsed_moves` independence moves of theta given omega alone (see `_collapsed_moves`); with
    `adapt` the sweep's theta also updates the moments those moves propose from."""
    n = data.counts.shape[0]
    w = statistic.num_features
    key_s, key_omega, key_theta, key_move = jax.random.split(key, 4)
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
    if collapsed_moves:
        weights, noise_var = _collapsed_moves(
            jax.random.fold_in(key_move, 1),
            collapsed_moves,
            weights,
            noise_var,
            x_mean,
            x_cov,
            data,
            mask,
            priors.model,
            statistic,
            state.moments,
        )
    phi = theta_coordinates(weights, noise_var)
    moments = jax.tree.map(lambda new, old: jnp.where(adapt, new, old), state.moments.add(phi), state.moments)
    return GibbsState(weights, noise_var, x_mean, x_cov, moments)


def initial_state(key: jax.Array, priors: BLRPriors, num_parties: int) -> GibbsState:
    """theta^(0) from the NIG prior and omega_i^(0) from the NIW prior (Algorithm 1, lines 1-2)."""
    key_theta, key_omega = jax.random.split(key)
    weights, noise_var = sample_nig(key_theta, priors.model)
    x_mean, x_cov = jax.vmap(lambda k: sample_niw(k, priors.data))(jax.random.split(key_omega, num_parties))
    return GibbsState(weights, noise_var, x_mean, x_cov, ThetaMoments.empty(weights.shape[0] + 1))


def _sweeps(key, state, data, mask, priors, statistic, moves, adapt, num_sweeps):
    """`num_sweeps` Gibbs sweeps (a traced count, so any length reuses one compiled program)."""
    shared_data_model, interweaving_moves, collapsed_moves = moves

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
        )

    return jax.lax.fori_loop(0, num_sweeps, body, state)


_STATIC = ("statistic", "moves", "num_kept")


@partial(jax.jit, static_argnames=_STATIC)
def _advance(keys, states, data, masks, priors, statistic, moves, adapt, num_kept, thinning):
    """Run every (coalition, chain) for num_kept * thinning sweeps, keeping every thinning-th theta.
    moves = (shared_data_model, interweaving_moves, collapsed_moves)."""

    def run_chain(key, state, mask):
        def kept(state, key):
            state = _sweeps(key, state, data, mask, priors, statistic, moves, adapt, thinning)
            return state, state.theta

        return jax.lax.scan(kept, state, jax.random.split(key, num_kept))

    per_coalition = jax.vmap(run_chain, in_axes=(0, 0, None))
    return jax.vmap(per_coalition, in_axes=(0, 0, 0))(keys, states, masks)


def sample_coalition_posteriors(
    key: jax.Array,
    data: NoiseAwareData,
    masks: np.ndarray,
    priors: BLRPriors,
    statistic: LinearRegressionStatistic,
    *,
    shared_data_model: bool = False,
    interweaving_moves: int = 4,
    collapsed_moves: int = 0,
    num_chains: int = 4,
    num_warmup: int = 500,
    num_samples: int = 2000,
    thinning: int = 1,
    segments: int = 10,
    progress_bar: bool = True,
) -> np.ndarray:
    """Posterior draws of theta = (w, sigma^2) for every coalition mask: (K, chains, kept, D + 1).

    `num_samples` sweeps follow `num_warmup` burn-in sweeps and every `thinning`-th is kept, as in
    NumPyro's MCMC. The sweeps run as `segments` calls of one compiled program, to show progress.
    """
    masks = jnp.asarray(masks, dtype=bool)
    num_coalitions, num_parties = masks.shape
    if num_samples % thinning:
        raise ValueError(f"num_samples={num_samples} must be a multiple of thinning={thinning}")
    total_kept = num_samples // thinning
    per_segment = -(-total_kept // segments)
    key_init, key_run = jax.random.split(key)
    states = jax.vmap(jax.vmap(lambda k: initial_state(k, priors, num_parties)))(
        jax.random.split(key_init, (num_coalitions, num_chains))
    )
    # Warm-up reuses the sampling program with its draws discarded (at least num_warmup sweeps).
    # The second half of warm-up also gathers the moments the collapsed moves propose from.
    warmup = [-(-len(b) // per_segment) for b in np.array_split(np.arange(num_warmup), segments) if len(b)]
    plan = [(False, 2 * i >= len(warmup), sweeps) for i, sweeps in enumerate(warmup)]
    plan += [(True, False, thinning)] * -(-total_kept // per_segment)
    moves = (shared_data_model, interweaving_moves, collapsed_moves)
    kept = []
    with tqdm(total=len(plan), desc="Gibbs", disable=not progress_bar, unit="segment") as bar:
        for index, (keep, adapt, sweeps) in enumerate(plan):
            keys = jax.random.split(jax.random.fold_in(key_run, index), (num_coalitions, num_chains))
            states, draws = _advance(
                keys, states, data, masks, priors, statistic, moves, jnp.asarray(adapt), per_segment, sweeps
            )
            if keep:
                kept.append(np.asarray(draws))
            bar.update()
    return np.concatenate(kept, axis=2)[:, :, :total_kept]
