"""NUTS for any noise-aware NumPyro model, batched over coalitions and chains in one jitted program.

A model is a NumPyro function `model(data, mask)` of the released statistics and a boolean
coalition mask (see `bayesval.models.NumPyroModel`). NumPyro's functional HMC interface takes a
potential-function generator, so one compiled NUTS kernel serves every mask: `vmap` over
(coalition, chain), `fori_loop` over iterations with traced bounds (warm-up and sampling share the
kernel). Chains start from prior draws and warm-up adapts the step size and a diagonal mass matrix (NumPyro's
windowed adaptation); with `warm_start`, each coalition's posterior is first fitted by Laplace's method in
unconstrained space (`bayesval.inference.warm_start`, one fit per distinct coalition of a call): its chains start
from draws of the fit, with its covariance as a dense inverse mass matrix, and warm-up adapts the step size only
(where a fit fails, the call starts from prior draws, with a warning). Either way NUTS targets the same posterior;
the warm start pays where the posterior has many coordinates and a short warm-up is asked for (docs/benchmarks.md,
"A warm start for NUTS"). All latent sites must be continuous. Chains whose
energy Bayesian fraction of missing information (BFMI, Betancourt 2016) is below `min_bfmi` are flagged, as Sim et
al. (2023, App. H.1) drop them, and so are chains that stopped moving: more than `MAX_REPEATED_DRAWS` equal draws
in a row (`longest_repeat`).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from functools import partial
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.flatten_util import ravel_pytree
from numpyro import handlers
from numpyro.infer.hmc import hmc
from numpyro.infer.util import constrain_fn, potential_energy, unconstrain_fn
from tqdm.auto import tqdm

from bayesval.batching import even_splits, pad_rows
from bayesval.compilation import RUN_ONCE_OPTIONS, compile_ahead, sampler_jit
from bayesval.inference.batching import on_rows_of, row_keys
from bayesval.inference.data import CoalitionDraws, NoiseAwareData
from bayesval.inference.linalg import cholesky
from bayesval.inference.warm_start import LaplaceFit, laplace_fit
from bayesval.progress import describe, shown


class NUTSSettings(NamedTuple):
    """The NUTS kernel's settings, owned by the model as NumPyro's `NUTS(target_accept_prob=, max_tree_depth=)`
    owns them (while `SamplerConfig` holds the run budget): the step-size adaptation's target acceptance (Hoffman
    & Gelman 2014, Sec. 3.2), trees of at most 2^max_tree_depth - 1 leapfrog steps, the E-BFMI below which a
    chain is dropped (Betancourt 2016; Sim et al. 2023, App. H.1), and whether chains start warm (`WARM_START`,
    `bayesval.inference.warm_start`) or from prior draws (`COLD_START`)."""

    target_accept_prob: float = 0.8
    max_tree_depth: int = 10
    min_bfmi: float = 0.3
    warm_start: bool = False

    def describe_start(self) -> str:
        """How chains start and what warm-up adapts, in words (a result's diagnostics record it)."""
        if self.warm_start:
            return WARM_START
        return COLD_START


WARM_START = (
    "warm start: chains start from draws of a Laplace fit of their coalition posterior (mode and inverse Hessian in "
    "unconstrained space), whose covariance is the dense inverse mass matrix; warm-up adapts the step size only "
    "(a call whose fit fails starts from prior draws, with a warning)"
)
COLD_START = "chains start from prior draws; warm-up adapts the step size and a diagonal inverse mass matrix"


def bfmi(energy: np.ndarray) -> np.ndarray:
    """E-BFMI = sum (E_t - E_{t-1})^2 / sum (E_t - mean E)^2 over the last axis (Betancourt 2016, Eq. 3)."""
    return np.sum(np.diff(energy, axis=-1) ** 2, axis=-1) / np.sum(
        (energy - energy.mean(axis=-1, keepdims=True)) ** 2, axis=-1
    )


# A chain that keeps one point this many draws in a row has stopped moving (its step size outgrew the local
# curvature): a moving chain stays put at a transition with probability well under 1/2 (the multinomial choice of
# a trajectory's start), so 16 stays in a row come by chance less than once in 2^16. Its draws would also pile up
# past the k-NN estimator's reach (bayesval.divergence.EXTRA_NEIGHBOURS). Seen on Diab at short warm-ups.
MAX_REPEATED_DRAWS = 16


def longest_repeat(draws: np.ndarray) -> np.ndarray:
    """The longest run of equal consecutive draws in each chain, draws (..., kept, d) -> (...,); 1 where none
    repeats."""
    same = np.all(draws[..., 1:, :] == draws[..., :-1, :], axis=-1)  # step t repeats draw t
    steps = np.arange(same.shape[-1])
    last_move = np.maximum.accumulate(np.where(same, -1, steps), axis=-1)  # the latest step <= t that moved
    return np.max(np.where(same, steps - last_move, 0), axis=-1, initial=0) + 1


class _NUTSProgram:
    """The jitted pieces of batched NUTS for one model and one set of sampler settings.

    Data and masks are traced arguments and iteration counts are dynamic, so a program compiles
    once per array shape and is reused across calls (`_program` caches it per model).
    """

    def __init__(self, model, settings: tuple) -> None:
        num_warmup, target_accept_prob, max_tree_depth, warm = settings
        init_kernel, sample_kernel = hmc(
            potential_fn_gen=lambda data, mask: partial(potential_energy, model, (data, mask), {}), algo="NUTS"
        )

        def unconstrained_prior_draw(key, data, mask):
            """A prior draw mapped to the unconstrained space (traced inside the program, so supports that depend
            on other sites are mapped right)."""
            prior = handlers.trace(handlers.seed(model, key)).get_trace(data, jnp.zeros_like(mask))
            latent = {
                name: site["value"]
                for name, site in prior.items()
                if site["type"] == "sample" and not site["is_observed"]
            }
            return unconstrain_fn(model, (data, mask), {}, latent)

        def fit(data, masks):
            """The Laplace fit of each row's posterior in unconstrained space (`laplace_fit`), from the origin."""

            def one(data, mask):
                flat, unravel = ravel_pytree(unconstrained_prior_draw(jax.random.key(0), data, mask))
                potential = lambda point: potential_energy(model, (data, mask), {}, unravel(point))  # noqa: E731
                return laplace_fit(potential, jnp.zeros_like(flat))

            return jax.vmap(one, in_axes=(data.row_axis, 0))(data, masks)

        def start(keys, data, masks, mode=None, cov=None):
            """Each chain starts from its own prior draw with a diagonal mass matrix adapted in warm-up, or (`warm`)
            from its own draw of its posterior's Laplace fit (mode, cov) with cov as its dense inverse mass matrix,
            warm-up adapting only the step size."""

            def one(key, data, mask, mode, cov):
                key_start, key_run = jax.random.split(key)
                point = unconstrained_prior_draw(key_start, data, mask)
                mass = {}
                if warm:
                    flat, unravel = ravel_pytree(point)
                    lower = cholesky(cov)  # plain jax.numpy, not LAPACK (`bayesval.inference.warm_start`)
                    point = unravel(mode + lower @ jax.random.normal(key_start, flat.shape, flat.dtype))
                    mass = dict(inverse_mass_matrix=cov, dense_mass=True, adapt_mass_matrix=False)
                return init_kernel(
                    point,
                    num_warmup,
                    target_accept_prob=target_accept_prob,
                    max_tree_depth=max_tree_depth,
                    model_args=(data, mask),
                    rng_key=key_run,
                    **mass,
                )

            return jax.vmap(one, in_axes=(0, data.row_axis, 0, 0 if warm else None, 0 if warm else None))(
                keys, data, masks, mode, cov
            )

        def run(states, trace, data, masks, begin, end, transitions):
            """Draws begin..end-1, each after `transitions` NUTS transitions, written to trace[index]
            (z, energy, divergence); warm-up uses negative indices, all written to slot 0 and later
            overwritten, so warm-up and sampling share one compiled kernel."""

            def one(state, trace, data, mask):
                def draw(index, carry):
                    state, trace = carry
                    state = jax.lax.fori_loop(
                        0, transitions, lambda _, s: sample_kernel(s, model_args=(data, mask)), state
                    )
                    record = (state.z, state.energy, state.diverging)
                    slot = jnp.maximum(index, 0)
                    trace = jax.tree.map(lambda buffer, value: buffer.at[slot].set(value), trace, record)
                    return state, trace

                return jax.lax.fori_loop(begin, end, draw, (state, trace))

            return jax.vmap(one, in_axes=(0, 0, data.row_axis, 0))(states, trace, data, masks)

        def constrain(z, data, masks, sites):
            def one(z, data, mask):
                values = jax.vmap(lambda point: constrain_fn(model, (data, mask), {}, point))(z)
                return jnp.concatenate([values[site].reshape(values[site].shape[0], -1) for site in sites], -1)

            return jax.vmap(one, in_axes=(0, data.row_axis, 0))(z, data, masks)

        self.fit = sampler_jit(fit)
        self.start = sampler_jit(start, compiler_options=RUN_ONCE_OPTIONS)
        self.run = sampler_jit(run)
        self.constrain = jax.jit(constrain, static_argnums=3)


_PROGRAMS: dict = {}


def _program(model, settings: tuple) -> _NUTSProgram:
    if (model, settings) not in _PROGRAMS:
        _PROGRAMS[model, settings] = _NUTSProgram(model, settings)
    return _PROGRAMS[model, settings]


def sample_coalition_posteriors_nuts(
    key: jax.Array,
    model,
    data,
    masks: np.ndarray,
    sites: tuple[str, ...],
    *,
    num_chains: int,
    num_warmup: int,
    num_samples: int,
    thinning: int = 1,
    target_accept_prob: float = 0.8,
    max_tree_depth: int = 10,
    min_bfmi: float = 0.3,
    warm_start: bool = False,
    segments: int = 10,
    progress_bar: bool = True,
) -> CoalitionDraws:
    """Draws of the `sites` of p(theta | o_C) for every coalition mask (K, n) by NUTS; `key` is one key, or one
    per mask (each row's draws then depend on its key alone); `data` shared by every row, or one set of releases
    per row (`NoiseAwareData.per_row`).

    Returns draws (K, num_chains, num_samples / thinning, d), the chains kept (E-BFMI at least `min_bfmi`, at
    most `MAX_REPEATED_DRAWS` equal draws in a row) and, in info, per-chain 'bfmi', 'longest_repeat',
    'divergences', 'mean_accept_prob' and 'warm_start' (whether the chain started warm), as `CoalitionDraws` (as the
    Gibbs driver does). Chains start warm (`warm_start`, the module's docstring) or from prior draws. The kernel's
    settings are those of `NUTSSettings` (a model passes `**config.overriding(model.kernel_settings(data))._asdict()`).
    """
    masks = jnp.asarray(masks, bool)
    num_coalitions, num_parties = masks.shape
    batch = num_coalitions * num_chains
    chain_masks = jnp.repeat(masks, num_chains, axis=0)
    rows_data = data
    if data.row_axis is not None:  # one set of releases per row: every chain of the row reads it
        data = jax.tree.map(lambda leaf: jnp.repeat(leaf, num_chains, axis=0), data)
    keys = row_keys(key, num_coalitions)
    on_rows = on_rows_of(keys)  # the states and the trace stay split as the rows are: one sampling program
    chain_keys = jax.vmap(lambda k: jax.random.split(k, num_chains))(keys)
    kept = num_samples // thinning
    phases = [(n, 1) for n in even_splits(num_warmup, segments)] + [(n, thinning) for n in even_splits(kept, segments)]
    begin = -num_warmup
    start = (chain_keys.reshape(batch), data, chain_masks)
    settings, fit = (num_warmup, target_accept_prob, max_tree_depth), None
    run_ahead = partial(_sampling_ahead, kept=kept, phase=(begin, begin + phases[0][0]), on_rows=on_rows)
    if warm_start:  # the sampling program compiles while the fits compile and run (bayesval.compilation)
        program = _program(model, settings + (True,))
        fit_data, fit_masks, row_of = _fit_rows(rows_data, masks)
        # traced here, before the sampling program traces in the background: NumPyro's handler stack is one
        # per process, so two threads must not trace a model at once (`bayesval.compilation`, `_LOWERING`)
        fit_shape = program.fit.trace(fit_data, fit_masks).out_info
        chain_fit_shape = [jax.ShapeDtypeStruct((batch,) + part.shape[1:], part.dtype) for part in fit_shape[:2]]
        sampling_program, trace = run_ahead(program, start + tuple(chain_fit_shape))
        fit = _fitted(program, fit_data, fit_masks, row_of)
        if fit is not None:
            start += tuple(jnp.asarray(np.repeat(part, num_chains, axis=0)) for part in (fit.mode, fit.cov))
    if fit is None:  # the sampling program compiles while the start program compiles and runs
        program = _program(model, settings + (False,))
        sampling_program, trace = run_ahead(program, start)
    states = on_rows(program.start(*start))
    sampling_program.result()
    bar = tqdm(
        total=num_warmup + num_samples,
        desc=describe(f"NUTS, {num_coalitions} posteriors x {num_chains} chains"),
        disable=not shown(progress_bar),
    )
    for length, transitions in phases:
        states, trace = on_rows(program.run(states, trace, data, chain_masks, begin, begin + length, transitions))
        begin += length
        # `run` returns once the phase is dispatched (JAX's asynchronous dispatch), before its sweeps are done: the
        # bar advances when they are. The next phase needs this one's states, so waiting costs no sampling time.
        jax.block_until_ready(states)
        bar.update(length * transitions)
    bar.close()
    draws = _coalition_draws(
        program, trace, states, data, chain_masks, tuple(sites), (num_coalitions, num_chains), min_bfmi
    )
    draws.info["warm_start"] = np.full((num_coalitions, num_chains), fit is not None)
    return draws


def _sampling_ahead(program: _NUTSProgram, start: tuple, kept: int, phase: tuple[int, int], on_rows: Callable):
    """The sampling program of the chains `program.start(*start)` begins (arguments or their shapes), compiling
    (`compile_ahead`), and the zero trace of `kept` draws per chain that it fills, both laid out by `on_rows` (as the
    row keys are, `on_rows_of`)."""
    states = on_rows(program.start.trace(*start).out_info)  # shapes (traced): the sampling program compiles from them
    trace = on_rows(
        jax.tree.map(
            lambda leaf: jnp.zeros(leaf.shape[:1] + (kept,) + leaf.shape[1:], leaf.dtype),
            (states.z, states.energy, states.diverging),
        )
    )
    _, data, chain_masks = start[:3]
    return compile_ahead(program.run, states, trace, data, chain_masks, *phase, 1), trace


def _fit_rows(data: NoiseAwareData, masks) -> tuple[NoiseAwareData, jnp.ndarray, np.ndarray]:
    """The releases and masks of the posteriors fitted, and the fitted row of each row: each distinct posterior once
    (rows of equal masks and, where every row holds its own releases, equal releases: a coalition's repeats, which
    share its fit), padded to a power of two rows so that a game's calls compile few fit programs. The fit is
    deterministic (it starts from the origin), so fitting a posterior once for its repeats changes no start; the
    three Pima hospitals' call fits 8 posteriors where it fitted its 21 rows (docs/benchmarks.md)."""
    rows = masks.shape[0]
    parts = [np.asarray(masks)] + ([] if data.row_axis is None else [np.asarray(leaf) for leaf in data])
    table = np.concatenate([part.reshape(rows, -1).astype(np.float64) for part in parts], axis=1)
    _, first, row_of = np.unique(table, axis=0, return_index=True, return_inverse=True)
    chosen = pad_rows(first, 2 ** int(np.ceil(np.log2(len(first)))))
    fit_data = data if data.row_axis is None else jax.tree.map(lambda leaf: leaf[chosen], data)
    return fit_data, jnp.asarray(np.asarray(masks)[chosen]), row_of.ravel()


def _fitted(program: _NUTSProgram, data, fit_masks, row_of: np.ndarray) -> LaplaceFit | None:
    """The Laplace fit of every row's posterior (`bayesval.inference.warm_start`), or None, with a one-line warning,
    where some row's fit failed: then every chain of the call starts as without a warm start."""
    fit = jax.tree.map(lambda part: np.asarray(part)[row_of], program.fit(data, fit_masks))  # on the host: no program
    failed = ~np.asarray(fit.fitted)
    if not failed.any():
        return fit
    largest = np.asarray(fit.gradient)[failed]
    largest = np.nanmax(largest) if np.isfinite(largest).any() else np.nan
    warnings.warn(
        f"NUTS warm start: the Laplace fit of {failed.sum()} of {len(failed)} coalition posteriors did not converge "
        f"(largest partial derivative of the potential left {largest:.3g}); "
        "their call starts from prior draws with a diagonal mass matrix adapted in warm-up",
        RuntimeWarning,
        stacklevel=3,
    )
    return None


def _coalition_draws(program, trace, states, data, chain_masks, sites, shape, min_bfmi) -> CoalitionDraws:
    """The traced draws constrained to the `sites` and laid out (K, chains, kept, d), with the chains kept (E-BFMI
    and moving) and the per-chain statistics; `shape` = (K, chains)."""
    z, energy, diverging = trace
    energy = np.asarray(energy).reshape(shape + (-1,))
    draws = np.asarray(program.constrain(z, data, chain_masks, sites)).reshape(shape + (energy.shape[-1], -1))
    chain_bfmi, repeat = bfmi(energy), longest_repeat(draws)
    return CoalitionDraws(
        draws,
        (chain_bfmi >= min_bfmi) & (repeat <= MAX_REPEATED_DRAWS),
        {
            "bfmi": chain_bfmi,
            "longest_repeat": repeat,
            "divergences": np.asarray(diverging).reshape(shape + (-1,)).sum(-1),
            "mean_accept_prob": np.asarray(states.mean_accept_prob).reshape(shape),
        },
    )
