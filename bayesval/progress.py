"""What a progress bar is sampling: the caller names the stage ("valuation: posteriors of 7 coalitions x 3
repeats", "reward search, round 2: ..."), and the sampler underneath (Gibbs or NUTS, which knows nothing of
coalitions or rewards) puts that name in front of its own.

    with progress.stage("valuation: coalition posteriors p(theta | o_C)", calls=2):
        ...  # each sampler call inside shows "valuation: coalition posteriors p(theta | o_C), call 1 of 2 [Gibbs]"

Stages do not nest: an inner stage replaces the outer one's label while it lasts. Outside any stage a bar shows the
sampler's name alone. When several processes split one valuation (docs/multihost.md), only process 0 shows bars
(`shown`), and every process reads process 0's clock (`seconds_since`): time-based stopping rules then stop every
process at the same batch, and a result records the same seconds in each.
"""

from __future__ import annotations

import contextvars
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import jax
import numpy as np
from jax.experimental import multihost_utils


@dataclass
class _Stage:
    label: str
    calls: int | None  # how many sampler calls the stage makes, where the caller knows
    started: int = 0  # sampler calls begun so far


_CURRENT: contextvars.ContextVar[_Stage | None] = contextvars.ContextVar("bayesval_progress_stage", default=None)


@contextmanager
def stage(label: str, *, calls: int | None = None) -> Iterator[None]:
    """Label every progress bar opened inside with `label` (and "call j of `calls`" where there are several)."""
    token = _CURRENT.set(_Stage(label, calls))
    try:
        yield
    finally:
        _CURRENT.reset(token)


def describe(sampler: str) -> str:
    """The description of a progress bar the sampler `sampler` is opening now: the stage's label, which call of the
    stage this is, and the sampler."""
    current = _CURRENT.get()
    if current is None:
        return sampler
    current.started += 1
    if current.calls is not None and current.calls > 1:
        return f"{current.label}, call {current.started} of {current.calls} [{sampler}]"
    if current.calls is None and current.started > 1:
        return f"{current.label}, call {current.started} [{sampler}]"
    return f"{current.label} [{sampler}]"


def shown(progress_bar: bool) -> bool:
    """Whether a bar asked for (`progress_bar`) is shown here: in process 0 only, so that processes splitting one
    valuation print one set of bars."""
    return bool(progress_bar) and jax.process_index() == 0


def seconds_since(started: float) -> float:
    """Seconds since `started` (a `time.perf_counter()` reading) by process 0's clock, the same in every process;
    with one process, this process's. A collective when there are several: every process must call it alike."""
    seconds = time.perf_counter() - started
    if jax.process_count() > 1:
        seconds = float(multihost_utils.broadcast_one_to_all(np.float64(seconds)))
    return seconds


__all__ = ["describe", "seconds_since", "shown", "stage"]
