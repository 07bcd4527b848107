"""The keys of a party valuation, in one place: which stream each random draw of the party path comes from.

`valuate(key=...)` splits into the coalitions' key and the permutations' key (`bayesval.games.semivalue`); the
coalitions' key splits into the posterior key and the prior key (`CoalitionSurprise`). A row (coalition, repeat)
samples from `row_keys(posterior key, codes, repeats)`: its key depends on its coalition and repeat alone, so values
do not depend on the batch size, the device layout or the number of processes. Every key is one path of splits and
folds from the valuation's key, and no stream's path is a prefix of another's (tests/test_keys.py): a code below
2^32 is folded in as it is (never 0), a code past 32 bits on the branch (0, 0) (`WIDE_CODES`), a rerun's rows on the
branch (0, attempt >= 1). The reserved streams below are folded into a key beside values that its other users fold
in, so each is chosen where those never reach:

RERUN_STREAM         0, folded into the posterior key: the code of the empty coalition, which is never sampled,
                     so no coalition's row key is on it; the reruns' row keys then fold in the attempt (>= 1), and
                     the codes past 32 bits fold in 0 (`WIDE_CODES`).
MIXTURE_STREAM       1, folded into a row's sampler key: the key of the points the Rao-Blackwellised KL scores.
REWARDS_STREAM       2, folded into the valuation's key: the rewards' key (the coalitions' and permutations' keys
                     are split from it, never folded).
CONTROL_STREAM       3, folded into the valuation's key: the key of the surrogate's evaluations that estimate the
                     control variate's phi(u) beyond the parties a table holds (`estimated_control`).
REWARD_PRIOR_STREAM  2^31 - 1, folded into the rewards' key: its prior draws; the reward trials fold in their call
                     count (`RewardSampler.calls`), which stays below it (`MAX_REWARD_CALLS`).
"""

from __future__ import annotations

import jax

from bayesval.inference.batching import WIDE_CODES, coalition_keys

RERUN_STREAM = WIDE_CODES[0]  # the empty coalition's code: the branch of reruns and of codes past 32 bits
MIXTURE_STREAM = 1
REWARDS_STREAM = 2
CONTROL_STREAM = 3
REWARD_PRIOR_STREAM = 2**31 - 1
MAX_REWARD_CALLS = REWARD_PRIOR_STREAM - 1  # the reward trials' calls fold in 0 .. MAX_REWARD_CALLS - 1


def row_keys(key: jax.Array, codes, repeats) -> jax.Array:
    """The key of each row (code, repeat): a coalition's bitmask (or a reward input's index) and its repeat, folded
    into `key` (`bayesval.inference.batching.coalition_keys`)."""
    return coalition_keys(key, codes, repeats)


def rerun_key(posterior_key: jax.Array, attempt: int) -> jax.Array:
    """The key the rows of the `attempt`-th rerun (>= 1) are folded from: the posterior key on RERUN_STREAM, then
    the attempt."""
    return jax.random.fold_in(jax.random.fold_in(posterior_key, RERUN_STREAM), attempt)


def rewards_key(key: jax.Array) -> jax.Array:
    """The rewards' key, from the valuation's key."""
    return jax.random.fold_in(key, REWARDS_STREAM)


def control_key(key: jax.Array) -> jax.Array:
    """The key of the estimated control variate's surrogate evaluations, from the valuation's key."""
    return jax.random.fold_in(key, CONTROL_STREAM)


def reward_call_key(rewards: jax.Array, call: int) -> jax.Array:
    """The key of the reward trials' `call`-th sampler call (0, 1, ...)."""
    if not 0 <= call < MAX_REWARD_CALLS:
        raise ValueError(f"reward call {call} is past the {MAX_REWARD_CALLS} calls the rewards' key stream holds")
    return jax.random.fold_in(rewards, call)


def reward_prior_key(rewards: jax.Array) -> jax.Array:
    """The key of the rewards' prior draws (a party whose target is 0)."""
    return jax.random.fold_in(rewards, REWARD_PRIOR_STREAM)
