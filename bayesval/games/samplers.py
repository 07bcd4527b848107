"""Coalition samplers: fixed-size batches of masks from an explicit key, and the draws they give each index.

A sampler is configured once (its options) and planned for a game (`plan(num_players, batch_size, semivalue)`), which
gives a `BatchPlan`: `draw(key) -> (masks (M, n), aux)` with M fixed, so a jitted utility compiles once, and
`reduce(values (R, M), aux) -> (sums (R, G, n), sums_sq (G, n), counts (G, n))`, the batch's draws of each index
filed into the sampler's G groups (see `bayesval.games.state`). Both are jitted, cached by JAX on their static
shapes. Every draw is an unbiased estimate of its group's mean, for any semivalue:

* `PermutationSampler`: a permutation's marginal contributions (Castro et al. 2009), importance weighted by
  n binom(n-1, s) w(s) for a predecessor set of size s (1 for Shapley; as pyDVL's semivalue sampling). Antithetic:
  each permutation with its reverse, the pair's mean one draw.
* `UniformSampler`: uniform random coalitions, each used for every index (maximum sample reuse, Wang & Jia 2023,
  Eq. 4): phi_i = 2^(n-1) (E[w(|S|-1) v(S) | i in S] - E[w(|S|) v(S) | i not in S]); for Banzhaf the difference of
  the mean value of the coalitions with and without i.
* `StratifiedSampler`: per index i and coalition size s, uniform coalitions S of N minus i of size s and the marginal
  contribution v(S u i) - v(S); phi_i = sum_s binom(n-1, s) w(s) mean_s (the layers of Layered Shapley, Watson et al.;
  spec_layered_shapley.md Sec. 3.2, with every layer sampled and the mean estimator). Each batch allocates its draws
  over the sizes: a quarter evenly, three quarters in proportion to `allocation` (default the semivalue's size
  weights), and at least two per used size, so that every batch alone gives each layer a variance, estimated from
  enough draws to be trusted (proportional allocation left Beta(4, 1)'s large layers a few dozen 0/1 draws of a
  voting game, whose variance was at times near 0: z-scores beyond 6).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from bayesval.games.weights import Semivalue
from bayesval.validation import check_bool


class BatchPlan(NamedTuple):
    """A sampler specialised to a game: G group coefficients, M masks per batch, and its two jitted steps."""

    coefficients: np.ndarray
    num_masks: int
    draw: Any
    reduce: Any


@dataclass(frozen=True)
class PermutationSampler:
    """Random permutations, each giving every index one draw (n + 1 coalitions); `antithetic` pairs each with its
    reverse (the batch size must then be even)."""

    antithetic: bool = False

    def __post_init__(self) -> None:
        check_bool("antithetic", self.antithetic)

    @property
    def name(self) -> str:
        return "permutation (antithetic)" if self.antithetic else "permutation"

    def plan(self, num_players: int, batch_size: int, semivalue: Semivalue) -> BatchPlan:
        if self.antithetic and batch_size % 2:
            raise ValueError(f"batch_size must be even for antithetic permutations (pairs), got {batch_size}")
        importance = jnp.asarray(num_players * semivalue.size_weights(num_players))
        draw = partial(_permutation_masks, num_players=num_players, batch_size=batch_size, antithetic=self.antithetic)
        reduce = partial(_permutation_reduce, importance=importance, antithetic=self.antithetic)
        return BatchPlan(np.ones(1), batch_size * (num_players + 1), draw, reduce)


@partial(jax.jit, static_argnames=("num_players", "batch_size", "antithetic"))
def _permutation_masks(key, num_players: int, batch_size: int, antithetic: bool):
    orders = jnp.argsort(jax.random.uniform(key, (batch_size // 2 if antithetic else batch_size, num_players)), axis=1)
    if antithetic:
        orders = jnp.concatenate([orders, orders[:, ::-1]])
    ranks = jnp.argsort(orders, axis=1)  # position of each player
    prefixes = ranks[:, None, :] < jnp.arange(num_players + 1)[None, :, None]  # (B, n + 1, n): the first k players
    return prefixes.reshape(-1, num_players), ranks


@partial(jax.jit, static_argnames=("antithetic",))
def _permutation_reduce(values, ranks, importance, antithetic: bool):
    batch, num_players = ranks.shape
    steps = jnp.diff(values.reshape(len(values), batch, num_players + 1), axis=2)  # (R, B, n): k-th player's gain
    draws = jnp.take_along_axis(steps, ranks[None], axis=2) * importance[ranks]  # (R, B, n) by player
    if antithetic:
        draws = 0.5 * (draws[:, : batch // 2] + draws[:, batch // 2 :])
    mean_draws = draws.mean(axis=0)
    counts = jnp.full((1, num_players), draws.shape[1])
    return draws.sum(axis=1)[:, None], (mean_draws**2).sum(axis=0)[None], counts


@dataclass(frozen=True)
class UniformSampler:
    """Uniform random coalitions (each player in with probability 1/2), every one used for every index."""

    @property
    def name(self) -> str:
        return "uniform"

    def plan(self, num_players: int, batch_size: int, semivalue: Semivalue) -> BatchPlan:
        scaled = jnp.asarray(np.append(semivalue.weights(num_players), 0.0) * 2.0 ** (num_players - 1))
        draw = partial(_uniform_masks, num_players=num_players, batch_size=batch_size)
        return BatchPlan(np.array([1.0, -1.0]), batch_size, draw, partial(_uniform_reduce, scaled_weights=scaled))


@partial(jax.jit, static_argnames=("num_players", "batch_size"))
def _uniform_masks(key, num_players: int, batch_size: int):
    masks = jax.random.bernoulli(key, 0.5, (batch_size, num_players))
    return masks, masks


@jax.jit
def _uniform_reduce(values, masks, scaled_weights):
    sizes = masks.sum(axis=1)
    members = masks * scaled_weights[jnp.maximum(sizes - 1, 0)][:, None]  # (B, n): weight of v(S) in group "in"
    others = ~masks * scaled_weights[sizes][:, None]  # group "out"
    mean_values = values.mean(axis=0)
    sums = jnp.stack([values @ members, values @ others], axis=1)  # (R, 2, n)
    sums_sq = jnp.stack([mean_values**2 @ members**2, mean_values**2 @ others**2])
    inside = masks.sum(axis=0)
    return sums, sums_sq, jnp.stack([inside, len(masks) - inside])


@dataclass(frozen=True)
class StratifiedSampler:
    """Per index and coalition size, uniform coalitions of that size without the index (2 n B coalitions a batch).

    `allocation` (n,) weighs the sizes' share of each batch's B draws per index (default: the semivalue's
    binom(n-1, s) w(s)); a size with zero semivalue weight is never sampled."""

    allocation: tuple[float, ...] | None = None

    def __post_init__(self) -> None:
        if self.allocation is not None:
            allocation = np.asarray(self.allocation, np.float64)
            if allocation.ndim != 1 or not np.all(np.isfinite(allocation)) or np.any(allocation < 0):
                raise ValueError(f"allocation must be finite weights >= 0, one per coalition size, got {allocation}")
            object.__setattr__(self, "allocation", tuple(allocation.tolist()))

    @property
    def name(self) -> str:
        return "stratified" if self.allocation is None else f"stratified {list(self.allocation)}"

    def draws_per_size(self, num_players: int, batch_size: int, semivalue: Semivalue) -> np.ndarray:
        """Draws per coalition size in each batch: two for every size the semivalue weighs, the rest a quarter evenly
        over those sizes and three quarters in proportion to the allocation (largest remainders)."""
        used = semivalue.size_weights(num_players) > 0
        allocation = semivalue.size_weights(num_players) if self.allocation is None else np.array(self.allocation)
        if len(allocation) != num_players:
            raise ValueError(f"allocation needs one weight per coalition size 0..{num_players - 1}, got {allocation}")
        if np.any(used & (allocation <= 0)):
            raise ValueError(
                f"allocation gives no draws to coalition sizes {np.flatnonzero(used & (allocation <= 0)).tolist()}, "
                f"which the semivalue weighs: their layers would never be estimated"
            )
        if batch_size < 2 * used.sum():
            raise ValueError(
                f"batch_size must be at least twice the number of coalition sizes the semivalue weighs ({used.sum()}) "
                f"for stratified sampling (two draws per size give each layer a variance), got {batch_size}"
            )
        share = np.where(used, allocation / allocation[used].sum(), 0.0)
        share = 0.25 * used / used.sum() + 0.75 * share  # a quarter spread evenly: no layer's variance from a handful
        counts = 2 * used.astype(np.int64)
        quota = share * (batch_size - counts.sum())
        counts += np.floor(quota).astype(np.int64)
        remainder = np.argsort(-(quota - np.floor(quota)), kind="stable")[: batch_size - counts.sum()]
        counts[remainder] += 1
        return counts

    def plan(self, num_players: int, batch_size: int, semivalue: Semivalue) -> BatchPlan:
        per_size = self.draws_per_size(num_players, batch_size, semivalue)
        sizes = jnp.asarray(np.repeat(np.arange(num_players), per_size))
        draw = partial(_stratified_masks, sizes=sizes, num_players=num_players)
        reduce = partial(_stratified_reduce, sizes=sizes)
        return BatchPlan(semivalue.size_weights(num_players), 2 * num_players * batch_size, draw, reduce)


@partial(jax.jit, static_argnames=("num_players",))
def _stratified_masks(key, sizes, num_players: int):
    players = jnp.eye(num_players, dtype=bool)[:, None, :]  # (n, 1, n): index i's own column
    scores = jnp.where(players, 2.0, jax.random.uniform(key, (num_players, len(sizes), num_players)))
    ranks = jnp.argsort(jnp.argsort(scores, axis=2), axis=2)
    without = ranks < sizes[None, :, None]  # (n, B, n): the sizes[b] lowest scores, never i itself
    return jnp.concatenate([without | players, without]).reshape(-1, num_players), ()


@jax.jit
def _stratified_reduce(values, aux, sizes):
    num_players, batch = values.shape[1] // (2 * len(sizes)), len(sizes)
    paired = values.reshape(len(values), 2, num_players, batch)
    gains = paired[:, 0] - paired[:, 1]  # (R, n, B)
    layers = jax.nn.one_hot(sizes, num_players, dtype=values.dtype)  # (B, G)
    sums = jnp.einsum("rnb,bg->rgn", gains, layers)
    sums_sq = jnp.einsum("nb,bg->gn", gains.mean(axis=0) ** 2, layers)
    counts = jnp.broadcast_to(layers.sum(axis=0)[:, None], (num_players, num_players)).astype(jnp.int64)
    return sums, sums_sq, counts


Sampler = PermutationSampler | UniformSampler | StratifiedSampler


def default_sampler(semivalue: Semivalue) -> Sampler:
    """Maximum sample reuse for Banzhaf (Wang & Jia 2023), stratified for leave-one-out (one layer), else
    permutations."""
    if semivalue.kind == "banzhaf":
        return UniformSampler()
    if semivalue.kind == "loo":
        return StratifiedSampler()
    return PermutationSampler()
