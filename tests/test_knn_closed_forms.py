"""Every closed form of the KNN family equals exact Shapley values by subset enumeration (N <= 9)."""

from __future__ import annotations

import itertools
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import bayesval  # noqa: F401  (64-bit mode)
from bayesval.estimators.knn import values as knn_values
from bayesval.estimators.knn.values import distance_order

# jitted once per game size: much faster than op-by-op dispatch over hundreds of small games
knn_shapley_original = jax.jit(knn_values.knn_shapley_original, static_argnums=2)
knn_shapley_soft = jax.jit(knn_values.knn_shapley_soft, static_argnums=2)
tknn_shapley = jax.jit(knn_values.tknn_shapley)
private_tknn_shapley = jax.jit(knn_values.private_tknn_shapley)
subsampled_knn_shapley_original = jax.jit(knn_values.subsampled_knn_shapley_original, static_argnums=3)


def brute_force_shapley(n: int, utility) -> np.ndarray:
    """Shapley values by Eq. (1): weighted marginal contributions over all subsets of the others."""
    value = {s: utility(s) for r in range(n + 1) for s in itertools.combinations(range(n), r)}
    phi = np.zeros(n)
    for i in range(n):
        others = [j for j in range(n) if j != i]
        for r in range(n):
            weight = math.factorial(r) * math.factorial(n - r - 1) / math.factorial(n)
            for s in itertools.combinations(others, r):
                phi[i] += weight * (value[tuple(sorted(s + (i,)))] - value[s])
    return phi


def knn_soft_utility(dist, agree, k, n_classes):
    def utility(s):
        if not s:
            return 1.0 / n_classes
        nearest = sorted(s, key=lambda j: (dist[j], j))[: min(k, len(s))]
        return float(np.mean(agree[nearest]))

    return utility


def knn_original_utility(dist, agree, k):
    def utility(s):
        nearest = sorted(s, key=lambda j: (dist[j], j))[: min(k, len(s))]
        return float(np.sum(agree[nearest])) / k

    return utility


def tknn_utility(dist, agree, tau, n_classes):
    def utility(s):
        ball = [j for j in s if dist[j] <= tau]
        return float(np.mean(agree[ball])) if ball else 1.0 / n_classes

    return utility


def random_games(seed: int, count: int):
    """Random multi-class games: distinct distances in [-1, 1], labels in C in {2, 3, 4} classes."""
    rng = np.random.default_rng(seed)
    for _ in range(count):
        n = int(rng.integers(1, 10))
        n_classes = int(rng.integers(2, 5))
        dist = rng.permutation(np.linspace(-0.95, 0.95, n)) if n > 1 else np.array([0.1])
        labels = rng.integers(0, n_classes, n)
        agree = labels == rng.integers(0, n_classes)
        yield n, n_classes, dist, agree, rng


def owners_game(sampled, owner):
    """Indices of the players of `owner`'s game on (B minus {owner}) plus {owner}."""
    return [j for j in range(len(sampled)) if sampled[j] or j == owner]


@pytest.mark.parametrize("k", [1, 2, 3, 5])
def test_soft_label_knn_shapley_equals_brute_force(k):
    for n, c, dist, agree, _ in random_games(seed=10 + k, count=25):
        exact = brute_force_shapley(n, knn_soft_utility(dist, agree, k, c))
        closed = knn_shapley_soft(jnp.asarray(dist), jnp.asarray(agree), k, 1.0 / c)
        np.testing.assert_allclose(closed, exact, atol=1e-12, err_msg=f"N={n} K={k} C={c}")


@pytest.mark.parametrize("k", [1, 2, 3, 5])
def test_original_knn_shapley_equals_brute_force(k):
    for n, _, dist, agree, _ in random_games(seed=20 + k, count=25):
        exact = brute_force_shapley(n, knn_original_utility(dist, agree, k))
        closed = knn_shapley_original(jnp.asarray(dist), jnp.asarray(agree), k)
        np.testing.assert_allclose(closed, exact, atol=1e-12, err_msg=f"N={n} K={k}")


@pytest.mark.parametrize("tau", [-0.5, 0.0, 0.6, 1.0])
def test_tknn_shapley_equals_brute_force(tau):
    for n, c, dist, agree, _ in random_games(seed=int(100 * tau) + 107, count=25):
        exact = brute_force_shapley(n, tknn_utility(dist, agree, tau, c))
        closed = tknn_shapley(jnp.asarray(dist), jnp.asarray(agree), tau, 1.0 / c)
        np.testing.assert_allclose(closed, exact, atol=1e-12, err_msg=f"N={n} tau={tau} C={c}")
        assert np.all(np.asarray(closed)[dist > tau] == 0)  # points outside the ball are null players
        inside = dist <= tau
        assert np.all(np.asarray(closed)[inside & agree] > 0)  # sign property (spec Sec. 1.4)
        assert np.all(np.asarray(closed)[inside & ~agree] < 0)


def test_tknn_efficiency_sums_to_utility_gain():
    for n, c, dist, agree, _ in random_games(seed=3, count=20):
        utility = tknn_utility(dist, agree, -0.2, c)
        closed = tknn_shapley(jnp.asarray(dist), jnp.asarray(agree), -0.2, 1.0 / c)
        assert float(jnp.sum(closed)) == pytest.approx(utility(tuple(range(n))) - utility(()), abs=1e-12)


@pytest.mark.parametrize("q", [1.0, 0.5])
def test_dp_tknn_without_noise_equals_brute_force_on_each_owners_subsample(q):
    """DP-TKNN with zero noise: owner l's value is the TKNN-Shapley of l in (B minus {l}) plus {l}."""
    for seed, (n, c, dist, agree, _) in enumerate(random_games(seed=31, count=25)):
        sample_key = jax.random.PRNGKey(seed)
        closed, released = private_tknn_shapley(
            sample_key, jnp.zeros(3), jnp.asarray(dist), jnp.asarray(agree), 0.3, 1.0 / c, q
        )
        sampled = np.asarray(jax.random.bernoulli(sample_key, q, (n,)))
        assert released[0] == sampled.sum()
        for owner in range(n):
            members = owners_game(sampled, owner)
            exact = brute_force_shapley(len(members), tknn_utility(dist[members], agree[members], 0.3, c))
            assert float(closed[owner]) == pytest.approx(exact[members.index(owner)], abs=1e-12)


def test_subsampled_original_knn_shapley_equals_brute_force_on_each_owners_subsample():
    for seed, (n, _, dist, agree, _) in enumerate(random_games(seed=41, count=25)):
        k = 1 + seed % 4
        key = jax.random.PRNGKey(seed)
        closed = subsampled_knn_shapley_original(key, jnp.asarray(dist), jnp.asarray(agree), k, 0.5)
        sampled = np.asarray(jax.random.bernoulli(key, 0.5, (n,)))
        for owner in range(n):
            members = owners_game(sampled, owner)
            exact = brute_force_shapley(len(members), knn_original_utility(dist[members], agree[members], k))
            assert float(closed[owner]) == pytest.approx(exact[members.index(owner)], abs=1e-12)


def test_original_knn_shapley_sensitivity_is_one_over_k_k_plus_one():
    """Thm 10: adding one point changes any KNN-OLD value by at most 1/(K(K+1)), and that is attained."""
    rng = np.random.default_rng(5)
    for k in (1, 3, 5):
        worst = 0.0
        for _ in range(300):
            n = int(rng.integers(2, 9))
            dist = rng.random(n)
            agree = rng.random(n) < 0.5
            before = np.asarray(knn_shapley_original(jnp.asarray(dist), jnp.asarray(agree), k))
            after = np.asarray(
                knn_shapley_original(
                    jnp.asarray(np.append(dist, rng.random())),
                    jnp.asarray(np.append(agree, rng.random() < 0.5)),
                    k,
                )
            )[:n]
            worst = max(worst, float(np.max(np.abs(after - before))))
        assert worst <= 1.0 / (k * (k + 1)) + 1e-12
        assert worst >= 0.9 / (k * (k + 1))


def test_estimators_sum_brute_force_values_over_validation_points():
    """End to end (string labels, 3 classes, euclidean, padded chunks): value = sum over validation points."""
    from bayesval.estimators import KNNShapley, TKNNShapley

    rng = np.random.default_rng(0)
    names = np.array(["cat", "dog", "eel"])
    x_train, y_train = rng.normal(size=(7, 3)), names[rng.integers(0, 3, 7)]
    x_val, y_val = rng.normal(size=(3, 3)), names[rng.integers(0, 3, 3)]
    dists = np.linalg.norm(x_val[:, None, :] - x_train[None, :, :], axis=2)
    tau = float(np.median(dists))
    games = {
        KNNShapley(3, distance="euclidean", batch_size=2): lambda d, a: knn_soft_utility(d, a, 3, 3),
        KNNShapley(3, variant="original", distance="euclidean", batch_size=2): lambda d, a: knn_original_utility(
            d, a, 3
        ),
        TKNNShapley(tau, distance="euclidean", batch_size=2): lambda d, a: tknn_utility(d, a, tau, 3),
    }
    for estimator, utility in games.items():
        exact = sum(brute_force_shapley(7, utility(dists[v], y_train == y_val[v])) for v in range(3))
        result = estimator.fit(x_train, y_train).value(x_val, y_val)
        np.testing.assert_allclose(result.values, exact, atol=1e-12, err_msg=estimator.method)
        assert result.names == [str(i) for i in range(7)] and not result.stderr.any()


def test_distance_order_is_a_stable_argsort():
    rng = np.random.default_rng(9)
    dist = np.concatenate([rng.normal(size=500), np.zeros(5), -np.zeros(5), np.full(10, -0.25), [1e30, -1e30]])
    dist = rng.permutation(dist)
    np.testing.assert_array_equal(distance_order(jnp.asarray(dist)), np.argsort(dist, kind="stable"))
    np.testing.assert_array_equal(
        distance_order(jnp.asarray(dist, dtype=jnp.float32)), np.argsort(dist.astype(np.float32), kind="stable")
    )


def tie_orders(dist):
    """Every order of the points consistent with their distances (ties in any order), as a priority per point."""
    groups = [np.flatnonzero(dist == d) for d in np.unique(dist)]
    for arrangement in itertools.product(*(itertools.permutations(group) for group in groups)):
        priority = np.empty(len(dist), int)
        priority[np.concatenate(arrangement)] = np.arange(len(dist))
        yield priority


def tie_symmetric_shapley(dist, utility_of_order) -> np.ndarray:
    """Shapley values of the game whose utility averages the KNN utility over every tie order: by linearity, the
    mean over those orders of each order's brute-force Shapley values."""
    orders = list(tie_orders(dist))
    return np.mean([brute_force_shapley(len(dist), utility_of_order(priority)) for priority in orders], axis=0)


def tied_games(seed: int, count: int):
    """Random games whose distances take 2 or 3 values, so that most points tie with others."""
    rng = np.random.default_rng(seed)
    for _ in range(count):
        n = int(rng.integers(2, 7))
        n_classes = int(rng.integers(2, 4))
        dist = rng.choice(np.array([-0.6, 0.1, 0.7])[: int(rng.integers(2, 4))], n)
        agree = rng.integers(0, n_classes, n) == 0
        yield n, n_classes, dist, agree


@pytest.mark.parametrize("variant", ["soft", "original"])
def test_tied_distances_give_the_tie_symmetric_game_s_values_whatever_the_rows_order(variant):
    """Where distances tie, the closed forms give the Shapley values of the game averaged over tie orders (brute
    force over every order and subset), so that reordering the rows moves no value; before, ties were broken by
    row index and two copies of one row with other labels swapped values when the rows swapped."""
    checked = 0
    for n, n_classes, dist, agree in tied_games(2026_12_06, 30):
        for k in sorted({1, 2, 3, n + 1}):
            if variant == "soft":
                closed = np.asarray(knn_shapley_soft(jnp.asarray(dist), jnp.asarray(agree), k, 1.0 / n_classes))

                def utility_of_order(priority, k=k, dist=dist, agree=agree, n_classes=n_classes):
                    return knn_soft_utility(dist + 1e-9 * priority, agree, k, n_classes)
            else:
                closed = np.asarray(knn_shapley_original(jnp.asarray(dist), jnp.asarray(agree), k))

                def utility_of_order(priority, k=k, dist=dist, agree=agree):
                    return knn_original_utility(dist + 1e-9 * priority, agree, k)

            np.testing.assert_allclose(closed, tie_symmetric_shapley(dist, utility_of_order), atol=1e-12)
            order = np.random.default_rng(n * 10 + k).permutation(n)
            if variant == "soft":
                again = knn_shapley_soft(jnp.asarray(dist[order]), jnp.asarray(agree[order]), k, 1.0 / n_classes)
            else:
                again = knn_shapley_original(jnp.asarray(dist[order]), jnp.asarray(agree[order]), k)
            np.testing.assert_allclose(np.asarray(again), closed[order], atol=1e-12)
            checked += len(np.unique(dist)) < n
    assert checked >= 50  # games with at least one tie
