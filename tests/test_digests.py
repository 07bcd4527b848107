"""What a fingerprint reads of a utility beyond its name (bayesval/digests.py): the same in every process, told apart
where the data differ, and blind to the state a utility keeps as it runs, so that a run resumes only the game it
sampled (docs/architecture.md, "One resume mechanism")."""

import functools
import os
import subprocess
import sys
import textwrap

import jax
import jax.numpy as jnp
import numpy as np
import pandas as pd
import pytest

from bayesval.digests import array_digest, content_digest, content_parts
from bayesval.games import MaxEvaluations, semivalue
from bayesval.games.analytic import Airport
from bayesval.games.fingerprint import probe_masks


def _closure_over(data):
    def utility(key, masks):
        return jnp.asarray(masks, jnp.float32) @ data

    return utility


def test_a_function_is_read_by_its_code_and_what_it_closes_over_not_by_its_name():
    data = jnp.arange(5.0)
    first, second = _closure_over(data), _closure_over(data)
    second.__name__ = second.__qualname__ = "renamed"
    assert content_digest(first) == content_digest(second)
    assert content_digest(first) != content_digest(_closure_over(data.at[3].set(7.0)))
    assert set(content_parts(first)) == {"code", "closure data"}
    assert content_digest(first) != content_digest(lambda key, masks: masks.sum(axis=1))


def test_a_wrapper_partial_and_defaults_are_read_through():
    def scaled(key, masks, weights):
        return masks @ weights

    weights = np.linspace(0.0, 1.0, 6)
    assert content_digest(jax.jit(_closure_over(weights))) == content_digest(_closure_over(weights))
    left, right = functools.partial(scaled, weights=weights), functools.partial(scaled, weights=weights * 2)
    assert content_digest(left) != content_digest(right)
    assert content_digest(left) == content_digest(functools.partial(scaled, weights=weights.copy()))

    def defaulted(key, masks, weights=weights):
        return masks @ weights

    reversed_weights = weights[::-1].copy()

    def other(key, masks, weights=reversed_weights):
        return masks @ weights

    assert content_parts(defaulted)["defaults"] != content_parts(other)["defaults"]


def test_a_digest_is_the_same_in_another_process_whatever_its_hash_seed():
    """A set constant's order changes with PYTHONHASHSEED; its digest must not (a resumed run is another process)."""
    script = textwrap.dedent(
        """
        from bayesval.digests import content_digest
        def utility(key, masks):
            return masks.sum(axis=1) * ("alpha" in {"alpha", "beta", "gamma", "delta", "epsilon"})
        print(content_digest(utility).hex())
        """
    )
    digests = {
        subprocess.run(
            [sys.executable, "-c", script],
            env={**os.environ, "PYTHONHASHSEED": str(seed), "JAX_PLATFORMS": "cpu"},
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        for seed in (1, 2, 3)
    }
    assert len(digests) == 1


def test_recursion_and_cycles_are_read_without_end():
    def outer():
        def countdown(n):
            return 0 if n == 0 else countdown(n - 1)

        return countdown

    class Holder:
        def __init__(self):
            self.me = self
            self.table = np.ones(3)

        def value(self, key, masks):
            return masks @ self.table

    assert len(content_digest(outer())) == 32
    holder = Holder()
    assert "attribute table" in content_parts(holder.value) and len(content_digest(holder.value)) == 32


def test_state_a_utility_keeps_as_it_runs_is_not_read():
    """A counter, a log in a list, a private cache and a cached property change as the utility runs; the data it is
    made of (an array attribute) is read."""

    class Counted:
        def __init__(self, table):
            self.table, self.calls, self.log, self._cache = table, 0, [], {}

        @functools.cached_property
        def total(self):
            return self.table.sum()

        def __call__(self, key, masks):
            self.calls += 1
            self.log.append(np.shape(masks))
            self._cache[self.calls] = self.total
            return np.asarray(masks) @ self.table

    utility = Counted(np.arange(4.0))
    before = content_parts(utility)
    table = pd.DataFrame({"x": np.arange(4.0), "y": np.ones(4)})
    assert content_parts(Counted(table)) != content_parts(Counted(table.assign(y=np.arange(4.0))))
    utility(None, np.ones((2, 4), bool))
    assert content_parts(utility) == before
    assert content_parts(Counted(np.arange(4.0) + 1)) != before
    assert array_digest(np.arange(4.0)) == content_digest(np.arange(4.0))


def _airports_alike_on_the_probes(num_players: int) -> tuple[Airport, Airport]:
    """Two airport games whose costs differ where no probe coalition looks: one player's cost lowered where it is
    never the largest of a probe coalition that holds it."""
    costs = np.arange(1.0, num_players + 1)
    probes = probe_masks(num_players)
    for player in range(num_players):
        lowered = costs.copy()
        lowered[player] -= 0.5
        if all((costs[mask].max() == lowered[mask].max()) for mask in probes if mask.any()):
            return Airport(tuple(costs)), Airport(tuple(lowered))
    raise AssertionError("no player's cost is hidden from the probes")


def test_a_utility_of_one_name_made_of_other_data_does_not_resume_though_it_agrees_on_the_probes():
    """The airport game of other costs (the same method, the same probe values) resumed silently, z -43 on the
    player whose cost changed; it is refused naming the costs, and the same costs in a new object resume."""
    first_game, other_game = _airports_alike_on_the_probes(8)
    stop = MaxEvaluations(200)
    first = semivalue(first_game.utility, 8, 0, stop=stop)
    with pytest.raises(
        ValueError,
        match=r"it sampled .*Airport.values_of, this run one of that name made of other contents \(its attribute costs",
    ):
        semivalue(other_game.utility, 8, 1, stop=MaxEvaluations(2000), resume_from=first)
    with pytest.raises(ValueError, match="cannot merge the results of different games: game .*attribute costs"):
        first + semivalue(other_game.utility, 8, 1, stop=stop)
    resumed = semivalue(Airport(first_game.costs).utility, 8, 1, stop=MaxEvaluations(2000), resume_from=first)
    assert resumed.state.evaluations > first.state.evaluations


def test_a_state_saved_without_contents_resumes_on_its_probes():
    """States saved before the contents were kept hold none: they resume where the probes agree, as they did."""
    first_game, other_game = _airports_alike_on_the_probes(8)
    first = semivalue(first_game.utility, 8, 0, stop=MaxEvaluations(200))
    del first.state.game["content"]
    resumed = semivalue(other_game.utility, 8, 1, stop=MaxEvaluations(2000), resume_from=first)
    assert resumed.state.evaluations > first.state.evaluations


def test_a_counting_utility_resumes_in_the_process_that_ran_it():
    calls = []

    def logged(key, masks, _seen=calls):
        calls.append(len(masks))
        return jnp.asarray(masks, jnp.float32).sum(axis=1) ** 2

    first = semivalue(logged, 6, 0, stop=MaxEvaluations(200))
    resumed = semivalue(logged, 6, 1, stop=MaxEvaluations(2000), resume_from=first)
    assert resumed.state.evaluations > first.state.evaluations and len(calls) > 2
