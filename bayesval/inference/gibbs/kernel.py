"""Noise-aware Gibbs kernel for Bayesian linear regression (Sim et al. 2023, Algorithm 1; Bernstein & Sheldon
2019): pure `init` and `step` functions on a `GibbsState`, in the manner of BlackJAX's kernels (`base.py`,
`mcmc/hmc.py`), batched over coalitions and chains by the driver (`bayesval.inference.gibbs.driver`).

The latent exact statistics s_i, the data models omega_i = (mu_i, Sigma_i) and theta = (w, sigma^2)
are updated in turn:
  s_i | theta, omega_i, o_i  ~  N(c_i mu_t, c_i Sigma_t) x N(o_i; s_i, sigma_z,i^2 I)   (step 7)
  omega_i | s_i              ~  NIW posterior from sum x, sum x x^T                     (steps 9/13)
  theta | s_C                ~  NIG posterior from sum over the coalition of s_i          (steps 15-16)
A coalition is a boolean mask over parties: every party's s_i is sampled, but only members enter
the theta update (and, for a shared data model, the omega update). One jitted program therefore
serves all 2^n coalitions, vmapped over (coalition, chain). By default (`collapsed_moves`, 8 in
`LinearRegression`) each sweep opens with independence moves of theta and of each omega_i with s integrated
out, proposing from conditionals of a Gaussian fitted to the chains' joint warm-up draws (`moves`,
`adaptation`): partially collapsed steps that cure Algorithm 1's slow mixing where DP noise dominates, while
the conjugate theta | s draw that ends the sweep keeps the exact likelihood. Optional interweaving moves
(Yu & Meng 2011) move theta in the ancillary parameterisation. `interweaving_moves=0, collapsed_moves=0`
give Algorithm 1 as printed.
"""

from __future__ import annotations

from functools import partial

import jax
import jax.numpy as jnp

from bayesval.inference.conjugate import NIG, nig_update, niw_update, sample_nig, sample_niw
from bayesval.inference.gibbs.adaptation import ConditionalFit, RunningMoments, fit_for, gather_moments, joint_dimension
from bayesval.inference.gibbs.moves import clt_entries, clt_moments, collapsed_moves, interweaving_moves, with_noise
from bayesval.inference.gibbs.state import BLRPriors, GibbsInputs, GibbsSettings, GibbsState
from bayesval.inference.linalg import SCALAR_LIMIT, cholesky, cholesky_times_entries, spd_solve, spd_solve_entries


def init(key: jax.Array, priors: BLRPriors, num_parties: int, shared_data_model: bool = False) -> GibbsState:
    """theta^(0) from the NIG prior and omega_i^(0) from the NIW prior (Algorithm 1, lines 1-2), with empty
    proposal moments."""
    key_theta, key_omega = jax.random.split(key)
    weights, noise_var = sample_nig(key_theta, priors.model)
    x_mean, x_cov = jax.vmap(lambda k: sample_niw(k, priors.data))(jax.random.split(key_omega, num_parties))
    if shared_data_model:
        x_mean, x_cov = jnp.broadcast_to(x_mean[0], x_mean.shape), jnp.broadcast_to(x_cov[0], x_cov.shape)
    num_blocks = 1 if shared_data_model else num_parties
    dim = joint_dimension(weights.shape[0] + 1, x_mean.shape[-1], num_blocks)
    return GibbsState(weights, noise_var, x_mean, x_cov, RunningMoments.empty(dim), RunningMoments.empty(dim))


def sample_latent_statistic(key, statistic, state_i, perturbed, count, noise_std):
    """Step 7: draw s_i from the product of its CLT prior N(c mu_t, A = c Sigma_t) and the DP-noise
    likelihood N(o_i; s_i, sigma_z^2 I), by Matheron's rule: with s0 ~ N(c mu_t, A) and
    e ~ N(0, sigma_z^2 I), s0 + A (A + sigma_z^2 I)^-1 (o_i - s0 - e) has exactly that law.
    Two Cholesky factorisations replace the eigendecomposition of the direct form. `state_i` is
    (weights, noise_var, x_mean_i, x_cov_i).
    """
    key_prior, key_noise = jax.random.split(key)
    size = len(statistic.pairs[0])
    prior_white, noise_white = (jax.random.normal(k, (size,)) for k in (key_prior, key_noise))
    if size > SCALAR_LIMIT:
        clt_mean, clt_cov = clt_moments(statistic, *state_i, count)
        prior_draw = clt_mean + cholesky(clt_cov) @ prior_white
        residual = perturbed - prior_draw - noise_std * noise_white
        return prior_draw + clt_cov @ spd_solve(clt_cov + noise_std**2 * jnp.eye(size), residual)
    clt_mean, clt_cov = clt_entries(statistic, *state_i, count)  # on scalars, as the likelihood
    offset = cholesky_times_entries(clt_cov, prior_white)
    prior_draw = [mean + step for mean, step in zip(clt_mean, offset)]
    residual = [perturbed[i] - prior_draw[i] - noise_std * noise_white[i] for i in range(size)]
    solved = spd_solve_entries(with_noise(clt_cov, noise_std), residual)
    return jnp.stack([draw + sum(c * x for c, x in zip(row, solved)) for draw, row in zip(prior_draw, clt_cov)])


def step(
    key: jax.Array,
    state: GibbsState,
    inputs: GibbsInputs,
    settings: GibbsSettings,
    adapt: jnp.ndarray | bool = False,
    fit: ConditionalFit | None = None,
    with_conditional: bool = False,
) -> GibbsState | tuple[GibbsState, NIG]:
    """One sweep for the coalition `inputs.mask`: `settings.collapsed_moves` independence moves of theta and of
    each data model with the statistics integrated out, proposing from `fit` (`moves.collapsed_moves`; fitted to
    the state's proposal moments if not given), then Algorithm 1's steps 5-16 (s | theta, omega, o; omega | s;
    theta | s), then `settings.interweaving_moves` Metropolis moves of theta in the ancillary parameterisation
    (`moves.interweaving_moves`). With `adapt` the sweep's draws also update the moments the collapsed moves
    propose from. With `with_conditional` (static) it also returns the NIG posterior p(theta | s_C) the sweep's
    conjugate step drew theta from (`nig_update` of the members' pooled statistics): the component of a
    Rao-Blackwellised posterior density. After interweaving moves the theta returned is no longer a draw of it,
    but the conditional is still that of the chain's stationary s, which is all the mixture needs.

    The order is the exactness correction of the collapsed moves: they carry the chain across the wide
    posterior p(theta, omega | o) that the conjugate steps cross slowly, and the theta a sweep ends with
    is then drawn by Algorithm 1's exact conditional p(theta | s) given statistics s imputed from o. At
    negligible noise s = o, so the draws follow the exact-statistics NIG posterior whatever the collapsed
    moves' CLT target; where noise dominates, the collapsed moves set the mixing (docs/architecture.md).
    """
    key_s, key_omega, key_theta, key_move = jax.random.split(key, 4)
    if settings.collapsed_moves:
        if fit is None:
            fit = fit_for(state, inputs.mask, settings.shared_data_model)
        state = collapsed_moves(jax.random.fold_in(key_move, 1), state, fit, inputs, settings)
        gather = partial(gather_moments, num_blocks=settings.blocks(inputs.data.counts.shape[0]))
        state = jax.lax.cond(adapt, gather, lambda state: state, state)
    stats, x_mean, x_cov, conditional = _conjugate_steps(key_s, key_omega, state, inputs, settings)
    weights, noise_var = sample_nig(key_theta, conditional)
    state = state._replace(weights=weights, noise_var=noise_var, x_mean=x_mean, x_cov=x_cov)
    if settings.interweaving_moves:
        weights, noise_var = interweaving_moves(
            key_move, settings.interweaving_moves, state, stats, inputs, settings.statistic
        )
    state = state._replace(weights=weights, noise_var=noise_var)
    return (state, conditional) if with_conditional else state


def _conjugate_steps(key_s, key_omega, state: GibbsState, inputs: GibbsInputs, settings: GibbsSettings):
    """Algorithm 1's steps 5-15: every party's s_i | theta, omega_i, o_i, then omega | s (the members' pooled
    statistics if the data model is shared, each party's own otherwise), then the NIG conditional of theta | s_C;
    returns s, the new data models and that conditional (step 16 draws theta from it)."""
    data, mask, priors, statistic = inputs.data, inputs.mask, inputs.priors, settings.statistic
    n, w = data.counts.shape[0], statistic.num_features
    stats = jax.vmap(
        lambda k, mu, cov, o, c, sz: sample_latent_statistic(
            k, statistic, (state.weights, state.noise_var, mu, cov), o, c, sz
        )
    )(jax.random.split(key_s, n), state.x_mean, state.x_cov, data.perturbed, data.counts, data.noise_std)
    matrices = jax.vmap(statistic.to_matrix)(stats, data.counts)

    def data_model_draw(k, matrix, count):
        posterior = niw_update(priors.data, matrix[:w, w], matrix[:w, :w], count)
        return sample_niw(k, posterior)

    weight = mask.astype(matrices.dtype)
    if settings.shared_data_model:
        x_mean, x_cov = data_model_draw(key_omega, jnp.tensordot(weight, matrices, 1), weight @ data.counts)
        x_mean, x_cov = jnp.broadcast_to(x_mean, (n, w)), jnp.broadcast_to(x_cov, (n, w, w))
    else:
        x_mean, x_cov = jax.vmap(data_model_draw)(jax.random.split(key_omega, n), matrices, data.counts)

    conditional = nig_update(priors.model, jnp.tensordot(weight, matrices, 1), weight @ data.counts)
    return stats, x_mean, x_cov, conditional


initial_state = init  # the name the kernel's initial state had before the package split
