"""Stopping rules for sampled semivalues, combined with `&` (both hold) and `|` (either holds), as pyDVL's.

A rule is a pure function of the run's `Progress`: it keeps no state of its own, so a resumed run stops where an
uninterrupted one would. Besides `holds`, each rule says which indices it counts as converged: a standard error
threshold those within it whose variance can be trusted, rank stability those whose rank stayed put; budget caps stop
a run without converging it.
"""

from __future__ import annotations

import warnings
from typing import NamedTuple

import numpy as np

from bayesval.results.variance import Judgement, judged, trusted
from bayesval.validation import check_int, check_non_negative, check_positive, user_stacklevel

DEFAULT_MAX_EVALUATIONS = 1_000_000


class Progress(NamedTuple):
    """A run so far: the estimates, their standard errors and draws per index, the utility evaluations in all
    (resumed runs included), this call's wall time in seconds, the last rankings (H, n), best first, and per index
    the range of its draws (0: all equal), whether its value is exact (every weighted group one coalition of a
    `KeylessUtility`, valued the same each time: `bayesval.results.variance.exact_indices`) and the
    degrees of freedom of its standard error (`bayesval.results.variance`)."""

    values: np.ndarray
    stderr: np.ndarray
    counts: np.ndarray
    evaluations: int
    elapsed: float
    rankings: np.ndarray
    ranges: np.ndarray
    exact: np.ndarray
    dof: np.ndarray

    @property
    def trusted(self) -> np.ndarray:
        """Indices whose standard error means something: exact with no error left, or from at least `TRUSTED_DOF`
        degrees of freedom (draws that varied often enough to show their spread) (n,)."""
        return trusted(self.exact, self.stderr, self.dof)


class StoppingRule:
    """Base of the rules: `holds(progress)`, per-index `converged(progress)`, and whether it caps the run."""

    capped = False  # holds after a bounded budget, whatever the estimates
    history = 0  # rankings it needs to see

    def holds(self, progress: Progress) -> bool:
        raise NotImplementedError

    def converged(self, progress: Progress) -> np.ndarray:
        return np.zeros(len(progress.values), bool)

    def __and__(self, other: StoppingRule) -> StoppingRule:
        return _Both(self, _check_rule(other))

    def __or__(self, other: StoppingRule) -> StoppingRule:
        return _Either(self, _check_rule(other))


class StandardError(StoppingRule):
    """Every index's standard error at most `threshold` (>= 0), from at least `min_count` draws and trusted: of at
    least `TRUSTED_DOF` degrees of freedom (an index whose draws were all equal, or varied only a few times, has no
    variance to judge, and converges only where its value is exact)."""

    def __init__(self, threshold: float, min_count: int = 8) -> None:
        self.threshold = check_non_negative("threshold", threshold)
        self.min_count = check_int("min_count", min_count, minimum=2)

    def converged(self, progress: Progress) -> np.ndarray:
        enough = progress.trusted & (progress.exact | (progress.counts >= self.min_count))
        return (progress.stderr <= self.threshold) & enough

    def holds(self, progress: Progress) -> bool:
        return bool(self.converged(progress).all())

    def __repr__(self) -> str:
        return f"StandardError({self.threshold:g})"


class MaxEvaluations(StoppingRule):
    """At least `limit` utility evaluations in all (a resumed run counts its earlier ones)."""

    capped = True

    def __init__(self, limit: int) -> None:
        self.limit = check_int("limit", limit, minimum=1)

    def holds(self, progress: Progress) -> bool:
        return progress.evaluations >= self.limit

    def __repr__(self) -> str:
        return f"MaxEvaluations({self.limit})"


class MaxTime(StoppingRule):
    """At least `seconds` of wall time in this call (checked after each batch)."""

    capped = True

    def __init__(self, seconds: float) -> None:
        self.seconds = check_positive("seconds", seconds)

    def holds(self, progress: Progress) -> bool:
        return progress.elapsed >= self.seconds

    def __repr__(self) -> str:
        return f"MaxTime({self.seconds:g})"


class RankStability(StoppingRule):
    """The ranking of the indices unchanged over the last `checks` checks (one check per batch)."""

    def __init__(self, checks: int = 5) -> None:
        self.history = check_int("checks", checks, minimum=2)

    def converged(self, progress: Progress) -> np.ndarray:
        recent = progress.rankings[-self.history :]
        if len(recent) < self.history:
            return np.zeros(len(progress.values), bool)
        positions = np.argsort(recent, axis=1)  # (H, n): each index's rank in each check
        return (positions == positions[-1]).all(axis=0)

    def holds(self, progress: Progress) -> bool:
        return bool(self.converged(progress).all())

    def __repr__(self) -> str:
        return f"RankStability({self.history})"


class When(StoppingRule):
    """Whenever `predicate()` says so (e.g. a utility that has valued every coalition); not a cap."""

    def __init__(self, predicate) -> None:
        if not callable(predicate):
            raise TypeError(f"predicate must be a function of no arguments returning a bool, got {predicate!r}")
        self.predicate = predicate

    def holds(self, progress: Progress) -> bool:
        return bool(self.predicate())

    def __repr__(self) -> str:
        return f"When({getattr(self.predicate, '__name__', 'predicate')})"


class _Both(StoppingRule):
    def __init__(self, first: StoppingRule, second: StoppingRule) -> None:
        self.first, self.second = first, second
        self.capped = first.capped and second.capped
        self.history = max(first.history, second.history)

    def holds(self, progress: Progress) -> bool:
        return self.first.holds(progress) and self.second.holds(progress)

    def converged(self, progress: Progress) -> np.ndarray:
        return self.first.converged(progress) & self.second.converged(progress)

    def __repr__(self) -> str:
        return f"({self.first!r} & {self.second!r})"


class _Either(_Both):
    def __init__(self, first: StoppingRule, second: StoppingRule) -> None:
        super().__init__(first, second)
        self.capped = first.capped or second.capped

    def holds(self, progress: Progress) -> bool:
        return self.first.holds(progress) or self.second.holds(progress)

    def converged(self, progress: Progress) -> np.ndarray:
        return self.first.converged(progress) | self.second.converged(progress)

    def __repr__(self) -> str:
        return f"({self.first!r} | {self.second!r})"


def evaluation_cap(rule: StoppingRule) -> int | None:
    """The fewest evaluations after which `rule` surely holds by its `MaxEvaluations` caps (a resumed run's earlier
    evaluations count), or None where no such cap bounds it (a time cap, or a cap only under `&`)."""
    if isinstance(rule, MaxEvaluations):
        return rule.limit
    if not isinstance(rule, _Both):
        return None
    caps = [evaluation_cap(rule.first), evaluation_cap(rule.second)]
    if isinstance(rule, _Either):
        known = [cap for cap in caps if cap is not None]
        return min(known) if known else None
    return None if None in caps else max(caps)


def smallest_threshold(rule: StoppingRule) -> float | None:
    """The smallest positive `StandardError` threshold in `rule` (under `&` and `|` alike), or None where it has none:
    the standard error a part that every index's variance shares (an estimated control variate's) must stay
    below, or the rule could never hold."""
    if isinstance(rule, StandardError):
        return rule.threshold if rule.threshold > 0 else None
    if not isinstance(rule, _Both):
        return None
    found = [t for t in (smallest_threshold(rule.first), smallest_threshold(rule.second)) if t is not None]
    return min(found) if found else None


def judgement(progress: Progress, rule: StoppingRule) -> Judgement:
    """Whether each index is converged under `rule` and why, in words: a result's `converged` flags and its
    `diagnostics["indices"]["verdict"]`, both from `bayesval.results.variance.judged` (an index whose draws were all
    equal never converges unless its value is exact)."""
    return judged(progress.exact, progress.ranges, progress.dof, progress.stderr, rule.converged(progress))


def _check_rule(rule) -> StoppingRule:
    if not isinstance(rule, StoppingRule):
        raise TypeError(
            f"stop must be a stopping rule (StandardError, MaxEvaluations, MaxTime, RankStability, or rules "
            f"combined with & and |), got {rule!r}"
        )
    return rule


def capped(rule: StoppingRule) -> StoppingRule:
    """`rule`, or with a warning `rule | MaxEvaluations(DEFAULT_MAX_EVALUATIONS)` where it may never hold: a
    standard error threshold below the utility's noise floor, or a ranking of two tied indices, never does."""
    rule = _check_rule(rule)
    if rule.capped:
        return rule
    warnings.warn(
        f"stop={rule!r} has no evaluation or time cap and may never hold (a standard error below the utility's own "
        f"noise, tied values that swap ranks); stopping at MaxEvaluations({DEFAULT_MAX_EVALUATIONS}) as well. Add "
        "'| MaxEvaluations(...)' or '| MaxTime(...)' to choose the cap",
        UserWarning,
        stacklevel=user_stacklevel(),
    )
    return rule | MaxEvaluations(DEFAULT_MAX_EVALUATIONS)
