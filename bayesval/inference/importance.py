"""Draws of noise-aware linear regression's coalition posteriors by importance sampling from each coalition's Laplace
fit, then resampled: no chains, no burn-in (docs/importance.md).

The draws follow what the Gibbs sampler's theta draws follow (`bayesval.inference.gibbs.kernel.step`): (theta,
omega) from the posterior with the statistics integrated out, o_i ~ N(c_i mu_t, c_i Sigma_t + sigma_z,i^2 I) for each
member i (the model NUTS samples, the density `bayesval.inference.laplace` fits, in its unconstrained coordinates
theta = (w, log sigma^2) and omega_i, each party's data model), then each member's exact statistic s_i from its
conditional given (theta, omega_i, o_i) (Sim et al. 2023, Algorithm 1, step 7) and theta from the conjugate NIG
conditional p(theta | s_C) (steps 15-16). At negligible noise s = o, and the draws follow the exact-statistics NIG
posterior; where noise dominates they follow the CLT-marginal posterior, as the Gibbs sampler's do.

* **theta** is drawn from a defensive mixture (Hesterberg 1995, Technometrics 37(2)) of a Gaussian N(m, S) and the
  same Gaussian widened `WIDE` times (a share `DEFENSIVE` of the draws): the wider component covers tails the
  Gaussian misses, and a weight is at most 1 / DEFENSIVE times what the wide component alone would give it. (m, S)
  start at the Laplace fit's theta marginal N(theta*, Sigma) and move `ADAPT_ROUNDS` times to the weighted draws'
  moments, widened `INFLATE` times (adaptive importance sampling; Cappe, Douc, Guillin, Marin & Robert 2008,
  Statist. Comput. 18(4)): at Syn's noise the posterior's mean lies up to 2 fitted standard deviations from the
  mode, where the fit alone left k-hat above 1. Where the fits found two modes (`joint_modes`), the proposal is a
  mixture of one such component about each, in shares set by their Laplace masses and then by their weights (mixture
  population Monte Carlo, the same paper).
* **omega_i given theta** is drawn K times (`inner_draw_count`: one per MEMBERS_PER_INNER_DRAW party slots of the
  row, at least INNER_DRAWS; RERUN_INNER times as many on each rerun) from a Gaussian linear in theta: first the
  fit's conditional N(omega_i* - D_i^-1 B_i^T (theta - theta*), D_i^-1) (the arrow Hessian's blocks), then the
  weighted draws' regression of omega_i on theta, its spread widened OMEGA_INFLATE times. Each party's data model
  meets theta and nothing else, so the average of the K inner weights is an unbiased estimate of L_i(theta) =
  int p(o_i | theta, omega_i) p(omega_i) d omega_i, and theta's weight p(theta) prod_i L_i(theta) / g(theta) stays
  a weight of a 4-dimensional proposal however many members the coalition has (the weights of the pairs are those
  of importance sampling on the extended space, so the resampled pairs follow the posterior; Andrieu & Roberts
  2009, Ann. Statist. 37(2)).
* The weights are Pareto-smoothed (`bayesval.inference.psis`); k-hat says whether they can be trusted (a coalition
  over the threshold is sampled by MCMC instead: `bayesval.parties.importance`). Then `num_draws` pairs are drawn by
  systematic resampling (Douc, Cappe & Moulines 2005), each member's data model among its K by its inner weight, and
  each pair gets its own statistics and conjugate theta draw, so copies of one pair give distinct draws.
"""

from __future__ import annotations

import math
from functools import partial
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.special import logsumexp

from bayesval.compilation import Program, sampler_jit
from bayesval.inference.conjugate import NIG, NIW, nig_update, sample_nig
from bayesval.inference.data import NoiseAwareData
from bayesval.inference.gibbs.kernel import sample_latent_statistic
from bayesval.inference.laplace import CONVERGED, JointMode, coalition_terms, prior_start
from bayesval.inference.linalg import cholesky, inverse, solve, solve_lower
from bayesval.inference.psis import pareto_smoothed
from bayesval.statistics import LinearRegressionStatistic

WIDE = 2.0  # the defensive component's scale, in the proposal's standard deviations
DEFENSIVE = 0.2  # the share of theta draws from the defensive component
INNER_DRAWS = 4  # the fewest draws of each member's data model per theta draw
# Party slots of a row per draw of each member's data model (`inner_draw_count`). A member's likelihood is the mean
# of K inner weights, so the log of theta's weight carries the noise of m members' estimates, of variance about
# m v / K (v: one inner weight's relative variance), and the effective draws fall as m / K grows. At 24 parties and
# K = 4, rows of 8, 16 and 23 members held a median 594, 303 and 203 effective draws of 2,048 and fell below the 400
# that draws them again (docs/benchmarks.md, "Inner draws by width"). With the data models' proposal widened
# OMEGA_INFLATE = 1.1 times, v is 0.13-0.14 at 22 of 24 and 45 of 50 parties' members (0.32-0.33 at 1.2), so one
# draw per 3 slots leaves m v / K below what one per 1.5 left at 1.2: at 45 of 50 parties' members K = 18 held a
# median 970 effective draws of 2,048 against 850 at K = 34, for 0.63 times the row's cost (docs/benchmarks.md,
# "Fewer inner draws from a closer data-model proposal")
MEMBERS_PER_INNER_DRAW = 3.0
# Draws a row evaluates at once (`lax.map` in chunks): at 2,048 draws of 24 parties a weight's intermediates (draws x
# inner draws x parties x the data model's coordinates) are megabytes each and left the cache; in chunks of 256 the
# weights of a row ran 2.7x faster on one core, the conjugate draws 2x (docs/benchmarks.md, "Cheaper rows")
CHUNK = 256
# A rerun's inner draws over the attempt's before: the weights of the hard coalitions of 12 parties held 1.6-4 times
# the effective draws at 16 as at 4 (the noise of each member's estimated likelihood, multiplied over the members, was
# most of their spread), at about 3 times the cost of a row (docs/importance.md, "When it draws again")
RERUN_INNER = 4
# Times the proposal moves to the moments of its weighted draws before the last draws. On the six coalitions of
# benchmarks/bench_reference.py, two moves left the surprise of {1, 2, 3, 4} 5-6 of its errors above NUTS's; four,
# with Bessel's correction in `_moved`, brought every coalition within about two (docs/benchmarks.md, "Four adapting
# rounds, taken"). Keeping the third and fourth rounds' draws as well (weighted as the deterministic mixture of the
# rounds' proposals) brought back half the offset, and so did four moves from rounds of half the draws
ADAPT_ROUNDS = 4
ADAPT_SHARE = 4  # a round of `adapted_draws` draws a quarter of the row's draws
# A profiled fit replaces the plain one where its potential is lower by more than this (nats): two fits that reach
# one mode agree far closer (a potential is within about g^2 / 2h of its mode's at the fits' gradient of 1e-6), and
# the plain fit's mode is then kept as it was
MODE_MARGIN = 1e-6
# A second converged fit joins the proposal as a component of its own where its theta lies more than SEPARATE_MODE
# of the first's standard deviations from the first's (Mahalanobis) and its Laplace mass is within MODE_RANGE nats
# of the first's (e^-8 of it beyond). Of the 873 coalitions a 24-party valuation drew, 69 had a second converged fit,
# 44 of them within 8 nats of the first's potential and 27 within 2, the first two weights' signs flipped; drawn
# about the first mode alone, six of them came out 0.36-0.59 nats high, four trusted and three sent to the chains,
# which did not mix between the modes either (docs/benchmarks.md, "Two modes of one coalition")
SEPARATE_MODE = 3.0
MODE_RANGE = 8.0
MIN_SHARE = 0.1  # the least share of a row's theta draws a mode's component keeps, however light its mass
INFLATE = 1.2  # the moved theta proposal's standard deviations over its weighted draws' (heavier tails than the target)
# The moved data models' conditional standard deviations over the weighted draws'. Each member's K inner weights
# estimate its likelihood only where their variance is finite: at the adapted proposal of rows of 11 of 12, 22 of 24
# and 45 of 50 parties' members, 4,000 inner draws at each of 8 theta draws gave each member's inner weights a Pareto
# k-hat of at most 0.46 at 1.1 (finite variance below 0.5), up to 0.79-1.03 at 1.0 and below 0.2 at 1.2, whose
# wider spread costs twice the inner draws (`MEMBERS_PER_INNER_DRAW`)
OMEGA_INFLATE = 1.1


class ImportanceDraws(NamedTuple):
    """Resampled draws of a batch of rows (coalition, repeat): theta = (w, sigma^2) (B, S, D + 1), the Pareto k-hat
    of each row's weights (B,), their effective sample size (B,: 1 / the sum of squared normalised smoothed
    weights), whether the row's Laplace fit converged (B,: a gradient at most
    `bayesval.inference.laplace.CONVERGED`) and how unevenly its estimated likelihoods are noisy over theta (B,: the
    weighted standard deviation of `likelihood_noise` over the draws)."""

    draws: np.ndarray
    k_hat: np.ndarray
    ess: np.ndarray
    converged: np.ndarray
    noise_spread: np.ndarray


def importance_draws(
    keys: jax.Array,
    data: NoiseAwareData,
    masks: np.ndarray,
    prior: NIG,
    data_prior: NIW,
    statistic: LinearRegressionStatistic,
    num_draws: int,
    attempt: int = 0,
) -> ImportanceDraws:
    """`num_draws` resampled draws of each row's coalition posterior, from as many weighted ones: a key (B,) a row,
    the coalitions `masks` (B, n) and each row's releases (`NoiseAwareData.per_row`, perturbed (B, n, P)), under the
    NIG prior and each party's NIW data model, each member's data model drawn `inner_draw_count(n, attempt)` times per
    theta (`attempt`: 0 the first, then the reruns). A row is two compiled programs, its fit
    (`joint_modes`) and its draws (vectorised), and rows are drawn one after another: a batch of rows would compile a
    program per batch size, and under `vmap` each fit would run as many steps as the slowest."""
    if num_draws % 2 or num_draws < 20:
        raise ValueError(f"num_draws must be even and at least 20, got {num_draws}")
    masks = np.asarray(masks, bool)
    draws_a_member = inner_draw_count(masks.shape[1], attempt)
    parts = [np.asarray(part) for part in data]
    rows, modes = [], {}  # a coalition's repeats share its fit: a deterministic function of its mask and releases
    for row in range(len(masks)):
        row_data = NoiseAwareData(*(part[row] for part in parts))
        coalition = masks[row].tobytes() + row_data.perturbed.tobytes()
        if coalition not in modes:
            found = joint_modes(row_data, masks[row], prior, data_prior, statistic)
            modes[coalition] = jax.tree.map(lambda *parts: jnp.stack(parts), *found)
        rows.append(
            _row_draws(
                keys[row],
                row_data,
                masks[row],
                prior,
                data_prior,
                statistic,
                modes[coalition],
                num_draws,
                draws_a_member,
            )
        )
    return ImportanceDraws(*(np.stack([np.asarray(part) for part in parts]) for parts in zip(*rows)))


def importance_programs(
    key: jax.Array,
    data: NoiseAwareData,
    mask: np.ndarray,
    prior: NIG,
    data_prior: NIW,
    statistic: LinearRegressionStatistic,
    num_draws: int,
    attempt: int = 0,
) -> list[Program]:
    """The compiled programs `importance_draws` calls for rows of this one's shape (a key, its releases packed as
    `NoiseAwareData` of one row, its mask (n,)) on `attempt`, as `bayesval.compilation.Program`s: the fit
    (`joint_modes`' `_mode` and `_release_start`) and the draws of a row about one mode (`_row_draws`), so that a
    caller can compile them while other rows are drawn (docs/architecture.md, "Programs compiled ahead"). A row whose
    fits find two modes calls a draws program of its own, compiled when it comes."""
    start = prior_start(prior)
    fit = (data, mask, prior, data_prior, statistic, start, False)
    stacked = lambda part: jax.ShapeDtypeStruct((1,) + part.shape, part.dtype, weak_type=part.weak_type)  # noqa: E731
    one_mode = jax.tree.map(stacked, _mode.trace(*fit).out_info)  # as `importance_draws` stacks one fit
    layout = (data, mask, prior, data_prior, statistic)
    return [
        Program(_mode, fit),
        Program(_release_start, layout),
        Program(_row_draws, (key, *layout, one_mode, num_draws, inner_draw_count(mask.shape[0], attempt))),
    ]


def inner_draw_count(width: int, attempt: int = 0) -> int:
    """The draws of each member's data model per theta draw in a row of `width` party slots, on `attempt` (0 the
    first, then the reruns): one per MEMBERS_PER_INNER_DRAW slots, rounded up to even, at least INNER_DRAWS, and
    RERUN_INNER times as many on each rerun. A program serves one width, so its members (at most `width`) set it."""
    first = max(INNER_DRAWS, 2 * math.ceil(width / (2 * MEMBERS_PER_INNER_DRAW)))
    return first * RERUN_INNER**attempt


def joint_mode(data: NoiseAwareData, mask: np.ndarray, prior: NIG, data_prior: NIW, statistic) -> JointMode:
    """A coalition's joint mode, the first of `joint_modes`."""
    return joint_modes(data, mask, prior, data_prior, statistic)[0]


def joint_modes(data: NoiseAwareData, mask: np.ndarray, prior: NIG, data_prior: NIW, statistic) -> list[JointMode]:
    """A coalition's joint modes (`mask` (n,) of the parties of `data`), its highest first, from three fits: two from
    the prior's mode of theta, one with each member's data model at its own release's mode (`_Terms.start`) and one
    with the data models at their modes given theta (the profiled start of `_Terms.mode`, where the surrogate's fits
    start), and one from the mode of the NIG posterior of the members' releases taken as exact statistics
    (`_Terms.release_start`). The first mode is the plain fit's unless the profiled one converged lower by more than
    MODE_MARGIN (so a coalition whose fits meet keeps the draws it had before the second fit existed), and the
    release fit's where neither converged. From the releases' data models the steps can settle where the data
    models explain the releases in theta's place: on 181 coalitions of 24 Syn parties, two fits did (their modes 26
    and 39 nats above the coalition's highest, the weights' k-hat 1.4-3.1, 3-10 effective draws, the surprise 4-6
    nats high) and a third stopped where the precision was not positive; from the profiled start each reached the
    highest mode, k-hat 0.03-0.20 (docs/benchmarks.md, "Modes the data models made"). The steps from the prior's mode
    can also run down a ridge (at 12 parties 14 of 4,095 fits failed from there; every one converged from the
    releases' start). And the posterior can have two modes of comparable mass (the weights' signs flipped): a
    converged fit more than SEPARATE_MODE of the first mode's standard deviations away, whose Laplace mass
    (`log_mass`) is within MODE_RANGE nats of the first's, is the second mode (the heaviest such fit), and the
    row's proposal draws about both (docs/importance.md, "Two modes of one coalition"). Every fit is one compiled
    program, given its start."""
    start = prior_start(prior)
    plain = _mode(data, mask, prior, data_prior, statistic, start, False)
    profiled = _mode(data, mask, prior, data_prior, statistic, start, True)
    release_start = _release_start(data, mask, prior, data_prior, statistic)
    release = _mode(data, mask, prior, data_prior, statistic, release_start, False)
    mode = plain
    if profiled.gradient <= CONVERGED and not profiled.potential >= mode.potential - MODE_MARGIN:
        mode = profiled
    if not mode.gradient <= CONVERGED:
        mode = release
    lightest = float(log_mass(mode)) - MODE_RANGE
    others = [
        fit
        for fit in (plain, profiled, release)
        if fit.gradient <= CONVERGED and _separation(fit, mode) > SEPARATE_MODE and float(log_mass(fit)) > lightest
    ]
    return [mode] + ([max(others, key=lambda fit: float(log_mass(fit)))] if others else [])


@jax.jit
def log_mass(mode: JointMode):
    """The log of the Laplace approximation to the posterior mass about `mode`, up to the constant a coalition's
    modes share: -U* + log det(Sigma_theta) / 2 - sum_i log det(D_i) / 2, the arrow Hessian's determinant being
    det(D) det(Sigma_theta^-1) (its Schur complement)."""
    d_blocks = mode.derivatives[4]
    log_det_d = jnp.sum(jax.vmap(lambda d: jnp.sum(jnp.log(jnp.diagonal(cholesky(d)))))(d_blocks))
    return -mode.potential + jnp.sum(jnp.log(jnp.diagonal(cholesky(mode.cov)))) - log_det_d


def _separation(fit: JointMode, mode: JointMode) -> float:
    """How far `fit`'s theta lies from `mode`'s, in `mode`'s theta standard deviations (Mahalanobis)."""
    offset = np.asarray(fit.theta) - np.asarray(mode.theta)
    return float(np.sqrt(offset @ np.linalg.solve(np.asarray(mode.cov), offset)))


@sampler_jit(static_argnames=("statistic",))
def _mode(data, mask, prior, data_prior, statistic, theta_start, profiled) -> JointMode:
    return coalition_terms(data, prior, data_prior, statistic).mode(mask, theta_start, profiled)


@partial(jax.jit, static_argnames=("statistic",))
def _release_start(data, mask, prior, data_prior, statistic):
    return coalition_terms(data, prior, data_prior, statistic).release_start(mask)


class _Proposal(NamedTuple):
    """A proposal of a row: theta ~ the defensive mixture around `centre` with Cholesky factor `chol` (T, T); each
    data model given theta ~ N(omega_centre_i + slope_i (theta - centre), omega_chol_i omega_chol_i^T), with
    omega_centre (n, W), slope (n, W, T) and omega_chol (n, W, W)."""

    centre: jnp.ndarray
    chol: jnp.ndarray
    omega_centre: jnp.ndarray
    slope: jnp.ndarray
    omega_chol: jnp.ndarray


class _Mixture(NamedTuple):
    """A row's proposal: a `_Proposal` for each mode of its posterior (`components`, every field with a leading
    axis (M, ...)) and the log share of theta's draws each one proposes (M,)."""

    components: _Proposal
    log_shares: jnp.ndarray

    def component(self, index) -> _Proposal:
        return jax.tree.map(lambda part: part[index], self.components)


class _Weighted(NamedTuple):
    """A row's weighted draws: theta (S, T), the mode's component that proposed each (S,), the standard normal draws
    behind each member's data models (S, K, n, W), their log inner weights (S, K, n) and theta's log weights
    (S,)."""

    thetas: jnp.ndarray
    components: jnp.ndarray
    white: jnp.ndarray
    log_inner: jnp.ndarray
    log_weights: jnp.ndarray


@sampler_jit(static_argnames=("statistic", "num_draws", "inner_draws"))
def _row_draws(key, data, mask, prior, data_prior, statistic, modes: JointMode, num_draws: int, inner_draws: int):
    """(resampled draws (S, D + 1), k-hat, ESS, converged, the weighted spread of `likelihood_noise`) of one
    coalition from its joint modes (`JointMode`, each field stacked (M, ...), the highest first): the Laplace fits'
    proposal, moved ADAPT_ROUNDS times to the moments of its weighted draws, then the draws (`adapted_draws`: one
    compiled copy of a round for both)."""
    terms = coalition_terms(data, prior, data_prior, statistic)
    key_rounds, key_resample, key_inner, key_conjugate = jax.random.split(key, 4)
    proposal, weighted = adapted_draws(key_rounds, terms, mask, modes, num_draws, inner_draws)
    smoothed, k_hat = pareto_smoothed(weighted.log_weights)
    normalised = jax.nn.softmax(smoothed)
    chosen = _systematic(key_resample, normalised)
    members = jax.random.categorical(key_inner, weighted.log_inner[chosen], axis=1)  # (S, n): one of K each
    white = jnp.take_along_axis(weighted.white[chosen], members[:, None, :, None], axis=1)[:, 0]  # (S, n, W)
    thetas, components = weighted.thetas[chosen], weighted.components[chosen]
    keys = jax.random.split(key_conjugate, num_draws)

    def conjugate(row):
        row_key, theta, row_white, component = row
        return _conjugate_draw(row_key, terms, mask, proposal.component(component), theta, row_white)

    draws = jax.lax.map(conjugate, (keys, thetas, white, components), batch_size=CHUNK)
    noise = likelihood_noise(weighted.log_inner)
    noise_spread = jnp.sqrt(normalised @ (noise - normalised @ noise) ** 2)
    return draws, k_hat, 1.0 / jnp.sum(normalised**2), modes.gradient[0] <= CONVERGED, noise_spread


def _round_draws(num_draws: int) -> int:
    """The weighted draws of a round of `adapted_draws` for a row of `num_draws` draws: a 1 / ADAPT_SHARE of
    them, at least 20."""
    return max(-(-num_draws // ADAPT_SHARE), 20)


def adapted_draws(key, terms, mask, modes: JointMode, num_draws: int, inner_draws: int):
    """(the last proposal, `num_draws` weighted draws from it) of a row, in rounds of `_round_draws(num_draws)`
    weighted draws, each from its own key, scanned (`lax.scan`: the members' likelihoods, the program's bulk, are
    one compiled copy): the first ADAPT_ROUNDS move the proposal, from the Laplace fits' of `modes` (stacked
    (M, ...)), to the moments of their weighted draws; the rounds after them keep it, and their draws, the first
    `num_draws` of them, are the row's."""
    size = _round_draws(num_draws)
    rounds = ADAPT_ROUNDS + -(-num_draws // size)

    def round_(proposal, step):
        index, round_key = step
        weighted = _weighted(round_key, terms, mask, proposal, size, inner_draws)
        # branches made here, not `_moments` itself: JAX keeps a module-level branch's traced form between programs
        moved = lambda: _moments(weighted, proposal, mask)  # noqa: E731
        return jax.lax.cond(index < ADAPT_ROUNDS, moved, lambda: proposal), weighted

    start = _laplace_proposal(terms, modes)
    proposal, weighted = jax.lax.scan(round_, start, (jnp.arange(rounds), jax.random.split(key, rounds)))
    return proposal, jax.tree.map(lambda a: a[ADAPT_ROUNDS:].reshape((-1,) + a.shape[2:])[:num_draws], weighted)


def likelihood_noise(log_inner):
    """The variance of log L-hat(theta) = sum_i log mean_k w_ik, the log of theta's estimated likelihood, at each
    theta draw (S,), from its log inner weights (S, K, n) (a non-member's are 0): by the delta method each member's
    log-mean has variance Var_k(w_ik) / (K E_k[w_ik]^2), estimated from its K weights. The weights of the pairs
    target the posterior whatever this is (Andrieu & Roberts 2009), but where it is uneven over theta, a finite
    sample under-represents the noisier thetas (a log-normal factor of variance v has mean 1 and median e^(-v/2), so
    its mass sits in rare large weights), the draws come out tilted away from them, and neither k-hat nor the
    effective draws see it (docs/importance.md, "When it draws again")."""
    inner_draws = log_inner.shape[1]
    log_mean = logsumexp(log_inner, axis=1) - jnp.log(inner_draws)
    log_second = logsumexp(2 * log_inner, axis=1) - jnp.log(inner_draws)
    spread = jnp.expm1(jnp.maximum(log_second - 2 * log_mean, 0.0))  # E[w^2] / E[w]^2 - 1 >= 0
    return jnp.sum(jnp.where(jnp.isfinite(log_mean), spread, 0.0), axis=1) / (inner_draws - 1)


def _systematic(key, normalised, num_draws: int | None = None):
    """Systematic resampling: the indices of `num_draws` draws (as many as the weights `normalised` (S,) where None),
    each index i taken about num_draws w_i times (its copies adjacent)."""
    size = normalised.shape[0]
    num_draws = size if num_draws is None else num_draws
    points = (jax.random.uniform(key) + jnp.arange(num_draws)) / num_draws
    return jnp.minimum(jnp.searchsorted(jnp.cumsum(normalised), points), size - 1)


def _laplace_proposal(terms, modes) -> _Mixture:
    """The Laplace fits' Gaussians, one a mode (`modes` stacked (M, ...)): theta ~ N(theta*, Sigma), omega_i | theta
    ~ N(omega_i* - D_i^-1 B_i^T (theta - theta*), D_i^-1) (the arrow Hessian's blocks), each mode's share of the
    draws its Laplace mass's (`log_mass`), at least MIN_SHARE."""

    def component(mode):
        _, d_inv_bt = terms.schur(mode.derivatives, 0.0)
        omega_chol = jax.vmap(lambda d: cholesky(inverse(d)))(mode.derivatives[4])
        return _Proposal(mode.theta, cholesky(mode.cov), mode.omegas, -d_inv_bt, omega_chol)

    num_modes = modes.theta.shape[0]
    if num_modes == 1:
        only = component(jax.tree.map(lambda part: part[0], modes))
        return _Mixture(jax.tree.map(lambda part: part[None], only), jnp.zeros(1))
    masses = jax.nn.softmax(jax.vmap(log_mass)(modes))
    return _Mixture(jax.vmap(component)(modes), _floored(jnp.where(jnp.isfinite(masses), masses, 1.0 / num_modes)))


def _floored(shares):
    """The log of `shares` (M,) raised to MIN_SHARE at least and normalised."""
    shares = jnp.maximum(shares / jnp.sum(shares), MIN_SHARE)
    return jnp.log(shares / jnp.sum(shares))


def _moments(weighted: _Weighted, mixture: _Mixture, mask) -> _Mixture:
    """The proposal moved to the weighted draws (Pareto-smoothed theta weights): each mode's component to the
    moments of theta and of each member's (theta, omega_i) (a member's K data models weighted by their inner
    weights) over the draws it is responsible for (theta's weight times the component's share of the proposal's
    density there; mixture population Monte Carlo, Cappe et al. 2008), its covariances widened by INFLATE^2, and its
    share of the draws to its share of the weight, at least MIN_SHARE; a non-member's conditional is kept, a
    component with less than MIN_SHARE / 2 of the weight stays where it was, and where no draw has a weight (every
    log weight -inf: the masses are not numbers) the whole mixture stays as it was."""
    smoothed, _ = pareto_smoothed(weighted.log_weights)
    theta_weights = jax.nn.softmax(smoothed)  # (S,)
    inner_weights = jax.nn.softmax(weighted.log_inner, axis=1)  # (S, K, n)
    omegas = jax.vmap(lambda theta, white, c: _data_models(mixture.component(c), theta, white))(
        weighted.thetas, weighted.white, weighted.components
    )
    if mixture.log_shares.shape[0] == 1:
        moved = _moved(mixture.component(0), weighted.thetas, omegas, theta_weights, inner_weights, mask)
        return _Mixture(jax.tree.map(lambda part: part[None], moved), mixture.log_shares)
    densities = _log_densities(weighted.thetas, mixture, _fractions(mixture.log_shares, weighted.thetas.shape[0]))
    responsible = jax.nn.softmax(logsumexp(densities, axis=1), axis=0)  # (M, S)
    masses = responsible @ theta_weights  # (M,)

    def move(index, mass):
        old = mixture.component(index)
        weights = responsible[index] * theta_weights / mass
        moved = _moved(old, weighted.thetas, omegas, weights, inner_weights, mask)
        return jax.tree.map(lambda new, before: jnp.where(mass >= MIN_SHARE / 2, new, before), moved, old)

    components = jax.vmap(move)(jnp.arange(masses.shape[0]), masses)
    return _Mixture(components, jnp.where(jnp.isfinite(masses).all(), _floored(masses), mixture.log_shares))


def _moved(proposal: _Proposal, thetas, omegas, theta_weights, inner_weights, mask) -> _Proposal:
    """One component moved to the moments of the draws `thetas` (S, T) and their data models `omegas` (S, K, n, W)
    under `theta_weights` (S,, summing to 1) and `inner_weights` (S, K, n, each member's summing to 1 over K), its
    covariances widened by INFLATE^2; a non-member's conditional, and the whole component where a moment is not
    finite, kept. A member's spread about its mean at one theta is read from its K draws there, whose weighted
    spread is about (K - 1) / K of the conditional's, so it is taken K / (K - 1) times (Bessel's correction):
    without it the data models' proposal came out narrower than their conditional at every move (its variance by a
    quarter at K = 4)."""
    num_inner = omegas.shape[1]
    means = jnp.einsum("skn,sknw->snw", inner_weights, omegas)[:, None]
    omegas = means + math.sqrt(num_inner / (num_inner - 1)) * (omegas - means)
    joint = theta_weights[:, None, None] * inner_weights  # (S, K, n)
    centre = theta_weights @ thetas
    offsets = thetas - centre
    theta_cov = (offsets * theta_weights[:, None]).T @ offsets + 1e-9 * jnp.eye(centre.shape[0])
    omega_centre = jnp.einsum("skn,sknw->nw", joint, omegas)
    omega_offsets = omegas - omega_centre
    cross = jnp.einsum("skn,sknw,st->nwt", joint, omega_offsets, offsets)  # Cov(omega_i, theta) (n, W, T)
    omega_cov = jnp.einsum("skn,sknv,sknw->nvw", joint, omega_offsets, omega_offsets)
    slope = jax.vmap(lambda c: solve(theta_cov, c.T).T)(cross)  # (n, W, T)
    conditional = omega_cov - jnp.einsum("nwt,nvt->nwv", slope, cross)
    conditional = 0.5 * (conditional + jnp.swapaxes(conditional, 1, 2)) + 1e-9 * jnp.eye(omega_cov.shape[-1])
    omega_chol = OMEGA_INFLATE * jax.vmap(cholesky)(conditional)
    member = mask[:, None]
    moved = _Proposal(
        centre,
        INFLATE * cholesky(theta_cov),
        jnp.where(member, omega_centre, proposal.omega_centre),
        jnp.where(member[..., None], slope, proposal.slope),
        jnp.where(member[..., None], omega_chol, proposal.omega_chol),
    )
    usable = jax.tree.reduce(lambda a, b: a & b, jax.tree.map(lambda a: jnp.isfinite(a).all(), moved))
    return jax.tree.map(lambda new, old: jnp.where(usable, new, old), moved, proposal)


def _data_models(proposal: _Proposal, theta, white):
    """Data models omega_i = omega_centre_i + slope_i (theta - centre) + L_i z from standard normal z (..., n, W)."""
    centre = proposal.omega_centre + proposal.slope @ (theta - proposal.centre)
    return centre + jnp.einsum("nvw,...nw->...nv", proposal.omega_chol, white)


def _weighted(key, terms, mask, mixture: _Mixture, num_draws: int, inner_draws: int) -> _Weighted:
    """theta from the defensive mixture of each mode's component, K data models per member from the conditional of
    the component that drew its theta, and the weights."""
    key_theta, key_omega = jax.random.split(key)
    num_modes = mixture.log_shares.shape[0]
    components, scales = _allocation(mixture.log_shares, num_draws)
    normal = jax.random.normal(key_theta, (num_draws, terms.theta_dim))
    if num_modes == 1:
        chol = mixture.components.chol[0]
        thetas = mixture.components.centre[0] + scales[:, None] * (normal @ chol.T)
        parts = [_log_gaussian(thetas, mixture.components.centre[0], chol, scale) for scale in (1.0, WIDE)]
        log_proposal = jnp.logaddexp(jnp.log1p(-DEFENSIVE) + parts[0], jnp.log(DEFENSIVE) + parts[1])
    else:
        chols = mixture.components.chol[components]
        thetas = mixture.components.centre[components] + scales[:, None] * jnp.einsum("st,sut->su", normal, chols)
        densities = _log_densities(thetas, mixture, _fractions(mixture.log_shares, num_draws))
        log_proposal = logsumexp(densities, axis=(0, 1))
    num_parties, width = mixture.components.omega_centre.shape[1:]
    white = jax.random.normal(key_omega, (num_draws, inner_draws, num_parties, width))

    def inner(draw):
        theta, draw_white, component = draw
        return log_inner_weights(terms, mask, mixture.component(component), theta, draw_white)

    log_inner = jax.lax.map(inner, (thetas, white, components), batch_size=CHUNK)
    log_likelihood = jnp.sum(logsumexp(log_inner, axis=1) - jnp.log(inner_draws), axis=1)
    log_weights = -jax.vmap(terms.theta_prior)(thetas) + log_likelihood - log_proposal
    return _Weighted(thetas, components, white, log_inner, jnp.where(jnp.isfinite(log_weights), log_weights, -jnp.inf))


def _allocation(log_shares, num_draws: int):
    """Which mode's component draws each of `num_draws` thetas, and at which scale (1, or WIDE for the defensive
    share DEFENSIVE of them, the last draws): within each scale, the components in turn, as many draws each as
    its share (`log_shares` (M,)) of them, rounded (stratified; the weights take the proposal's density as the
    mixture of the draws' actual fractions, `_fractions`, so they stay those of a deterministic mixture: Owen &
    Zhou 2000, JASA 95(449))."""
    index = jnp.arange(num_draws)
    narrow = round((1 - DEFENSIVE) * num_draws)
    wide = index >= narrow
    position = jnp.where(wide, (index - narrow + 0.5) / (num_draws - narrow), (index + 0.5) / narrow)
    bounds = jnp.cumsum(jnp.exp(log_shares))
    components = jnp.minimum(jnp.searchsorted(bounds, position), log_shares.shape[0] - 1)
    return components, jnp.where(wide, WIDE, 1.0)


def _fractions(log_shares, num_draws: int):
    """The fraction of `num_draws` thetas each mode's component draws at each scale (M, 2: 1 and WIDE)."""
    components, scales = _allocation(log_shares, num_draws)
    by_mode = components[:, None] == jnp.arange(log_shares.shape[0])
    by_scale = jnp.stack([scales == 1.0, scales == WIDE], axis=1)
    return jnp.mean(by_mode[:, :, None] & by_scale[:, None, :], axis=0)


def _log_densities(thetas, mixture: _Mixture, fractions):
    """log of fraction_js N(theta; centre_j, s^2 Sigma_j) (M, 2, S) for each draw of `thetas` (S, T), each mode's
    component j and scale s (1, WIDE), up to the constant every term shares."""

    def mode(centre, chol, fraction):
        log_det = jnp.sum(jnp.log(jnp.diagonal(chol)))
        return jnp.stack(
            [
                jnp.log(share) + _log_gaussian(thetas, centre, chol, scale) - log_det
                for share, scale in zip((fraction[0], fraction[1]), (1.0, WIDE))
            ]
        )

    return jax.vmap(mode)(mixture.components.centre, mixture.components.chol, fractions)


def log_inner_weights(terms, mask, proposal: _Proposal, theta, white):
    """log inner weights (K, n) of one theta (T,): each member's K data models omega_ik = `_data_models(proposal,
    theta, white)` (white (K, n, W) standard normal) weighted by p(o_i | theta, omega_ik) p(omega_ik) over their
    proposal's density; a non-member's are 0. Their mean over k estimates member i's likelihood L_i(theta)."""
    omegas = _data_models(proposal, theta, white)
    log_det = jnp.sum(jnp.log(jnp.diagonal(proposal.omega_chol, axis1=1, axis2=2)), axis=1)  # (n,)
    log_conditional = -0.5 * jnp.sum(white**2, axis=-1) - log_det

    def party(omega, perturbed, count, noise_std):
        return -terms.party(theta, omega, perturbed, count, noise_std, True, scalar=True)

    joint = jax.vmap(lambda row: jax.vmap(party)(row, *terms.data))(omegas)
    return jnp.where(mask, joint - log_conditional, 0.0)


def _log_gaussian(points, centre, chol, scale):
    """log N(points; centre, scale^2 chol chol^T) of each row of points, up to the constant every scale shares."""
    white = solve_lower(chol, (points - centre).T).T / scale
    return -0.5 * jnp.sum(white**2, axis=1) - centre.shape[0] * jnp.log(scale)


def _conjugate_draw(key, terms, mask, proposal: _Proposal, theta, white):
    """One draw of theta = (w, sigma^2) from p(theta | s_C), with each member's s_i drawn from its conditional given
    the resampled (theta, omega_i) and its release (Algorithm 1, steps 7 and 15-16)."""
    omegas = _data_models(proposal, theta, white)
    weights, noise_var = theta[:-1], jnp.exp(theta[-1])
    key_statistics, key_theta = jax.random.split(key)

    def statistic(k, omega, perturbed, count, noise_std):
        mean, cov, _ = terms.data_model(omega)
        return sample_latent_statistic(k, terms.statistic, (weights, noise_var, mean, cov), perturbed, count, noise_std)

    keys = jax.random.split(key_statistics, omegas.shape[0])
    statistics = jax.vmap(statistic)(keys, omegas, *terms.data)
    matrices = jax.vmap(terms.statistic.to_matrix)(statistics, terms.data.counts)
    weight = mask.astype(matrices.dtype)
    conditional = nig_update(terms.prior, jnp.tensordot(weight, matrices, 1), weight @ terms.data.counts)
    w, v = sample_nig(key_theta, conditional)
    return jnp.append(w, v)
