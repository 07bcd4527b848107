"""The sampler that runs when the caller names none (docs/games.md, "The default sampler").

For a semivalue other than Shapley it is `samplers.default_sampler`'s. For Shapley it is the estimator that needed
the fewest evaluations for the kind of utility at hand, measured at equal evaluations on sums of unanimity games of
12 and 50 players (benchmarks/bench_regression.py): regression sampling (`RegressionSampler`), whose every evaluation
serves every player, where the evaluations are noisy, and permutations where they are exact. Whether they are noisy
is found out, not asked: a utility is noisy when it returns variances with its values (`NoisyValues`), when its R
estimates of a coalition differ, or when its values on the fingerprint's probe coalitions (`fingerprint.probe_masks`)
differ under two keys. That costs `PROBES` evaluations more than the fingerprint's own (twice that with a `game_id`,
whose run values no probes otherwise), counted among the run's evaluations.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import jax
import numpy as np

from bayesval.games.fingerprint import PROBES, probe_key, probe_masks
from bayesval.games.regression import DESIGNS, RegressionSampler, minimum_batch
from bayesval.games.samplers import PermutationSampler, Sampler, default_sampler
from bayesval.games.weights import Semivalue

DEFAULT_BATCH_SIZE = 64  # draws a batch of every sampler but the regression chosen by default
SAME_VALUE = 1e-9  # relative difference under which two probe values are the same value


class Probed(NamedTuple):
    """A utility's values (R, B) and their variances (R, B), or None where it gave none."""

    values: np.ndarray
    variances: np.ndarray | None


class SamplerChoice(NamedTuple):
    """The sampler that runs, its batch size, why it was chosen (in words, for the result's diagnostics), the
    evaluations the choice spent (counted in the run's budget) and the probe coalitions' values under the
    fingerprint's key where it valued them (R, PROBES), for the fingerprint to reuse."""

    sampler: Sampler
    batch_size: int
    why: str
    evaluations: int
    probe_values: np.ndarray | None


def given_sampler(sampler: Sampler, batch_size: int | None) -> SamplerChoice:
    """The caller's own sampler, at its batch size (default `DEFAULT_BATCH_SIZE`)."""
    size = DEFAULT_BATCH_SIZE if batch_size is None else batch_size
    return SamplerChoice(sampler, size, "given by the caller", 0, None)


def default_choice(
    value: Callable[[jax.Array, np.ndarray], Probed],
    semivalue: Semivalue,
    num_players: int,
    batch_size: int | None,
    resumed_sampler: str | None,
    named_game: bool,
) -> SamplerChoice:
    """The default sampler for `semivalue` on this utility (module docstring). `value(key, masks)` values masks
    (B, n) as the run would; `resumed_sampler` is the name of the sampler of a run resumed (which goes on with it);
    `named_game` whether the caller gave a game_id (then the fingerprint values no probes, and the choice values both
    sets). The choice depends on the utility alone, not on the stopping rule, so that a run stopped and resumed is
    the uninterrupted run."""
    size = DEFAULT_BATCH_SIZE if batch_size is None else batch_size
    if semivalue.kind != "shapley":
        sampler = default_sampler(semivalue)
        return SamplerChoice(sampler, size, f"the default for the {semivalue.name} semivalue", 0, None)
    if resumed_sampler is not None:
        return SamplerChoice(
            shapley_sampler(resumed_sampler), size, f"the sampler of resume_from ({resumed_sampler})", 0, None
        )
    masks = probe_masks(num_players)
    first = value(probe_key(), masks)
    second = value(jax.random.fold_in(probe_key(), 1), masks)
    spent = PROBES * (2 if named_game else 1)
    noise = why_noisy(first, second)
    if noise is None:
        why = f"permutations: the utility is exact ({exact_reason(first)}), where permutations need fewest evaluations"
        return SamplerChoice(PermutationSampler(), size, why, spent, first.values)
    why = f"regression: the utility is noisy ({noise}), where regression sampling needs fewest evaluations"
    return SamplerChoice(RegressionSampler(), regression_batch(num_players, batch_size, why), why, spent, first.values)


def shapley_sampler(name: str) -> Sampler:
    """The Shapley sampler called `name` (a resumed state's), or plain permutations (which a resume then refuses,
    naming both, where the state's sampler was another)."""
    candidates = [PermutationSampler(antithetic=True), PermutationSampler(latin=True)]
    candidates += [RegressionSampler(design) for design in DESIGNS]
    return next((sampler for sampler in candidates if sampler.name == name), PermutationSampler())


def regression_batch(num_players: int, batch_size: int | None, why: str) -> int:
    """The default regression's coalitions a batch: the caller's batch_size where given (even, at least
    `regression.minimum_batch`, else a ValueError that says why regression runs), else `default_regression_batch`."""
    minimum = minimum_batch(num_players)
    if batch_size is not None:
        if batch_size < minimum or batch_size % 2:
            raise ValueError(
                f"the default sampler here is RegressionSampler ({why}), whose batch_size counts coalitions drawn in "
                f"pairs: an even number, at least twice the {num_players} players, so the minimum is {minimum}; got "
                f"batch_size={batch_size}. Pass batch_size={default_regression_batch(num_players)} (or leave it "
                "out), or "
                "sampler=PermutationSampler() for permutations"
            )
        return batch_size
    return default_regression_batch(num_players)


def default_regression_batch(num_players: int) -> int:
    """4.5 n coalitions a batch, rounded up to even: the largest with which 50 permutations' worth of evaluations
    (50 (n + 1), and the 4 (n + 1) of the exact sizes twice a batch: 54 n + 54) holds the 4 probes, the pilot and the
    11 counted batches whose standard error `StandardError` trusts (4 + 12 (4.5 n + 3) <= 54 n + 54), so that
    at the budget of the acceptance table (docs/games.md, "The default sampler") the run has an error bar to stop on;
    from 4 n on, the estimator's own cost is below 5 % of a run whose utility costs 1 ms an evaluation at n = 100."""
    half = -(-9 * num_players // 4)  # ceil(4.5 n / 2)
    return 2 * half


def why_noisy(first: Probed, second: Probed) -> str | None:
    """Why a utility whose probe values under two keys are `first` and `second` is noisy, or None if it is not."""
    if first.variances is not None and float(first.variances.max()) > 0:
        return f"it returned variances with its values, up to {float(first.variances.max()):.3g}"
    values = first.values
    scale = SAME_VALUE * max(1.0, float(np.abs(values).max()))
    if len(values) > 1 and float(np.ptp(values, axis=0).max()) > scale:
        return f"its {len(values)} estimates of a coalition differ, by up to {float(np.ptp(values, axis=0).max()):.3g}"
    if values.shape != second.values.shape:
        return "its values on the same coalitions came in different shapes under two keys"
    difference = float(np.abs(values - second.values).max())
    if difference > scale:
        return f"its values on {PROBES} probe coalitions differ under two keys, by up to {difference:.3g}"
    return None


def exact_reason(first: Probed) -> str:
    """In words, what showed the utility exact."""
    told = "" if first.variances is None else ", with variances 0"
    return f"the same values on {PROBES} probe coalitions under two keys{told}"
