"""The key streams of a party valuation (`bayesval.parties.keys`) never collide: every key the party path derives is
one path of operations (split i, fold d) from the valuation's key, checked against the package's own derivations, and
no key's path is a prefix of another's, so no two streams share a key, nor a key derived from one."""

from itertools import combinations

import jax
import numpy as np

from bayesval.parties import keys

VALUES, PERMUTATIONS, REWARDS = (("split", 0),), (("split", 1),), (("fold", keys.REWARDS_STREAM),)
POSTERIOR, PRIOR = VALUES + (("split", 0),), VALUES + (("split", 1),)


def row_path(code: int, repeat: int, attempt: int = 0) -> tuple:
    """Row (code, repeat) of the first pass (attempt 0) or of a rerun, as `CoalitionSurprise` derives it."""
    base = POSTERIOR if not attempt else POSTERIOR + (("fold", keys.RERUN_STREAM), ("fold", attempt))
    if code < 2**32:
        return base + (("fold", code), ("fold", repeat))
    low, high = code & 0xFFFFFFFF, code >> 32
    return base + (("fold", 0), ("fold", 0), ("fold", low), ("fold", high), ("fold", repeat))


def derived(key: jax.Array, path: tuple) -> jax.Array:
    for operation, value in path:
        key = jax.random.split(key)[value] if operation == "split" else jax.random.fold_in(key, value)
    return key


def same(a: jax.Array, b: jax.Array) -> bool:
    return bool(np.array_equal(jax.random.key_data(a), jax.random.key_data(b)))


def test_the_package_derives_each_key_along_its_path():
    """The paths below are the package's: row keys (codes below and past 32 bits), a rerun's rows, the mixture's
    points, the rewards' calls and prior."""
    key = jax.random.key(11)
    posterior = derived(key, POSTERIOR)
    codes, repeats = [5, 2**32, 2**40 + 7], [2, 0, 1]
    for row, code, repeat in zip(keys.row_keys(posterior, codes, repeats), codes, repeats):
        assert same(row, derived(key, row_path(code, repeat)))
    rerun = keys.row_keys(keys.rerun_key(posterior, 2), [6], [1])[0]
    assert same(rerun, derived(key, row_path(6, 1, attempt=2)))
    assert same(jax.random.fold_in(rerun, keys.MIXTURE_STREAM), derived(key, row_path(6, 1, 2) + (("fold", 1),)))
    rewards = keys.rewards_key(key)
    assert same(rewards, derived(key, REWARDS))
    assert same(keys.reward_call_key(rewards, 3), derived(key, REWARDS + (("fold", 3),)))
    assert same(keys.reward_prior_key(rewards), derived(key, REWARDS + (("fold", 2**31 - 1),)))


def test_no_stream_is_a_prefix_of_another():
    """The roots of the streams, each row of a 4-party game and of coalitions past 32 parties (party 33 alone, whose
    low 32 bits are 0, once passed through the key a rerun's rows are folded from) in 3 repeats and 2 reruns, the
    prior samples, the permutations, the reward calls and the reward prior: no root's path is another's prefix, so
    no key derived from one root is a key of another. Within a row, its samplers split its key and the mixture's
    points fold it: two operations, two streams."""
    codes = list(range(1, 16)) + [2**32, 2**32 + 1, 2**33 + 2**32, 2**63 + 5]
    roots = [row_path(code, repeat, attempt) for code in codes for repeat in range(3) for attempt in range(3)]
    roots += [PRIOR + (("fold", repeat),) for repeat in range(3)] + [PERMUTATIONS]
    roots += [REWARDS + (("fold", call),) for call in range(4)] + [REWARDS + (("fold", keys.REWARD_PRIOR_STREAM),)]
    assert len(set(roots)) == len(roots)
    prefixed = [(a, b) for a, b in combinations(sorted(roots), 2) if b[: len(a)] == a]
    assert not prefixed, prefixed[:3]
    assert len({keys.RERUN_STREAM, keys.MIXTURE_STREAM, keys.REWARDS_STREAM, keys.REWARD_PRIOR_STREAM}) == 4
    assert keys.MAX_REWARD_CALLS < keys.REWARD_PRIOR_STREAM  # the reward calls never reach the prior's stream
