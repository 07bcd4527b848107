"""Enumerable games for the game-layer tests: each a jitted utility of its masks (`KeylessUtility`, or of a key and
masks with noise) and its value table."""

from __future__ import annotations

from functools import partial

import jax
import jax.numpy as jnp
import numpy as np

from bayesval.games import KeylessUtility
from bayesval.games.masks import coalition_masks


def table_utility(table: np.ndarray, noise: float = 0.0):
    """The utility looking up each mask's value in `table` (2^n,): of the masks alone (`KeylessUtility`), or with
    `noise`, utility(key, masks) adding N(0, noise^2) per evaluation. One compiled program serves every table of a
    size (the table is its argument, not a constant of a program a table)."""
    table = jnp.asarray(table)
    if noise:
        return partial(_noisy_table_lookup, table, float(noise))
    return KeylessUtility(partial(_table_lookup, table))


@jax.jit
def _table_lookup(table, masks):
    return table[masks @ (1 << jnp.arange(int(np.log2(table.shape[0]))))]


@partial(jax.jit, static_argnames=("noise",))
def _noisy_table_lookup(table, noise, key, masks):
    values = _table_lookup(table, masks)
    return values + noise * jax.random.normal(key, values.shape)


def voting_table(weights, quota) -> np.ndarray:
    """A weighted voting game: v(S) = 1 where the weights in S reach the quota."""
    masks = coalition_masks(len(weights), include_empty=True)
    return (masks @ np.asarray(weights, np.float64) >= quota).astype(np.float64)


def random_table(seed: int, num_players: int) -> np.ndarray:
    """A random game (as tests/test_shapley.py): additive, a smooth interaction, and a size term; v(empty) = 0."""
    rng = np.random.default_rng(seed)
    masks = coalition_masks(num_players, include_empty=True)
    values = masks @ rng.normal(size=num_players) + np.sin(masks @ rng.normal(size=num_players))
    values += 0.2 * masks.sum(axis=1) ** 1.5
    values[0] = 0.0
    return values


def surprise_table(syn) -> np.ndarray:
    """The party-surprise game of Syn (`make_syn(seed=0)`, each of its 3 parties split in two: 6 parties) in closed
    form: v_C = KL(NIG posterior from the summed exact statistics of C's parties || NIG prior) (Sim et al. 2023,
    Sec. 3, the non-private limit), by `nig_kl`; the posteriors of all 63 coalitions in one vmapped program."""
    import bayesval as bv
    from bayesval.divergence import nig_kl

    parties = [(X[rows], y[rows]) for X, y in syn.parties for rows in np.array_split(np.arange(len(X)), 2)]
    model = bv.models.LinearRegression()
    statistics = np.stack([model.statistic(2).compute(X, y) for X, y in parties])
    sizes = np.array([len(X) for X, _ in parties], np.float64)
    masks = coalition_masks(len(parties))
    posteriors = jax.jit(jax.vmap(lambda s, c: model.exact_posterior(s, c, 2)))(masks @ statistics, masks @ sizes)
    prior = model.priors(2).model
    kl = [nig_kl(jax.tree.map(lambda a, i=i: a[i], posteriors), prior) for i in range(len(masks))]
    return np.concatenate([[0.0], kl])


def averaging_utility(scores, c: float = 1.0, step: float | None = None):
    """The mean-score game v(S) = c mean_{j in S} a_j (v(empty) = 0), a jitted utility(key, masks) -> values; with
    `step`, v rounded down to a multiple of it (a discrete utility, like an accuracy). Its marginal to a size-k
    coalition C, v_i(C) = c (a_i - mean_C a) / (k + 1), satisfies Watson et al.'s diminishing-returns assumption
    |v_i(C)| <= c / k (Sec. 3) for scores in [0, 1]."""
    return partial(_averaging, jnp.asarray(scores), c, step)


@partial(jax.jit, static_argnames=("c", "step"))
def _averaging(scores, c, step, key, masks):
    masks = jnp.asarray(masks)
    sizes = masks.sum(axis=1)
    values = c * jnp.where(sizes > 0, masks @ scores / jnp.maximum(sizes, 1), 0.0)
    return values if step is None else jnp.floor(values / step) * step


def averaging_shapley(scores, c: float = 1.0) -> np.ndarray:
    """The Shapley values of `averaging_utility` in closed form,
    phi_i = c (a_i H_n / n - (sum_{j != i} a_j) (H_n - 1) / (n (n - 1))), by linearity over g_j(S) = 1[j in S] / |S|:
    j's marginal to a size-k coalition is 1 / (k + 1), so phi_j(g_j) = H_n / n, and by efficiency and symmetry the
    other n - 1 players share g_j(N) - H_n / n = -(H_n - 1) / n equally."""
    scores = np.asarray(scores, np.float64)
    num_players = len(scores)
    harmonic = np.sum(1.0 / np.arange(1, num_players + 1))
    others = scores.sum() - scores
    return c * (scores * harmonic / num_players - others * (harmonic - 1) / (num_players * (num_players - 1)))


def assert_flags_agree(result) -> None:
    """Every index's converged flag says what its verdict says (both from `bayesval.results.variance.judged`): a
    flag set exactly where the verdict is 'exact' or 'converged'."""
    verdicts = result.diagnostics["indices"]["verdict"]
    said = [verdict in ("exact", "converged") for verdict in verdicts]
    assert result.converged.tolist() == said, list(zip(result.converged.tolist(), verdicts))
