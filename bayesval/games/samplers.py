"""Coalition samplers: fixed-size batches of masks from an explicit key, and the draws they give each index.

A sampler is configured once (its options) and planned for a game (`plan(num_players, batch_size, semivalue)`), which
gives a `BatchPlan`: `draw(key, state) -> (masks (M, n), aux)` with M fixed, so a jitted utility compiles once (the
state of the run so far, None before the first batch, steers the adaptive samplers), and
`reduce(values (R, M), aux) -> BatchStatistics`, the batch's draws of each index filed into the sampler's G groups
(see `bayesval.results.state`). Every draw is an unbiased estimate of its group's mean, for any semivalue, and
phi_i = sum_g c_g E[x_gi].

The groups follow coalition sizes. A size s of which N minus i has a single coalition (s = 0: the empty coalition,
s = n - 1: everyone else) is an *exact* group: its marginal v(S u i) - v(S) is one number, valued twice per batch,
so a rare event there (the airport game's cheapest player adds value only when it comes first) costs no variance,
where the utility gives a coalition one value (`bayesval.games.utilities`); a keyed utility's vary by its noise.

* `PermutationSampler`: a permutation's marginal contributions (Castro et al. 2009), filed as first, middle or last;
  a middle draw at position s is importance weighted by (n - 2) binom(n-1, s) w(s) / c_middle (1 for Shapley; as
  pyDVL's semivalue sampling). Antithetic: each permutation with its reverse, a middle pair's mean one draw.
  Latin: blocks of n permutations, the rows of a random Latin square, so that each index takes every position once
  a block, and a draw at position s filed unweighted in a layer of size s, as stratified sampling files them (c_s
  the semivalue's size weight): stratified by position, with the coalitions shared along each permutation. Where
  marginals shrink with the coalition (diminishing returns) the spread between positions, most of a plain
  permutation's variance, drops out (docs/games.md, "Latin permutations").
  Prefixed: each permutation with `prefixes` more cut after their first `depth` positions (their coalitions the
  smallest, so the cheapest where a coalition's cost grows with its members), each draw filed by its position as
  first, early (1 to depth - 1), late (depth to n - 2) or last, and a group's mean taken over its draws
  (post-stratified): where the marginals spread most in small coalitions, as a party game's against its control
  do, the early positions get the draws their variance asks for at a fraction of a permutation's cost, and a
  party's draws are no longer a mix of wide and narrow spreads whose tails hide the variance (docs/games.md,
  "Prefixed permutations").
* `UniformSampler`: uniform random coalitions, each used for every index (maximum sample reuse, Wang & Jia 2023,
  Eq. 4): phi_i = 2^(n-1) (E[w(|S|-1) v(S) | i in S] - E[w(|S|) v(S) | i not in S]); for Banzhaf the difference of
  the mean value of the coalitions with and without i.
* `StratifiedSampler`: per index i and coalition size s, uniform coalitions S of N minus i of size s and the marginal
  v(S u i) - v(S); phi_i = sum_s binom(n-1, s) w(s) mean_s (the layers of Layered Shapley, Watson et al., with every
  layer sampled and the mean estimator). Its allocation is adaptive (Neyman 1934): each batch gives every used size
  two draws per index, and the rest where c_s sigma_s, with the honest layer spreads of the run so far
  (`bayesval.results.variance`), says the variance is.
  Its fixed mode, `StratifiedSampler.fixed_draws(key, counts)`, draws a given number of coalitions per index and
  size in one go, every coalition where the count asks for all of them, else without replacement where the size's
  coalitions can be listed and independently (with replacement) where they cannot: the layer sampling of Layered
  Shapley (Watson et al. 2023, Alg. 1), whose counts come from its (alpha, beta) guarantee.
* `SemivalueSampler`: coalitions drawn from the semivalue's own distribution, the size s with probability
  binom(n-1, s) w(s), then uniform members, so every draw has weight 1 (the exact sizes are valued on their own).

Importance weights with heavy tails make standard errors lie (a few huge draws dominate): `BatchPlan.weight_inflation`
is E_q[r^2] of the weights r = p / q, the factor by which they shrink the effective number of draws (Kong 1992);
`semivalue` warns above `HEAVY_TAILS` and names the sampler to use (docs/games.md, "Calibration").
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from functools import partial
from math import comb
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from bayesval.games.weights import Semivalue
from bayesval.validation import check_bool, check_int

HEAVY_TAILS = 2.0  # weight inflation E_q[r^2] above which a sampler's importance weights are too heavy-tailed
LAYER_DRAWS = 30  # draws per layer and batch below which stratified layer variances are not to be trusted
ENUMERATION_LIMIT = 20_000  # in the fixed mode, sizes of at most this many coalitions are sampled without replacement


class BatchStatistics(NamedTuple):
    """One batch's draws of each index, per group: sums (R, G, n) per utility estimate, and of the draws averaged over
    the R estimates the sums of their squared, cubed and fourth-power deviations from the batch's group mean m2, m3,
    m4 (G, n) (m4 says how far the variance can be trusted: `bayesval.results.variance`), counts (G, n) and the
    smallest and largest draw low, high (G, n) (+inf, -inf where a group drew nothing)."""

    sums: Any
    m2: Any
    m3: Any
    m4: Any
    counts: Any
    low: Any
    high: Any


class BatchPlan(NamedTuple):
    """A sampler specialised to a game: G group coefficients, which groups hold one coalition (exact) and which are
    strata of coalition sizes (layers: one size, or positions no other group draws from), M masks per batch, its two
    steps, the weight inflation of its importance weights (1 without weights), and what makes its standard errors
    unreliable for this game, if anything (for a warning)."""

    coefficients: np.ndarray
    exact: np.ndarray
    layers: np.ndarray
    num_masks: int
    draw: Any
    reduce: Any
    weight_inflation: float
    unreliable: str | None = None


def heavy_tails(inflation: float) -> str | None:
    """Why importance weights that inflate the variance `inflation`-fold make standard errors lie, or None."""
    if inflation <= HEAVY_TAILS:
        return None
    return (
        f"its importance weights are heavy-tailed (they shrink the effective number of draws {inflation:.3g}-fold, "
        f"above {HEAVY_TAILS:g}), so a few huge draws decide the estimate and its standard error"
    )


def size_groups(num_players: int) -> np.ndarray:
    """The group (0 first, 1 middle, 2 last) of each coalition size 0..n-1: sizes 0 and n - 1 are single coalitions."""
    groups = np.ones(num_players, np.int64)
    groups[0] = 0
    if num_players > 1:
        groups[-1] = 2
    return groups


def single_coalition_sizes(num_players: int) -> np.ndarray:
    """The coalition sizes 0..n-1 (n,) of which N minus i holds a single coalition: 0 and n - 1 (exact groups)."""
    return np.array([comb(num_players - 1, size) == 1 for size in range(num_players)])


def end_coefficients(num_players: int, semivalue: Semivalue) -> np.ndarray:
    """c_g of the groups first, middle, last: the semivalue's probability of each (sizes 0, 1..n-2, n-1)."""
    return np.bincount(size_groups(num_players), semivalue.size_weights(num_players), minlength=3)


def group_weights(groups: np.ndarray, sizes: np.ndarray, num_groups: int) -> tuple[np.ndarray, np.ndarray, float]:
    """For a permutation's draws filed by position into `groups` (one a position 0..n-1, the first and the last group
    the ends): c_g, the semivalue's probability of each group (`sizes`: its size weights w(s)); each position's
    importance weight, (positions in its group) w(s) / c_g (0 where c_g is 0, 1 at the ends); and the variance
    inflation, the largest mean square of a middle group's weights (1 without one)."""
    coefficients = np.bincount(groups, sizes, minlength=num_groups)
    positions = np.bincount(groups, minlength=num_groups)
    with np.errstate(invalid="ignore", divide="ignore"):
        importance = np.where(coefficients[groups] > 0, positions[groups] * sizes / coefficients[groups], 0.0)
    importance[[0, -1]] = 1.0
    middle = [importance[groups == group] for group in range(1, num_groups - 1) if coefficients[group] > 0]
    return coefficients, importance, max((float(np.mean(weights**2)) for weights in middle), default=1.0)


@partial(jax.jit, static_argnames=("num_groups",))
def file_draws(draws, groups, num_groups: int) -> BatchStatistics:
    """Draws (R, D, n) of each index, and their groups (D, n) (num_groups: not filed), as BatchStatistics."""
    member = jax.nn.one_hot(groups, num_groups, dtype=draws.dtype)  # (D, n, G)
    counts = member.sum(axis=0).T  # (G, n)
    sums = jnp.einsum("rdn,dng->rgn", draws, member)
    averaged = draws.mean(axis=0)  # (D, n)
    means = sums.mean(axis=0) / jnp.maximum(counts, 1)
    deviations = averaged - jnp.take_along_axis(means.T, jnp.minimum(groups, num_groups - 1).T, axis=1).T
    m2, m3, m4 = (jnp.einsum("dn,dng->gn", deviations**power, member) for power in (2, 3, 4))
    inside = member.transpose(2, 0, 1) > 0  # (G, D, n)
    low = jnp.where(inside, averaged[None], jnp.inf).min(axis=1)
    high = jnp.where(inside, averaged[None], -jnp.inf).max(axis=1)
    return BatchStatistics(sums, m2, m3, m4, counts.astype(jnp.int64), low, high)


def end_masks(num_players: int) -> np.ndarray:
    """The 2n + 2 coalitions of the exact sizes: the empty one, each {i}, each N minus i, and N."""
    eye = np.eye(num_players, dtype=bool)
    return np.concatenate([np.zeros((1, num_players), bool), eye, ~eye, np.ones((1, num_players), bool)])


def end_draws(values):
    """From the values (R, 2n + 2) of `end_masks`: draws (R, 2, n) of v({i}) - v({}) and v(N) - v(N minus i)."""
    num_players = (values.shape[1] - 2) // 2
    first = values[:, 1 : num_players + 1] - values[:, :1]
    last = values[:, -1:] - values[:, num_players + 1 : -1]
    return jnp.stack([first, last], axis=1)


@dataclass(frozen=True)
class PermutationSampler:
    """Random permutations, each giving every index one draw (n + 1 coalitions), plus the exact sizes valued twice
    (2 (2n + 2) coalitions); `antithetic` pairs each permutation with its reverse (the batch size must be even);
    `latin` draws blocks of n permutations in which each index takes every position once (`_latin_orders`; the batch
    size must be a multiple of n) and files each draw in the layer of its position's coalition size; `prefixes`
    (>= 1) draws that many permutations more beside each, cut after their first `depth` positions (depth + 1
    coalitions; None: a third of the players, rounded up; 2 <= depth <= n - 2), and files every draw by its position
    as first, early (positions 1 to depth - 1), late (depth to n - 2) or last. The batch size counts the whole
    permutations."""

    antithetic: bool = False
    latin: bool = False
    prefixes: int = 0
    depth: int | None = None

    def __post_init__(self) -> None:
        check_bool("antithetic", self.antithetic)
        check_bool("latin", self.latin)
        check_int("prefixes", self.prefixes, minimum=0)
        if self.depth is not None:
            check_int("depth", self.depth, minimum=2)
            if not self.prefixes:
                raise ValueError("PermutationSampler: depth is the cut of the prefixes; set prefixes >= 1 with it")
        if self.antithetic + self.latin + bool(self.prefixes) > 1:
            raise ValueError("PermutationSampler: choose one of antithetic, latin or prefixed permutations")

    @property
    def name(self) -> str:
        if self.prefixes:
            depth = "a third" if self.depth is None else str(self.depth)
            return f"permutation ({self.prefixes} prefixes {depth} deep)"
        return "permutation (antithetic)" if self.antithetic else "permutation (Latin)" if self.latin else "permutation"

    def prefix_depth(self, num_players: int) -> int:
        """The positions a prefix values: `depth`, or a third of the players rounded up; a ValueError where it leaves
        the early or the late positions empty (it must lie in 2..n - 2)."""
        depth = -(-num_players // 3) if self.depth is None else self.depth
        if not 2 <= depth <= num_players - 2:
            raise ValueError(
                f"prefixed permutations of {num_players} players need a depth in 2..{num_players - 2} (early and late "
                f"positions both), got {depth}" + ("" if num_players >= 4 else ": they need at least 4 players")
            )
        return depth

    def plan(self, num_players: int, batch_size: int, semivalue: Semivalue) -> BatchPlan:
        if self.antithetic and batch_size % 2:
            raise ValueError(f"batch_size must be even for antithetic permutations (pairs), got {batch_size}")
        if self.latin and batch_size % num_players:
            raise ValueError(
                f"batch_size must be a multiple of the {num_players} players for Latin permutations (blocks in which "
                f"each player takes every position once), got {batch_size}"
            )
        ends = jnp.asarray(np.tile(end_masks(num_players), (2, 1)))
        if self.prefixes:
            return self._prefixed_plan(num_players, batch_size, semivalue, ends)
        options = {"antithetic": self.antithetic, "latin": self.latin}
        draw = partial(_permutation_masks, ends=ends, batch_size=batch_size, **options)
        num_masks = batch_size * (num_players + 1) + len(ends)
        if self.latin:  # a layer per coalition size, as stratified sampling files them
            layers = np.ones(num_players, bool)
            sizes = semivalue.size_weights(num_players)
            return BatchPlan(sizes, single_coalition_sizes(num_players), layers, num_masks, draw, _latin_reduce, 1.0)
        groups = size_groups(num_players)
        coefficients, importance, inflation = group_weights(groups, semivalue.size_weights(num_players), 3)
        reduce = partial(
            _permutation_reduce,
            importance=jnp.asarray(importance),
            groups_by_rank=jnp.asarray(groups),
            antithetic=self.antithetic,
        )
        ends = np.array([True, False, True])
        return BatchPlan(coefficients, ends, ends, num_masks, draw, reduce, inflation, heavy_tails(inflation))

    def _prefixed_plan(self, num_players: int, batch_size: int, semivalue: Semivalue, ends) -> BatchPlan:
        """Groups first, early, late, last by position; a middle draw at position s weighted by (the group's
        positions) w(s) / c_group (1 for Shapley), as the plain sampler weights its middle."""
        depth = self.prefix_depth(num_players)
        groups = np.array([0] + [1] * (depth - 1) + [2] * (num_players - 1 - depth) + [3])  # by position
        coefficients, importance, inflation = group_weights(groups, semivalue.size_weights(num_players), 4)
        prefixes = batch_size * self.prefixes
        draw = partial(_prefixed_masks, ends=ends, batch_size=batch_size, prefixes=prefixes, depth=depth)
        reduce = partial(
            _prefixed_reduce,
            importance=jnp.asarray(importance),
            groups_by_rank=jnp.asarray(groups),
            batch=batch_size,
            depth=depth,
        )
        num_masks = batch_size * (num_players + 1) + prefixes * (depth + 1) + len(ends)
        exact = np.array([True, False, False, True])
        # Every group a stratum of positions no other group draws from: its variance is guarded by its own range, as
        # a layer's is (bayesval.results.variance). The index's range would guard the late positions' narrow spread
        # with the early ones' wide range: on the 6-party surprise game the standard errors came out 1.39 times the
        # spread over keys that way, 1.03 with their own ranges.
        strata = np.ones(4, bool)
        return BatchPlan(coefficients, exact, strata, num_masks, draw, reduce, inflation, heavy_tails(inflation))


def _permutation_masks(key, state, ends, batch_size: int, antithetic: bool, latin: bool):
    return _permutation_chains(key, ends, batch_size, antithetic, latin)


def _latin_orders(key, blocks: int, num_players: int):
    """Blocks (blocks x n, n) of n permutations, a random Latin square each: row t puts at position k the player
    sigma((pi(k) + t) mod n), sigma and pi uniform permutations of the block, so each player takes every position
    once. Each row is a uniform permutation, so a player's draw at a position is a uniform coalition of that size;
    permuting the columns (pi) keeps a player's coalitions at different positions from all nesting along one cycle,
    which in the cyclic square (pi the identity) makes its marginals across positions covary. The layers' variances
    take a block's draws as independent; measured, they covary negatively (on the 6-party noisy game a block's
    estimate varied 0.0186 where independent positions give 0.0302), so its standard errors are conservative, up to
    about 1.3-fold there (docs/games.md, "Latin permutations")."""
    symbols, columns = jax.random.split(key)
    sigma = jnp.argsort(jax.random.uniform(symbols, (blocks, num_players)), axis=1)
    pi = jnp.argsort(jax.random.uniform(columns, (blocks, num_players)), axis=1)
    shifted = (pi[:, None, :] + jnp.arange(num_players)[None, :, None]) % num_players  # (blocks, t, k)
    return jnp.take_along_axis(sigma[:, None, :], shifted, axis=2).reshape(blocks * num_players, num_players)


@partial(jax.jit, static_argnames=("batch_size", "antithetic", "latin"))
def _permutation_chains(key, ends, batch_size: int, antithetic: bool, latin: bool):
    num_players = ends.shape[1]
    if latin:
        orders = _latin_orders(key, batch_size // num_players, num_players)
    else:
        shape = (batch_size // 2 if antithetic else batch_size, num_players)
        orders = jnp.argsort(jax.random.uniform(key, shape), axis=1)
    if antithetic:
        orders = jnp.concatenate([orders, orders[:, ::-1]])
    ranks = jnp.argsort(orders, axis=1)  # position of each player
    prefixes = ranks[:, None, :] < jnp.arange(num_players + 1)[None, :, None]  # (B, n + 1, n): the first k players
    return jnp.concatenate([prefixes.reshape(-1, num_players), ends]), ranks


def _chain_draws(values, ranks):
    """From a permutation batch's values (R, M): each player's marginal in each permutation (R, B, n), and the exact
    sizes' draws (R, 4, n): v({i}) - v({}), v(N) - v(N minus i), twice."""
    batch, num_players = ranks.shape
    marginals = _marginals(values[:, : batch * (num_players + 1)], ranks, num_players)
    return marginals, _exact_draws(values[:, batch * (num_players + 1) :], num_players)


def _marginals(values, ranks, depth: int):
    """The gains (R, B, n) of each player in B permutations valued along their first `depth` positions (values
    (R, B (depth + 1)): the prefixes of 0..depth players): 0 for a player placed at or beyond `depth`."""
    batch, num_players = ranks.shape
    steps = jnp.diff(values.reshape(len(values), batch, depth + 1), axis=2)  # (R, B, depth): the k-th player's gain
    steps = jnp.pad(steps, ((0, 0), (0, 0), (0, num_players - depth)))
    return jnp.take_along_axis(steps, ranks[None], axis=2)


def _exact_draws(values, num_players: int):
    """The exact sizes' draws (R, 4, n) from the values (R, 2 (2n + 2)) of `end_masks` twice."""
    return end_draws(values.reshape(2 * len(values), -1)).reshape(len(values), 4, num_players)  # 2 copies a row


@jax.jit
def _latin_reduce(values, ranks) -> BatchStatistics:
    """Each marginal filed, unweighted, in the layer of its position's coalition size; the exact sizes' draws in
    layers 0 and n - 1."""
    num_players = ranks.shape[1]
    marginals, exact_draws = _chain_draws(values, ranks)
    exact_sizes = jnp.broadcast_to(jnp.array([0, num_players - 1] * 2)[:, None], (4, num_players))
    return file_draws(
        jnp.concatenate([marginals, exact_draws], axis=1), jnp.concatenate([ranks, exact_sizes]), num_groups=num_players
    )


@partial(jax.jit, static_argnames=("antithetic",))
def _permutation_reduce(values, ranks, importance, groups_by_rank, antithetic: bool) -> BatchStatistics:
    batch, num_players = ranks.shape
    marginals, exact_draws = _chain_draws(values, ranks)
    groups = groups_by_rank[ranks]  # (B, n)
    draws = jnp.where(groups == 1, marginals * importance[ranks], marginals)
    exact_groups = jnp.broadcast_to(jnp.array([0, 2, 0, 2])[:, None], (4, num_players))
    if antithetic:  # a middle pair is one draw (its halves are correlated); an end pair is one draw in each end
        half = batch // 2
        pair_means = 0.5 * (draws[:, :half] + draws[:, half:])
        pair_groups = jnp.where(groups[:half] == 1, 1, 3)  # 3: not filed
        end_groups = jnp.where(groups == 1, 3, groups)
        draws = jnp.concatenate([pair_means, draws], axis=1)
        groups = jnp.concatenate([pair_groups, end_groups])
    return file_draws(
        jnp.concatenate([draws, exact_draws], axis=1), jnp.concatenate([groups, exact_groups]), num_groups=3
    )


def _prefixed_masks(key, state, ends, batch_size: int, prefixes: int, depth: int):
    return _prefixed_chains(key, ends, batch_size, prefixes, depth)


@partial(jax.jit, static_argnames=("batch_size", "prefixes", "depth"))
def _prefixed_chains(key, ends, batch_size: int, prefixes: int, depth: int):
    """`batch_size` whole permutations' prefixes (n + 1 each), `prefixes` permutations' first depth + 1, the ends;
    the ranks (batch_size + prefixes, n) of both."""
    num_players = ends.shape[1]
    orders = jnp.argsort(jax.random.uniform(key, (batch_size + prefixes, num_players)), axis=1)
    ranks = jnp.argsort(orders, axis=1)
    whole = ranks[:batch_size, None, :] < jnp.arange(num_players + 1)[None, :, None]
    cut = ranks[batch_size:, None, :] < jnp.arange(depth + 1)[None, :, None]
    return jnp.concatenate([whole.reshape(-1, num_players), cut.reshape(-1, num_players), ends]), ranks


@partial(jax.jit, static_argnames=("batch", "depth"))
def _prefixed_reduce(values, ranks, importance, groups_by_rank, batch: int, depth: int) -> BatchStatistics:
    """Each marginal of the `batch` whole and the cut permutations filed by its position's group (first, early, late,
    last; a cut permutation's players beyond its depth not filed), weighted as `_prefixed_plan` says; the exact
    sizes' draws in first and last."""
    num_players = ranks.shape[1]
    whole_end = batch * (num_players + 1)
    cut_end = whole_end + (len(ranks) - batch) * (depth + 1)
    marginals = jnp.concatenate(
        [
            _marginals(values[:, :whole_end], ranks[:batch], num_players),
            _marginals(values[:, whole_end:cut_end], ranks[batch:], depth),
        ],
        axis=1,
    )
    beyond = (jnp.arange(len(ranks)) >= batch)[:, None] & (ranks >= depth)
    groups = jnp.where(beyond, 4, groups_by_rank[ranks])  # 4: not filed
    draws = marginals * importance[ranks]
    exact_groups = jnp.broadcast_to(jnp.array([0, 3, 0, 3])[:, None], (4, num_players))
    return file_draws(
        jnp.concatenate([draws, _exact_draws(values[:, cut_end:], num_players)], axis=1),
        jnp.concatenate([groups, exact_groups]),
        num_groups=4,
    )


@dataclass(frozen=True)
class UniformSampler:
    """Uniform random coalitions (each player in with probability 1/2), every one used for every index."""

    @property
    def name(self) -> str:
        return "uniform"

    def plan(self, num_players: int, batch_size: int, semivalue: Semivalue) -> BatchPlan:
        scaled = np.append(semivalue.weights(num_players), 0.0) * 2.0 ** (num_players - 1)
        draw = partial(_uniform_masks, num_players=num_players, batch_size=batch_size)
        reduce = partial(_uniform_reduce, scaled_weights=jnp.asarray(scaled))
        size_weights = semivalue.size_weights(num_players)
        inflation = float((size_weights * scaled[:-1]).sum())  # E_q[r^2] = sum_s p(s) r(s), r = 2^(n-1) w(s)
        mixed = np.zeros(2, bool)
        return BatchPlan(
            np.array([1.0, -1.0]), mixed, mixed, batch_size, draw, reduce, inflation, heavy_tails(inflation)
        )


def _uniform_masks(key, state, num_players: int, batch_size: int):
    masks = jax.random.bernoulli(key, 0.5, (batch_size, num_players))
    return masks, masks


@jax.jit
def _uniform_reduce(values, masks, scaled_weights) -> BatchStatistics:
    sizes = masks.sum(axis=1, keepdims=True)
    weights = jnp.where(masks, scaled_weights[jnp.maximum(sizes - 1, 0)], scaled_weights[sizes])  # (B, n)
    return file_draws(values[:, :, None] * weights, jnp.where(masks, 0, 1), num_groups=2)


@dataclass(frozen=True)
class StratifiedSampler:
    """Per index and coalition size, uniform coalitions of that size without the index (2 n B coalitions a batch).

    The first batch shares each index's B draws over the sizes: two for every size the semivalue weighs, a quarter of
    the rest evenly and three quarters in proportion to `allocation` (n,) (default: the semivalue's
    binom(n-1, s) w(s)). Later batches keep the two per size and give the rest by Neyman allocation, in proportion
    to c_s sigma_s per index (the honest layer spreads so far), filling the layers furthest below their share. The
    allocation reads the draws it pools with, so a skewed layer's mean has a bias of order 1 / (its draws), measured
    at 0.5-1.2 % of the value over 2-3 small batches (docs/games.md, "Design")."""

    allocation: tuple[float, ...] | None = None

    def __post_init__(self) -> None:
        if self.allocation is not None:
            try:
                allocation = np.asarray(self.allocation, np.float64)
            except (TypeError, ValueError):
                raise TypeError(
                    f"allocation must be numbers, one weight per coalition size, got {self.allocation!r}"
                ) from None
            if allocation.ndim != 1 or not np.all(np.isfinite(allocation)) or np.any(allocation < 0):
                raise ValueError(f"allocation must be finite weights >= 0, one per coalition size, got {allocation}")
            object.__setattr__(self, "allocation", tuple(allocation.tolist()))

    @property
    def name(self) -> str:
        return "stratified" if self.allocation is None else f"stratified {list(self.allocation)}"

    def draws_per_size(self, num_players: int, batch_size: int, semivalue: Semivalue) -> np.ndarray:
        """The first batch's draws per coalition size: two for every size the semivalue weighs, the rest a quarter
        evenly over those sizes and three quarters in proportion to the allocation (largest remainders)."""
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
        return 2 * used + largest_remainders(share[None], batch_size - 2 * used.sum())[0]

    def plan(self, num_players: int, batch_size: int, semivalue: Semivalue) -> BatchPlan:
        first = np.repeat(np.arange(num_players), self.draws_per_size(num_players, batch_size, semivalue))
        coefficients = semivalue.size_weights(num_players)
        exact = single_coalition_sizes(num_players)
        draw = partial(_neyman_masks, first=np.broadcast_to(first, (num_players, batch_size)), weights=coefficients)
        reduce = partial(_sized_reduce, group_of_size=jnp.arange(num_players), num_groups=num_players)
        sampled = int(((coefficients > 0) & ~exact).sum())
        unreliable, enough = None, LAYER_DRAWS * sampled + 2 * int((coefficients > 0).sum())
        if batch_size < enough:
            unreliable = (
                f"each batch gives the {sampled} sampled layers fewer than {LAYER_DRAWS} draws each (batch_size "
                f"{batch_size}), and layer variances from so few draws miss rare marginals (measured in "
                f"docs/games.md, 'Calibration'); use batch_size >= {enough}"
            )
        layers = np.ones(num_players, bool)
        return BatchPlan(coefficients, exact, layers, 2 * num_players * batch_size, draw, reduce, 1.0, unreliable)

    @staticmethod
    def fixed_draws(key, counts: np.ndarray):
        """The fixed mode: counts[i, s] uniform coalitions of size s of N minus i for every index i and size s, as
        masks without the index (T, n), their index (T,) and size (T,), grouped by index and then size. A size whose
        count is at least its binom(n-1, s) coalitions is enumerated, each coalition once (the layer is exact),
        however many there are: the draws asked for would cost as much. Otherwise a size of at most
        `ENUMERATION_LIMIT` coalitions is listed and sampled without replacement, and a larger one gets
        independent uniform coalitions (with replacement; `samples_without_replacement` tells which). The draws
        come from a NumPy generator seeded by the key's data, not from `sized_masks`' JAX stream: the listed sizes
        need NumPy's draw without replacement, and one stream for both keeps a key's coalitions, and so Layered
        Shapley's values (docs/layered.md), what they have always been."""
        rng = np.random.default_rng(np.asarray(jax.random.key_data(key)).tolist())
        num_players = counts.shape[1]
        masks, owners, sizes, independent = [], [], [], []
        for player, size in zip(*np.nonzero(counts)):
            count, total = int(counts[player, size]), comb(num_players - 1, int(size))
            count = min(count, total)
            if count < total and total > ENUMERATION_LIMIT:
                independent.append((player, size, count))
                continue
            others = np.delete(np.arange(num_players), player)
            members = np.array(list(itertools.combinations(others, size)), np.int64).reshape(total, size)
            if count < total:
                members = members[rng.choice(total, count, replace=False)]
            chosen = np.zeros((count, num_players), bool)
            np.put_along_axis(chosen, members, True, axis=1)
            masks.append(chosen)
            owners.append(np.full(count, player))
            sizes.append(np.full(count, size))
        if independent:
            player, size, count = (np.repeat(column, [c for *_, c in independent]) for column in zip(*independent))
            scores = rng.random((len(player), num_players))
            scores[np.arange(len(player)), player] = 2.0  # never the index itself
            kth = np.take_along_axis(np.sort(scores, axis=1), size[:, None], axis=1)  # the size-th smallest score
            masks.append(scores < kth)  # the `size` smallest scores' players
            owners.append(player)
            sizes.append(size)
        return np.concatenate(masks), np.concatenate(owners), np.concatenate(sizes)


def samples_without_replacement(num_players: int, counts: np.ndarray) -> np.ndarray:
    """Where `StratifiedSampler.fixed_draws` draws without replacement, by index and size (the shape of counts): a
    size it enumerates (count >= binom(n-1, s)) or lists (binom(n-1, s) <= `ENUMERATION_LIMIT`). Elsewhere its
    draws are independent, so their mean has no finite-population correction (Cochran, Sampling Techniques,
    Thm 2.2 holds for draws without replacement only)."""
    totals = np.array([comb(num_players - 1, s) for s in range(counts.shape[-1])], dtype=object)
    listed = np.array([total <= ENUMERATION_LIMIT for total in totals])
    return listed | (np.asarray(counts, dtype=object) >= totals).astype(bool)


def largest_remainders(shares: np.ndarray, total: int) -> np.ndarray:
    """Integer counts (K, G) summing to `total` per row, proportional to shares (K, G) (Hamilton's method)."""
    shares = np.asarray(shares, np.float64)
    quota = shares / shares.sum(axis=1, keepdims=True) * total
    counts = np.floor(quota).astype(np.int64)
    order = np.argsort(-(quota - counts), axis=1, kind="stable")
    extra = np.arange(shares.shape[1])[None] < (total - counts.sum(axis=1))[:, None]
    np.put_along_axis(counts, order, np.take_along_axis(counts, order, axis=1) + extra, axis=1)
    return counts


def neyman_sizes(state, weights: np.ndarray, batch_size: int) -> np.ndarray:
    """Sizes (n, B) of the next batch's draws per index: two per used size, the rest to bring each layer's draws
    toward its Neyman share c_s sigma_s / sum_s c_s sigma_s of all draws after the batch."""
    from bayesval.results.variance import draw_variances

    used = weights > 0
    num_players = len(weights)
    sigma = np.sqrt(np.nan_to_num(draw_variances(state), posinf=0.0)).T  # (n, G): per index and size
    target = weights[None] * sigma
    target = np.where(target.sum(axis=1, keepdims=True) > 0, target, weights[None])  # no spread seen: by weight
    counts = state.counts.T  # (n, G)
    spare = batch_size - 2 * used.sum()
    after = counts.sum(axis=1, keepdims=True) + batch_size
    deficit = np.maximum(target / target.sum(axis=1, keepdims=True) * after - counts - 2 * used, 0.0)
    deficit = np.where(deficit.sum(axis=1, keepdims=True) > 0, deficit, target)
    per_size = 2 * used[None] + largest_remainders(deficit, spare)
    return np.stack([np.repeat(np.arange(num_players), row) for row in per_size])


def _neyman_masks(key, state, first: np.ndarray, weights: np.ndarray):
    sizes = first if state is None else neyman_sizes(state, weights, first.shape[1])
    return sized_masks(key, jnp.asarray(sizes)), jnp.asarray(sizes)


@jax.jit
def sized_masks(key, sizes):
    """Masks (2 n B, n): per index i and draw b, a uniform coalition of size sizes[i, b] without i, with i (first
    half) and without (second half)."""
    num_players = sizes.shape[0]
    players = jnp.eye(num_players, dtype=bool)[:, None, :]  # (n, 1, n): index i's own column
    scores = jnp.where(players, 2.0, jax.random.uniform(key, (num_players, sizes.shape[1], num_players)))
    ranks = jnp.argsort(jnp.argsort(scores, axis=2), axis=2)
    without = ranks < sizes[:, :, None]  # (n, B, n): the sizes[i, b] lowest scores, never i itself
    return jnp.concatenate([without | players, without]).reshape(-1, num_players)


@partial(jax.jit, static_argnames=("num_groups",))
def _sized_reduce(values, sizes, group_of_size, num_groups: int) -> BatchStatistics:
    num_players, batch = sizes.shape
    paired = values.reshape(len(values), 2, num_players, batch)
    gains = paired[:, 0] - paired[:, 1]  # (R, n, B)
    return file_draws(gains.transpose(0, 2, 1), group_of_size[sizes].T, num_groups=num_groups)


@dataclass(frozen=True)
class SemivalueSampler:
    """Coalitions from the semivalue's own distribution: per index and draw a size s with probability
    binom(n-1, s) w(s), then uniform members without the index, so every draw has weight 1 (2 n B coalitions a
    batch). The sizes 0 and n - 1, single coalitions, are estimated on their own; the other sizes are cut into up to
    `MAX_BINS` bins of about equal probability, sampled within from the semivalue's distribution, so each bin's
    variance has its neighbours to be pooled with (`bayesval.results.variance`). Every group gets its share of the
    batch (proportional stratification, Cochran 1977, Sec. 5.3) and at least two draws."""

    @property
    def name(self) -> str:
        return "semivalue"

    def plan(self, num_players: int, batch_size: int, semivalue: Semivalue) -> BatchPlan:
        weights = semivalue.size_weights(num_players)
        ends = end_coefficients(num_players, semivalue)
        end_sizes = sorted({s for s, group in ((0, 0), (num_players - 1, 2)) if ends[group] > 0})
        if ends[1] == 0:  # only exact sizes (leave-one-out): each in turn
            bin_of_size = size_groups(num_players)
            fixed, counts = np.resize(end_sizes, batch_size), np.zeros(0, np.int64)
        else:
            bin_of_size = size_bins(weights, min(MAX_BINS, max(1, (batch_size - 2 * len(end_sizes)) // BIN_DRAWS)))
            masses = np.bincount(bin_of_size, weights)
            used = masses > 0
            if batch_size < 2 * used.sum():
                raise ValueError(
                    f"batch_size must be at least {2 * used.sum()} for semivalue sampling (two draws of each exact "
                    f"size and of each bin of the others), got {batch_size}"
                )
            counts = 2 * used + largest_remainders(masses[None], batch_size - 2 * used.sum())[0]
            fixed = np.repeat([0, num_players - 1], counts[[0, -1]])  # the exact sizes in proportion too
            counts = counts[1:-1]
        num_groups = bin_of_size.max() + 1
        coefficients = np.bincount(bin_of_size, weights, minlength=num_groups)
        bins = np.repeat(np.arange(1, len(counts) + 1), counts)  # each column's bin
        in_bin = (bin_of_size[None] == bins[:, None]) & (weights[None] > 0)
        logits = np.log(np.where(in_bin, weights[None], 1.0)) + np.where(in_bin, 0.0, -np.inf)
        draw = partial(_semivalue_masks, fixed=jnp.asarray(fixed), logits=jnp.asarray(logits))
        reduce = partial(_sized_reduce, group_of_size=jnp.asarray(bin_of_size), num_groups=int(num_groups))
        exact = np.arange(num_groups) == 0
        exact[-1] = num_players > 1 or exact[-1]
        layers = np.bincount(bin_of_size, weights > 0, minlength=num_groups) <= 1
        return BatchPlan(coefficients, exact, layers, 2 * num_players * batch_size, draw, reduce, 1.0)


MAX_BINS = 8  # bins of the middle sizes for semivalue sampling
BIN_DRAWS = 8  # draws per bin and batch at least, before a batch is cut into more bins


def size_bins(weights: np.ndarray, num_bins: int) -> np.ndarray:
    """The group of each coalition size 0..n-1: 0 for size 0, 1..J for J bins of consecutive middle sizes of about
    equal probability (a size heavier than a bin's share is a bin of its own), J + 1 for size n - 1."""
    middle = weights[1:-1] / weights[1:-1].sum()
    edges = np.floor((np.cumsum(middle) - middle / 2) * num_bins).clip(0, num_bins - 1).astype(np.int64)
    used = np.unique(edges[middle > 0])
    bins = np.searchsorted(used, edges) + 1  # 1..J, renumbered over the bins that hold weight
    bins = np.minimum(bins, len(used))
    return np.concatenate([[0], bins, [len(used) + 1]]) if len(weights) > 1 else np.zeros(1, np.int64)


def _semivalue_masks(key, state, fixed, logits):
    return _semivalue_draw(key, fixed, logits)


@jax.jit
def _semivalue_draw(key, fixed, logits):
    size_key, member_key = jax.random.split(key)
    num_players = logits.shape[1]
    drawn = jax.random.categorical(size_key, logits, shape=(num_players, len(logits)))  # column b from its bin
    sizes = jnp.concatenate([jnp.broadcast_to(fixed, (num_players, len(fixed))), drawn], axis=1)
    return sized_masks(member_key, sizes), sizes


Sampler = PermutationSampler | UniformSampler | StratifiedSampler | SemivalueSampler
SAMPLERS = (PermutationSampler, UniformSampler, StratifiedSampler, SemivalueSampler)


def default_sampler(semivalue: Semivalue) -> Sampler:
    """Permutations for Shapley (every draw weight 1), maximum sample reuse for Banzhaf (Wang & Jia 2023), and the
    semivalue's own distribution for Beta semivalues and leave-one-out (whose permutation weights are heavy-tailed).
    `semivalue()` with no sampler runs regression sampling instead for Shapley values of a noisy utility
    (`bayesval.games.choice`)."""
    if semivalue.kind == "shapley":
        return PermutationSampler()
    if semivalue.kind == "banzhaf":
        return UniformSampler()
    return SemivalueSampler()
