"""The Metropolis moves that open and close a Gibbs sweep, beside Algorithm 1's conjugate steps (`kernel`).

Collapsed moves (van Dyk & Park 2008): independence Metropolis moves of theta given omega, then of each data model
omega_i given theta, with the exact statistics integrated out of the likelihood (the CLT marginal NUTS uses),
proposing from the block conditionals that `adaptation` fits to the warm-up draws. Interweaving moves (Yu & Meng
2011): random-walk moves of theta in the ancillary parameterisation, the standardised statistics held fixed.
Both cure the slow data augmentation of Sim et al.'s (2023) Algorithm 1 where DP noise dominates
(docs/architecture.md).
"""

from __future__ import annotations

from functools import partial

import jax
import jax.numpy as jnp

from bayesval.inference.clt import linear_regression_record_moments, pair_product_entries, pair_product_moments
from bayesval.inference.conjugate import nig_log_density, niw_log_density
from bayesval.inference.gibbs.adaptation import (
    PROPOSAL_DOF,
    ConditionalFit,
    Proposal,
    omega_coordinates,
    theta_coordinates,
)
from bayesval.inference.gibbs.state import GibbsInputs, GibbsSettings, GibbsState
from bayesval.inference.linalg import (
    SCALAR_LIMIT,
    cholesky,
    mvn_log_prob,
    mvn_log_prob_entries,
    mvt_log_prob_cholesky,
    pd_from_unconstrained,
    pd_log_abs_det_jacobian,
    solve_lower,
    spd_inverse,
)

JITTER = 1e-10  # added to the CLT covariance's diagonal, relative to its mean diagonal entry


def clt_moments(statistic, weights, noise_var, x_mean, x_cov, count):
    """c mu_t and c Sigma_t (plus a relative jitter) for one party: the CLT moments of its exact statistic
    (Sim et al. 2023, Sec. 4)."""
    rows, cols = statistic.pairs
    if len(rows) <= SCALAR_LIMIT:
        mean, cov = clt_entries(statistic, weights, noise_var, x_mean, x_cov, count)
        return jnp.stack(mean), jnp.stack([jnp.stack(row) for row in cov])
    z_mean, z_cov = linear_regression_record_moments(weights, noise_var, x_mean, x_cov)
    t_mean, t_cov = pair_product_moments(z_mean, z_cov, rows, cols)
    clt_cov = count * t_cov
    jitter = JITTER * jnp.trace(clt_cov) / clt_cov.shape[0]
    return count * t_mean, clt_cov + jitter * jnp.eye(clt_cov.shape[0])


def clt_entries(statistic, weights, noise_var, x_mean, x_cov, count) -> tuple[list, list[list]]:
    """`clt_moments` on scalars, for a statistic of at most SCALAR_LIMIT entries: the mean a list, the covariance
    nested lists. A caller that only reads them (a density, a draw) never stacks them into matrices: under `vmap`
    stacking scalars into (batch, P, P) arrays and reading them back cost 3.4x the whole likelihood of a party of
    Syn (docs/benchmarks.md)."""
    z_mean, z_cov = linear_regression_record_moments(weights, noise_var, x_mean, x_cov)
    t_mean, t_cov = pair_product_entries(z_mean, z_cov, *statistic.pairs)
    cov = [[count * entry for entry in row] for row in t_cov]
    jitter = JITTER * sum((row[i] for i, row in enumerate(cov)), 0.0) / len(cov)
    return [count * entry for entry in t_mean], [
        [entry + jitter if i == j else entry for j, entry in enumerate(row)] for i, row in enumerate(cov)
    ]


def with_noise(cov: list[list], noise_std) -> list[list]:
    """c Sigma_t + sigma_z^2 I on entries: the covariance of a release around c mu_t."""
    noise_var = noise_std**2
    return [[entry + noise_var if i == j else entry for j, entry in enumerate(row)] for i, row in enumerate(cov)]


def marginal_log_likelihood(statistic, weights, noise_var, x_mean, x_cov, perturbed, count, noise_std):
    """log N(o_i; c_i mu_t, c_i Sigma_t + sigma_z,i^2 I): one party's perturbed statistic with its exact
    statistic integrated out (the likelihood NUTS uses). Up to SCALAR_LIMIT entries on scalars (`clt_entries`,
    `mvn_log_prob_entries`), never stacked."""
    if len(statistic.pairs[0]) > SCALAR_LIMIT:
        clt_mean, clt_cov = clt_moments(statistic, weights, noise_var, x_mean, x_cov, count)
        return mvn_log_prob(perturbed, clt_mean, clt_cov + noise_std**2 * jnp.eye(clt_cov.shape[0]))
    clt_mean, clt_cov = clt_entries(statistic, weights, noise_var, x_mean, x_cov, count)
    return mvn_log_prob_entries(perturbed, clt_mean, with_noise(clt_cov, noise_std))


def interweaving_moves(key, num_moves: int, state: GibbsState, stats, inputs: GibbsInputs, statistic):
    """Metropolis moves of theta with the standardised statistics eta_i = L_i^-1 (s_i - c_i mu_t) held
    fixed: the ancillary parameterisation of Yu & Meng's (2011) interweaving. When DP noise dominates,
    p(o | s) is flat, so theta moves far where the conjugate update (s held fixed) barely moves; when
    noise is small the moves are rejected and the conjugate update mixes well. Random-walk scales are
    drawn log-uniformly in [0.01, 1] of the prior's (state-independent, so the proposal is symmetric).
    Since s is redrawn at the start of the next sweep, only theta = (weights, noise_var) is returned.
    """
    data, mask, prior = inputs.data, inputs.mask, inputs.priors.model

    def standardise(w, v):
        means, covs = jax.vmap(lambda mu, cov, c: clt_moments(statistic, w, v, mu, cov, c))(
            state.x_mean, state.x_cov, data.counts
        )
        return means, jax.vmap(cholesky)(covs)

    def log_target(w, v, means, chols):
        log_prior = nig_log_density(prior, w, v)
        moved = means + jnp.einsum("nij,nj->ni", chols, eta)
        misfit = jnp.sum((data.perturbed - moved) ** 2, axis=1) / data.noise_std**2
        return log_prior - 0.5 * jnp.sum(jnp.where(mask, misfit, 0.0))

    means, chols = standardise(state.weights, state.noise_var)
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

    initial = (state.weights, state.noise_var, log_target(state.weights, state.noise_var, means, chols))
    (weights, noise_var, _), _ = jax.lax.scan(move, initial, jax.random.split(key, num_moves))
    return weights, noise_var


def independence_moves(key, num_moves, position, log_target, proposal: Proposal, ready):
    """`num_moves` independence Metropolis moves from a Student t with `PROPOSAL_DOF` degrees of freedom, centred
    and scaled as the Gaussian `proposal`; every move is rejected until `ready` (enough warm-up draws gathered).
    An independence sampler stalls wherever the target's tail is heavier than the proposal's: a chain that
    reaches such a point has a large weight target / proposal there, and rejects for as long as that weight is
    unmatched (Mengersen & Tweedie 1996, Thm. 2.1: it is uniformly ergodic iff the weight is bounded). The sigma^2
    of a coalition of 11 of 12 parties has such a tail: Gaussian proposals left one of its four chains there, and
    sigma^2 an ESS of 83 in 6,400 draws (docs/benchmarks.md, "Proposals with heavy tails"); the t's polynomial
    tails bound the weight there. The proposals do not depend on the chain's state, so all of them and the
    current position are scored in one batched call, and only the accept / reject pass runs in sequence: the batch
    is what the small-matrix kernels need to run at speed on CPU."""
    dim = position.shape[0]
    key_propose, key_scale, key_accept = jax.random.split(key, 3)
    chi_square = jnp.sum(jax.random.normal(key_scale, (num_moves, PROPOSAL_DOF)) ** 2, axis=1, keepdims=True)
    standard = jax.random.normal(key_propose, (num_moves, dim)) * jnp.sqrt(PROPOSAL_DOF / chi_square)
    proposed = proposal.mean + standard @ proposal.lower.T
    points = jnp.concatenate([position[None], proposed])
    log_targets = jax.vmap(log_target)(points)
    log_proposal = partial(mvt_log_prob_cholesky, mean=proposal.mean, lower=proposal.lower, dof=PROPOSAL_DOF)
    log_weights = log_targets - jax.vmap(log_proposal)(points)
    log_uniforms = jnp.log(jax.random.uniform(key_accept, (num_moves,)))

    def move(current, inputs):
        candidate, log_uniform = inputs
        accept = ready & (log_uniform < log_weights[candidate] - log_weights[current])
        return jnp.where(accept, candidate, current), None

    chosen, _ = jax.lax.scan(move, jnp.asarray(0), (jnp.arange(1, num_moves + 1), log_uniforms))
    return points[chosen]


def collapsed_moves(key, state: GibbsState, fit: ConditionalFit, inputs: GibbsInputs, settings: GibbsSettings):
    """`settings.collapsed_moves` independence Metropolis moves of theta given omega, then as many of each data
    model omega_i given theta, with the statistics integrated out (`marginal_log_likelihood`); returns the state
    with theta and omega moved. Each block proposes from the conditional, given the other blocks' current values,
    of a Gaussian fitted to the chains' joint warm-up draws of u = (phi, psi_1, ..., psi_m) (`adaptation`): theta
    and the data models are tightly coupled (the slope a statistic implies scales with the inputs' covariance), so
    marginal proposals are far wider than the conditionals they must hit. With the draw of s | theta, omega, o that
    follows these are partially collapsed Gibbs steps (van Dyk & Park 2008); with the fit frozen after warm-up each
    is an exact Metropolis kernel. They cure the slow data augmentation of Algorithm 1 when DP noise dominates:
    p(theta | s) and p(omega | s) are far narrower than p(. | o). Their target is the CLT-marginal model, as
    NUTS's; the conjugate step that ends each sweep restores Algorithm 1's exact likelihood given s.
    """
    data, mask, priors, statistic = inputs.data, inputs.mask, inputs.priors, settings.statistic
    key_theta, key_omega = jax.random.split(key)
    num_blocks = settings.blocks(data.counts.shape[0])
    psi = jax.vmap(omega_coordinates)(state.x_mean, state.x_cov)[:num_blocks]
    phi = theta_coordinates(state.weights, state.noise_var)
    target = partial(_theta_log_target, state=state, inputs=inputs, statistic=statistic)
    phi = independence_moves(key_theta, settings.collapsed_moves, phi, target, fit.theta(psi), fit.ready)
    dim = state.weights.shape[0]
    noise_var = jnp.exp(phi[dim])
    weights = phi[:dim] * jnp.sqrt(noise_var)

    num_features = state.x_mean.shape[-1]
    omega_target = partial(_omega_log_target, weights, noise_var, statistic, priors.data, num_features)
    proposals = fit.omega(phi)
    moves = partial(independence_moves, num_moves=settings.collapsed_moves, ready=fit.ready)
    if settings.shared_data_model:
        observed = dict(perturbed=data.perturbed, counts=data.counts, noise_std=data.noise_std)
        proposal = jax.tree.map(lambda p: p[0], proposals)
        target = partial(omega_target, **observed, included=mask)
        psi = moves(key_omega, position=psi[0], log_target=target, proposal=proposal)
        psi = jnp.broadcast_to(psi, (data.counts.shape[0],) + psi.shape)
    else:  # each party's own data model, from its own statistic alone

        def own_moves(key, psi_i, proposal_i, perturbed, count, noise_std):
            observed = dict(perturbed=perturbed[None], counts=count[None], noise_std=noise_std[None])
            target = partial(omega_target, **observed, included=True)
            return moves(key, position=psi_i, log_target=target, proposal=proposal_i)

        keys = jax.random.split(key_omega, data.counts.shape[0])
        psi = jax.vmap(own_moves)(keys, psi, proposals, data.perturbed, data.counts, data.noise_std)
    x_cov = jax.vmap(partial(pd_from_unconstrained, dim=num_features))(psi[:, num_features:])
    return state._replace(weights=weights, noise_var=noise_var, x_mean=psi[:, :num_features], x_cov=x_cov)


def _party_log_likelihoods(statistic, data, w, v, x_mean, x_cov):
    return jax.vmap(partial(marginal_log_likelihood, statistic, w, v))(
        x_mean, x_cov, data.perturbed, data.counts, data.noise_std
    )


def _theta_log_target(phi, state: GibbsState, inputs: GibbsInputs, statistic):
    """log p(theta, o_C | omega) in the coordinates phi = (w / sigma, log sigma^2), Jacobian included."""
    dim = state.weights.shape[0]
    v = jnp.exp(phi[dim])
    w = phi[:dim] * jnp.sqrt(v)
    log_jacobian = (dim / 2 + 1) * phi[dim]  # d(w, v) / d(phi) = v^(D/2) * v
    likelihood = _party_log_likelihoods(statistic, inputs.data, w, v, state.x_mean, state.x_cov)
    return nig_log_density(inputs.priors.model, w, v) + log_jacobian + jnp.sum(jnp.where(inputs.mask, likelihood, 0.0))


def _omega_log_target(
    weights, noise_var, statistic, data_prior, num_features, psi, perturbed, counts, noise_std, included
):
    """log p(omega, o | theta) of one data model psi = (mu, unconstrained Sigma), Jacobian included, for the
    parties `included` among those observed (leading axis)."""
    x_mean, unconstrained = psi[:num_features], psi[num_features:]
    x_cov = pd_from_unconstrained(unconstrained, num_features)
    likelihood = jax.vmap(partial(marginal_log_likelihood, statistic, weights, noise_var, x_mean, x_cov))(
        perturbed, counts, noise_std
    )
    log_jacobian = pd_log_abs_det_jacobian(unconstrained, num_features)
    log_prior = niw_log_density(data_prior, x_mean, x_cov) + log_jacobian
    return log_prior + jnp.sum(jnp.where(included, likelihood, 0.0))
