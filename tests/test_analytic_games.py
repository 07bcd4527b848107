"""Closed-form semivalues of the analytic games (bayesval.games.analytic) against enumeration of every coalition,
the Shapley formulas of the literature at 100 players, efficiency, and finite values at 150 players."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from bayesval.games import (
    BANZHAF,
    LEAVE_ONE_OUT,
    SHAPLEY,
    Airport,
    Miner,
    Shoes,
    SymmetricVoting,
    UnanimitySum,
    WeightedVoting,
    beta_shapley,
    exact_semivalue,
)
from bayesval.games.analytic import MinimumSpanningTree

SEMIVALUES = [SHAPLEY, BANZHAF, beta_shapley(4, 1), beta_shapley(16, 1), beta_shapley(1, 4), LEAVE_ONE_OUT]
TIED_COSTS = (3.0, 1.0, 3.0, 2.0, 5.0, 1.0, 2.0, 5.0, 4.0, -0.5, 4.0)  # ties at every level, one negative cost
GAMES = {
    "unanimity": lambda n: UnanimitySum.random(n, num_terms=6, max_size=4, seed=n),
    "unanimity with a negative term": lambda n: UnanimitySum(((0, 1), (1, 2, n - 1), (3,), (0, 1)), (2, -1, 0.5, 1), n),
    "airport": lambda n: Airport.random(n, seed=n),
    "airport with tied costs": lambda n: Airport(TIED_COSTS[:n]),
    "symmetric voting": SymmetricVoting,
    "shoes": lambda n: Shoes(n // 2, n - n // 2),
    "shoes, one left": lambda n: Shoes(1, n - 1),
    "miner": Miner,
    "weighted voting": lambda n: WeightedVoting(tuple(j % 5 for j in range(n)), quota=n + 0.5),  # weights 0..4
    "minimum spanning tree": MinimumSpanningTree,
}


def grand_coalition_gain(game) -> float:
    """v(N) - v(empty)."""
    masks = jnp.array([[True] * game.num_players, [False] * game.num_players])
    full, empty = np.asarray(game.utility(None, masks))
    return full - empty


@pytest.mark.parametrize("n", [5, 8, 11])
@pytest.mark.parametrize("name", GAMES)
def test_closed_forms_equal_enumeration(name, n):
    game = GAMES[name](n)
    assert game.num_players == n
    for weights in SEMIVALUES:
        exact = exact_semivalue(game.utility, n, jax.random.key(0), weights=weights).values
        np.testing.assert_allclose(game.semivalue(weights), exact, rtol=0, atol=1e-10, err_msg=weights.name)
    np.testing.assert_array_equal(game.semivalue("banzhaf"), game.semivalue(BANZHAF))


def test_shapley_values_equal_the_formulas_of_the_literature_at_100_players():
    n = 100
    unanimity = UnanimitySum.random(n, num_terms=40, max_size=8, seed=0)
    by_term = np.zeros(n)  # Shapley 1953: a_T / |T| to each member of T
    for coalition, coefficient in zip(unanimity.coalitions, unanimity.coefficients):
        by_term[list(coalition)] += coefficient / len(coalition)
    np.testing.assert_allclose(unanimity.semivalue(SHAPLEY), by_term, rtol=1e-10)

    airport = Airport.random(n, seed=1)
    costs = np.array(airport.costs)
    order = np.argsort(costs, kind="stable")  # Littlechild & Owen 1973: sorted costs, segment j shared by n - j
    shares = np.cumsum(np.diff(costs[order], prepend=0.0) / (n - np.arange(n)))
    littlechild_owen = np.empty(n)
    littlechild_owen[order] = shares
    np.testing.assert_allclose(airport.semivalue(SHAPLEY), littlechild_owen, rtol=1e-10)

    np.testing.assert_allclose(SymmetricVoting(n).semivalue(SHAPLEY), 1 / n, rtol=1e-10)
    np.testing.assert_allclose(Miner(n + 1).semivalue(SHAPLEY), (n // 2) / (n + 1), rtol=1e-10)
    np.testing.assert_allclose(Shoes(n // 2, n // 2).semivalue(SHAPLEY), 0.5, rtol=1e-10)  # symmetric: v(N) / n
    # Castro, Gomez & Tejada 2009: the ring of 100 players, v(N) = 99 ring edges + 101 to the source, shared alike
    np.testing.assert_allclose(MinimumSpanningTree(n).semivalue(SHAPLEY), (99 + 101) / n, rtol=1e-10)


@pytest.mark.parametrize("name", GAMES)
def test_shapley_values_are_efficient_at_100_players(name):
    game = GAMES[name](100) if "tied" not in name else Airport(TIED_COSTS * 9 + (6.0,))
    np.testing.assert_allclose(game.semivalue(SHAPLEY).sum(), grand_coalition_gain(game), rtol=1e-10)


@pytest.mark.parametrize("name", GAMES)
def test_values_are_finite_at_150_players(name):
    game = GAMES[name](150) if "tied" not in name else Airport(TIED_COSTS * 13 + (6.0,) * 7)
    for weights in SEMIVALUES:
        values = game.semivalue(weights)
        assert values.shape == (150,) and np.all(np.isfinite(values)), weights.name
        assert np.all(values >= 0) or name.endswith("negative term") or "tied" in name or "tree" in name, weights.name


def test_bad_games_are_refused():
    with pytest.raises(ValueError, match="distinct player indices"):
        UnanimitySum(((0, 0),), (1.0,), 3)
    with pytest.raises(ValueError, match="distinct player indices"):
        UnanimitySum(((0, 3),), (1.0,), 3)
    with pytest.raises(ValueError, match="one per coalition"):
        UnanimitySum(((0,), (1,)), (1.0,), 3)
    with pytest.raises(ValueError, match="non-finite"):
        Airport((1.0, np.nan))
    with pytest.raises(ValueError, match="non-negative integers"):
        WeightedVoting((1, 2.5), 2)
    with pytest.raises(ValueError, match="left"):
        Shoes(0, 3)
    with pytest.raises(ValueError, match="num_players"):
        MinimumSpanningTree(2)
    with pytest.raises(ValueError, match="beta_shapley"):
        Miner(4).semivalue("beta")
