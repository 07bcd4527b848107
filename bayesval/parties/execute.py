"""Planned sampler calls run: each call's rows (coalition, repeat) go from the sampler to KL and diagnostics on the
device (`summarise`) and come back as one typed `RowSummary` per call, gathered from every process
(`bayesval.inference.batching.gather_rows`). `CallExecutor.run_plan` runs a plan (`bayesval.parties.plan`) in order,
the next width's programs compiling while one width samples (`bayesval.compilation.compile_for_later`).

The k-NN KL estimator uses the prior's density where the model knows it, else a fresh prior sample per repeat,
shared by every coalition of that repeat (common random numbers, as Sim et al. 2023, App. C.3). Asked for
(kl='rao-blackwell'), a Gibbs model's conjugate conditionals give a Rao-Blackwellised KL instead, with no nearest
neighbours (`bayesval.divergence.batched_mixture_kl`; docs/architecture.md).
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future, wait
from functools import partial
from typing import NamedTuple

import jax
import numpy as np

from bayesval.batching import pad_rows
from bayesval.compilation import Program, compile_ahead, compile_for_later, sampler_jit
from bayesval.divergence import batched_kl, batched_mixture_kl, theiler_window
from bayesval.inference.batching import gather_rows, process_block, shard_rows
from bayesval.inference.config import SamplerConfig
from bayesval.inference.data import NoiseAwareData
from bayesval.inference.diagnostics import chain_diagnostics
from bayesval.parties.keys import MIXTURE_STREAM, row_keys
from bayesval.parties.plan import SamplerCall


@sampler_jit(static_argnames=("k", "group"))
def summarise(
    draws, kept_chains, k: int, log_density=None, prior=None, conditionals=None, conjugate=None, keys=None, group=1
):
    """One compiled program from a batch of posteriors (B, chains, kept, d) to (KL (B,), max R-hat (B,), min bulk
    ESS (B,)), against the prior's log density (a `jax.tree_util.Partial` theta (d,) -> log p(theta)) or prior
    draws (B, m, d) (k-NN), or, given each draw's NIG conditional (`conditionals`, leading axes (B, chains,
    kept)), the conjugate NIG prior and a key per row, Rao-Blackwellised (`batched_mixture_kl`).

    With `group` > 1 (static), each run of `group` consecutive rows is one posterior sampled `group` times (a
    coalition's repeats): its R-hat is computed over the chains of all of them together, and every row of the run
    reports it. R-hat is a diagnostic of all the chains that target one posterior (Vehtari et al. 2021, Sec. 4:
    at least four chains, and the more the better); the maximum of per-repeat R-hats of four chains each is a noisier
    statistic: over 28 fresh releases of Syn's demo setting it passed 1.01 in 4, the pooled R-hat in 1
    (docs/benchmarks.md, "R-hat over a coalition's repeats"). The ESS stays per row: each repeat's estimate
    rests on its own chains."""
    window = theiler_window(draws.shape[2])
    if conditionals is not None:
        kl = batched_mixture_kl(keys, conditionals, kept_chains, conjugate)
    elif log_density is not None:
        log_prior = jax.vmap(jax.vmap(jax.vmap(log_density)))(draws)
        kl = batched_kl(draws, kept_chains, k, log_prior=log_prior, window=window)
    else:
        kl = batched_kl(draws, kept_chains, k, prior=prior, window=window)
    r_hat, ess = chain_diagnostics(draws, kept_chains)
    runs = draws.shape[0] // group
    if group > 1 and runs:  # rows past the last whole run (padding) keep their own R-hat
        pooled_shape = (runs, group * draws.shape[1])
        pooled, _ = chain_diagnostics(
            draws[: runs * group].reshape(pooled_shape + draws.shape[2:]),
            kept_chains[: runs * group].reshape(pooled_shape),
        )
        r_hat = r_hat.at[: runs * group].set(jax.numpy.repeat(pooled, group, axis=0))
    return kl, r_hat.max(axis=1), ess.min(axis=1)


class Rows(NamedTuple):
    """The rows a plan's calls sample: each row's key (`repeated`), coalition mask (n,),
    repeat, releases (the valuation's own, or a reward's modified ones) and whether its draws are kept."""

    keys: jax.Array
    masks: np.ndarray
    repeats: list[int]
    inputs: list[NoiseAwareData]
    keep: np.ndarray

    @classmethod
    def repeated(
        cls, key: jax.Array, labels, masks, inputs: list, keep, num_repeats: int, first_repeat: int = 0
    ) -> Rows:
        """Repeats first_repeat, ..., first_repeat + num_repeats - 1 of each labelled row (a coalition's bitmask, or a
        reward input's index) with its mask, releases and whether its draws are kept: rows (label, repeat) in that
        order, the one place a row's key is made, `row_keys(key, label, repeat)`."""
        label_of_row = np.repeat(np.asarray(labels, np.uint64), num_repeats)
        repeat_of_row = first_repeat + np.tile(np.arange(num_repeats), len(label_of_row) // num_repeats)
        return cls(
            row_keys(key, label_of_row, repeat_of_row),
            np.repeat(np.asarray(masks, bool), num_repeats, axis=0),
            repeat_of_row.tolist(),
            [item for item in inputs for _ in range(num_repeats)],
            np.repeat(np.asarray(keep, bool), num_repeats),
        )


class RowSummary(NamedTuple):
    """What sampling rows left, one entry per row: KL (NaN where no chain was kept), max R-hat over its chains (inf
    where none kept), min bulk ESS (0 where none kept), dropped chains, divergences, which chains were kept
    (rows, chains), and the draws (rows, chains, kept, d) of the rows whose draws are kept, in row order (None if
    none)."""

    kl: np.ndarray
    r_hat: np.ndarray
    ess: np.ndarray
    dropped: np.ndarray
    divergences: np.ndarray
    kept: np.ndarray
    draws: np.ndarray | None

    @classmethod
    def in_row_order(cls, num_rows: int, keep: np.ndarray, parts: list[tuple[np.ndarray, RowSummary]]) -> RowSummary:
        """One summary of `num_rows` rows from the summaries of calls, each with the indices of the rows it holds;
        `keep` (num_rows,) marks the rows whose draws the calls returned."""
        first = parts[0][1]
        per_row = [np.empty((num_rows,) + np.shape(part)[1:], np.asarray(part).dtype) for part in first[:-1]]
        position = np.cumsum(keep) - 1  # a kept row's index among the returned draws
        draws = None
        for rows, summary in parts:
            for output, part in zip(per_row, summary[:-1]):
                output[rows] = part
            if summary.draws is not None:
                if draws is None:
                    draws = np.empty((int(keep.sum()),) + summary.draws.shape[1:], summary.draws.dtype)
                draws[position[rows[keep[rows]]]] = summary.draws
        return cls(*per_row, draws)


class CallInputs(NamedTuple):
    """A padded call as this process samples it (`CallExecutor.inputs`): its budget, keys, masks and releases per
    row, the prior draws per row for the two-sample KL (else None), and the run of rows R-hat pools."""

    config: SamplerConfig
    keys: jax.Array
    masks: jax.Array
    data: NoiseAwareData
    prior: np.ndarray | None
    group: int


class CallOutputs(NamedTuple):
    """A padded call's per-row outputs as they come off the device, gathered from every process: KL, max R-hat, min
    bulk ESS, kept chains, divergences per chain (None where the sampler does not count them) and the draws (None
    unless asked)."""

    kl: np.ndarray
    r_hat: np.ndarray
    ess: np.ndarray
    kept: np.ndarray
    divergences: np.ndarray | None
    draws: np.ndarray | None


class CallExecutor:
    """Runs planned sampler calls of one game: the `model`, the KL estimator's `k`, its prior log density
    (`log_density`, else None: two-sample) or conjugate prior (`conjugate`, Rao-Blackwellised), the prior sample
    of each repeat (`prior_sample`, for the two-sample estimator), the draws' coordinates (`dimension`), whether the
    model names its compiled programs (`names_programs`), and the message of a KL that came out NaN
    (`unestimated`)."""

    def __init__(
        self,
        model,
        k: int,
        log_density,
        conjugate,
        prior_sample: Callable[[int], np.ndarray],
        dimension: int,
        names_programs: bool,
        unestimated: str,
    ) -> None:
        self.model, self.k, self.log_density, self.conjugate = model, k, log_density, conjugate
        self.prior_sample, self.dimension = prior_sample, dimension
        self.names_programs, self.unestimated = names_programs, unestimated

    def run_plan(self, calls: list[SamplerCall], rows: Rows) -> RowSummary:
        """Every call of a plan, in order, as one summary of `rows` in row order; while one width samples, the
        first call of the next width compiles (`compile_for_later`)."""
        starts = [index for index, call in enumerate(calls) if index == 0 or call.width != calls[index - 1].width]
        parts, compiling = [], None
        for index, call in enumerate(calls):
            if index in starts:
                if compiling is not None:  # this width's programs, compiling since the width before began
                    wait([compiling])
                later = [start for start in starts if start > index]
                compiling = self.compile_for_later(calls[later[0]], rows) if later else None
            parts.append((call.rows, self.run(call, rows)))
        return RowSummary.in_row_order(len(rows.repeats), rows.keep, parts)

    def run(self, call: SamplerCall, rows: Rows) -> RowSummary:
        """One call: its rows sampled to KL and diagnostics, a row that kept no chain marked so (NaN KL, inf R-hat,
        0 ESS); the draws of the rows `rows.keep` marks."""
        count = len(call.rows)
        wanted = rows.keep[call.rows]
        outputs = self._sample(self.inputs(call, rows), bool(wanted.any()))
        outputs = CallOutputs(*(None if part is None else part[:count] for part in outputs))
        any_kept = outputs.kept.any(axis=1)
        if (any_kept & np.isnan(outputs.kl)).any():
            raise RuntimeError(self.unestimated)
        divergences = np.zeros(count, int) if outputs.divergences is None else outputs.divergences.sum(axis=1)
        return RowSummary(
            np.where(any_kept, outputs.kl, np.nan).astype(np.float64),
            np.where(any_kept, outputs.r_hat, np.inf).astype(np.float64),
            np.where(any_kept, outputs.ess, 0.0).astype(np.float64),
            (~outputs.kept).sum(axis=1).astype(int),
            np.asarray(divergences).astype(int),
            outputs.kept,
            outputs.draws[wanted] if wanted.any() else None,
        )

    def inputs(self, call: SamplerCall, rows: Rows) -> CallInputs:
        """A call's rows packed to its width (`NoiseAwareData.members`) and padded to its size with copies of its
        first row, as this process samples them: its block of the global device mesh (`process_block`), sharded over
        its devices; with one process, the block is the call. Runs of `call.group` rows are one posterior's
        repeats: R-hat pools their chains (`summarise`) where the block starts a run."""
        packed = [rows.inputs[row].members(rows.masks[row], call.width) for row in call.rows]
        keys, masks = rows.keys[call.rows], np.stack([mask for _, mask in packed])
        row_inputs, repeats = [data for data, _ in packed], [rows.repeats[row] for row in call.rows]
        padding = call.size - len(call.rows)
        block = process_block(call.size)
        chunk_keys, chunk_masks = shard_rows(pad_rows(keys, call.size)[block], pad_rows(masks, call.size)[block])
        data = NoiseAwareData.per_row((row_inputs + [row_inputs[0]] * padding)[block])
        prior = None
        if self.log_density is None and self.conjugate is None:
            repeat_of_row = (repeats + [repeats[0]] * padding)[block]
            prior = np.stack([self.prior_sample(repeat) for repeat in repeat_of_row])
        group = call.group if block.start % call.group == 0 else 1
        return CallInputs(call.config, chunk_keys, chunk_masks, data, prior, group)

    def compile_for_later(self, call: SamplerCall, rows: Rows) -> Future | None:
        """Start compiling the programs of `call` in the background (`compile_for_later`): the model's sampler
        programs where it names them (`posterior_programs`) and the k-NN summary. None where the model does not
        name them."""
        if not self.names_programs:
            return None
        batch = self.inputs(call, rows)
        arguments = (batch.keys, batch.data, batch.masks, batch.config)
        if self.conjugate is None:
            return compile_for_later(self.model.posterior_programs(*arguments) + [self._summary_program(batch)])
        return compile_for_later(self.model.posterior_programs(*arguments, conditionals=True))

    def _summary_program(self, batch: CallInputs) -> Program:
        """The k-NN summary program (`summarise`) of a call's draws."""
        config = batch.config
        shape = (len(batch.keys), config.num_chains, config.num_samples // config.thinning, self.dimension)
        draws, kept = jax.ShapeDtypeStruct(shape, np.float64), jax.ShapeDtypeStruct(shape[:2], bool)
        return Program(summarise, (draws, kept, self.k, self.log_density, batch.prior), {"group": batch.group})

    def _sample(self, batch: CallInputs, keep_draws: bool) -> CallOutputs:
        """One padded call, sampler to KL and diagnostics on the device, on the host for every padded row, every
        process's block gathered into every process (`gather_rows`)."""
        mixture, summary_program = {}, None
        if self.conjugate is None:
            # the k-NN summary compiles while the sampler compiles and runs (bayesval.compilation)
            summary = self._summary_program(batch)
            summary_program = compile_ahead(summary.function, *summary.args, **summary.kwargs)
            sample = self.model.posterior_draws(batch.keys, batch.data, batch.masks, batch.config)
        else:  # the conditionals, and a key per row for the points the mixture is scored at
            sample = self.model.posterior_draws(batch.keys, batch.data, batch.masks, batch.config, conditionals=True)
            keys_of_points = jax.vmap(partial(jax.random.fold_in, data=MIXTURE_STREAM))(batch.keys)
            mixture = dict(conditionals=sample.conditionals, conjugate=self.conjugate, keys=keys_of_points)
        draws, kept = jax.numpy.asarray(sample.draws), jax.numpy.asarray(sample.kept_chains)
        if summary_program is not None:
            summary_program.result()
        kl, r_hat, ess = summarise(draws, kept, self.k, self.log_density, batch.prior, **mixture, group=batch.group)
        divergences = sample.info.get("divergences")
        return gather_rows(CallOutputs(kl, r_hat, ess, kept, divergences, draws if keep_draws else None))


def surprise_of_inputs(
    executor: CallExecutor, layout, repeats: int, key: jax.Array, inputs: list, masks: np.ndarray
) -> tuple[np.ndarray, list[np.ndarray]]:
    """The surprise of coalition masks (J, n) under modified releases, one `NoiseAwareData` per mask (the reward
    mechanisms' tempered or noisier inputs, Sim et al. 2023, App. E.3), run by `executor` in the calls `layout` (a
    `bayesval.parties.plan.CallLayout`) plans: estimates (repeats, J) and, for each mask, the draws of every chain it
    kept (m_j, d), pooled over repeats (NUTS chains dropped for low BFMI are left out, as in the estimates). Row
    (j, repeat) samples from `row_keys(key, [j], [repeat])` (`Rows.repeated`)."""
    rows = Rows.repeated(key, range(len(inputs)), masks, inputs, [True] * len(inputs), repeats)
    summary = executor.run_plan(layout.plan(rows.masks.sum(axis=1), rows.repeats), rows)
    kl = summary.kl.reshape(len(inputs), repeats)
    if np.isnan(kl).all(axis=1).any():
        raise RuntimeError("every chain of some reward posterior was dropped (low BFMI or stuck); raise num_warmup")
    kl = np.where(np.isnan(kl), np.nanmean(kl, axis=1, keepdims=True), kl)
    by_input = (len(inputs), repeats * summary.draws.shape[1])  # (J, repeats x chains)
    draws, kept = summary.draws.reshape(by_input + summary.draws.shape[2:]), summary.kept.reshape(by_input)
    return kl.T, [d[k].reshape(-1, d.shape[-1]) for d, k in zip(draws, kept)]
