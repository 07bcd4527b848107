"""NUTS for any noise-aware NumPyro model, batched over coalitions and chains in one jitted program.

A model is a NumPyro function `model(data, mask)` of the released statistics and a boolean
coalition mask (see `bayesval.models.NumPyroModel`). NumPyro's functional HMC interface takes a
potential-function generator, so one compiled NUTS kernel serves every mask: `vmap` over
(coalition, chain), `lax.scan` over iterations, warm-up adaptation per chain (NumPyro's windowed
step size and diagonal mass matrix). Chains whose energy Bayesian fraction of missing information
(BFMI, Betancourt 2016) is below `min_bfmi` are flagged, as Sim et al. (2023, App. H.1) drop them.
"""

from __future__ import annotations

from functools import partial
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from numpyro.infer.hmc import hmc
from numpyro.infer.initialization import init_to_sample
from numpyro.infer.util import initialize_model
from tqdm.auto import tqdm


class CoalitionDraws(NamedTuple):
    """Posterior draws of a batch of coalitions: draws (B, chains, kept, d), kept_chains (B, chains) bool
    (False = dropped by the BFMI rule), and per-chain sampler statistics (B, chains) in `info`."""

    draws: np.ndarray
    kept_chains: np.ndarray
    info: dict

    @classmethod
    def all_kept(cls, draws: np.ndarray) -> CoalitionDraws:
        return cls(draws, np.ones(draws.shape[:2], bool), {})


def bfmi(energy: np.ndarray) -> np.ndarray:
    """E-BFMI = sum (E_t - E_{t-1})^2 / sum (E_t - mean E)^2 over the last axis (Betancourt 2016, Eq. 3)."""
    return np.sum(np.diff(energy, axis=-1) ** 2, axis=-1) / np.sum(
        (energy - energy.mean(axis=-1, keepdims=True)) ** 2, axis=-1
    )


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
    segments: int = 10,
    progress_bar: bool = True,
) -> CoalitionDraws:
    """Draws of the `sites` of p(theta | o_C) for every coalition mask (K, n) by NUTS.

    Returns draws (K, num_chains, num_samples / thinning, d), the chains kept by the BFMI rule and,
    in info, per-chain 'bfmi', 'divergences' and 'mean_accept_prob'.
    """
    masks = jnp.asarray(masks, bool)
    num_coalitions = masks.shape[0]
    key_init, key_run = jax.random.split(key)
    batch = num_coalitions * num_chains
    init_keys = jax.random.key_data(jax.random.split(key_init, batch))
    info = initialize_model(
        init_keys,
        model,
        init_strategy=init_to_sample,
        dynamic_args=True,
        model_args=(data, jnp.ones(masks.shape[1], bool)),
    )
    init_params = info.param_info.z
    chain_masks = jnp.repeat(masks, num_chains, axis=0)
    run_keys = jax.random.key_data(jax.random.split(key_run, batch))
    init_kernel, sample_kernel = hmc(potential_fn_gen=info.potential_fn, algo="NUTS")

    @jax.jit
    def start(init_params, run_keys, chain_masks):
        def one(params, run_key, mask):
            return init_kernel(
                params,
                num_warmup,
                target_accept_prob=target_accept_prob,
                max_tree_depth=max_tree_depth,
                model_args=(data, mask),
                rng_key=run_key,
            )

        return jax.vmap(one)(init_params, run_keys, chain_masks)

    @partial(jax.jit, static_argnums=(2, 3))
    def advance(states, chain_masks, length, collect):
        def one(state, mask):
            def sweep(state, _):
                state = jax.lax.fori_loop(
                    0, thinning if collect else 1, lambda _, s: sample_kernel(s, model_args=(data, mask)), state
                )
                return state, (state.z, state.energy, state.diverging)

            return jax.lax.scan(sweep, state, None, length=length)

        return jax.vmap(one)(states, chain_masks)

    states = start(init_params, run_keys, chain_masks)
    total = num_warmup + num_samples
    bar = tqdm(total=total, desc=f"NUTS, {num_coalitions} coalitions x {num_chains} chains", disable=not progress_bar)
    if num_warmup:
        states, _ = advance(states, chain_masks, num_warmup, False)
        bar.update(num_warmup)
    kept = num_samples // thinning
    chunks = [len(c) for c in np.array_split(np.arange(kept), min(segments, kept))]
    traces = []
    for length in chunks:
        states, trace = advance(states, chain_masks, length, True)
        traces.append(trace)
        bar.update(length * thinning)
    bar.close()
    z, energy, diverging = jax.tree.map(lambda *parts: jnp.concatenate(parts, axis=1), *traces)
    postprocess = info.postprocess_fn

    @jax.jit
    def constrain(z, mask):
        samples = jax.vmap(postprocess(data, mask))(z)
        return jnp.concatenate([samples[s].reshape(kept, -1) for s in sites], -1)

    draws = np.asarray(jax.vmap(constrain)(z, chain_masks))
    energy = np.asarray(energy).reshape(num_coalitions, num_chains, kept)
    chain_bfmi = bfmi(energy)
    mean_accept = np.asarray(states.mean_accept_prob).reshape(num_coalitions, num_chains)
    return CoalitionDraws(
        draws.reshape(num_coalitions, num_chains, kept, -1),
        chain_bfmi >= min_bfmi,
        {
            "bfmi": chain_bfmi,
            "divergences": np.asarray(diverging).reshape(num_coalitions, num_chains, kept).sum(-1),
            "mean_accept_prob": mean_accept,
        },
    )
