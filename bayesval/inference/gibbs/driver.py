"""The host driver of the Gibbs kernel: every (coalition, chain) of a batch advanced by one compiled program, in
segments that show progress and close the adaptation windows, returning `CoalitionDraws` as the NUTS driver does
(the loop of NumPyro's `infer/mcmc.py`, with warm-up and sampling sharing one program).

`_advance` vmaps `kernel.step` over every (coalition, chain) row and loops over it, scanning `KEPT_PER_CALL` kept
draws; the iteration counts are traced and a segment's kept draws run in calls of that fixed length, so any warm-up,
number of draws or thinning reuses the program, which compiles once per batch shape and `GibbsSettings`.
A call is laid out first (`plan_coalition_posteriors`, a `GibbsRun`) and run by `GibbsRun.sample`, so that a
caller can compile its programs (`GibbsRun.programs`) while an earlier call runs (docs/architecture.md).
"""

from __future__ import annotations

from functools import partial
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from tqdm.auto import tqdm

from bayesval.compilation import RUN_ONCE_OPTIONS, Program, compile_ahead, sampler_jit
from bayesval.inference.batching import on_rows_of, row_keys
from bayesval.inference.data import CoalitionDraws, NoiseAwareData
from bayesval.inference.gibbs.adaptation import end_window, fit_for, is_adapting, is_window_end
from bayesval.inference.gibbs.kernel import init, step
from bayesval.inference.gibbs.state import BLRPriors, GibbsInputs, GibbsSettings, GibbsState
from bayesval.progress import describe, shown
from bayesval.statistics import LinearRegressionStatistic

# The kept draws one call of the sweep program scans. A segment's kept draws run in calls of this many (the last
# padded with draws of no sweeps, dropped), so that the program's shape does not depend on the number of draws, the
# thinning or the segments: a valuation's repeats at other budgets, its reruns and every test of one batch shape share
# one compiled program (Syn's sweep program compiles in ~20 s on 2 cores; each kept draw's sweeps cost the same in
# any call, and a call adds ~1 ms of dispatch beside its sweeps).
KEPT_PER_CALL = 32

# XLA's backend optimisation level 1 compiles the sweep program ~30 % faster (Syn, 84 chains: 9.1 s against 13.0 s)
# and runs it as fast (23.1 against 23.6 ms per sweep): its small matrices leave level 2's passes nothing to gain.
_COMPILER_OPTIONS = {"xla_backend_optimization_level": 1}


def _start_and_run_keys(row_keys: jax.Array) -> tuple[jax.Array, jax.Array]:
    """Each row's key (K,) split into the key its chains start from and the key its sweeps run on (K,) each."""
    pairs = jax.vmap(jax.random.split)(row_keys)  # (K, 2)
    return pairs[:, 0], pairs[:, 1]


def _chain_keys(keys: jax.Array, num_chains: int) -> jax.Array:
    """(K,) keys split into (K, chains)."""
    return jax.vmap(lambda key: jax.random.split(key, num_chains))(keys)


def _segment_keys(row_keys: jax.Array, segment, num_chains: int) -> jax.Array:
    """The (K, chains) keys of a row's sweeps in segment `segment`: its run key folded with the segment, split."""
    segment_keys = jax.vmap(jax.random.fold_in, in_axes=(0, None))(_start_and_run_keys(row_keys)[1], segment)
    return _chain_keys(segment_keys, num_chains)


@sampler_jit(static_argnames=("num_chains", "num_parties", "shared_data_model"), compiler_options=RUN_ONCE_OPTIONS)
def _initial_states(
    row_keys: jax.Array, num_chains: int, priors: BLRPriors, num_parties: int, shared_data_model: bool
) -> GibbsState:
    """`kernel.init` of `num_chains` chains a row, from each row's key (K,): its chain keys are derived in the
    program, so that no program of its own runs before the sampler's (each small one compiles for a tenth of a
    second on a CPU, on the critical path of a first call)."""
    draw = partial(init, priors=priors, num_parties=num_parties, shared_data_model=shared_data_model)
    return jax.vmap(jax.vmap(draw))(_chain_keys(_start_and_run_keys(row_keys)[0], num_chains))


@sampler_jit(static_argnames=("settings", "conditionals"), compiler_options=_COMPILER_OPTIONS)
def _advance(
    row_keys, segment, first, states: GibbsState, inputs: GibbsInputs, settings: GibbsSettings, adapt, sweeps,
    conditionals=False,
):  # fmt: skip
    """Run every (coalition, chain) for sweeps[0], then sweeps[1], ... sweeps, returning theta after each
    (K, chains, len(sweeps), D + 1) and, with `conditionals` (static: the default program is unchanged), the NIG
    conditional p(theta | s_C) of each kept sweep (leading axes (K, chains, len(sweeps))). The chains run on the keys
    of segment `segment` of each row's key (K,) (`_segment_keys`): the sweeps before the call's j-th kept draw on the
    chain's segment key folded with `first` + j, `first` being the segment's kept draws before the call (both traced;
    the j-th key `jax.random.split` gives, under JAX's default partitionable Threefry, so a segment's draws are the
    same in any number of calls). `inputs` holds the masks (K, n), the data (shared, or one row per coalition) and the
    priors. The counts are traced, so warm-up (one count, the rest 0) and sampling (every count the thinning, then 0
    past a segment's last kept draw) share one compiled program.

    The loops (a scan over the kept draws, a loop over the sweeps between them) run outside one map over every
    (coalition, chain), which maps one sweep: tracing then batches the sweep as it traces it, where loops inside a
    map over chains inside a map over coalitions are traced and then batched again by each map (Syn's fast-preset
    sweep program traces and lowers in 3.3 s against 5.4 s, docs/benchmarks.md, "Tracing the sweep program"). The
    program computes the same values up to rounding."""
    num_coalitions, num_chains = states.theta.shape[:2]
    rows = lambda a: a.reshape((num_coalitions * num_chains,) + a.shape[2:])  # noqa: E731  (K, chains) -> rows
    states, keys = jax.tree.map(rows, states), rows(_segment_keys(row_keys, segment, num_chains))
    each_chain = lambda a: jnp.repeat(a, num_chains, axis=0)  # noqa: E731  a coalition's inputs, for each chain
    data = inputs.data if inputs.data.row_axis is None else jax.tree.map(each_chain, inputs.data)
    inputs = inputs._replace(data=data, mask=each_chain(inputs.mask))
    row_inputs = GibbsInputs(inputs.data.row_axis, 0, None)

    # the proposal moments change only between calls (at the ends of warm-up windows): one fit a chain a call
    fit_one = lambda state, inputs: fit_for(state, inputs.mask, settings.shared_data_model)  # noqa: E731
    fit = jax.vmap(fit_one, in_axes=(0, row_inputs))(states, inputs) if settings.collapsed_moves else None
    sweep = jax.vmap(
        lambda key, state, inputs, fit: step(key, state, inputs, settings, adapt, fit, with_conditional=conditionals),
        in_axes=(0, 0, row_inputs, 0),
    )
    fold = jax.vmap(jax.random.fold_in, in_axes=(0, None))

    def kept(carry, step_inputs):
        """`num_sweeps` sweeps; the carry: the states, with `conditionals` also the last sweep's conditionals (the
        prior after none)."""
        keys, num_sweeps = step_inputs
        states_of = (lambda carry: carry[0]) if conditionals else (lambda carry: carry)
        carry = jax.lax.fori_loop(0, num_sweeps, lambda i, c: sweep(fold(keys, i), states_of(c), inputs, fit), carry)
        theta = states_of(carry).theta
        return carry, ((theta, carry[1]) if conditionals else theta)

    start = states
    if conditionals:
        prior = jax.tree.map(lambda a: jnp.asarray(a, jnp.float64), inputs.priors.model)
        start = (states, jax.tree.map(lambda a: jnp.broadcast_to(a, keys.shape + a.shape), prior))
    kept_keys = jax.vmap(lambda j: jax.vmap(jax.random.fold_in, in_axes=(0, None))(keys, j))(
        first + jnp.arange(sweeps.shape[0])
    )  # (len(sweeps), rows)
    end, draws = jax.lax.scan(kept, start, (kept_keys, sweeps))
    end = end[0] if conditionals else end
    by_chain = lambda a: a.reshape((num_coalitions, num_chains) + a.shape[1:])  # noqa: E731
    # draws (S, rows, ...) -> (K, chains, S, ...)
    return jax.tree.map(by_chain, end), jax.tree.map(lambda a: by_chain(jnp.moveaxis(a, 0, 1)), draws)


def _segments(num_warmup: int, total_kept: int, segments: int) -> tuple[list[int], int, int]:
    """Warm-up sweeps per warm-up segment (exactly num_warmup in at most `segments`), the kept draws per sampling
    segment and the number of sampling segments."""
    warmup = [len(b) for b in np.array_split(np.arange(num_warmup), segments) if len(b)]
    per_segment = -(-total_kept // segments)
    return warmup, per_segment, -(-total_kept // per_segment)


class GibbsRun(NamedTuple):
    """One sampler call, laid out before it runs (`plan_coalition_posteriors`): its start program's arguments, the
    inputs of its sweep program and its segments. `programs()` names the compiled programs `sample()` calls, so
    that a caller can compile them ahead of the call (`bayesval.compilation.compile_for_later`)."""

    inputs: GibbsInputs
    settings: GibbsSettings
    row_keys: jax.Array  # (K,) keys, one per row, from which the programs derive every chain's keys
    num_chains: int
    warmup: list[int]  # warm-up sweeps per warm-up segment
    per_segment: int  # kept draws per sampling segment
    sampling: int  # sampling segments
    total_kept: int
    thinning: int
    progress_bar: bool
    conditionals: bool

    @property
    def start(self) -> tuple:
        """The arguments of `_initial_states`: the row keys, the chains a row and the static layout of the state."""
        num_parties = self.inputs.mask.shape[1]
        return (self.row_keys, self.num_chains, self.inputs.priors, num_parties, self.settings.shared_data_model)

    def _sweep_arguments(self) -> tuple:
        """The arguments of `_advance` for one call: the row keys, the chain states' shapes (traced, not computed),
        the inputs and the static settings."""
        sweeps = np.zeros_like(self._segment_sweeps(0, 0)[0])  # one call's counts, as `sample` gives them
        states = on_rows_of(self.row_keys)(_initial_states.trace(*self.start).out_info)
        adapt, at = np.bool_(True), np.int32(0)
        return (self.row_keys, at, at, states, self.inputs, self.settings, adapt, sweeps, self.conditionals)

    def programs(self) -> list[Program]:
        """The start and sweep programs `sample()` calls."""
        return [Program(_initial_states, self.start), Program(_advance, self._sweep_arguments())]

    def _segment_sweeps(self, index: int, done: int) -> list[np.ndarray]:
        """The sweep counts of segment `index`'s calls, each KEPT_PER_CALL long: a warm-up segment's sweeps before
        its one kept draw (one call), a sampling segment's `thinning` before each of its kept draws up to the run's
        `total_kept` (`done` kept before it), and 0 (no sweep) in the places past them."""
        if index < len(self.warmup):
            wanted = [self.warmup[index]]
        else:
            wanted = [self.thinning] * min(self.per_segment, self.total_kept - done)
        counts = np.zeros(-(-len(wanted) // KEPT_PER_CALL) * KEPT_PER_CALL, np.full(1, self.thinning).dtype)
        counts[: len(wanted)] = wanted
        return np.split(counts, len(counts) // KEPT_PER_CALL)

    def sample(self) -> CoalitionDraws:
        """Run the chains: the draws (K, chains, kept, D + 1), with every chain kept (Gibbs has no BFMI rule), and
        with `conditionals` each draw's NIG conditional."""
        # the sweep program, then the start program, lowered in the background (bayesval.compilation)
        sweep_program = compile_ahead(_advance, *self._sweep_arguments())
        compile_ahead(_initial_states, *self.start).result()
        on_rows = on_rows_of(self.row_keys)
        states = _initial_states(*self.start)
        settings, kept, done, segments = self.settings, [], 0, len(self.warmup) + self.sampling
        with tqdm(total=segments, desc=describe("Gibbs"), disable=not shown(self.progress_bar), unit="segment") as bar:
            bar.set_postfix_str("compiling", refresh=True)  # on a cold cache, a minute before the first sweep
            sweep_program.result()
            bar.reset()  # the rate and its estimate of the time left count sweeps, not compiling
            bar.set_postfix_str("", refresh=False)
            for index in range(segments):
                warming = index < len(self.warmup)
                adapt = np.bool_(is_adapting(index, len(self.warmup)))
                if settings.collapsed_moves and is_window_end(index, len(self.warmup)):
                    states = end_window(states)
                states = on_rows(states)
                for call, sweeps in enumerate(self._segment_sweeps(index, done)):
                    states, draws = _advance(
                        self.row_keys, np.int32(index), np.int32(call * KEPT_PER_CALL), states, self.inputs, settings,
                        adapt, sweeps, self.conditionals,
                    )  # fmt: skip
                    states = on_rows(states)
                    if not warming:
                        drawn = int(np.count_nonzero(sweeps))
                        kept.append(jax.tree.map(lambda a, drawn=drawn: np.asarray(a)[:, :, :drawn], draws))
                        done += drawn
                # `_advance` returns once dispatched (JAX's asynchronous dispatch), before its sweeps are done: the
                # bar advances when they are. The next segment needs these states, so waiting costs no sampling time.
                jax.block_until_ready(states)
                bar.update()
        if not self.conditionals:
            return CoalitionDraws.all_kept(np.concatenate(kept, axis=2))
        theta, found = jax.tree.map(lambda *parts: np.concatenate(parts, axis=2), *kept)
        return CoalitionDraws.all_kept(theta)._replace(conditionals=found)


def plan_coalition_posteriors(
    key: jax.Array,
    data: NoiseAwareData,
    masks: np.ndarray,
    priors: BLRPriors,
    statistic: LinearRegressionStatistic | GibbsSettings,
    *,
    shared_data_model: bool = False,
    interweaving_moves: int = 0,
    collapsed_moves: int = 8,
    num_chains: int = 4,
    num_warmup: int = 500,
    num_samples: int = 2000,
    thinning: int = 1,
    segments: int = 10,
    progress_bar: bool = True,
    conditionals: bool = False,
) -> GibbsRun:
    """The sampler call `sample_coalition_posteriors` makes, laid out and not run (`GibbsRun`): its `sample()`
    gives the draws, and its `programs()` the compiled programs that takes."""
    settings = (
        statistic
        if isinstance(statistic, GibbsSettings)
        else GibbsSettings(statistic, shared_data_model, interweaving_moves, collapsed_moves)
    )
    masks = jnp.asarray(masks, dtype=bool)
    num_coalitions = masks.shape[0]
    if num_samples % thinning:
        raise ValueError(f"num_samples={num_samples} must be a multiple of thinning={thinning}")
    total_kept = num_samples // thinning
    warmup, per_segment, sampling = _segments(num_warmup, total_kept, segments)
    return GibbsRun(
        GibbsInputs(data, masks, priors), settings, row_keys(key, num_coalitions), num_chains, warmup, per_segment,
        sampling, total_kept, thinning, progress_bar, conditionals,
    )  # fmt: skip


def sample_coalition_posteriors(*args, **kwargs) -> CoalitionDraws:
    """Posterior draws of theta = (w, sigma^2) for every coalition mask, as `CoalitionDraws` with draws
    (K, chains, kept, D + 1) and every chain kept (Gibbs has no BFMI rule); the arguments are
    `plan_coalition_posteriors`'s.

    `key` is one key, or one key per mask (K,): each row's draws then depend on its key alone. `data` is shared by
    every row, or one set of releases per row (`NoiseAwareData.per_row`). The kernel's settings come as a
    `GibbsSettings` in place of `statistic`, or as the statistic and the keyword moves.

    `num_samples` sweeps follow `num_warmup` burn-in sweeps and every `thinning`-th is kept, as in
    NumPyro's MCMC. The sweeps run as `segments` calls of one compiled program, to show progress; from warm-up
    segment `adaptation.ADAPT_FROM_SEGMENT` on, windows ending at `adaptation.WINDOW_ENDS` and at the end of
    warm-up refit the collapsed moves' proposal.

    With `conditionals`, the result also holds, per kept draw, the NIG conditional p(theta | s_C) its sweep's
    conjugate step drew theta from (`CoalitionDraws.conditionals`, an `NIG` with leading axes (K, chains, kept)):
    the components of the Rao-Blackwellised posterior density (`bayesval.divergence.batched_mixture_kl`). They are
    conditionals given the chain's stationary statistics s whatever moves follow the conjugate step, while with
    interweaving moves the theta draws are not draws of them.
    """
    return plan_coalition_posteriors(*args, **kwargs).sample()
