"""Semivalues of the game layer against exact values: weights by hand, exact enumeration against the Shapley matrix,
and every sampler's estimate of every semivalue on three enumerable games (issue 12, "done when")."""

import itertools
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from game_examples import random_table, surprise_table, table_utility, voting_table
from scipy import integrate, stats

from bayesval.games.masks import coalition_masks, mask_codes
from bayesval.games.samplers import (
    BatchStatistics,
    PermutationSampler,
    SemivalueSampler,
    StratifiedSampler,
    UniformSampler,
)
from bayesval.games.semivalues import exact_semivalue, semivalue
from bayesval.games.shapley import shapley_matrix
from bayesval.games.stopping import MaxEvaluations
from bayesval.games.utilities import KeylessUtility
from bayesval.games.weights import BANZHAF, LEAVE_ONE_OUT, SHAPLEY, beta_shapley, semivalue_matrix
from bayesval.results.state import SemivalueState

SEMIVALUES = [SHAPLEY, BANZHAF, beta_shapley(4, 1), LEAVE_ONE_OUT]
# one batch per run, of 7,000 to 12,000 evaluations
SAMPLERS = [
    (PermutationSampler(), 1024),
    (PermutationSampler(antithetic=True), 1024),
    (PermutationSampler(latin=True), 1020),  # 170 blocks of 6
    (PermutationSampler(prefixes=3), 512),  # 7 coalitions a permutation and 3 prefixes of 3 each
    (UniformSampler(), 8192),
    (StratifiedSampler(), 1024),
    (SemivalueSampler(), 1024),
]
SEEDS = 100


def by_hand(values, n, weight):
    """sum over S not containing i of weight(|S|) (v(S u i) - v(S)), coalition by coalition."""
    phi = np.zeros(n)
    for i in range(n):
        others = [j for j in range(n) if j != i]
        for size in range(n):
            for subset in itertools.combinations(others, size):
                mask = np.zeros(n, bool)
                mask[list(subset)] = True
                without = values[mask_codes(mask)]
                mask[i] = True
                phi[i] += weight(size) * (values[mask_codes(mask)] - without)
    return phi


@pytest.mark.parametrize("n", [3, 4])
def test_exact_semivalues_equal_their_hand_formulas(n):
    values = random_table(n, n)
    utility = table_utility(values)
    exact = {sv.name: exact_semivalue(utility, n, 0, weights=sv, batch_size=5).values for sv in SEMIVALUES}
    shapley = np.mean([_along(values, order) for order in _orders(n)], axis=0)
    np.testing.assert_allclose(exact["shapley"], shapley, atol=1e-12)
    np.testing.assert_allclose(exact["banzhaf"], by_hand(values, n, lambda s: 0.5 ** (n - 1)), atol=1e-12)
    grand = values[-1] - values[2**n - 1 - 2 ** np.arange(n)]
    np.testing.assert_allclose(exact["loo"], grand, atol=1e-12)

    def beta_weight(s, alpha=4.0, beta=1.0):  # Kwon & Zou 2022, Eq. 3 / n: the Beta(beta, alpha) mixture of t^s
        density = stats.beta(beta, alpha).pdf
        return integrate.quad(lambda t: t**s * (1 - t) ** (n - 1 - s) * density(t), 0, 1)[0]

    np.testing.assert_allclose(exact["beta(4, 1)"], by_hand(values, n, beta_weight), atol=1e-9)
    np.testing.assert_allclose(exact["shapley"].sum(), values[-1] - values[0])  # efficiency


def _orders(n):
    return itertools.permutations(range(n))


def _along(values, order):
    """Marginal contributions along one permutation."""
    phi, mask = np.zeros(len(order)), np.zeros(len(order), bool)
    for player in order:
        before = values[mask_codes(mask)]
        mask[player] = True
        phi[player] = values[mask_codes(mask)] - before
    return phi


def test_weights_are_distributions_and_beta_11_is_shapley():
    for n in (1, 2, 7):
        for sv in SEMIVALUES:
            assert sv.size_weights(n).sum() == pytest.approx(1.0)
        np.testing.assert_allclose(beta_shapley(1, 1).weights(n), SHAPLEY.weights(n))


def test_exact_shapley_via_the_layer_equals_the_shapley_matrix():
    n = 7
    values = random_table(1, n)
    result = exact_semivalue(table_utility(values), n, 0, weights="shapley", batch_size=48)  # 3 chunks, last padded
    np.testing.assert_allclose(result.values, shapley_matrix(n) @ values, atol=1e-12)
    np.testing.assert_allclose(shapley_matrix(n), semivalue_matrix(n, SHAPLEY))
    np.testing.assert_allclose(result.coalition_values, values[1:])
    assert np.all(result.stderr == 0)


def test_exact_semivalue_with_repeats_reports_their_spread():
    n = 4
    values = random_table(2, n)
    noisy = np.stack([values + 0.1 * np.random.default_rng(r).normal(size=len(values)) for r in range(5)])
    result = exact_semivalue(lambda key, masks: noisy[:, mask_codes(np.asarray(masks))], n, 0, weights="banzhaf")
    per_repeat = noisy @ semivalue_matrix(n, BANZHAF).T
    np.testing.assert_allclose(result.values, per_repeat.mean(axis=0))
    np.testing.assert_allclose(result.stderr, per_repeat.std(axis=0, ddof=1) / math.sqrt(5))


GAMES = {
    # 6 players: weights 3, 3, 2, 2, 2, 1 and quota 11 (of 13): each player pivotal in 10 % to 30 % of permutations,
    # the two weight-3 players also for leave-one-out
    "weighted voting": lambda syn: (voting_table([3, 3, 2, 2, 2, 1], 11), 0.0),
    # a random game with N(0, 0.05^2) noise on every evaluation: the utility's key matters
    "random (noisy)": lambda syn: (random_table(3, 6), 0.05),
    # Bayesian surprise of 6 Syn parties in closed form (nats)
    "party surprise": lambda syn: (surprise_table(syn), 0.0),
}


def seed_study(table, utility, sv, sampler, batch_size):
    """Estimates and standard errors (SEEDS, n) of one-batch runs with keys 0..SEEDS-1, and the exact values (n,).

    The runs are the driver's first batch, vmapped over the keys: the same plan, keys and state as `semivalue`
    (checked against it for key 0)."""
    n = int(np.log2(len(table)))
    plan = sampler.plan(n, batch_size, sv)
    keys = jax.vmap(lambda seed: jax.random.split(jax.random.fold_in(jax.random.key(seed), 0)))(np.arange(SEEDS))
    masks, aux = jax.vmap(lambda key: plan.draw(key, None))(keys[:, 0])
    if isinstance(utility, KeylessUtility):
        values = jax.vmap(utility.values_of)(masks)[:, None]  # (SEEDS, R = 1, M)
    else:
        values = jax.vmap(utility)(keys[:, 1], masks)[:, None]
    sums = jax.tree.map(np.asarray, jax.vmap(lambda v, a: plan.reduce(v, a))(values, aux))
    estimates, variances = [], []
    for seed in range(SEEDS):
        state = SemivalueState.empty(sv.name, sampler.name, plan, 1, n)
        state.add(BatchStatistics(*(part[seed] for part in sums)), np.asarray(values[seed]))
        estimates.append(state.estimate()[0])
        variances.append(state.estimate()[1])
    for seed in (0,):
        run = semivalue(utility, n, seed, weights=sv, sampler=sampler, stop=MaxEvaluations(1), batch_size=batch_size)
        np.testing.assert_allclose(run.values, estimates[seed], rtol=1e-12, atol=1e-12)
    return np.array(estimates), np.sqrt(variances), semivalue_matrix(n, sv) @ table


@pytest.mark.parametrize("game", GAMES)
def test_every_sampler_estimates_every_semivalue_within_its_standard_error(game, request):
    """z = (estimate - exact) / stderr over 100 keys, for each semivalue and sampler: RMS z in [0.7, 1.3], the
    reported standard error within 15 % of the spread of the estimates over keys (mean over indices of the per-index
    ratio), and |z| < 4 but for as many as normal tails allow: 16 x 100 x 6 = 9,600 z-scores a game put 0.6 beyond 4
    even if exactly normal, so at most 3 may (P = 0.3 %) and none beyond 5. An index whose every draw is the same (a
    layer of one coalition, a dummy player) has stderr 0 and must be exact."""
    table, noise = GAMES[game](request.getfixturevalue("syn") if game == "party surprise" else None)
    utility = table_utility(table, noise)
    summary, beyond_4 = {}, 0
    for sv, (sampler, batch_size) in itertools.product(SEMIVALUES, SAMPLERS):
        estimates, stderr, exact = seed_study(table, utility, sv, sampler, batch_size)
        scale = np.abs(table).max()
        same_draws = stderr.max(axis=0) <= 1e-7 * scale
        np.testing.assert_allclose(estimates[:, same_draws], np.tile(exact[same_draws], (SEEDS, 1)), atol=1e-9 * scale)
        with np.errstate(divide="ignore", invalid="ignore"):
            z = ((estimates - exact) / stderr)[:, ~same_draws]
        spread = estimates[:, ~same_draws].std(axis=0, ddof=1)
        ratio = np.mean(stderr[:, ~same_draws].mean(axis=0) / spread) if z.size else 1.0
        summary[f"{sv.name} / {sampler.name}"] = (
            np.abs(z).max(initial=0),
            np.sqrt(np.mean(z**2)) if z.size else 1,
            ratio,
        )
        beyond_4 += int((np.abs(z) >= 4).sum())
    print(f"\n{game}: max|z|, RMS z, stderr / spread ({beyond_4} of |z| >= 4)")
    for label, (worst, rms, ratio) in summary.items():
        print(f"  {label:40s} {worst:5.2f} {rms:5.2f} {ratio:5.2f}")
    bad = {label: s for label, s in summary.items() if not calibrated(label, *s)}
    assert not bad and beyond_4 <= 3, (bad, beyond_4)


def calibrated(label: str, worst: float, rms: float, ratio: float) -> bool:
    """|z| < 5 (< 6 for semivalue sampling), RMS z in [0.7, 1.3] and stderr / spread within 15 %; antithetic pairs
    may be conservative up to 1.8-fold: their pair means vary far less than single marginals, and the middle group's
    variance guard is the index's range of draws (bayesval.results.variance), which guards rare marginals on large
    games; Latin permutations up to 1.3-fold: their layer variances take a block's draws as independent, and those
    covary slightly negatively."""
    if "antithetic" in label:
        return worst < 5 and 0.5 <= rms <= 1.3 and 0.85 <= ratio <= 1.8
    if "Latin" in label:  # a block's draws at different positions covary slightly negatively: beta(4, 1) on voting 1.21
        return worst < 5 and 0.7 <= rms <= 1.3 and 0.85 <= ratio <= 1.3
    if "semivalue" in label:  # one pivot layer of 0/1 marginals a bin, one batch: max |z| 5.13 seen on voting
        return worst < 6 and 0.7 <= rms <= 1.3 and abs(ratio - 1) <= 0.15
    return worst < 5 and 0.7 <= rms <= 1.3 and abs(ratio - 1) <= 0.15


def test_permutation_estimates_are_efficient_within_their_error():
    """Every permutation's Shapley contributions sum to v(N) - v(empty); filed as first, middle and last positions
    (the exact coalitions on their own) the estimate stays unbiased, so its sum is v(N) within the error of the sum
    (at most the sum of the standard errors), and every index drew from every batch's permutations."""
    table = random_table(4, 6)
    result = semivalue(table_utility(table), 6, 0, stop=MaxEvaluations(1000), batch_size=32)
    assert abs(result.values.sum() - table[-1]) <= 4 * result.stderr.sum()
    assert result.counts.tolist() == [4 * (32 + 4)] * 6  # 4 batches: 32 permutations and the exact sizes twice


def test_latin_permutations_put_each_player_at_every_position_once_a_block_and_file_it_in_that_layer():
    """Blocks of n permutations (batch 3 n): within each block every player takes every position once; a player's
    draws land in the layer of their position (one a block in each), the exact sizes also get their 2 end draws a
    batch, and on a game whose marginals shrink with the coalition the Shapley standard errors are about half plain
    permutations' at equal evaluations (post-stratification by position)."""
    n, key = 6, jax.random.key(0)
    plan = PermutationSampler(latin=True).plan(n, 3 * n, SHAPLEY)
    masks, ranks = plan.draw(key, None)
    ranks = np.asarray(ranks)
    assert all(sorted(column) == list(range(n)) for block in ranks.reshape(3, n, n) for column in block.T)
    chains = np.asarray(masks)[: 3 * n * (n + 1)].reshape(3 * n, n + 1, n)
    np.testing.assert_array_equal(chains[:, 1:].sum(axis=2), np.tile(np.arange(1, n + 1), (3 * n, 1)))
    table = surprise_like_table(n)
    batch = plan.reduce(jnp.asarray(table[mask_codes(np.asarray(masks))])[None], ranks)
    expected_counts = np.full((n, n), 3)
    expected_counts[[0, -1]] += 2  # the exact sizes valued twice a batch
    np.testing.assert_array_equal(np.asarray(batch.counts), expected_counts)
    n = 8  # the gain grows with the positions: 1.7-fold at 6 players, 1.9 at 8 and 2.0 at 10 (keys 1)
    table = surprise_like_table(n)
    exact = shapley_matrix(n) @ table
    stderr = {}
    for sampler in (PermutationSampler(), PermutationSampler(latin=True)):
        result = semivalue(table_utility(table), n, 1, sampler=sampler, stop=MaxEvaluations(6000), batch_size=6 * n)
        assert np.all(np.abs(result.values - exact) <= 5 * result.stderr)
        stderr[sampler.name] = result.stderr.max()
    assert stderr["permutation (Latin)"] < stderr["permutation"] / 1.5, stderr


def test_prefixed_permutations_add_cut_permutations_and_file_each_draw_by_its_positions_group():
    """Each permutation (n + 1 coalitions) with 3 more cut after depth = ceil(n / 3) positions (depth + 1 coalitions
    each, the smallest prefixes); a draw is filed as first, early (positions 1..depth - 1), late (depth..n - 2) or
    last, a cut permutation's players beyond its depth not at all, so every position of the early group holds 4
    times the draws of a late one. On a game whose marginals spread most in small coalitions (diminishing returns)
    the early draws' extra count buys the Shapley standard errors below plain permutations' at equal evaluations,
    and the estimates stay within their errors of the exact values."""
    n, key, batch = 9, jax.random.key(0), 40
    sampler = PermutationSampler(prefixes=3)
    plan = sampler.plan(n, batch, SHAPLEY)
    depth = sampler.prefix_depth(n)
    assert depth == 3 and plan.num_masks == batch * (n + 1) + 3 * batch * (depth + 1) + 2 * (2 * n + 2)
    np.testing.assert_allclose(plan.coefficients, [1 / n, (depth - 1) / n, (n - 1 - depth) / n, 1 / n])
    masks, ranks = plan.draw(key, None)
    masks, ranks = np.asarray(masks), np.asarray(ranks)
    cut = masks[batch * (n + 1) : batch * (n + 1) + 3 * batch * (depth + 1)].reshape(3 * batch, depth + 1, n)
    np.testing.assert_array_equal(cut.sum(axis=2), np.tile(np.arange(depth + 1), (3 * batch, 1)))
    np.testing.assert_array_equal(cut[:, -1], ranks[batch:] < depth)  # the players before the cut, in rank order
    table = surprise_like_table(n)
    counts = np.asarray(plan.reduce(jnp.asarray(table[mask_codes(masks)])[None], ranks).counts)
    ranks_of = {"early": (ranks >= 1) & (ranks < depth), "late": (ranks >= depth) & (ranks < n - 1)}
    np.testing.assert_array_equal(counts[1], ranks_of["early"].sum(axis=0))  # whole and cut permutations alike
    np.testing.assert_array_equal(counts[2], ranks_of["late"][:batch].sum(axis=0))  # whole permutations only
    np.testing.assert_array_equal(counts[0], (ranks == 0).sum(axis=0) + 2)  # the exact sizes twice a batch
    np.testing.assert_array_equal(counts[3], (ranks[:batch] == n - 1).sum(axis=0) + 2)
    early, late = counts[1].sum() / (depth - 1), counts[2].sum() / (n - 1 - depth)
    assert early == 4 * batch and late == batch  # every permutation fills each of its positions once
    exact = shapley_matrix(n) @ table
    stderr = {}
    for sampler in (PermutationSampler(), PermutationSampler(prefixes=3)):
        result = semivalue(table_utility(table), n, 1, sampler=sampler, stop=MaxEvaluations(8000), batch_size=40)
        assert np.all(np.abs(result.values - exact) <= 4 * result.stderr)
        stderr[sampler.name] = np.sqrt(np.mean(result.stderr**2))
    assert stderr[sampler.name] < stderr["permutation"] / 1.2, stderr


def surprise_like_table(n):
    """A game with diminishing returns: v(C) = log(1 + sum of its members' weights 1..n), v(empty) = 0."""
    masks = np.asarray(coalition_masks(n))
    table = np.zeros(2**n)
    table[mask_codes(masks)] = np.log1p(masks @ np.arange(1.0, n + 1))
    return table


def test_masks_of_every_sampler_are_what_they_claim():
    n, key = 5, jax.random.key(0)
    masks, _ = PermutationSampler().plan(n, 4, SHAPLEY).draw(key, None)
    chains = np.asarray(masks)[: 4 * (n + 1)].reshape(4, n + 1, n)
    ends = np.asarray(masks)[4 * (n + 1) :].reshape(2, 2 * n + 2, n)  # the exact sizes, twice
    assert np.all(ends.sum(axis=2) == np.concatenate([[0], np.ones(n), np.full(n, n - 1), [n]]))
    assert np.all(np.diff(chains.sum(axis=2), axis=1) == 1) and np.all(chains[:, :-1] <= chains[:, 1:])
    masks, _ = PermutationSampler(antithetic=True).plan(n, 4, SHAPLEY).draw(key, None)
    chains = np.asarray(masks)[: 4 * (n + 1)].reshape(4, n + 1, n)
    np.testing.assert_array_equal(chains[2:, 1:-1], ~chains[:2, -2:0:-1])  # the reverse joins in reverse order
    per_size = StratifiedSampler().draws_per_size(n, 16, BANZHAF)
    assert per_size.tolist() == [3, 3, 4, 3, 3]  # 2 each; 6 more, a quarter evenly, the rest ~ binom(4, s)
    masks = np.asarray(StratifiedSampler().plan(n, 16, BANZHAF).draw(key, None)[0]).reshape(2, n, 16, n)
    with_i, without = masks
    assert not np.any(without[np.arange(n), :, np.arange(n)]) and np.all(with_i[np.arange(n), :, np.arange(n)])
    np.testing.assert_array_equal(without.sum(axis=2), np.broadcast_to(np.repeat(np.arange(n), per_size), (n, 16)))
    assert coalition_masks(n).shape == (2**n - 1, n)


def test_the_weights_of_over_a_thousand_players_are_taken_in_log_space_and_a_run_values_them():
    """From 1,021 players n binom(n - 1, s) is past a double, where the weights overflowed ("int too large to convert
    to float"): beyond LARGEST_EXACT_N they come from log space, continuous with the exact products, summing to 1;
    an additive game of 1,100 players is valued exactly (each marginal is the player's own weight)."""
    from bayesval.games.weights import LARGEST_EXACT_N, Semivalue

    semivalues = [Semivalue("shapley"), Semivalue("banzhaf"), Semivalue("loo"), Semivalue("beta", 4.0, 1.0)]
    for weights in semivalues:
        exact = weights.size_weights(LARGEST_EXACT_N)
        np.testing.assert_allclose(np.exp(weights._log_size_weights(LARGEST_EXACT_N)), exact, rtol=1e-10, atol=0)
        for n in (LARGEST_EXACT_N + 1, 1_100, 5_000):
            assert weights.size_weights(n).sum() == pytest.approx(1.0, abs=1e-9)
            assert np.isfinite(weights.weights(n)).all()
    n = 1_100
    own = np.linspace(0.0, 1.0, n)
    additive = jax.jit(lambda key, masks: masks.astype(jnp.float64) @ jnp.asarray(own))
    result = semivalue(additive, n, 0, sampler=PermutationSampler(), batch_size=2, stop=MaxEvaluations(2 * (n + 1)))
    np.testing.assert_allclose(result.values, own, atol=1e-9)
