"""Laplace approximations of noise-aware Bayesian linear regression's coalition posteriors, and their surprise: the
surrogate game that `bayesval.valuate` (by default, `control_variate`) samples the Shapley values of `LinearRegression`
against (a control variate, docs/games.md, "Control variates").

The model is Sim et al. (2023, App. A.3) with the exact statistics integrated out, as NUTS samples it
(`bayesval.models.linear_regression.noise_aware_linear_regression`): o_i ~ N(c_i mu_t, c_i Sigma_t + sigma_z,i^2 I)
for each member i, where (mu_t, Sigma_t) are the CLT moments of a record under theta = (w, sigma^2) and the party's
data model omega_i = (mu_i, Sigma_i). The approximation is a Gaussian at the posterior mode in unconstrained
coordinates, theta = (w, log sigma^2) and omega_i = (mu_i, the Cholesky factor of Sigma_i with a log diagonal), with
the Hessian of the negative log posterior there as its precision (MacKay 2003, ch. 27). D is the length of
w = (slope..., bias).

The Hessian is arrow-shaped: each party's data model meets theta and nothing else, so a Newton step solves the theta
block's Schur complement (D + 1 unknowns) and one small system per party, and its cost grows linearly in the
parties. The mode is found by Levenberg-Marquardt steps from a fixed start, so the approximation is a deterministic
function of the coalition's releases: the same number for the same coalition every time, which is what a control
variate needs (any such u keeps phi(v) = phi(v - beta u) + beta phi(u) exact; a poor u only helps less).

Its surprise, the KL divergence of the Gaussian's theta marginal from the NIG prior, has a closed form in
(w, s = log sigma^2): log p(w, s) = C - (a0 + D / 2) s - e^(-s) (b0 + (w - mu0)^T Lambda0 (w - mu0) / 2), and under a
Gaussian E[e^(-s) f(w)] = E[e^(-s)] E'[f(w)], E' the Gaussian tilted by e^(-s) (its mean shifted by -Cov(w, s)).
docs/benchmarks.md, "A noise-aware surrogate as a control variate", shows how closely it tracks the sampled surprise.
"""

from __future__ import annotations

from functools import partial
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.special import gammaln

from bayesval.games.masks import coalition_masks
from bayesval.inference.clt import linear_regression_record_moments, pair_product_moments
from bayesval.inference.conjugate import NIG, NIW, nig_log_density, nig_update, niw_log_density, niw_update
from bayesval.inference.data import NoiseAwareData
from bayesval.inference.gibbs.moves import marginal_log_likelihood
from bayesval.inference.linalg import cho_solve, cholesky, log_abs_det, solve, solve_lower
from bayesval.statistics import LinearRegressionStatistic

MAX_STEPS = 300  # Levenberg-Marquardt steps at most
# The steps stop once no partial derivative of the log posterior is larger: a hundredth of CONVERGED. Below about
# 1e-7 a step's change of the log posterior is lost in its rounding, and 6 % of 200 coalitions of 12 parties then
# took all MAX_STEPS (a batch of fits runs as long as its slowest); at 1e-6 the most was 64 steps, the surprises
# moved by at most 1e-6 nats, and the 4,095 fits of 12 parties took 0.81 of the time (docs/benchmarks.md).
GRADIENT_TOLERANCE = 1e-6
MAX_STEP = 4.0  # the largest move of an unconstrained coordinate in one step
INITIAL_DAMPING = 1.0  # the Levenberg-Marquardt damping of the first step (divided by 4 on success, times 4 if not)
MAX_DAMPING = 1e12  # the steps stop once the damping has grown past this: no step lowers the potential
CONVERGED = 1e-4  # a fit whose largest partial derivative of the log posterior is above this has not converged
# Newton steps on the data models alone, theta held, that a profiled start takes (`_Terms.mode`): on the
# 24 Syn parties of docs/benchmarks.md, "Modes the data models made", one step took the three coalitions it was made
# for to their highest modes, and from 3 steps on four coalitions' fits ended where 30 steps' did
PROFILE_STEPS = 8


class LaplaceFit(NamedTuple):
    """Laplace approximations of a batch of coalition posteriors: the surprise KL(q(theta) || p(theta)) of each (B,),
    the mode of theta = (w, log sigma^2) (B, D + 1) with its covariance (B, D + 1, D + 1), and the largest absolute
    gradient of the log posterior left at the mode (B,), which says how well the steps converged, with the steps
    taken (B,)."""

    surprise: jnp.ndarray
    mode: jnp.ndarray
    cov: jnp.ndarray
    gradient: jnp.ndarray
    steps: jnp.ndarray


class JointMode(NamedTuple):
    """A coalition's joint posterior mode in unconstrained coordinates: theta (T,) and each party's omega_i (n, W)
    (a non-member's at 0), the gradient and arrow Hessian's blocks there (`_Terms.derivatives`: g_theta, g_omega,
    A, B, D), the theta marginal's covariance (T, T), the largest absolute gradient left (inf where the precision is
    not positive), the steps taken and the negative log posterior there (up to a constant the coalition's modes
    share, so the lower of two is the higher mode)."""

    theta: jnp.ndarray
    omegas: jnp.ndarray
    derivatives: tuple
    cov: jnp.ndarray
    gradient: jnp.ndarray
    steps: jnp.ndarray
    potential: jnp.ndarray


def laplace_surprises(
    data: NoiseAwareData,
    masks: np.ndarray,
    prior: NIG,
    data_prior: NIW,
    statistic: LinearRegressionStatistic,
    theta_start: np.ndarray | None = None,
) -> LaplaceFit:
    """The Laplace fits of the coalitions `masks` (B, n) from the releases `data` of n parties, under the NIG prior
    and each party's own NIW data model, from `theta_start` (D + 1,) in (w, log sigma^2), by default the prior mean
    of w and the log of the inverse gamma's mode of sigma^2, b0 / (a0 + 1).
    The coalitions are fitted one after another (`lax.map`; under `vmap` the program took minutes to compile), each
    with its parties side by side."""
    if theta_start is None:
        theta_start = prior_start(prior)
    return _fit_batch(data, jnp.asarray(masks, bool), prior, data_prior, statistic, jnp.asarray(theta_start))


def prior_start(prior: NIG) -> jnp.ndarray:
    """The fits' default start (D + 1,) in (w, log sigma^2): the prior mean of w and the log of the inverse gamma's
    mode of sigma^2, b0 / (a0 + 1)."""
    return jnp.append(prior.mean, jnp.log(prior.scale / (prior.shape + 1)))


class SurpriseTable(NamedTuple):
    """The Laplace surprise of every coalition of n parties (2^n,) in code order (sum_i mask_i 2^i; the empty
    coalition's is 0), and the coalitions whose fit did not converge (codes), kept as they are: a surrogate used as
    a control variate only needs to be a fixed function of the coalition."""

    values: np.ndarray
    unconverged: np.ndarray
    name: str = "the Laplace surprise"


def surprise_table(data: NoiseAwareData, prior: NIG, data_prior: NIW, statistic: LinearRegressionStatistic):
    """`laplace_surprises` of every non-empty coalition of the parties of `data`, from the prior's mode; the fits
    left unconverged (a gradient above CONVERGED) are fitted again from the mode of the largest converged coalition,
    and a surprise that is still not finite is 0. A deterministic function of the releases."""
    num_parties = len(data.counts)
    codes = np.arange(1, 2**num_parties)
    masks = coalition_masks(num_parties)
    fit = laplace_surprises(data, masks, prior, data_prior, statistic)
    values, gradient = np.array(fit.surprise), np.array(fit.gradient)
    failed = np.flatnonzero(~(gradient <= CONVERGED))
    converged = np.flatnonzero(gradient <= CONVERGED)
    if len(failed) and len(converged):
        largest = converged[np.argmax(masks[converged].sum(axis=1))]
        refit = laplace_surprises(data, masks[failed], prior, data_prior, statistic, np.asarray(fit.mode)[largest])
        values[failed], gradient[failed] = np.asarray(refit.surprise), np.asarray(refit.gradient)
    values = np.where(np.isfinite(values), values, 0.0)
    return SurpriseTable(np.append(0.0, values), codes[~(gradient <= CONVERGED)])


class _Step(NamedTuple):
    """The carry of `_Terms.mode`'s loop: the point, the damping and potential there, the derivatives (taken where
    the point was before it moved, where `stale`), the Levenberg-Marquardt steps taken, the data-model steps still to
    take first (the profiled start's), and whether the steps are done."""

    theta: jnp.ndarray
    omegas: jnp.ndarray
    damping: jnp.ndarray
    value: jnp.ndarray
    derivatives: tuple
    stale: jnp.ndarray
    steps: jnp.ndarray
    profile_left: jnp.ndarray
    done: jnp.ndarray


def coalition_terms(data: NoiseAwareData, prior: NIG, data_prior: NIW, statistic: LinearRegressionStatistic) -> _Terms:
    """The negative log posterior of a coalition of the parties of `data` in the fit's coordinates, term by term, with
    its Levenberg-Marquardt steps (`mode`): what `bayesval.inference.importance` draws around and weighs by."""
    return _Terms(data, prior, data_prior, statistic)


@partial(jax.jit, static_argnames=("statistic",))
def _fit_batch(data, masks, prior, data_prior, statistic, theta_start) -> LaplaceFit:
    terms = _Terms(data, prior, data_prior, statistic)
    return jax.lax.map(lambda mask: terms.fit(mask, theta_start), masks)


class _Terms:
    """The negative log posterior of one coalition as a sum of a theta term and one term per party, and the damped
    Newton steps over it (every party is carried; a non-member's term, |omega_i|^2 / 2, holds its block still)."""

    def __init__(self, data: NoiseAwareData, prior: NIG, data_prior: NIW, statistic: LinearRegressionStatistic):
        self.data, self.prior, self.data_prior, self.statistic = data, prior, data_prior, statistic
        self.pairs = tuple(np.asarray(part) for part in statistic.pairs)
        num_features = self.num_features = statistic.num_features
        self.theta_dim = num_features + 2  # (w, log sigma^2), w = (slope..., bias)
        self.omega_dim = num_features + num_features * (num_features + 1) // 2  # mu_i and the Cholesky factor
        self.tril = np.tril_indices(num_features)

    def theta_prior(self, theta):
        """-log p(w, log sigma^2) (`theta_prior_potential`)."""
        return theta_prior_potential(self.prior, theta)

    def data_model(self, omega):
        """(mu_i, Sigma_i, the log-diagonal of its Cholesky factor) from the unconstrained omega_i."""
        d = self.num_features
        mean, free = omega[:d], omega[d:]
        factor = jnp.zeros((d, d)).at[self.tril].set(free)
        log_diagonal = jnp.diagonal(factor)
        factor = factor - jnp.diag(log_diagonal) + jnp.diag(jnp.exp(log_diagonal))
        return mean, factor @ factor.T, log_diagonal

    def omega_prior(self, omega):
        """-log NIW(mu_i, Sigma_i) in the unconstrained omega_i, with the Jacobian of Sigma = L L^T (L's log
        diagonal), up to a constant."""
        d = self.num_features
        mean, cov, log_diagonal = self.data_model(omega)
        jacobian = jnp.sum((d - jnp.arange(d) + 1) * log_diagonal)  # log |dSigma / dlog-diag L|, less d log 2
        return -(niw_log_density(self.data_prior, mean, cov) + jacobian)

    def party(self, theta, omega, perturbed, count, noise_std, member, scalar: bool = False):
        """-log p(o_i | theta, omega_i) - log p(omega_i) for a member; for a non-member, whose data model does not
        meet theta, |omega_i|^2 / 2, which holds it at 0 (its start) and keeps the Hessian invertible.

        Two forms of one density (`scalar` static), equal up to a constant and rounding: the fit's steps
        differentiate twice the gathered form (`pair_product_moments(gathered=True)`, a Cholesky factor in loops,
        `bayesval.inference.linalg`, not LAPACK's, whose batched kernel stalled 50 parties' fits), whose derivatives
        compile in seconds; `scalar` is the Gibbs sampler's `marginal_log_likelihood`, on scalars, which
        the importance weights evaluate for every draw of every member: 3-4x faster under `vmap`
        (docs/benchmarks.md, "Cheaper rows")."""
        mean, cov, _ = self.data_model(omega)
        weights, noise_var = theta[:-1], jnp.exp(theta[-1])
        if scalar:
            likelihood = -marginal_log_likelihood(
                self.statistic, weights, noise_var, mean, cov, perturbed, count, noise_std
            )
        else:
            record_mean, record_cov = linear_regression_record_moments(weights, noise_var, mean, cov)
            t_mean, t_cov = pair_product_moments(record_mean, record_cov, *self.pairs, gathered=True)
            total = count * t_cov + noise_std**2 * jnp.eye(t_mean.shape[0])
            chol = cholesky(total, on_scalars=False)
            residual = solve_lower(chol, perturbed - count * t_mean, on_scalars=False)
            likelihood = jnp.sum(jnp.log(jnp.diagonal(chol))) + 0.5 * residual @ residual
        return jnp.where(member, likelihood + self.omega_prior(omega), 0.5 * omega @ omega)

    def value(self, theta, omegas, mask):
        parties = jax.vmap(self.party, in_axes=(None, 0, 0, 0, 0, 0))(theta, omegas, *self.data, mask)
        return self.theta_prior(theta) + parties.sum()

    def derivatives(self, theta, omegas, mask):
        """The gradient and the arrow Hessian's blocks: theta (T,), omegas (n, W); A (T, T), B (n, T, W) and
        D (n, W, W)."""
        hessians, gradients = self._members_derivatives(theta, omegas, self.data, mask)
        t = self.theta_dim
        a = jax.hessian(self.theta_prior)(theta) + hessians[:, :t, :t].sum(axis=0)
        g_theta = jax.grad(self.theta_prior)(theta) + gradients[:, :t].sum(axis=0)
        return g_theta, gradients[:, t:], a, hessians[:, :t, t:], hessians[:, t:, t:]

    def no_derivatives(self, num_parties: int) -> tuple:
        """Zeros in the shapes of `derivatives` (a loop's carry before it takes them)."""
        t, w = self.theta_dim, self.omega_dim
        return tuple(
            jnp.zeros(shape) for shape in ((t,), (num_parties, w), (t, t), (num_parties, t, w), (num_parties, w, w))
        )

    def _members_derivatives(self, theta, omegas, data, mask):
        """Each party's term's Hessian and gradient in (theta, omega_i): (n, T + W, T + W) and (n, T + W)."""
        gradient = jax.grad(self._joint_party)
        hessian_and_gradient = jax.jacfwd(lambda x, *rest: (gradient(x, *rest),) * 2, has_aux=True)
        stacked = jnp.concatenate([jnp.broadcast_to(theta, (omegas.shape[0], theta.shape[0])), omegas], axis=1)
        return jax.vmap(hessian_and_gradient)(stacked, *data, mask)

    def _joint_party(self, stacked, perturbed, count, noise_std, member):
        return self.party(stacked[: self.theta_dim], stacked[self.theta_dim :], perturbed, count, noise_std, member)

    def schur(self, derivatives, damping):
        """The Schur complement of the theta block of H + damping I, A - sum_i B_i D_i^-1 B_i^T (T, T) (with
        damping 0, the inverse of the theta marginal's covariance), and D_i^-1 B_i^T (n, W, T)."""
        _, _, a, b, d = derivatives
        d_inv_bt = jax.vmap(solve)(d + damping * jnp.eye(self.omega_dim), jnp.swapaxes(b, 1, 2))
        return a + damping * jnp.eye(self.theta_dim) - jnp.einsum("ntw,nws->ts", b, d_inv_bt), d_inv_bt

    def newton_step(self, derivatives, damping):
        """The Levenberg-Marquardt step (H + damping I)^-1 g by the Schur complement of the theta block."""
        g_theta, g_omega, _, b, d = derivatives
        d = d + damping * jnp.eye(self.omega_dim)
        schur, d_inv_bt = self.schur(derivatives, damping)
        d_inv_g = jax.vmap(solve)(d, g_omega)  # (n, W)
        step_theta = solve(schur, g_theta - jnp.einsum("ntw,nw->t", b, d_inv_g))
        step_omega = d_inv_g - jnp.einsum("nwt,t->nw", d_inv_bt, step_theta)
        largest = jnp.maximum(jnp.abs(step_theta).max(), jnp.abs(step_omega).max())
        shrink = jnp.minimum(1.0, MAX_STEP / largest)  # a step moves no coordinate further than MAX_STEP
        return shrink * step_theta, shrink * step_omega

    def start(self, mask, theta):
        """The steps' start: theta as given, a member's omega_i at its NIW posterior's mode given its
        own release taken as exact statistics, a non-member's at 0 (where its term holds it)."""
        d, to_matrix = self.num_features, self.statistic.to_matrix

        def omega(perturbed, party_count):
            moments = to_matrix(perturbed, party_count)
            posterior = niw_update(self.data_prior, moments[:d, d], moments[:d, :d], party_count)
            factor = cholesky(posterior.scale / (posterior.dof + d + 1))
            factor = factor - jnp.diag(jnp.diagonal(factor)) + jnp.diag(jnp.log(jnp.diagonal(factor)))
            return jnp.concatenate([posterior.mean, factor[self.tril]])

        omegas = jax.vmap(omega)(self.data.perturbed, self.data.counts)
        return theta, jnp.where(mask[:, None], omegas, 0.0)

    def release_start(self, mask):
        """theta at the mode of the NIG posterior of the members' releases taken as exact statistics (each projected
        to the PSD cone by `nig_update`): a start that the data place, where the prior's mode can be far off."""
        matrices = jax.vmap(self.statistic.to_matrix)(self.data.perturbed, self.data.counts)
        weight = mask.astype(matrices.dtype)
        posterior = nig_update(self.prior, jnp.tensordot(weight, matrices, 1), weight @ self.data.counts)
        return jnp.append(posterior.mean, jnp.log(posterior.scale / (posterior.shape + 1)))

    def fit(self, mask, theta_start) -> LaplaceFit:
        """The Laplace fit at the mode `mode` finds from its profiled start. From the data models' own releases' modes
        the steps settled, on 181 coalitions of 24 Syn parties, twice at modes 26 and 39 nats above the coalition's
        highest, whose surprises were 0.9 and 1.7 nats below the highest mode's, and once where the precision was not
        positive (docs/benchmarks.md, "Modes the data models made"). The profiled start is not always the better one: on
        716 coalitions of the same parties it reached a mode 13-53 nats above the plain start's on 7 of 14 to 20 members
        (docs/benchmarks.md, "A control without fits beyond 12 parties"), where
        `bayesval.inference.importance.joint_mode` keeps the lower of both. These fits are now the control of at most 12
        parties (`surprise_table`), where a control variate's error costs variance, not bias."""
        theta, _, _, cov, gradient, steps, _ = self.mode(mask, theta_start, True)
        return LaplaceFit(self.surprise(theta, cov), theta, cov, gradient, steps)

    def mode(self, mask, theta_start, profiled=False) -> JointMode:
        """Levenberg-Marquardt steps from `start` until the gradient is below GRADIENT_TOLERANCE, the damping has grown
        past MAX_DAMPING (no step lowers the potential) or MAX_STEPS were taken: the mode there, with the derivatives,
        the theta marginal's covariance, the largest gradient left (inf where the precision is not positive), the steps
        taken and the potential (`JointMode`).

        Where `profiled` (a bool that may be traced), PROFILE_STEPS Newton steps on the data models alone come first,
        theta held (the profiled start): given theta the members' terms are apart, so each block steps by its own
        D_i^-1 g_i, no coordinate further than MAX_STEP, and keeps a step only where it lowers its own term. Started at
        their own releases' modes (`start`), the data models can pull the joint steps into a basin where they explain
        the releases in theta's place; from their modes given theta, the steps follow theta (docs/importance.md, "When
        it falls back").

        One loop takes both kinds of step. Each turn first takes the derivatives where the last step moved the point
        (`_Step.stale`), then one step, or ends where the steps are done: the program holds one copy of the
        derivatives, the largest part of it, where a loop for each kind and the derivatives at the start held three
        (docs/benchmarks.md, "One copy of a fit's derivatives")."""
        terms = jax.vmap(self.party, in_axes=(None, 0, 0, 0, 0, 0))

        def gradient_size(derivatives):
            return jnp.maximum(jnp.abs(derivatives[0]).max(), jnp.abs(derivatives[1]).max())

        def profile_step(at: _Step) -> _Step:
            _, g_omega, _, _, d = at.derivatives
            move = jax.vmap(solve)(d, g_omega)
            move = move * jnp.minimum(1.0, MAX_STEP / jnp.abs(move).max(axis=1, keepdims=True))
            moved = at.omegas - move
            before, after = terms(at.theta, at.omegas, *self.data, mask), terms(at.theta, moved, *self.data, mask)
            lower = jnp.isfinite(after) & (after <= before) & jnp.isfinite(moved).all(axis=1) & mask
            value = self.theta_prior(at.theta) + jnp.where(lower, after, before).sum()
            omegas = jnp.where(lower[:, None], moved, at.omegas)
            return at._replace(omegas=omegas, value=value, stale=True, profile_left=at.profile_left - 1)

        def newton_step(at: _Step) -> _Step:
            step_theta, step_omega = self.newton_step(at.derivatives, at.damping)
            new_theta, new_omegas = at.theta - step_theta, at.omegas - step_omega
            new_value = self.value(new_theta, new_omegas, mask)
            better = jnp.isfinite(new_value) & (new_value <= at.value)
            return at._replace(
                theta=jnp.where(better, new_theta, at.theta),
                omegas=jnp.where(better, new_omegas, at.omegas),
                damping=jnp.where(better, at.damping / 4, at.damping * 4),
                value=jnp.where(better, new_value, at.value),
                stale=better,
                steps=at.steps + 1,
            )

        def finished(at: _Step) -> _Step:
            return at._replace(done=True)

        def turn(at: _Step) -> _Step:
            derivatives = jax.lax.cond(
                at.stale, lambda: self.derivatives(at.theta, at.omegas, mask), lambda: at.derivatives
            )
            at = at._replace(derivatives=derivatives, stale=False)
            going = (at.steps < MAX_STEPS) & (at.damping < MAX_DAMPING)
            going = going & (gradient_size(derivatives) > GRADIENT_TOLERANCE)
            kind = jnp.where(at.profile_left > 0, 0, jnp.where(going, 1, 2))
            return jax.lax.switch(kind, (profile_step, newton_step, finished), at)

        theta, omegas = self.start(mask, theta_start)
        first = _Step(
            theta,
            omegas,
            jnp.asarray(INITIAL_DAMPING),
            self.value(theta, omegas, mask),
            self.no_derivatives(omegas.shape[0]),
            jnp.asarray(True),
            jnp.asarray(0),
            jnp.where(profiled, PROFILE_STEPS, 0),
            jnp.asarray(False),
        )
        at = jax.lax.while_loop(lambda at: ~at.done, turn, first)
        factor = cholesky(self.schur(at.derivatives, 0.0)[0])  # NaN where the precision is not positive
        cov = cho_solve(factor, jnp.eye(self.theta_dim))
        cov = 0.5 * (cov + cov.T)
        gradient = jnp.where(jnp.isfinite(factor).all(), gradient_size(at.derivatives), jnp.inf)
        return JointMode(at.theta, at.omegas, at.derivatives, cov, gradient, at.steps, at.value)

    def surprise(self, mode, cov):
        """KL(N(mode, cov) || the NIG prior) over theta = (w, log sigma^2) (`gaussian_surprise`)."""
        return gaussian_surprise(self.prior, mode, cov)


def theta_prior_potential(prior: NIG, theta: jnp.ndarray) -> jnp.ndarray:
    """-log p(w, log sigma^2) at theta = (w, log sigma^2): the NIG prior and the Jacobian of log sigma^2."""
    return -(nig_log_density(prior, theta[:-1], jnp.exp(theta[-1])) + theta[-1])


def gaussian_surprise(prior: NIG, mode: jnp.ndarray, cov: jnp.ndarray) -> jnp.ndarray:
    """KL(N(mode, cov) || the NIG prior) over theta = (w, log sigma^2), in closed form (module docstring)."""
    dim = mode.shape[-1] - 1  # D, the length of w
    mean_w, mean_s = mode[:-1], mode[-1]
    cov_ww, cov_ws, var_s = cov[:-1, :-1], cov[:-1, -1], cov[-1, -1]
    constant = (
        prior.shape * jnp.log(prior.scale)
        - gammaln(prior.shape)
        - 0.5 * dim * jnp.log(2 * jnp.pi)
        + 0.5 * log_abs_det(prior.precision)
    )
    tilted = mean_w - cov_ws - prior.mean
    quadratic = tilted @ prior.precision @ tilted + jnp.trace(prior.precision @ cov_ww)
    expected_log_prior = (
        constant - (prior.shape + dim / 2) * mean_s - jnp.exp(-mean_s + var_s / 2) * (prior.scale + 0.5 * quadratic)
    )
    entropy = 0.5 * log_abs_det(2 * jnp.pi * jnp.e * cov)
    return -entropy - expected_log_prior
