"""Which coalition posteriors are sampled again (`SamplerConfig.reruns`): those that failed the convergence flags
(R-hat over a coalition's repeats' chains > 1.01, or a repeat's bulk ESS < 400), where they are few among the
coalitions sampled together. Each rerun samples them from fresh chains (`bayesval.parties.keys.rerun_key`) with twice
the sweeps of the time before (`SamplerConfig.rerun`), in calls of their own rows (`bayesval.parties.plan.rerun_rows`),
at one width (`CallLayout.rerun_width`); `CoalitionSurprise` files the rerun's estimates over the failed ones."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol

# Reruns go to the coalitions that failed the convergence flags only where they are one, or at most this share of the
# coalitions sampled together: the slow posteriors of a game (9 of 4,095 in a 12-party valuation on a GPU, 12 of 63
# for six parties at half the fast preset's sweeps; docs/benchmarks.md), not a budget too short for the game. A rerun
# of 2x the sweeps after warm-up costs ~5/3 of a first call per row, so at this share it costs at most ~0.4 of the
# first call's sweeps where the batch is large, against at least a whole valuation for a budget raised for every
# coalition.
RERUN_SHARE = 0.25


class Converging(Protocol):
    """What a rerun decision reads of a coalition's run: whether it passed the convergence flags."""

    @property
    def converged(self) -> bool: ...


def to_rerun(runs: Mapping[int, Converging], codes: list[int]) -> list[int]:
    """The coalitions among `codes` (sampled together) to sample again: those whose run failed the convergence
    flags, where they are one or at most RERUN_SHARE of `codes`; none where more failed (the budget is short for
    the game, and the valuation warns instead)."""
    failed = [code for code in codes if not runs[code].converged]
    return failed if len(failed) <= max(1, RERUN_SHARE * len(codes)) else []
