"""Semivalues from differentially private gradients, with correlated noise (Zhou et al. 2024, arXiv:2412.17008).

The game (Sec. 4, the G-Shapley framework of Ghorbani & Zou 2019): for each of k uniform permutations a fresh
model takes one clipped gradient step per party in permutation order, and party j's marginal contribution is the
change of the utility V (negated test loss, or test accuracy) over its own step. The estimate is the running mean of
p(r) m_j over permutations (Eq. 2) with the importance weight p(r) = C(n-1, r-1) w(r), r = j's position + 1, in the
normalisation of Eq. 1, which makes E_pi[p m] = phi for any semivalue and E_pi[p] = 1 (the paper's printed forms of
p disagree; docs/gradients.md, "Where we depart from the paper").

Privacy (Sec. 3.2 and 4): each party releases its clipped gradient (per example clipped to C and summed, so one
example moves it by at most C) with Gaussian noise once per permutation, k releases in all, the multiplier
calibrated by dp-accounting for k compositions at (epsilon, delta). What the step uses is a post-processing of the
party's releases so far (Algorithm 1, with the buffer kept as the raw running mean that Sec. 5.2 describes;
docs/gradients.md, "Where we depart from the paper"):

* 'iid': the fresh noisy gradient g~_t (the baseline; Prop. 5.1, variance Omega(k)).
* 'correlated': X* (Eq. 4), the running mean R_t of the party's own noisy gradients (Prop. C.9, O(log^2 k)).
* 'adaptive': the X of Lemma C.6, (1 - X_tt) R_{t-1} + X_tt g~_t with X_tt = (A + t s) / (t (A + s)), A the
  per-release noise variance and s = `gradient_variance` (sigma_g^2); s = 0 is X*.
* 'fl': the FL schedule of App. D.2, an EMA of the previous *released* gradient with X_tt = 0.75 - 0.7 t/k and
  the first release the raw one (the printed recursion starts from 0, which shrinks the first release).

Burn-in Y(q) (Sec. 5.3) runs and releases every permutation but averages only t > floor(kq) (the paper requires kq
to be whole). The whole permutation is one `lax.scan` over positions inside a `lax.scan` over permutations (which
depend on each other through the buffer R); independent runs are batched with `vmap` (docs/architecture.md,
"Gradient-trajectory semivalues").
"""

from __future__ import annotations

import math
import warnings
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np

from bayesval.estimators.base import PointEstimator, sampling_key
from bayesval.estimators.gradients.models import LogisticModel, MLPModel
from bayesval.games.weights import Semivalue, as_semivalue
from bayesval.privacy import PrivacyLedger, add_noise
from bayesval.privacy.release import PrivateRelease, check_noise_options, check_privacy
from bayesval.results.result import ValuationResult
from bayesval.validation import (
    check_count,
    check_finite_array,
    check_non_negative,
    check_positive,
    check_real,
)

NOISE_MODES = ("iid", "correlated", "adaptive", "fl")
"""The release rules: i.i.d. noise, X* (running mean), the adaptive X of Lemma C.6, and the FL schedule (App. D.2)."""
UTILITIES = ("loss", "accuracy")
MODELS = ("logistic", "mlp")


def permutation_weights(semivalue: str | Semivalue, num_players: int) -> np.ndarray:
    """p(r) = C(n-1, r-1) w(r) for r = 1..n (Zhou et al. 2024, Eq. 2's weight in Eq. 1's normalisation
    sum_r C(n-1, r-1) w(r) = n; docs/gradients.md, "Where we depart from the paper"):
    the weight of a marginal contribution at position r - 1 of a uniform permutation. Shapley: 1; Banzhaf:
    n C(n-1, r-1) / 2^(n-1); Beta(alpha, beta): n BetaBinomPMF(r-1; n-1, beta, alpha); leave-one-out: n 1[r = n]."""
    num_players = check_count("num_players", num_players, minimum=1)
    return num_players * as_semivalue(semivalue).size_weights(num_players)


def burn_in_count(num_permutations: int, burn_in: float) -> int:
    """floor(k q): permutations run and released but left out of the average (Zhou et al. 2024, Sec. 5.3, which
    takes kq whole); q in [0, 1)."""
    k = check_count("num_permutations", num_permutations, minimum=1)
    q = check_real("burn_in", burn_in)
    if not 0 <= q < 1:
        raise ValueError(f"burn_in (q) must lie in [0, 1), got {burn_in!r}")
    return int(np.floor(k * q + 1e-9))


def check_noise_mode(noise: str) -> int:
    if noise not in NOISE_MODES:
        raise ValueError(f"noise must be one of {NOISE_MODES}, got {noise!r}")
    return NOISE_MODES.index(noise)


def release_diagonal(mode, t, k, noise_variance, gradient_variance):
    """X_tt, the weight of the fresh noisy gradient in release t (1-based) under the noise mode of index `mode`."""
    adaptive = (noise_variance + t * gradient_variance) / (t * (noise_variance + gradient_variance))
    return jnp.select(
        [mode == 0, mode == 1, mode == 2],
        [jnp.ones_like(t), 1.0 / t, jnp.where(noise_variance + gradient_variance > 0, adaptive, 1.0 / t)],
        jnp.where(t == 1, 1.0, 0.75 - 0.7 * t / k),
    )


def release_step(mode, buffer, noisy, t, k, noise_variance, gradient_variance):
    """One release of the correlated mechanism: (released gradient, new buffer) from the party's buffer and its
    fresh noisy gradient at permutation t (1-based). The buffer is the raw running mean R of the noisy gradients
    (Sec. 5.2; Algorithm 1 read literally would average the released gradients, docs/gradients.md, "Where we
    depart from the paper"), or for 'fl' the previous released gradient (App. D.2)."""
    t = jnp.asarray(t, noisy.dtype)
    diagonal = release_diagonal(mode, t, k, noise_variance, gradient_variance)
    released = (1 - diagonal) * buffer + diagonal * noisy
    running_mean = buffer + (noisy - buffer) / t
    return released, jnp.where(mode == 3, released, running_mean)


def released_gradients(
    key: jax.Array, clipped: jax.Array, noise_std: float, noise: str = "correlated", gradient_variance: float = 0.0
) -> jax.Array:
    """The k released gradients (k, d) of one party whose clipped gradients at permutations 1..k are `clipped`
    (k, d): g~_t = clipped_t + N(0, noise_std^2 I) (`add_noise`, key fold_in(key, t)) passed through
    `release_step`. Under 'correlated' (X*) the released noise has Cov(z*_s, z*_t) = noise_std^2 / max(s, t).
    The release rule alone, on float noise, for studying it: it releases nothing and records nothing (a private
    valuation's releases are the Gaussian rounded to a grid, `gradient_marginals`)."""
    mode = check_noise_mode(noise)
    clipped = jnp.asarray(check_finite_array("clipped gradients", clipped, ndim=2))
    noise_std = check_non_negative("noise_std", noise_std)
    gradient_variance = check_non_negative("gradient_variance", gradient_variance)
    k = clipped.shape[0]

    def step(buffer, inputs):
        t, gradient = inputs
        noisy = add_noise(jax.random.fold_in(key, t), gradient, noise_std)
        return release_step(mode, buffer, noisy, t, k, noise_std**2, gradient_variance)[::-1]

    _, released = jax.lax.scan(step, jnp.zeros_like(clipped[0]), (jnp.arange(1, k + 1), clipped))
    return released


def _clipped_sum(model, params, x, y, clip, grid):
    """Sum over the party's rows of each row's loss gradient clipped to l2 norm `clip` (sensitivity `clip`): as
    floats without a grid; with one, each clipped gradient rounded to it, in whole grid steps (int32), so that the
    sum is exact and one row moves it by that row's steps, of l2 norm at most clip / grid + sqrt(d) / 2 (plus
    float32's clipping error, far inside the sqrt(d) / 2 the sensitivity leaves: the third flag checks it).
    Returns (sum, every gradient finite, every row's steps within clip / grid + sqrt(d))."""
    gradients = jax.vmap(jax.grad(lambda p, xi, yi: model.loss(p, xi[None], yi[None])), (None, 0, 0))(params, x, y)
    norms = jnp.linalg.norm(gradients, axis=1, keepdims=True)
    clipped = gradients / jnp.maximum(1.0, norms / clip)
    finite = jnp.all(jnp.isfinite(gradients))
    if grid is None:
        return jnp.sum(clipped, axis=0), finite, jnp.asarray(True)
    steps = jnp.round(clipped / grid).astype(jnp.int32)  # dividing by a power of two is exact
    bound = clip / grid + float(np.sqrt(model.num_parameters))
    within = jnp.all(jnp.sum(jnp.square(steps.astype(jnp.float64)), axis=1) <= bound**2)
    return jnp.sum(steps, axis=0), finite, within


@partial(jax.jit, static_argnames=("model", "num_permutations", "utility", "with_gradients", "grid"))
def gradient_marginals(
    sampling_key: jax.Array,
    party_x: jax.Array,
    party_y: jax.Array,
    x_val: jax.Array,
    y_val: jax.Array,
    noise: jax.Array | None = None,
    noise_std: jax.Array = 0.0,
    *,
    model: LogisticModel | MLPModel,
    num_permutations: int,
    learning_rate: float,
    clip: float,
    mode: int,
    grid: float | None = None,
    gradient_variance: float = 0.0,
    utility: str = "loss",
    with_gradients: bool = False,
) -> tuple[jax.Array, ...]:
    """The gradient-trajectory game: (marginals, positions, finite, within) with marginals[t-1, j] = m_j(pi^t), the
    change of V over party j's step in permutation t, positions[t-1, j] its position in pi^t (0-based;
    r = position + 1), whether every gradient and utility was finite, and whether every row's rounded clipped
    gradient stayed within the sensitivity the noise was calibrated for. The trajectory does not depend on the
    semivalue: weight the marginals by `permutation_weights(semivalue, n)[positions]` for any semivalue
    (`weighted_marginals`).

    party_x (n, B, f), party_y (n, B): each party's B rows. Permutation t (1-based) draws pi^t and a fresh model
    from fold_in(sampling_key, t). Private (a `grid`): party j's release at permutation t is
    grid * (its clipped gradients in whole grid steps, summed + noise[t-1, j]), the integer noise (k, n, d) drawn
    exactly beforehand (`bayesval.privacy.Mechanism.run_on_grid`), so the release is the Gaussian rounded to a grid;
    noise_std is that noise's std in the gradient's units (for the 'adaptive' rule). Without a grid (no DP): the
    clipped gradients' float sum, no noise. mode: the index of the noise mode in NOISE_MODES. The step is
    theta <- theta - learning_rate * released / B (the released sum of clipped gradients, averaged). The
    permutations form one `lax.scan` (`_permutation`), linked by the parties' buffers.

    with_gradients: also return the gradients of V (k, n, 2, d) at the model each party stepped from ([:, j, 0])
    and the one it stepped to ([:, j, 1]), functions of the releases and the public validation set, from which
    `dp_noise_covariance` takes the values' first-order sensitivity to the released noise.
    """
    noise_std = jnp.asarray(noise_std, party_x.dtype)
    permutation = partial(
        _permutation,
        sampling_key=sampling_key,
        data=(party_x, party_y),
        value=partial(_utility, model, utility, x_val, y_val),
        release=(mode, num_permutations, noise_std**2, gradient_variance, grid),
        model=model,
        step_size=(learning_rate, clip),
        with_gradients=with_gradients,
    )
    buffer = jnp.zeros((party_x.shape[0], model.num_parameters), party_x.dtype)
    _, (marginals, positions, finite, within, gradients) = jax.lax.scan(
        permutation, buffer, (jnp.arange(1, num_permutations + 1), noise)
    )
    finite = jnp.all(finite) & jnp.all(jnp.isfinite(marginals))
    if with_gradients:
        return marginals, positions, finite & jnp.all(jnp.isfinite(gradients)), jnp.all(within), gradients
    return marginals, positions, finite, jnp.all(within)


def _utility(model, utility: str, x_val, y_val, params):
    """V(theta): the validation accuracy, or minus the validation loss."""
    if utility == "accuracy":
        return model.accuracy(params, x_val, y_val)
    return -model.loss(params, x_val, y_val)


def _permutation(buffer, inputs, sampling_key, data, value, release, model, step_size, with_gradients=False):
    """Permutation t (1-based) of `gradient_marginals`, with every party's integer noise at t (n, d) or None: pi^t
    and a fresh model from fold_in(sampling_key, t), then one clipped, released step per party in the order pi^t.
    Returns the buffers after it and (marginals (n,), positions (n,), finite, within the sensitivity, gradients of
    V before and after each party's step (n, 2, d), or None) by party."""
    t, noise = inputs
    party_x, party_y = data
    mode, k, noise_variance, gradient_variance, grid = release
    learning_rate, clip = step_size
    n, rows = party_x.shape[0], party_x.shape[1]
    perm_key, init_key = jax.random.split(jax.random.fold_in(sampling_key, t))
    order = jax.random.permutation(perm_key, n)
    params = model.init(init_key).astype(party_x.dtype)
    if with_gradients:
        evaluate = jax.value_and_grad(value)
    else:

        def evaluate(params):
            return value(params), None

    def step(carry, position):  # each party steps once per permutation: its buffer row is read-only here
        params, (before, grad_before), finite, within = carry
        j = order[position]
        gradient, ok, inside = _clipped_sum(model, params, party_x[j], party_y[j], clip, grid)
        noisy = gradient if grid is None else (gradient + noise[j]).astype(params.dtype) * grid
        released, own = release_step(mode, buffer[j], noisy, t, k, noise_variance, gradient_variance)
        params = params - learning_rate * released / rows
        after, grad_after = evaluate(params)
        pair = None if grad_after is None else jnp.stack([grad_before, grad_after])
        return (params, (after, grad_after), finite & ok, within & inside), (after - before, own, pair)

    init = (params, evaluate(params), jnp.asarray(True), jnp.asarray(True))
    (_, _, finite, within), (marginals, owns, pairs) = jax.lax.scan(step, init, jnp.arange(n))
    positions = jnp.zeros(n, jnp.int32).at[order].set(jnp.arange(n, dtype=jnp.int32))
    gradients = None if pairs is None else jnp.zeros_like(pairs).at[order].set(pairs)
    by_party = jnp.zeros(n, marginals.dtype).at[order].set(marginals)
    return buffer.at[order].set(owns), (by_party, positions, finite, within, gradients)


def weighted_marginals(marginals, positions, semivalue: str | Semivalue) -> np.ndarray:
    """p(r) m_j(pi^t) (k, n): the summands of Eq. 2 for `semivalue`, from one run's marginals and positions."""
    positions = np.asarray(positions)
    return permutation_weights(semivalue, positions.shape[1])[positions] * np.asarray(marginals, np.float64)


def burn_in_values(marginals, burn_in: float = 0.0, noise_covariance=None) -> tuple[np.ndarray, np.ndarray, int]:
    """psi_j (Eq. 2, or Y's average over t > floor(kq), Sec. 5.3) with its standard error and the number of
    permutations averaged, from the (k, n) weighted marginals of one run: post-processing, so every q of one run
    costs no extra privacy.

    Without `noise_covariance` the standard error is the Monte Carlo error over permutations, s / sqrt(count): the
    whole error only where the summands are independent (no noise, or i.i.d. noise). Under shared noise (X*, Y*,
    'adaptive', 'fl') pass the sum over s != t of the summands' covariances (`dp_noise_covariance`); with K
    permutations averaged, E[s^2] = (sum_t Var_t - sum_{s!=t} Cov_st / (K - 1)) / K, so
    Var[psi] = s^2 / K + sum_{s!=t} Cov_st / (K (K - 1)) (docs/gradients.md, "Standard errors"). A negative first-order
    covariance is not trusted to shrink the error below s / sqrt(K). From a single permutation the error is unknown,
    and reported as inf (not 0: one draw has no spread to measure, while its value carries all of the permutation's
    variance and the DP noise)."""
    marginals = np.asarray(marginals, np.float64)
    kept = marginals[burn_in_count(marginals.shape[0], burn_in) :]
    count = kept.shape[0]
    if count < 2:
        return kept.mean(axis=0), np.full(kept.shape[1], np.inf), count
    variance = kept.var(axis=0, ddof=1) / count
    if noise_covariance is not None:
        variance = variance + np.maximum(np.asarray(noise_covariance, np.float64), 0.0) / (count * (count - 1))
    return kept.mean(axis=0), np.sqrt(variance), count


def release_covariance(num_permutations: int, noise: str, noise_variance: float, gradient_variance: float = 0.0):
    """M = X X^T of the release rule in the O(k) generator form (diagonal, h, r, w), each (k,) in float64:
    M_tt = diagonal_t and, for s < t, M_st = h_t w_s prod_{u=s+1}^{t-1} r_u.

    With a_t = X_tt (`release_diagonal`): a running-mean buffer (iid, X*, 'adaptive') releases
    z*_t = (1 - a_t) R_{t-1} + a_t z_t with R_{t-1} the mean of z_1..z_{t-1}, so X_tl = (1 - a_t) / (t - 1) for
    l < t; every row of X sums to 1 (a_1 = 1), hence M_st = h_t sum_l X_sl = h_t with h_t = (1 - a_t) / (t - 1),
    r = w = 1 (1/max(s, t) under X*, Zhou et al. 2024, Eq. 4; 0 under i.i.d. noise). The 'fl' EMA of the previous
    release (App. D.2) has z*_t = (1 - a_t) z*_{t-1} + a_t z_t, so M_st = (1 - a_t) M_{s,t-1}: h = r = 1 - a,
    w = diagonal."""
    mode = check_noise_mode(noise)
    k = check_count("num_permutations", num_permutations, minimum=1)
    t = np.arange(1, k + 1, dtype=np.float64)
    a = np.asarray(release_diagonal(mode, jnp.asarray(t), k, noise_variance, gradient_variance), np.float64)
    buffer, diagonal = 0.0, np.empty(k)
    for i in range(k):
        diagonal[i] = (1 - a[i]) ** 2 * buffer + a[i] ** 2
        buffer = diagonal[i] if mode == 3 else (1 - 1 / t[i]) ** 2 * buffer + 1 / t[i] ** 2
    if mode == 3:
        return diagonal, 1 - a, 1 - a, diagonal
    h = np.concatenate([[0.0], (1 - a[1:]) / (t[1:] - 1)])
    return diagonal, h, np.ones(k), np.ones(k)


def _block_coefficients(structure, block: int):
    """The generator form of M cut into blocks of `block` releases (k padded with zero-weight releases): per block,
    the weight h_t prod_{block start <= u < t} r_u of the state carried in from earlier blocks, the decay of that
    state over the block, the weight w_s prod_{s < u <= block end} r_u with which release s enters the state carried
    out, and M_st for s < t inside the block (strictly upper triangular, (block, block))."""
    _, h, r, w = (np.asarray(v, np.float64) for v in structure)
    k = h.shape[0]
    pad = -k % block
    h, w = np.pad(h, (0, pad)), np.pad(w, (0, pad))
    r = np.pad(r, (0, pad), constant_values=1.0).reshape(-1, block)
    h, w = h.reshape(r.shape), w.reshape(r.shape)
    before = np.cumprod(np.concatenate([np.ones((r.shape[0], 1)), r[:, :-1]], axis=1), axis=1)  # prod_{u < t}
    after = np.cumprod(np.concatenate([np.ones((r.shape[0], 1)), r[:, :0:-1]], axis=1), axis=1)[:, ::-1]  # s < u
    # prod_{s < u < t} r_u for s < t: cumulative products of r along u, from s + 1
    upper = np.triu(np.ones((block, block), bool), 1)
    spans = np.where(upper[None], r[:, None, :], 1.0)  # [q, s, u] = r_u where u > s
    spans = np.cumprod(spans, axis=2)  # prod_{s < u' <= u}
    between = np.concatenate([np.ones((r.shape[0], block, 1)), spans[:, :, :-1]], axis=2)  # prod_{s < u' < t}
    inside = np.where(upper[None], h[:, None, :] * w[:, :, None] * between, 0.0)
    return h * before, before[:, -1] * r[:, -1], w * after, inside


@partial(jax.jit, static_argnames=("block",))
def _shared_noise_sums(parties, gradients, positions, scale, coefficients, block):
    """sum_{s < t} M_st d_s . d_t for each party j of `parties` over its own term (d_t = own_t) and over every
    predecessor i (d_t = change_t 1[i before j in pi^t]), as one scan over blocks of `block` releases. With the
    generator form of M (`release_covariance`), sum_{s < t} M_st d_s . d_t = sum_t h_t d_t . Q_{t-1} for the state
    Q_t = r_t Q_{t-1} + w_t d_t: the pairs across blocks read the state carried in (an (n, d) state per party j, a
    row per predecessor i); the pairs inside a block are (predecessors shared by releases s and t) x
    (change_s . change_t) x M_st from Gram matrices, so every product is a batched matrix product. Returns
    (own, cross), each (parties,) (docs/gradients.md, "Standard errors")."""
    k, n = positions.shape
    chosen = gradients[:, parties].astype(jnp.float64) * scale[:, parties, None, None]  # (k, J, 2, d)
    own, change = chosen[:, :, 1], chosen[:, :, 1] - chosen[:, :, 0]
    pad = -k % block

    def blocks(values):  # (k, J, ...) -> (blocks, J, block, ...)
        values = jnp.pad(values, [(0, pad)] + [(0, 0)] * (values.ndim - 1))
        return jnp.swapaxes(values.reshape(-1, block, *values.shape[1:]), 1, 2)

    rank = jnp.pad(positions, ((0, pad), (0, 0))).reshape(-1, block, n)

    def step(carry, inputs):
        state, own_state = carry  # (J, n, d), (J, d)
        own_q, change_q, rank_q, (into, decay, out, inside) = inputs  # (J, T, d), (J, T, d), (T, n)
        before = (rank_q[None] < rank_q[:, parties].T[:, :, None]).astype(jnp.float64)  # (J, T, i): i before j
        carried = jnp.matmul(before, state)  # (J, T, d)
        cross = jnp.sum(into[:, None] * change_q * carried, axis=(1, 2))
        common = jnp.matmul(before, jnp.swapaxes(before, 1, 2))  # (J, s, t): predecessors shared by s and t
        gram = jnp.matmul(change_q, jnp.swapaxes(change_q, 1, 2))
        cross += jnp.sum(inside * common * gram, axis=(1, 2))
        owned = jnp.sum(into[:, None] * own_q * own_state[:, None], axis=(1, 2))
        owned += jnp.sum(inside * jnp.matmul(own_q, jnp.swapaxes(own_q, 1, 2)), axis=(1, 2))
        state = decay * state + jnp.matmul(jnp.swapaxes(before, 1, 2), out[:, None] * change_q)
        own_state = decay * own_state + jnp.sum(out[:, None] * own_q, axis=1)
        return (state, own_state), (owned, cross)

    d = gradients.shape[-1]
    init = (jnp.zeros((parties.shape[0], n, d)), jnp.zeros((parties.shape[0], d)))
    _, (owned, cross) = jax.lax.scan(step, init, (blocks(own), blocks(change), rank, coefficients))
    return owned.sum(axis=0), cross.sum(axis=0)


GRADIENT_MEMORY = 2**32
"""Bytes of validation gradients, (k, n, 2, d) in float32, that a shared-noise run may keep for its standard error;
above, the error is reported unknown (inf) rather than the Monte Carlo part alone."""

COVARIANCE_MEMORY = 2**28
"""Bytes that `dp_noise_covariance` lets one chunk of parties use (their carried states and Gram blocks)."""


def dp_noise_covariance(
    gradients,
    positions,
    weights,
    *,
    noise: str,
    noise_std: float,
    step_scale: float,
    burn_in: float = 0.0,
    gradient_variance: float = 0.0,
) -> np.ndarray:
    """sum_{s != t} Cov[p m_j(pi^s), p m_j(pi^t)] over the averaged permutations, per party (n,), to first order in
    the released noise: the part of Var[psi_j] that the spread over permutations cannot see when the noise is shared.

    Party i's released noise at permutation t is z*_it = sum_l X_tl z_il (Zhou et al. 2024, Sec. 5.2), so
    Cov[z*_is, z*_it] = noise_std^2 M_st I with M = X X^T (1/max(s, t) under X*, Eq. 4; I under i.i.d. noise, where
    this is 0), independent across parties. Holding the clipped gradients fixed (each moves by at most 2C against
    noise of norm noise_std sqrt(d)), a step theta <- theta - step_scale (g + z*) gives
    d m_j / d z*_j = -step_scale grad V(after j's step) and, for each party i before j in pi^t,
    d m_j / d z*_i = -step_scale (grad V(after) - grad V(before)): `gradients` (k, n, 2, d) from
    `gradient_marginals(..., with_gradients=True)`, `weights` (k, n) the p(r) of `weighted_marginals`, step_scale
    = learning_rate / party size. Every input is a function of the releases and the public validation set, so this
    is post-processing (docs/gradients.md, "Standard errors").

    The sum is exact and costs O(k n^2 d): M has the generator form of `release_covariance`, so the pairs s < t are
    summed in blocks of releases (Gram matrices inside a block, a carried state per predecessor across blocks) for
    chunks of parties sized to `COVARIANCE_MEMORY` bytes."""
    mode = check_noise_mode(noise)
    positions = jnp.asarray(positions, jnp.int32)
    k, n = positions.shape
    if mode == 0 or noise_std == 0:
        return np.zeros(n)
    gradients = jnp.asarray(gradients)
    scale = -step_scale * np.asarray(weights, np.float64)
    scale[: burn_in_count(k, burn_in)] = 0.0  # the burned-in permutations are not averaged
    variance = noise_std**2
    # at least 2 blocks: compiled, a scan of one block returned values of 1e250 for some shapes on the CPU backend
    # (jax 0.10.2, k = 20, d = 62), where the same step run op by op (jax.disable_jit) is right; the test against the
    # dense sum over release pairs covers it
    block = min(64, -(-k // 2))
    coefficients = _block_coefficients(release_covariance(k, noise, variance, gradient_variance), block)
    d = gradients.shape[-1]
    per_party = 8 * (4 * n * d + 6 * block * (n + d) + 6 * k * d)  # states, predecessor masks, the party's inputs
    chunk = int(max(1, min(n, COVARIANCE_MEMORY // per_party)))
    chunk = -(-n // -(-n // chunk))  # equal chunks: one compilation, little padding
    total = np.empty(n)
    for start in range(0, n, chunk):
        parties = np.minimum(np.arange(start, start + chunk), n - 1)  # the last chunk repeats its last party
        owned, cross = _shared_noise_sums(
            jnp.asarray(parties), gradients, positions, jnp.asarray(scale), coefficients, block
        )
        stop = min(n, start + chunk)
        total[start:stop] = np.asarray(owned + cross, np.float64)[: stop - start]
    return 2 * variance * total


def mean_adjusted_variance(marginals) -> float:
    """The estimation-uncertainty proxy of Sec. 6.1 (Zhou et al. 2023): n^-1 sum_j s_j^2 / |mu_j| with mu_j the mean
    of the (k, n) marginals over permutations and s_j^2 the variance of that mean. A party whose marginals are all
    equal to 0 (common with V = accuracy) has no uncertainty and no value, so 0/0 is left out of the average; a
    zero mean with spread gives inf."""
    marginals = np.asarray(marginals, np.float64)
    k = marginals.shape[0]
    if k < 2:
        raise ValueError(f"the mean-adjusted variance needs at least 2 permutations, got {k}")
    variance, mean = marginals.var(axis=0, ddof=1) / k, np.abs(marginals.mean(axis=0))
    defined = (mean > 0) | (variance > 0)
    if not defined.any():
        return float("nan")
    with np.errstate(divide="ignore"):
        return float(np.mean(variance[defined] / mean[defined]))


class GradientSemivalues(PointEstimator):
    """Semivalues of data points (or of parties of `party_size` consecutive rows) from DP gradient trajectories
    (Zhou et al. 2024, Algorithm 1, corrected as in the module docstring).

    model: 'logistic' (multinomial logistic regression) or 'mlp' (one hidden layer of `hidden` ReLUs).
    semivalue: 'shapley', 'banzhaf', 'loo' or a `Semivalue` such as `bayesval.games.beta_shapley(16, 1)`.
    num_permutations: k, each party's number of releases. clip: C, per example. learning_rate: alpha, to be tuned
        (the paper gives no values; noise enters the step as alpha z, so the values depend on it; docs/gradients.md,
        "Where we depart from the paper").
    epsilon, delta: each point's (epsilon, delta)-DP over its k releases (add-or-remove-one example); both None
        values without noise (the paper's no-DP baseline, clipped gradients).
    noise: 'iid', 'correlated' (X*, the default when private), 'adaptive' (with `gradient_variance`) or 'fl'.
    burn_in: q in [0, 1) of Y(q); utility: 'loss' (negated test cross-entropy) or 'accuracy'.
    key: the sampling key (permutations and model initialisations), an int seed or a jax.random.key; privacy noise
        comes from `noise_seed`, else OS entropy, never from it.

    `estimator.fit(X, y).value(X_val, y_val)` makes the k releases of each party once per call (one ledger record
    for all parties' k releases) and returns the values. The run's (k, n) `marginals_` and `positions_` give every
    other semivalue and burn-in of the same releases by post-processing (`weighted_marginals`, `burn_in_values`).
    The trajectories run in float32. The stderr is the Monte Carlo error over the permutations averaged plus, under
    noise shared across permutations (X*, Y*, 'adaptive', 'fl'), the covariance that shared noise adds to first
    order (`dp_noise_covariance`; the Monte Carlo part alone is
    `diagnostics["monte_carlo_stderr_without_shared_noise"]`): inf (unknown) where only one permutation is
    averaged (docs/gradients.md, "Standard errors").
    """

    needs = "a classifier"

    def __init__(
        self,
        model: str = "logistic",
        *,
        semivalue: str | Semivalue = "shapley",
        num_permutations: int = 200,
        learning_rate: float = 0.01,
        clip: float = 1.0,
        epsilon: float | None = None,
        delta: float | None = None,
        noise: str | None = None,
        burn_in: float = 0.0,
        gradient_variance: float = 0.0,
        utility: str = "loss",
        party_size: int = 1,
        hidden: int = 16,
        key=0,
        noise_seed: int | None = None,
        allow_seed_reuse: bool = False,
    ) -> None:
        if model not in MODELS:
            raise ValueError(f"model must be one of {MODELS}, got {model!r}")
        if utility not in UTILITIES:
            raise ValueError(f"utility must be one of {UTILITIES}, got {utility!r}")
        self.model, self.utility = model, utility
        self.semivalue = as_semivalue(semivalue)
        self.num_permutations = check_count("num_permutations", num_permutations, minimum=1)
        burn_in_count(self.num_permutations, burn_in)  # checks q
        self.burn_in = burn_in
        self.learning_rate = check_positive("learning_rate", learning_rate)
        self.clip = check_positive("clip", clip)
        self.gradient_variance = check_non_negative("gradient_variance", gradient_variance)
        self.party_size = check_count("party_size", party_size, minimum=1)
        self.hidden = check_count("hidden", hidden, minimum=1)
        self.key = sampling_key(key)
        private = check_privacy(epsilon, delta, required=False) is not None
        self.noise = ("correlated" if private else "iid") if noise is None else noise
        check_noise_mode(self.noise)
        if not private and self.noise != "iid":
            raise ValueError(f"noise={self.noise!r} post-processes DP releases: set epsilon and delta too")
        check_noise_options(private, noise_seed, allow_seed_reuse, "private valuation")
        self.epsilon, self.delta = epsilon, delta
        self.privacy = PrivateRelease(epsilon, delta, 1.0, noise_seed, allow_seed_reuse) if private else None
        self.method = f"gradient_{self.semivalue.name}" + ("" if private else "_no_dp")

    def _check_rows(self, features) -> None:
        """The rows must split into at least 2 parties of `party_size` consecutive rows."""
        if features.shape[0] % self.party_size:
            raise ValueError(f"X has {features.shape[0]} rows, not a multiple of party_size={self.party_size}")
        if features.shape[0] // self.party_size < 2:
            raise ValueError(f"X must hold at least 2 parties of {self.party_size} rows, got {features.shape[0]} rows")

    def _store(self, features, labels) -> None:
        """The rows grouped into parties, (parties, party_size, features) in float32, and the model to train."""
        shape = (features.shape[0] // self.party_size, self.party_size)
        self.party_x_ = jnp.asarray(features.reshape(*shape, -1), jnp.float32)
        self.party_y_ = jnp.asarray(labels.reshape(shape))
        size = (self.n_features_in_, self.classes_.size)
        self.model_ = LogisticModel(*size) if self.model == "logistic" else MLPModel(*size, hidden=self.hidden)

    def _value(self, x_val, y_val) -> ValuationResult:
        """Run the k permutations (each party's k releases, when private) and value every party on (x_val, y_val)."""
        ledger, diagnostics = self._trajectories(x_val, y_val)
        weighted = weighted_marginals(self.marginals_, self.positions_, self.semivalue)
        covariance = None
        if self.gradients_ is not None:
            covariance = dp_noise_covariance(
                self.gradients_,
                self.positions_,
                weighted_marginals(np.ones_like(self.marginals_), self.positions_, self.semivalue),
                noise=self.noise,
                noise_std=diagnostics["noise_std"],
                step_scale=self.learning_rate / self.party_size,
                burn_in=self.burn_in,
                gradient_variance=self.gradient_variance,
            )
            self.gradients_ = None  # (k, n, 2, d): not kept
        values, stderr, kept = burn_in_values(weighted, self.burn_in, covariance)
        monte_carlo = burn_in_values(weighted, self.burn_in)[1]
        if self.shared_noise_unmeasured_:
            warnings.warn(
                f"the standard errors under {self.noise!r} noise need the validation gradients along the trajectory, "
                f"{8 * self.num_permutations * len(values) * self.model_.num_parameters / 2**30:.1f} GiB, more than "
                f"GRADIENT_MEMORY ({GRADIENT_MEMORY / 2**30:g} GiB): reported as inf (unknown). "
                "diagnostics['monte_carlo_stderr_without_shared_noise'] excludes the shared privacy noise",
                UserWarning,
                stacklevel=3,
            )
            stderr = np.full_like(stderr, np.inf)
        averaged = weighted[self.num_permutations - kept :]
        diagnostics = {
            "num_permutations": self.num_permutations,
            "burn_in": self.burn_in,
            "kept_permutations": kept,
            "noise": self.noise if self.privacy else "none",
            "semivalue": self.semivalue.name,
            "utility": self.utility,
            "learning_rate": self.learning_rate,
            "clip": self.clip,
            "party_size": self.party_size,
            "mean_adjusted_variance": mean_adjusted_variance(averaged) if kept > 1 else None,
            # s / sqrt(count) alone: excludes the privacy noise shared across permutations (X*, Y*, adaptive, fl)
            "monte_carlo_stderr_without_shared_noise": monte_carlo,
            **diagnostics,
        }
        counts = np.full(values.shape[0], kept)
        return self._result(values, stderr, ledger=ledger, diagnostics=diagnostics, counts=counts)

    def _release_identity(self) -> tuple:
        """What makes this estimator's gradient release differ beyond its data: the sampling key (permutations and
        initialisations), model, release rule and step (burn-in and semivalue are post-processing of it)."""
        return (
            np.asarray(jax.random.key_data(self.key)),
            repr(self.model_),
            self.noise,
            self.learning_rate,
            self.gradient_variance,
            self.utility,
            self.party_size,
        )

    def _private_run(self, program, privacy_key, counts, *inputs, grid, noise_std, shared: bool, rows: int):
        """The private trajectories on integer noise `counts` (k, n, d): checked to fit int32 with every party's
        rounded gradients (at most rows (clip / grid + sqrt(d)) steps an entry), then `program`. The privacy key
        goes unused: the trajectories draw nothing secret but that noise."""
        largest = int(np.abs(counts).max(initial=0)) + rows * math.ceil(self.clip / grid + math.sqrt(counts.shape[-1]))
        if largest >= 2**31:
            raise ValueError(
                f"the released gradients reach {largest} steps of the grid {grid:g}, beyond int32: use fewer rows a "
                "party (party_size) or a larger epsilon"
            )
        return program(self.key, *inputs, jnp.asarray(counts, jnp.int32), noise_std, grid=grid, with_gradients=shared)

    def _trajectories(self, x_val, y_val):
        """One run of `gradient_marginals` (released when private and recorded in `ledger_` even if it then fails,
        since its noise was drawn), kept as `marginals_`, `positions_`: (the run's ledger, privacy diagnostics)."""
        program = partial(
            gradient_marginals,
            model=self.model_,
            num_permutations=self.num_permutations,
            learning_rate=self.learning_rate,
            clip=self.clip,
            mode=NOISE_MODES.index(self.noise),
            gradient_variance=self.gradient_variance,
            utility=self.utility,
        )
        shared = self.privacy is not None and self.noise != "iid"  # the spread over permutations misses its noise
        gradient_bytes = 4 * 2 * self.num_permutations * self.party_x_.shape[0] * self.model_.num_parameters
        self.shared_noise_unmeasured_ = shared and gradient_bytes > GRADIENT_MEMORY
        shared = shared and not self.shared_noise_unmeasured_
        inputs = (self.party_x_, self.party_y_, jnp.asarray(x_val, self.party_x_.dtype), jnp.asarray(y_val))
        if self.privacy is None:
            (marginals, positions, finite, _), ledger = program(self.key, *inputs), PrivacyLedger()
            diagnostics, self.gradients_ = {}, None
        else:
            parties, rows = self.party_x_.shape[:2]
            output, ledger, diagnostics = self.privacy.release(
                partial(self._private_run, program, shared=shared, rows=rows),
                inputs,
                sensitivity=self.clip,
                compositions=self.num_permutations,
                what="clipped gradient (sum of per-example clipped gradients, rounded to the grid) with Gaussian "
                "noise rounded to the grid, once per permutation",
                noise_shape=(self.num_permutations, parties, self.model_.num_parameters),
                identity=self._release_identity(),
            )
            (marginals, positions, finite, within), self.gradients_ = output[:4], (output[4] if shared else None)
            if not bool(within):
                raise RuntimeError(
                    "a row's clipped gradient, rounded to the grid, exceeded the sensitivity its noise was "
                    "calibrated for (float32 clipping error beyond sqrt(d) / 2 grid steps): no values are returned"
                )
        self._record(ledger)
        if not bool(finite):
            raise FloatingPointError(
                f"non-finite gradients or utilities in the trajectories (learning_rate={self.learning_rate!r}, "
                f"model={self.model!r}): lower the learning rate or standardise X"
            )
        self.marginals_, self.positions_ = np.asarray(marginals), np.asarray(positions)
        return ledger, diagnostics
