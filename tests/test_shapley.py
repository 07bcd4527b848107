"""Shapley values: enumeration vs permutations, efficiency, sampling error (Sim et al. 2023, Sec. 4)."""

import itertools
import math

import jax
import numpy as np
import pytest

from bayesval.games.shapley import coalition_masks, exact_shapley, mask_codes, permutation_shapley


def random_game(rng, n):
    masks = coalition_masks(n, include_empty=True)
    weights = rng.normal(size=n)
    values = masks @ weights + np.sin(masks @ rng.normal(size=n)) + 0.2 * masks.sum(axis=1) ** 1.5
    values[0] = 0.0
    return values


def shapley_by_all_permutations(values, n):
    phi = np.zeros(n)
    for order in itertools.permutations(range(n)):
        mask = np.zeros(n, dtype=bool)
        for player in order:
            before = values[mask_codes(mask)]
            mask[player] = True
            phi[player] += values[mask_codes(mask)] - before
    return phi / math.factorial(n)


@pytest.mark.parametrize("n", [2, 3, 5])
def test_exact_shapley_equals_average_over_all_permutations(rng, n):
    values = random_game(rng, n)
    np.testing.assert_allclose(exact_shapley(values)[0], shapley_by_all_permutations(values, n))


def test_efficiency_and_symmetry(rng):
    values = random_game(rng, 6)
    phi, _ = exact_shapley(values)
    assert phi.sum() == pytest.approx(values[-1])
    additive = coalition_masks(4, include_empty=True) @ np.array([1.0, 1.0, 2.0, 0.0])
    phi, _ = exact_shapley(additive)
    np.testing.assert_allclose(phi, [1.0, 1.0, 2.0, 0.0], atol=1e-12)


def test_stderr_propagates_linearly():
    n = 3
    stderr = np.full(2**n, 0.1)
    stderr[0] = 0.0
    _, phi_stderr = exact_shapley(np.zeros(2**n), stderr)
    # each player's Shapley value is sum_C +-w(|C|) v_C over 2^(n-1) pairs; weights 1/3, 1/6, 1/6, 1/3
    weights = np.array([1 / 3, 1 / 6, 1 / 6, 1 / 3])
    expected = 0.1 * math.sqrt(2 * (weights**2).sum() - (1 / 3) ** 2)  # the empty coalition has no error
    np.testing.assert_allclose(phi_stderr, expected)


def test_permutation_sampling_within_reported_stderr_on_8_parties(rng):
    n = 8
    values = random_game(rng, n)
    exact, _ = exact_shapley(values)
    estimate, stderr, count = permutation_shapley(
        lambda masks: values[mask_codes(masks)], n, jax.random.key(0), tolerance=0.02, max_permutations=20_000
    )
    assert stderr.max() < 0.02 and count < 20_000
    z = (estimate - exact) / stderr
    assert np.all(np.abs(z) < 3.0), z
    assert 0.3 < np.sqrt(np.mean(z**2)) < 2.0  # the reported errors are the right size
    assert abs(estimate.sum() - values[-1]) <= 4 * stderr.sum()  # efficient within the error (docs/games.md)


def test_reported_stderr_matches_spread_over_runs(rng):
    n = 6
    values = random_game(rng, n)
    runs = [
        permutation_shapley(
            lambda m: values[mask_codes(m)], n, jax.random.key(seed), tolerance=0.0, max_permutations=200
        )
        for seed in range(60)
    ]
    spread = np.std([r[0] for r in runs], axis=0, ddof=1)
    reported = np.mean([r[1] for r in runs], axis=0)
    # the spread of 60 runs is itself uncertain by ~9 % per player; pooled over 6 players, ~4 %
    assert 0.85 < np.mean(reported / spread) < 1.15, reported / spread
    np.testing.assert_allclose(reported, spread, rtol=0.5)


@pytest.mark.parametrize("batch_size", [32, 60])
def test_permutation_limits_count_whole_batches_of_permutations(batch_size):
    """max_permutations rounded up to whole batches is what runs (not fewer: the ends each batch values counted
    against it), and min_permutations holds before a tolerance may stop it (the ends' exact draws do not count)."""
    values = random_game(np.random.default_rng(3), 5)
    game = lambda masks: values[mask_codes(masks)]  # noqa: E731
    _, _, count = permutation_shapley(game, 5, jax.random.key(0), tolerance=0.0, max_permutations=1000, batch_size=32)
    assert count == 32 * math.ceil(1000 / 32)
    _, _, count = permutation_shapley(
        game, 5, jax.random.key(0), tolerance=10.0, min_permutations=64, batch_size=batch_size
    )
    assert count == batch_size * math.ceil(64 / batch_size)
