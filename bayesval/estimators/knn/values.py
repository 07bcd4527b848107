"""Closed-form Shapley values of the nearest-neighbour games, per validation point and summed.

Per validation point (arguments: distances ``dist`` (N,) and ``agree`` (N,) = 1[y_i = y_val]):

* :func:`knn_shapley_soft`: soft-label KNN-Shapley, Wang et al. 2023, Thm 7 (Eq. 2 utility).
* :func:`knn_shapley_original`: KNN-Shapley of Jia et al. 2019 ("KNN-OLD"), Wang et al. 2023, Thm 8
  (Eq. 5 utility), in its non-recursive form (App. B.3.1).
* :func:`tknn_shapley`: Threshold-KNN-Shapley, Thm 13 (Eq. 7), with its binomial sum A_2 in closed form, H_m - 1
  (docs/knn.md, "Where we depart from the paper").
* :func:`private_tknn_shapley`: DP-TKNN-Shapley, Sec. 5 / App. D.2: noisy counts on a Poisson
  subsample, shared by all owners (Thm 16), then Eq. 7 as post-processing.
* :func:`subsampled_knn_shapley_original`: KNN-OLD on a Poisson subsample, for the naive DP-KNN
  baseline of App. B.4 (noise is added by the caller).

The ``*_values`` functions are jitted and sum these over a validation set in chunks (Thm 1).
"""

from __future__ import annotations

from functools import partial

import jax
import jax.numpy as jnp
import numpy as np

from bayesval.batching import sum_over_validation
from bayesval.estimators.knn.distances import distance_row, squared_norms, within


def harmonic(m: jax.Array) -> jax.Array:
    """H_m = sum_{j<=m} 1/j for real m >= 0 (digamma(m + 1) + Euler's gamma)."""
    return jax.scipy.special.digamma(m + 1.0) + np.euler_gamma


def tknn_from_counts(agree: jax.Array, m: jax.Array, p: jax.Array, inv_classes: float) -> jax.Array:
    """TKNN-Shapley of a point inside the ball, from its counts (Wang et al. 2023, Thm 13, Eq. 7).

    m: ball size including the point (c_x of the paper), clipped to >= 1; p: same-label ball
    members other than the point (c_+); inv_classes: 1/C. A_2 = H_m - 1, independent of |D|: the points outside
    the ball are null players, and dropping null players leaves a Shapley value unchanged (docs/knn.md, "Where we
    depart from the paper").
    """
    a = agree.astype(m.dtype)
    m = jnp.maximum(m, 1.0)
    a1 = a / m - p / jnp.maximum(m * (m - 1.0), 1.0)
    return (a - inv_classes) / m + jnp.where(m >= 2.0, a1 * (harmonic(m) - 1.0), 0.0)


def tknn_shapley(dist: jax.Array, agree: jax.Array, tau: float, inv_classes: float) -> jax.Array:
    """TKNN-Shapley of every training point for one validation point (Thm 13; 0 outside the ball)."""
    in_ball = within(dist, tau)
    m = jnp.sum(in_ball).astype(dist.dtype)
    p = jnp.sum(in_ball & agree).astype(dist.dtype) - agree
    return jnp.where(in_ball, tknn_from_counts(agree, m, p, inv_classes), 0.0)


def noisy_tknn_counts(counts: jax.Array, noise: jax.Array) -> jax.Array:
    """Release (c, c_x, c_+) + noise, rounded and clamped (Thm 14, App. D.2.3): `noise` is the Gaussian noise of the
    counts already rounded to their grid (`bayesval.privacy.Mechanism.gaussian_on_grid` with integer counts, drawn
    exactly), so the sum is exact and is the release.

    Rounded to whole counts and clamped onto their valid range, c >= 0, c_x >= 0 and 0 <= c_+ <= c_x
    (post-processing, so the guarantee is unchanged; docs/knn.md, "Where we depart from the paper"). The l2
    sensitivity of the count vector is sqrt(3) under add/remove-one adjacency (Sec. 5.1).
    """
    noisy = jnp.round(counts + noise)
    in_ball = jnp.maximum(noisy[1], 0.0)
    return jnp.stack([jnp.maximum(noisy[0], 0.0), in_ball, jnp.clip(noisy[2], 0.0, in_ball)])


def private_tknn_shapley(
    sample_key: jax.Array,
    noise: jax.Array,
    dist: jax.Array,
    agree: jax.Array,
    tau: float,
    inv_classes: float,
    sampling_probability: float,
) -> tuple[jax.Array, jax.Array]:
    """DP-TKNN-Shapley for one validation point, and the released noisy counts (Sec. 5, App. D.2); `noise` (3,)
    is the counts' noise (`noisy_tknn_counts`).

    One Poisson subsample B (rate q) and one noisy count vector on it, reused by every owner
    (Thm 16, joint DP). Every in-ball point of the full D is valued as a player joining
    B \\ {z_i}: its own sample membership is subtracted, m_i = c_x - 1[z_i in B] + 1 >= 1 and
    0 <= p_i = c_+ - 1[z_i in B] a_i <= m_i - 1. The paper's leave-one-out rule subtracts z_i whether or not it was
    sampled, which is right only without subsampling (docs/knn.md, "Where we depart from the paper").
    """
    dtype = dist.dtype
    sampled = jax.random.bernoulli(sample_key, sampling_probability, dist.shape)
    in_ball = within(dist, tau)
    hits = in_ball & sampled
    counts = jnp.stack([jnp.sum(sampled), jnp.sum(hits), jnp.sum(hits & agree)]).astype(dtype)
    released = noisy_tknn_counts(counts, noise.astype(dtype))
    own = sampled.astype(dtype)
    m = jnp.maximum(released[1] - own + 1.0, 1.0)
    p = jnp.clip(released[2] - own * agree, 0.0, m - 1.0)
    return jnp.where(in_ball, tknn_from_counts(agree, m, p, inv_classes), 0.0), released


def distance_order(dist: jax.Array) -> jax.Array:
    """The permutation that sorts `dist` ascending, ties broken by index (as a stable argsort).

    For float64, XLA's CPU argsort (a two-operand comparator sort) is ~5x slower than sorting one
    int64 array, so each distance's order-preserving int64 bit pattern is packed with its index
    into one key: the top 64 - b bits keep the distance (b = bits of the index), which resolves
    relative differences down to 2^(b - 52), e.g. 4e-12 for N = 10^4. Closer distances count as
    ties. Other dtypes use the stable argsort.
    """
    n = dist.shape[0]
    if dist.dtype != jnp.float64:
        return jnp.argsort(dist, stable=True)
    index_bits = max(1, (n - 1).bit_length())
    bits = jax.lax.bitcast_convert_type(jnp.where(dist == 0, 0.0, dist), jnp.int64)
    ordered = jnp.where(bits < 0, bits ^ jnp.int64(0x7FFFFFFFFFFFFFFF), bits)
    keys = ((ordered >> index_bits) << index_bits) | jnp.arange(n, dtype=jnp.int64)
    return (jnp.sort(keys) & ((1 << index_bits) - 1)).astype(jnp.int32)


def _in_distance_order(dist: jax.Array, sorted_fn, *arrays: jax.Array) -> jax.Array:
    """Apply `sorted_fn` to `arrays` sorted by ascending distance, and return in the original order."""
    order = distance_order(dist)
    return jnp.zeros(dist.shape, dtype=dist.dtype).at[order].set(sorted_fn(*(x[order] for x in arrays)))


def _knn_original_sorted(agree: jax.Array, sampled: jax.Array, k: int, dtype) -> jax.Array:
    """KNN-OLD value of each sorted point l in the game on (B \\ {l}) + {l} (App. B.3.1, non-recursive).

    With rank i of l and t = max(K, i): phi_l = a_l / t - sum_{j > t} a_(j) / ((j - 1) j), j running
    over ranks in (B \\ {l}) + {l}. Suffix sums over positions in B give all N values in O(N);
    ranks after an unsampled l shift by one, hence the two weightings.
    """
    n = agree.shape[0]
    a = agree.astype(dtype)
    before = jnp.cumsum(sampled) - sampled
    threshold = jnp.maximum(k, before + 1).astype(dtype)
    positions = jnp.where(sampled, before + 1, n + 1)
    label_at = jnp.zeros(n + 2, dtype=dtype).at[positions].add(a * sampled)
    j = jnp.arange(n + 2, dtype=dtype)
    weight_in = jnp.where(j >= 2, label_at / jnp.maximum((j - 1.0) * j, 1.0), 0.0)
    weight_out = label_at / jnp.maximum(j * (j + 1.0), 1.0)

    def suffix(weights):
        return jnp.concatenate([jnp.cumsum(weights[::-1])[::-1], jnp.zeros(1, dtype=dtype)])

    t = threshold.astype(jnp.int32)
    tail = jnp.where(
        sampled,
        suffix(weight_in)[jnp.minimum(t + 1, n + 2)],
        suffix(weight_out)[jnp.minimum(t, n + 2)],
    )
    return a / threshold - tail


def knn_shapley_original(dist: jax.Array, agree: jax.Array, k: int) -> jax.Array:
    """KNN-Shapley of Jia et al. 2019 (utility Eq. 5, base case 1[y_N = y_val] / max(K, N); Thm 8), of the
    tie-symmetric game where distances tie (`_tie_symmetric`)."""

    def symmetric(d, a):
        everyone = jnp.ones(a.shape, dtype=bool)
        n, (_, first, last) = a.shape[0], _tie_groups(d)
        threshold = jnp.maximum(k, jnp.arange(1, n + 1)).astype(a.dtype)  # t_r = max(K, r), r the 1-based rank
        start = jnp.maximum(threshold + 1.0, first + 1.0)  # the group's ranks j > t_r: start .. last + 1
        inside = jnp.where(start <= last + 1.0, 1.0 / (start - 1.0) - 1.0 / (last + 1.0), 0.0)  # sum 1/((j-1) j)
        values = partial(_knn_original_sorted, sampled=everyone, k=k, dtype=a.dtype)
        return _tie_symmetric(d, a, values, 1.0 / threshold, 1.0 / threshold - inside)

    return _in_distance_order(dist, symmetric, dist, agree.astype(dist.dtype))


def subsampled_knn_shapley_original(
    key: jax.Array, dist: jax.Array, agree: jax.Array, k: int, sampling_probability: float
) -> jax.Array:
    """KNN-OLD of each z_l on Poisson-subsample(D_{-z_l}) + {z_l} (App. B.3.2).

    One subsample B per validation point serves all owners: B \\ {z_l} is a Poisson subsample of
    D_{-z_l}, so each owner's release has the distribution of App. B.3.2 (fresh sample per owner)
    at O(N log N) instead of O(N^2) per validation point.
    """
    sampled = jax.random.bernoulli(key, sampling_probability, dist.shape)
    return _in_distance_order(dist, lambda a, s: _knn_original_sorted(a, s, k, dist.dtype), agree, sampled)


def _knn_soft_sorted(a: jax.Array, k: int, inv_classes: float) -> jax.Array:
    """Soft-label KNN-Shapley recursion on points sorted by distance (Wang et al. 2023, Thm 7).

    For N < K the printed increment does not match brute-force Shapley values; the game is then the TKNN game with
    every point a neighbour, so Eq. 7 with m = N is used (docs/knn.md, "Where we depart from the paper").
    """
    n = a.shape[0]
    if n < k:
        return tknn_from_counts(a > 0, jnp.asarray(n, a.dtype), jnp.sum(a) - a, inv_classes)
    if n == 1:
        return a - inv_classes
    h_k = harmonic(jnp.asarray(k, a.dtype))
    last = (a[-1] - jnp.sum(a[:-1]) / (n - 1)) * (h_k - 1.0) / n + (a[-1] - inv_classes) / n
    i = jnp.arange(1, n, dtype=a.dtype)
    increments = (a[:-1] - a[1:]) / (n - 1) * (h_k + (jnp.minimum(i, k) * (n - 1) / i - k) / k)
    return last + jnp.concatenate([jnp.cumsum(increments[::-1])[::-1], jnp.zeros(1, a.dtype)])


def knn_shapley_soft(dist: jax.Array, agree: jax.Array, k: int, inv_classes: float) -> jax.Array:
    """Soft-label KNN-Shapley (utility Eq. 2 with v(empty) = 1/C; Wang et al. 2023, Thm 7), of the tie-symmetric
    game where distances tie (`_tie_symmetric`)."""
    n = dist.shape[0]
    values = partial(_knn_soft_sorted, k=k, inv_classes=inv_classes)
    if n < k or n == 1:  # every point a neighbour: the TKNN game, whose values do not depend on the order
        return _in_distance_order(dist, values, agree.astype(dist.dtype))

    def symmetric(d, a):
        # Thm 7 as `_knn_soft_sorted` computes it: V_r = last + sum_{i = r}^{n - 1} (a_i - a_{i + 1}) w_i, affine in
        # a, with d last / d a_j = -(H_K - 1) / (n (n - 1)) for j < n and (H_K - 1) / n + 1 / n for j = n
        h_k = harmonic(jnp.asarray(k, a.dtype))
        i = jnp.arange(1, n, dtype=a.dtype)
        w = jnp.append((h_k + (jnp.minimum(i, k) * (n - 1) / i - k) / k) / (n - 1), 0.0)  # w_n = 0
        d_last = jnp.full(n, -(h_k - 1.0) / (n * (n - 1.0))).at[-1].set(h_k / n)
        group, _, last = _tie_groups(d)
        block = jax.ops.segment_sum(d_last, group, num_segments=n)[group] + w[last]  # (A 1_G)_r: r's group's sum
        return _tie_symmetric(d, a, values, d_last + w, block)

    return _in_distance_order(dist, symmetric, dist, agree.astype(dist.dtype))


def _tie_groups(sorted_dist: jax.Array) -> tuple[jax.Array, jax.Array, jax.Array]:
    """Per sorted position: the id of its group of equal distances, and the group's first and last positions."""
    n = sorted_dist.shape[0]
    starts = jnp.concatenate([jnp.ones(1, bool), sorted_dist[1:] != sorted_dist[:-1]])
    group = jnp.cumsum(starts) - 1
    positions = jnp.arange(n)
    first = jax.ops.segment_min(positions, group, num_segments=n)[group]
    last = jax.ops.segment_max(positions, group, num_segments=n)[group]
    return group, first, last


def _tie_symmetric(sorted_dist, a, values, diagonal, block) -> jax.Array:
    """The Shapley values of the tie-symmetric game, E over uniform orders within each group of tied distances of
    the values with ties broken by that order (by linearity, the Shapley value of the game whose utility is the
    average over those orders): so tied points of one label get one value, whatever the rows' order.

    `values` maps sorted labels a to the sorted values A a + b (affine in a), `diagonal` is A_rr and `block` is
    (A 1_G)_r, the sum of row r of A over r's group G. A point p of label a_p lands at each rank r of G with
    probability 1/g; the other g - 1 fill G's other ranks with mean label mu_p = (g m_G - a_p) / (g - 1), and every
    other group's ranks take its mean m_G', so E[phi_p] = mean_{r in G} V_r(a_bar) + (a_p - mu_p)
    (mean_{r in G} A_rr - mean_{r in G} (A 1_G)_r / g), a_bar the labels averaged within their groups. Without ties
    it is A a + b exactly (docs/knn.md, "Ties")."""
    n = a.shape[0]
    group = _tie_groups(sorted_dist)[0]
    size = jax.ops.segment_sum(jnp.ones(n, a.dtype), group, num_segments=n)

    def mean(x):
        return (jax.ops.segment_sum(x, group, num_segments=n) / jnp.maximum(size, 1.0))[group]

    g = size[group]
    smoothed = mean(a)
    others = jnp.where(g > 1, (g * smoothed - a) / jnp.maximum(g - 1.0, 1.0), a)
    return mean(values(smoothed)) + (a - others) * (mean(diagonal) - mean(block) / g)


def _point_geometry(x_train, y_train, distance: str):
    """(x_val, y_val) -> (distances to every training point, same-label indicators)."""
    train_sq_norms = squared_norms(x_train) if distance == "euclidean" else None

    def geometry(x_val, y_val):
        return distance_row(x_val, x_train, train_sq_norms, distance), y_train == y_val

    return geometry


@partial(jax.jit, static_argnames=("k", "variant", "distance", "batch_size"))
def knn_shapley_values(
    x_train, y_train, x_val, y_val, inv_classes, *, k: int, variant: str, distance: str, batch_size: int
) -> jax.Array:
    """KNN-Shapley of every training point summed over the validation set; variant 'soft' | 'original'."""
    geometry = _point_geometry(x_train, y_train, distance)

    def point(x_v, y_v):
        dist, agree = geometry(x_v, y_v)
        if variant == "soft":
            return knn_shapley_soft(dist, agree, k, inv_classes), ()
        return knn_shapley_original(dist, agree, k), ()

    return sum_over_validation(point, (x_val, y_val), x_train.shape[0], batch_size)[0]


@partial(jax.jit, static_argnames=("distance", "batch_size"))
def tknn_shapley_values(
    x_train, y_train, x_val, y_val, tau, inv_classes, *, distance: str, batch_size: int
) -> tuple[jax.Array, jax.Array]:
    """TKNN-Shapley summed over the validation set, and each validation point's ball size."""
    geometry = _point_geometry(x_train, y_train, distance)

    def point(x_v, y_v):
        dist, agree = geometry(x_v, y_v)
        return tknn_shapley(dist, agree, tau, inv_classes), jnp.sum(within(dist, tau))

    return sum_over_validation(point, (x_val, y_val), x_train.shape[0], batch_size)


@partial(jax.jit, static_argnames=("distance", "batch_size"))
def private_tknn_shapley_values(
    key,
    noise,
    x_train,
    y_train,
    x_val,
    y_val,
    tau,
    inv_classes,
    sampling_probability,
    *,
    distance: str,
    batch_size: int,
) -> tuple[jax.Array, jax.Array]:
    """DP-TKNN-Shapley summed over the validation set, and the released counts (N_val, 3).

    `key` is the privacy key of the release (`Mechanism.run_on_grid`): the Poisson subsamples are secret too, or
    they would amplify nothing, one key per point. `noise` (N_val, 3): each point's count noise in counts, drawn
    exactly on the grid (`noisy_tknn_counts`).
    """
    geometry = _point_geometry(x_train, y_train, distance)

    def point(x_v, y_v, sample_key, point_noise):
        dist, agree = geometry(x_v, y_v)
        return private_tknn_shapley(sample_key, point_noise, dist, agree, tau, inv_classes, sampling_probability)

    per_point = (x_val, y_val, jax.random.split(key, x_val.shape[0]), noise)
    return sum_over_validation(point, per_point, x_train.shape[0], batch_size)


@partial(jax.jit, static_argnames=("k", "subsample", "distance", "batch_size"))
def noisy_knn_shapley_values(
    key,
    noise,
    x_train,
    y_train,
    x_val,
    y_val,
    sampling_probability,
    grid,
    *,
    k: int,
    subsample: bool,
    distance: str,
    batch_size: int,
) -> jax.Array:
    """Naive DP-KNN-Shapley (App. B.4): KNN-OLD (on a subsample if `subsample`) + N(0, noise_std^2), on a grid.

    Each owner's value at each validation point is rounded to the power-of-two `grid` and gets its own noise
    (`noise` (N_val, N), in grid steps, drawn exactly: `bayesval.privacy.Mechanism.gaussian_on_grid`), so every
    release is whole grid steps; their sum over the validation set is exact, times the grid. App. B.4's
    N(0, 1/(K(K+1))) is read as noise_std = multiplier / (K(K+1)), the sensitivity of Thm 10 (docs/knn.md, "Where
    we depart from the paper"). Without noise (zeros), the values rounded to the grid. `key` draws the subsamples.
    """
    geometry = _point_geometry(x_train, y_train, distance)

    def point(x_v, y_v, sample_key, point_noise):
        dist, agree = geometry(x_v, y_v)
        if subsample:
            values = subsampled_knn_shapley_original(sample_key, dist, agree, k, sampling_probability)
        else:
            values = knn_shapley_original(dist, agree, k)
        return jnp.round(values / grid) + point_noise.astype(values.dtype), ()

    per_point = (x_val, y_val, jax.random.split(key, x_val.shape[0]), noise)
    return sum_over_validation(point, per_point, x_train.shape[0], batch_size)[0] * grid


__all__ = [
    "distance_order",
    "harmonic",
    "knn_shapley_original",
    "knn_shapley_soft",
    "knn_shapley_values",
    "noisy_knn_shapley_values",
    "noisy_tknn_counts",
    "private_tknn_shapley",
    "private_tknn_shapley_values",
    "subsampled_knn_shapley_original",
    "tknn_from_counts",
    "tknn_shapley",
    "tknn_shapley_values",
]
