"""The sampler calls of a coalition valuation, planned: which rows (coalition, repeat) a call holds, at how many
party slots, padded to how many rows, with which budget. Pure: a plan is a function of the rows' sizes and repeats,
the game's settings and the device count; nothing is released, compiled or sampled here
(`bayesval.parties.execute` runs a planned call, `bayesval.parties.surprise` caches what the calls return).

Rows are sampled in fixed-size calls, padded, so that a width has few compiled programs, and chunked to
`SamplerConfig.memory_limit_mb` per device over the global device mesh (every device of every process after
`jax.distributed.initialize()`, docs/multihost.md). Where the model packs members (`packs_members`) and the budget
makes it pay (`worth_packing`), a coalition's chains carry only its members' slots, rounded up to `member_width`, and
the rows of one width share calls (docs/architecture.md, "Coalitions are masks").
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import NamedTuple

import jax
import numpy as np

from bayesval.batching import batches, padded_size
from bayesval.inference.config import SamplerConfig

MAX_BATCH_ROWS = 256  # rows a process samples per call on CPU
MAX_BATCH_ROWS_ACCELERATOR = 16384  # on a GPU or TPU, where a wider call costs little more (docs/benchmarks.md)
CALL_ROWS_STEP = 64  # a width's last call is cut to its rows rounded up to a multiple of this (`call_rows`)
PACK_FROM_PARTIES = 6
PACK_FROM_CHAIN_SWEEPS = 4_000
BYTES_PER_DRAW_COORDINATE = 8 * 4  # float64 draws, plus the sampler's trace, state and the host copy


def max_rows_per_process(platform: str) -> int:
    """The most rows one process samples per call on devices of `platform` ('cpu', 'gpu', 'tpu', ...):
    MAX_BATCH_ROWS on CPU, where a call's time grows with its rows, and MAX_BATCH_ROWS_ACCELERATOR elsewhere, where
    the sweeps of a few hundred small chains leave most of the device idle and a wider call costs little more."""
    return MAX_BATCH_ROWS if platform == "cpu" else MAX_BATCH_ROWS_ACCELERATOR


def call_rows(rows: int, full: int, multiple: int) -> int:
    """The rows a sampler call holding `rows` rows is padded to, where a full call of its width holds `full`: its
    rows rounded up to a multiple of CALL_ROWS_STEP (itself rounded up to a `multiple`: the devices times the rows
    of one posterior's repeats, so that every process's block starts with a whole posterior), at most `full`. So a
    width's calls take at most ceil(full / step) sizes, each compiled once, and pad fewer rows than a step."""
    return min(full, padded_size(rows, padded_size(CALL_ROWS_STEP, multiple)))


def rerun_rows(rows: int, full: int, multiple: int) -> int:
    """The rows a rerun's call holding `rows` rows is padded to: its runs of `multiple` rows (the devices times a
    posterior's repeats) rounded up to a power of two, at most `full`. A rerun's budget compiles programs of its own
    shape wherever its call is cut (`cuts_calls`), so a call of one slow coalition samples that coalition's repeats,
    not a full call of the width's rows (21 posteriors for one coalition of 3 parties at 3 repeats); the powers of
    two keep the rerun programs of a sampled game to a few sizes."""
    runs = -(-rows // multiple)
    return min(full, multiple * 2 ** math.ceil(math.log2(runs)))


def cuts_calls(config: SamplerConfig) -> bool:
    """Whether sampler calls are cut to `call_rows` rather than padded to a full call: on CPU, where a call's time
    grows with its rows, at a budget where packing pays (`worth_packing`: a compiled program costs less than the
    sweeps it saves; each 64 rows cut from a 256-row call at the fast preset save minutes of sweeps against seconds
    of compiling, docs/benchmarks.md, "A width's last call cut to its rows"). Not on an accelerator, where a call's
    time grows less than its rows and a first compilation takes tens of seconds: where a cut pays there is yet to be
    measured (docs/architecture.md, "Coalitions are masks")."""
    return jax.default_backend() == "cpu" and worth_packing(config)


def whole_runs(rows: int, run: int) -> int:
    """The rows of a call that holds only whole runs of `run` rows (a coalition's repeats, never split between
    calls): `rows` less its remainder, or `rows` itself where it holds less than one run."""
    return rows - rows % run if rows >= run else rows


def rows_that_fit(config: SamplerConfig, coordinates: int, most_rows: int) -> int:
    """Rows per call: what fits `config.memory_limit_mb` on each device, for draws of `coordinates` numbers each,
    times the device count, and no more than `most_rows` (padded to a multiple of the device count) or
    `max_rows_per_process` per process. The devices are those of the global mesh, `jax.devices()`: after
    `jax.distributed.initialize()`, every device of every process."""
    per_row = config.draws_per_repeat * coordinates * BYTES_PER_DRAW_COORDINATE
    per_device = int(config.memory_limit_mb * 2**20 // per_row)
    if per_device < 1:
        raise ValueError(
            f"SamplerConfig.memory_limit_mb={config.memory_limit_mb:g} is too small for one coalition posterior of "
            f"{config.draws_per_repeat} draws of {coordinates} parameters, which needs {per_row / 2**20:.3g} MB; "
            "raise memory_limit_mb or lower num_samples / num_chains"
        )
    devices = jax.device_count()
    per_process = max_rows_per_process(jax.default_backend())
    return min(per_device * devices, padded_size(min(most_rows, per_process * jax.process_count()), devices))


def worth_packing(config: SamplerConfig) -> bool:
    """Whether a coalition's sweeps (chains x (warm-up + samples) x repeats) are enough, at least
    `PACK_FROM_CHAIN_SWEEPS`, for packing members (and cutting calls, `cuts_calls`) to save more sampling than their
    extra compiled programs cost: at the fast preset (28,800; 19,200 with the 2 repeats of a sampled game,
    `SamplerConfig.sampled_repeats`) it does; at a smoke-test budget of a few hundred the run is compilation and
    packing would triple it. Between, on a batch of 16 permutations of 8 parties, packing (and cutting calls) cost
    10 % at 2,400 and saved 9 % at 4,800 (docs/benchmarks.md, "Where packing starts to pay").
    A function of the settings alone, so a game's values do not depend on how its coalitions are batched."""
    return config.num_chains * (config.num_warmup + config.num_samples) * config.num_repeats >= PACK_FROM_CHAIN_SWEEPS


def member_width(size: int, num_parties: int) -> int:
    """The number of party slots a coalition of `size` members gets where the model packs members: from
    `PACK_FROM_PARTIES` parties on, the first multiple of ceil(n / 3) that holds its members, so at most three
    compiled sampler programs serve every coalition; below it, all n (packing would compile more programs than it
    saves sweeps). Most coalitions are mid-sized, so thirds save nearly what a width per size would: for n = 12,
    0.63 of the unpacked chains' party slots over all 4,095 coalitions, against 0.5 (docs/benchmarks.md)."""
    if num_parties < PACK_FROM_PARTIES:
        return num_parties
    step = -(-num_parties // 3)
    return min(num_parties, max(1, -(-size // step)) * step)


class SamplerCall(NamedTuple):
    """One planned sampler call: its budget (the game's, or a rerun's), the party slots each row's chains carry,
    the indices of the rows it holds (in the planned rows' order), the rows it is padded to, and the runs of `group`
    consecutive rows that are one posterior's repeats (R-hat pools their chains: `bayesval.parties.execute`)."""

    config: SamplerConfig
    width: int
    rows: np.ndarray
    size: int
    group: int


@dataclass(frozen=True)
class CallLayout:
    """How a game's rows are laid out in sampler calls: `num_parties` parties, the game's budget `config`, at most
    `batch_rows` rows a call (`rows_that_fit`), members packed where `packs_members` (a model capability) and the
    budget makes it pay. `plan` turns rows into `SamplerCall`s."""

    num_parties: int
    config: SamplerConfig
    batch_rows: int
    packs_members: bool

    def width(self, size: int) -> int:
        """The party slots the sampler is given for a coalition of `size` members: its `member_width` where the
        model packs members and the budget makes it pay (`worth_packing`), else every party."""
        if self.packs_members and worth_packing(self.config):
            return member_width(size, self.num_parties)
        return self.num_parties

    def coalitions_of_width(self, width: int) -> int:
        """The number of the game's coalitions that the sampler is given `width` party slots for."""
        n = self.num_parties
        return sum(math.comb(n, size) for size in range(1, n + 1) if self.width(size) == width)

    def rows_per_batch(self, width: int) -> int:
        """Rows per sampler call for the coalitions given `width` party slots: `batch_rows`, or fewer where every
        coalition of that width, times the repeats, fits in fewer. A call is padded to this size (its width's last
        call, on CPU, to `call_rows`), so a width has few compiled programs, and it is never larger than the width's
        rows: padding them all to the whole game's batch would sample up to three times the rows packing leaves."""
        rows = padded_size(self.coalitions_of_width(width) * self.config.num_repeats, jax.device_count())
        return min(self.batch_rows, rows)

    def repeat_runs(self, repeats, batch_rows: int) -> int:
        """`num_repeats` where the rows are runs of repeats 0, 1, ..., num_repeats - 1 modulo num_repeats (one
        posterior each; repeats added to an enumerated game come in whole runs, `CoalitionSurprise.add_repeats`) and
        a call holds at least one run, else 1."""
        runs = self.config.num_repeats
        if runs == 1 or batch_rows < runs or len(repeats) % runs:
            return 1
        runs_of = np.tile(np.arange(runs), len(repeats) // runs)
        return runs if np.array_equal(np.asarray(repeats) % runs, runs_of) else 1

    def plan(
        self, sizes, repeats, config: SamplerConfig | None = None, width: int | None = None, rerun: bool = False
    ) -> list[SamplerCall]:
        """The sampler calls of rows of coalitions of `sizes` members in `repeats` (one each a row), widths in
        ascending order, rows in their order within a width. Calls hold up to `rows_per_batch(width)` rows, padded to
        that size, or where the game's budget makes it pay (`cuts_calls`) to `call_rows`: in practice a width's last
        call, which holds what is left; a `rerun`'s calls to `rerun_rows`. Runs of a posterior's repeats are never
        split between calls (`repeat_runs`). `config`: the budget, the game's unless a rerun's
        (`SamplerConfig.rerun`); `width`: every row's party slots instead of each row's own (`rerun_width`)."""
        config = self.config if config is None else config
        repeats = np.asarray(repeats, int)
        widths = np.array([self.width(int(size)) for size in sizes] if width is None else [width] * len(repeats), int)
        cut, devices, calls = cuts_calls(self.config), jax.device_count(), []
        for slots in np.unique(widths):
            rows = np.flatnonzero(widths == slots)
            full = self.rows_per_batch(int(slots))
            group = self.repeat_runs(repeats[rows], full)
            for batch in batches(len(rows), whole_runs(full, group)):
                size = full
                if cut:
                    size = (rerun_rows if rerun else call_rows)(batch.count, full, devices * group)
                calls.append(SamplerCall(config, int(slots), rows[batch.start : batch.stop], size, group))
        return calls

    def rerun_width(self, failed: list[int], codes: list[int]) -> int:
        """The party slots a rerun samples the `failed` coalitions with, all of them at one width: among the widths
        of this call's `codes` (their programs compiled), those that hold every failed coalition's members, the one
        whose calls would carry the fewest party slots if each held every coalition of its width (calls x coalitions
        of the width x width; the smallest on a tie). On an accelerator a call is padded to its width's rows, so a
        few slow coalitions of a populous width cost less in a sparse wider one: of 12 parties with 32 GiB a call, a
        call of width 8 is 9,009 rows and one of width 12 is 897. (On CPU the rerun's call is cut to its rows,
        `rerun_rows`, and the narrowest width that holds them would often do; the ranking is kept everywhere so that
        the width does not depend on the platform either.) The ranking counts the game's coalitions, not the
        rows a call holds, so the width, and with it the rerun's estimates (a coalition at all n slots is not packed,
        so its chains draw other keys), does not depend on the batch size, the devices or the processes."""
        needed = max(self.width(code.bit_count()) for code in failed)
        widths = sorted({self.width(code.bit_count()) for code in codes} - set(range(needed)))
        held = {width: self.coalitions_of_width(width) for width in widths}
        return min(widths, key=lambda width: math.ceil(len(failed) / held[width]) * held[width] * width)
