"""A keyed utility whose noise follows each batch's key alone, not each row: what its runs reported before the check
(`bayesval.games.utilities.KeyAloneCheck`), and what the check refuses (2026-12-05).

    python benchmarks/bench_key_alone.py [--keys 40] [--part runs|reach|all]

The game of tests/test_no_confident_wrong_answer.py: 8 players, a random table, noise of sd 0.1, batches of 8,
StandardError(0.05) | MaxEvaluations(20,000). Two forms of the same noise: drawn once per coalition from the batch's
key (every copy of a coalition in a batch gets one value, as a model seeded with the key gives), and drawn for each
row. Per form and semivalue (leave-one-out by its own distribution, Shapley by permutations and by the default for a
noisy utility, regression sampling, Banzhaf by uniform coalitions), over the keys: with the check off (the run
before it), the RMS and largest |z| against the exact values; with the check on (its first `KEY_ALONE_BATCHES`
batches) and, for the key alone, over every batch, how many runs were refused and at which batch. A third form, an
accuracy-like utility of 6 players rounded to 0.1 (noise of each row, sd 0.01: copies agree 95 % of the time),
counts false refusals where copies often agree by chance, and a float32 utility of the masks alone whose values
round otherwise in batches of other shapes counts those where they differ by rounding. `--part reach`: how often
the check's first batches catch the key-alone noise in uniform coalitions of few players, and how much such copies
cost (`reach`).
"""

from __future__ import annotations

import argparse
import sys
import warnings
from pathlib import Path
from unittest import mock

import jax
import jax.numpy as jnp
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from game_examples import random_table  # noqa: E402

from bayesval.games import (  # noqa: E402
    MaxEvaluations,
    PermutationSampler,
    StandardError,
    exact_semivalue,
    semivalue,
    utilities,  # noqa: E402
)
from bayesval.games.masks import mask_codes  # noqa: E402
from bayesval.games.utilities import KeyAloneCheck  # noqa: E402

N = 8
TABLE = random_table(6, N)
STOP = StandardError(0.05) | MaxEvaluations(20_000)


def key_alone(key, masks):
    codes = mask_codes(np.asarray(masks))
    return TABLE[codes] + 0.1 * np.asarray(jax.random.normal(key, (2**N,)))[codes]


def each_row(key, masks):
    codes = mask_codes(np.asarray(masks))
    return TABLE[codes] + 0.1 * np.asarray(jax.random.normal(key, (len(codes),)))


def rounded(key, masks):
    masks = jnp.asarray(masks)
    return jnp.round(10 * (0.8 * masks.sum(axis=1) / 6 + 0.01 * jax.random.normal(key, (masks.shape[0],)))) / 10


class Counted:
    """The utility, and the sizes of the batches it was called on."""

    def __init__(self, utility):
        self.utility, self.calls = utility, []

    def __call__(self, key, masks):
        self.calls.append(len(masks))
        return self.utility(key, masks)


def _unchecked(self, masks, values) -> None:
    """`KeyAloneCheck.add` before the check: nothing."""


_WEIGHTS = np.random.default_rng(1).normal(size=(N + 1, 512)).astype(np.float32)


@jax.jit
def _float32_model(masks):
    hidden = jnp.tanh(masks.astype(jnp.float32) @ _WEIGHTS[:N] / 3)
    return 20 * hidden @ _WEIGHTS[N] / 512


def float32_once(key, masks):
    """Of the masks alone (the key unread), in float32, each distinct coalition of a batch valued once: how a value
    rounds depends on how many distinct coalitions the batch holds."""
    distinct, inverse = np.unique(np.asarray(masks), axis=0, return_inverse=True)
    return np.asarray(_float32_model(jnp.asarray(distinct)), np.float64)[inverse.ravel()]


def runs(utility, num_players, weights, sampler, keys: int, check: str):
    """z-scores of the runs that ended, and the batches at which the others were refused; `check` "off" (the run
    before the check), "on" (as it runs), or "every batch" (the check not stopped after its first batches)."""
    z, refused = [], []
    truth = exact_semivalue(lambda key, masks: TABLE[mask_codes(np.asarray(masks))], N, 0, weights=weights).values
    for seed in range(keys):
        counted = Counted(utility)
        adding = _unchecked if check == "off" else KeyAloneCheck.add
        window = np.inf if check == "every batch" else utilities.KEY_ALONE_BATCHES
        with (
            warnings.catch_warnings(),
            mock.patch.object(KeyAloneCheck, "add", adding),
            mock.patch.object(utilities, "KEY_ALONE_BATCHES", window),
        ):
            warnings.simplefilter("ignore")
            try:
                result = semivalue(
                    counted, num_players, seed, weights=weights, sampler=sampler, stop=STOP, batch_size=8
                )
            except ValueError:
                refused.append(sum(size >= 8 for size in counted.calls))
                continue
        if num_players == N:
            z.append((result.values - truth) / result.stderr)
    return np.array(z), refused


def reach(trials: int) -> None:
    """Where the check's 4 batches reach: uniform coalitions (each player in with chance 1/2) of a utility with one
    noise draw per coalition a batch, fed to the check alone. Such a run's noise share of the standard error is too
    small by sqrt(E sum_C c_C^2 / B) = sqrt(1 + (B - 1) / 2^n), c_C the copies of coalition C in a batch of B."""
    rng = np.random.default_rng(0)
    print("\n| players | batch | refused in 4 batches | noise's share of the stderr too small by |")
    print("|---|---|---|---|")
    for num_players, batch in ((3, 8), (4, 8), (4, 16), (6, 64), (7, 64), (8, 64), (8, 8)):
        refused = 0
        for _ in range(trials):
            check = KeyAloneCheck()
            try:
                for _ in range(utilities.KEY_ALONE_BATCHES):
                    masks = rng.random((batch, num_players)) < 0.5
                    noise = rng.normal(size=2**num_players)
                    check.add(masks, noise[mask_codes(masks)][None])
            except ValueError:
                refused += 1
        factor = np.sqrt(1 + (batch - 1) / 2**num_players)
        print(f"| {num_players} | {batch} | {refused / trials:.1%} | {factor:.2f} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--keys", type=int, default=40)
    parser.add_argument("--part", choices=("runs", "reach", "all"), default="all")
    args = parser.parse_args()
    if args.part in ("reach", "all"):
        reach(300)
    if args.part == "reach":
        return
    print("| utility | semivalue | check | runs ended | RMS z | largest \\|z\\| | refused (at batch) |")
    print("|---|---|---|---|---|---|---|")
    for weights, sampler in (("loo", None), ("shapley", PermutationSampler()), ("shapley", None), ("banzhaf", None)):
        sampler_name = "permutations" if sampler else "default sampler"
        for utility in (key_alone, each_row):
            for check in ("off", "on", "every batch") if utility is key_alone else ("off", "on"):
                z, refused = runs(utility, N, weights, sampler, args.keys, check)
                rms = f"{np.sqrt(np.mean(z**2)):.2f}" if z.size else ""
                worst = f"{np.abs(z).max():.1f}" if z.size else ""
                at = f"{len(refused)} ({min(refused)}-{max(refused)})" if refused else "0"
                row = [utility.__name__, f"{weights}, {sampler_name}", check, len(z), rms, worst, at]
                print("| " + " | ".join(map(str, row)) + " |")
    _, refused = runs(rounded, 6, "loo", None, args.keys, "on")
    print(f"\nrounded accuracy, leave-one-out, {args.keys} keys: {len(refused)} refused")
    _, refused = runs(float32_once, N, "shapley", PermutationSampler(), args.keys, "on")
    print(f"a float32 utility of the masks alone, Shapley by permutations, {args.keys} keys: {len(refused)} refused")


if __name__ == "__main__":
    main()
