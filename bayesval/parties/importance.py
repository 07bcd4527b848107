"""The party path's route without chains: each row (coalition, repeat) drawn by importance sampling from the
coalition's Laplace fit (a model's `importance_draws`, `LinearRegression`'s: `bayesval.inference.importance`), its
surprise the k-NN KL estimate of those draws against the prior's density, as the chains' draws get it
(`bayesval.divergence.batched_kl`). A coalition is trusted where every repeat's fit converged, its Pareto k-hat is at
most `bayesval.inference.psis.k_hat_threshold` and its KL is finite; `bayesval.parties.surprise` samples the others
by MCMC (docs/importance.md).

Which route runs is `valuate(surprise=...)` (`route`): 'auto' (the default) takes this one where the coalitions are
sampled (beyond `exact_up_to` parties) at a budget where it pays (`pays`), 'importance' everywhere, each where the
model offers it, the KL estimator is 'auto' and the coalition's draws are not kept (`keep_draws`, rewards); 'mcmc'
keeps the chains.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from functools import partial
from typing import NamedTuple

import jax
import numpy as np

from bayesval import progress
from bayesval.divergence import batched_kl
from bayesval.inference.config import SamplerConfig
from bayesval.inference.data import NoiseAwareData
from bayesval.inference.diagnostics import ESS_THRESHOLD
from bayesval.inference.psis import k_hat_threshold
from bayesval.models.protocol import Capabilities
from bayesval.parties.execute import Rows
from bayesval.parties.keys import rerun_key
from bayesval.parties.plan import CallLayout, member_width
from bayesval.validation import user_stacklevel

ROUTES = ("auto", "importance", "mcmc")
ROWS_PER_CALL = 16  # rows a call of the model's importance_draws holds (one compiled program serves every size)
IMPORTANCE_DRAWS = 2048  # weighted draws a repeat at most (fewer where the config's draws per repeat are fewer)
# Steps of the resampled sequence kept out of a draw's neighbours in the k-NN estimate (a Theiler window, as a chain's
# `theiler_window`): a weighted draw's copies sit side by side after systematic resampling, and their conjugate draws
# share (theta, omega). On a 6-member coalition of 12 parties (ESS a fifth of the draws) the estimate fell from 4.68
# to 4.47 nats as the window grew from 10 to 50 steps and stayed there at 100 and 200 (docs/benchmarks.md).
IMPORTANCE_WINDOW = 50
# 'auto' takes the route where a coalition's chains would sweep at least this many chain-sweeps (chains x (warm-up +
# kept) x repeats): a repeat of a 6-member coalition of 12 parties cost 0.38 s by importance sampling against 2.1 s for
# the fast preset's 9,600 chain-sweeps (docs/benchmarks.md), so the route pays from about 1,700 a repeat, 3,500 a
# coalition of 2 repeats. Below, at a smoke test's budget, the chains cost less than a row's Laplace fit and draws.
IMPORTANCE_FROM_CHAIN_SWEEPS = 4_000


class ImportanceRows(NamedTuple):
    """What the importance route left for each row (rows,): KL, Pareto k-hat, the weights' effective sample size,
    and whether the row can be trusted (fit converged, k-hat at most the threshold, finite KL)."""

    kl: np.ndarray
    k_hat: np.ndarray
    ess: np.ndarray
    trusted: np.ndarray

    def pooled(self, rows: np.ndarray, more: ImportanceRows, sets: np.ndarray) -> ImportanceRows:
        """These rows with another independent set of draws of `rows` (`more`, in their order) pooled in, where
        each of `rows` holds `sets` sets so far: its KL the mean of every set's estimate (each set's own, from as
        many draws as the others', so the k-NN estimate's finite-sample bias stays every row's), the effective
        sample sizes summed, the largest k-hat, trusted where every set is."""
        kl, k_hat, ess, trusted = (np.array(part) for part in self)
        weight = np.reshape(sets, (-1,) + (1,) * (kl.ndim - 1))
        kl[rows] = (kl[rows] * weight + more.kl) / (weight + 1)
        k_hat[rows] = np.maximum(k_hat[rows], more.k_hat)
        ess[rows] = ess[rows] + more.ess
        trusted[rows] = trusted[rows] & more.trusted
        return ImportanceRows(kl, k_hat, ess, trusted)


def route(
    caps: Capabilities, name: str, asked: str, kl: str, sampled: bool, config: SamplerConfig
) -> tuple[bool, str | None]:
    """Whether a game takes the importance route, and the one-line note where it does not take it for want of
    structure: the model offers no `importance_draws`, or the KL estimator asked for is one the route does not give.
    'importance' asks for it everywhere (and warns with the note where it is not taken); 'auto' (the default) takes it
    where the coalitions are `sampled` (Shapley values by permutations, beyond `exact_up_to` parties: at 12 parties it
    valued 584 coalitions in 13.0 minutes against about 42 by the chains, and agreed with the exact values, RMS z 0.95;
    docs/importance.md, "When it runs") at a budget where it pays (`pays`), and keeps the chains elsewhere, with the
    note but no warning where a sampled game's model cannot take it; 'mcmc' keeps the chains."""
    if asked not in ROUTES:
        raise ValueError(f"surprise must be one of {ROUTES}, got {asked!r}")
    if asked == "mcmc" or (asked == "auto" and not (sampled and pays(config))):
        return False, None
    if caps.importance_draws is None:
        note = f"{name} offers no importance_draws: every coalition posterior is sampled by MCMC"
    elif kl != "auto":
        note = f"kl={kl!r} reads MCMC chains: every coalition posterior is sampled by MCMC"
    else:
        return True, None
    if asked == "importance":
        warnings.warn(f"surprise='importance': {note}", UserWarning, stacklevel=user_stacklevel())
    return False, note


def pays(config: SamplerConfig) -> bool:
    """Whether a coalition's chains under `config` would sweep at least IMPORTANCE_FROM_CHAIN_SWEEPS chain-sweeps,
    where importance sampling from the coalition's Laplace fit costs less: a function of the settings alone, so a
    game's route does not depend on its batches."""
    sweeps = config.num_chains * (config.num_warmup + config.num_samples) * config.num_repeats
    return sweeps >= IMPORTANCE_FROM_CHAIN_SWEEPS


def importance_executor(
    caps: Capabilities, name: str, asked: str, kl: str, sampled: bool, layout: CallLayout, k: int, log_density
) -> tuple[ImportanceExecutor | None, str | None]:
    """The importance route's executor where a game takes it (`route`: `caps`, the model's `name`, the route and
    KL estimator `asked`, whether the coalitions are `sampled`, the game's parties and budget from its `layout`),
    else None, with the note of a route not taken."""
    takes, note = route(caps, name, asked, kl, sampled, layout.config)
    if not takes:
        return None, note
    return ImportanceExecutor(caps.importance_draws, layout.num_parties, layout.config, k, log_density), note


def route_diagnostics(executor: ImportanceExecutor | None, note: str | None) -> dict:
    """The diagnostics a game starts with on its route: each coalition's route and k-hat (filled as they are
    sampled) where it takes importance sampling, and the note of a route not taken."""
    return ({} if executor is None else {"route": [], "k_hat": []}) | ({} if note is None else {"surprise_note": note})


class ImportanceExecutor:
    """Draws rows by the model's `importance_draws` (`draw`) and estimates each row's KL from them: `num_parties`,
    the game's budget `config` (each row draws IMPORTANCE_DRAWS weighted and resampled draws, or the config's
    `draws_per_repeat` where fewer, rounded up to even), the k-NN estimator's `k` and the prior's log density
    (`log_density`)."""

    def __init__(self, draw: Callable, num_parties: int, config: SamplerConfig, k: int, log_density) -> None:
        self.draw, self.num_parties, self.k, self.log_density = draw, num_parties, k, log_density
        self.repeats, self.reruns = config.num_repeats, config.reruns
        draws = min(config.draws_per_repeat, IMPORTANCE_DRAWS)
        self.num_draws = max(draws + draws % 2, 20)

    def coalitions(self, key: jax.Array, codes: list[int], data: NoiseAwareData, repeats: int) -> ImportanceRows:
        """Every repeat of the coalitions `codes` (bitmasks), row (code, repeat) keyed as the chains' rows are
        (`Rows.repeated`): each part (codes, repeats)."""
        masks = (np.array(codes)[:, None] >> np.arange(self.num_parties)) & 1
        rows = Rows.repeated(key, codes, masks, [data] * len(codes), [False] * len(codes), repeats)
        with progress.stage(f"importance draws of {len(codes)} coalition posteriors x {repeats} repeats"):
            done = self.run(rows.keys, rows.masks, data)
        return ImportanceRows(*(part.reshape(len(codes), repeats) for part in done))

    def until_effective(
        self, key: jax.Array, codes: list[int], data: NoiseAwareData
    ) -> tuple[ImportanceRows, np.ndarray]:
        """Every repeat of the coalitions `codes` (`coalitions`), then, up to the budget's reruns, another independent
        set of draws of each trusted coalition whose weights' effective sample size is below ESS_THRESHOLD (400, the
        chains' flag) in some repeat, pooled in (`ImportanceRows.pooled`), from the rerun keys of the attempt
        (`bayesval.parties.keys.rerun_key`): so a coalition's estimate rests on at least 400 effective draws a repeat
        where the reruns allow, as a chain's does, at the cost of the few coalitions that fall short (9 of 584 at 12
        parties; docs/importance.md). Returns the rows (codes, repeats) and the extra sets each coalition drew."""
        done = self.coalitions(key, codes, data, self.repeats)
        extra = np.zeros(len(codes), int)
        for attempt in range(1, self.reruns + 1):
            short = np.flatnonzero(done.trusted.all(axis=1) & (done.ess.min(axis=1) < ESS_THRESHOLD))
            if not len(short):
                break
            more = self.coalitions(rerun_key(key, attempt), [codes[i] for i in short], data, self.repeats)
            done = done.pooled(short, more, extra[short] + 1)
            extra[short] += 1
        return done, extra

    def run(self, keys: jax.Array, masks: np.ndarray, data: NoiseAwareData) -> ImportanceRows:
        """Every row: its key (rows,), coalition mask (rows, n), the game's releases; its members packed to the
        planner's width (`member_width`: from 6 parties on, a third of the parties at a time, so at most three
        compiled programs), ROWS_PER_CALL rows a call."""
        masks = np.asarray(masks, bool)
        widths = np.array([member_width(int(mask.sum()), self.num_parties) for mask in masks])
        parts = [np.empty(len(masks)) for _ in ImportanceRows._fields]
        for width in np.unique(widths):
            rows = np.flatnonzero(widths == width)
            for start in range(0, len(rows), ROWS_PER_CALL):
                chunk = rows[start : start + ROWS_PER_CALL]
                packed = [data.members(masks[row], int(width)) for row in chunk]
                out = self.draw(
                    keys[chunk],
                    NoiseAwareData.per_row([inputs for inputs, _ in packed]),
                    np.stack([mask for _, mask in packed]),
                    self.num_draws,
                )
                if out is None:
                    raise RuntimeError("the model's importance_draws gave no draws for a game it was chosen for")
                window = min(IMPORTANCE_WINDOW, self.num_draws // 4)
                kl = np.asarray(_kl(out.draws[:, None], self.k, self.log_density, window))
                trusted = out.converged & (out.k_hat <= k_hat_threshold(self.num_draws)) & np.isfinite(kl)
                for part, value in zip(parts, (kl, out.k_hat, out.ess, trusted)):
                    part[chunk] = value
        return ImportanceRows(parts[0], parts[1], parts[2], parts[3].astype(bool))


@partial(jax.jit, static_argnames=("k", "window"))
def _kl(draws, k: int, log_density, window: int):
    """k-NN KL (B,) of single-chain draws (B, 1, S, d) against the prior's log density."""
    log_prior = jax.vmap(jax.vmap(jax.vmap(log_density)))(draws)
    kept = jax.numpy.ones(draws.shape[:2], bool)
    return batched_kl(draws, kept, k, log_prior=log_prior, window=window)
