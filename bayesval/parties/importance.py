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
from tqdm.auto import tqdm

from bayesval import progress
from bayesval.compilation import compile_for_later
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
# A row whose estimated likelihoods are this unevenly noisy over theta (`ImportanceDraws.noise_spread`: the weighted
# standard deviation of the variance of log L-hat) is drawn again, with more inner draws. Measured against the chains
# and against rows at 16 times the inner draws (docs/benchmarks.md, "Uneven noise draws a coalition again"): first
# attempts at coalitions of 12 parties spread 0.11-0.33 and sat within 0.04 nats; a 6-member coalition of 24 parties
# spread 0.44-0.77 and sat 0.3-0.6 nats above the chains (one row at k-hat 0.57 and 456 effective draws, passing
# both other rules), and drawn at 16 times the inner draws spread 0.11-0.18 and sat 0.03 above.
NOISE_SPREAD = 0.4
# The route's reruns for each of the chains' (`SamplerConfig.reruns`): a rerun of chains doubles their sweeps; two of
# the route's, at 4 and 16 times the inner draws, cost less than a chain call where measured (at 16 times, 2.5 s a
# repeat of a 6-member coalition of 24 parties against 18 s of the fast preset's chains; docs/benchmarks.md, "Hard
# coalitions of 24 parties against the chains")
RERUNS_PER_CHAIN_RERUN = 2
# The model's attempt, which sets each member's inner draws (RERUN_INNER-fold an attempt), is at most the route's
# reruns for the chains' one rerun (16 times the first attempt's inner draws, as far as measured): a rerun past it draws
# from its own keys at that many. A row draws its data models' standard normals at once, (draws, inner draws, width,
# W), and at 256 times the inner draws (reruns=2) those alone would take 19 GB at 50 parties' widest width
MOST_INNER_ATTEMPT = RERUNS_PER_CHAIN_RERUN
# Attempts more, after the reruns, for a coalition the route still does not trust (k-hat above the threshold, a fit
# that did not converge, a KL that is not finite), each from fresh keys at the last rerun's inner draws, before it goes
# to the chains. Of the 1,048 coalitions a 24-party valuation drew, two failed all three attempts (k-hat 0.76 and
# 1.53) and went to the chains, about 2.6 minutes each with their compilation; with the retries one was drawn at the
# second (1.4 minutes sooner), and the other failed all five inside the valuation, though drawn alone with the same
# keys it was trusted at every attempt (docs/importance.md, "When it draws again"). An attempt costs seconds.
UNTRUSTED_RETRIES = 2


class ImportanceRows(NamedTuple):
    """What the importance route left for each row (rows,): KL, Pareto k-hat, the weights' effective sample size,
    how unevenly its estimated likelihoods are noisy over theta (`bayesval.inference.importance.ImportanceDraws`) and
    whether the row can be trusted (fit converged, k-hat at most the threshold, finite KL)."""

    kl: np.ndarray
    k_hat: np.ndarray
    ess: np.ndarray
    noise_spread: np.ndarray
    trusted: np.ndarray

    def replaced(self, rows: np.ndarray, rerun: ImportanceRows) -> ImportanceRows:
        """These rows with the coalitions `rows` (indices) drawn again (`rerun`, in their order): a rerun's estimates
        are filed over the ones before, as the chains' are."""
        parts = [np.array(part) for part in self]
        for part, new in zip(parts, rerun):
            part[rows] = new
        return ImportanceRows(*parts)


def route(
    caps: Capabilities, name: str, asked: str, kl: str, sampled: bool, config: SamplerConfig
) -> tuple[bool, str | None]:
    """Whether a game takes the importance route, and the one-line note where it does not take it for want of
    structure: the model offers no `importance_draws`, or the KL estimator asked for is one the route does not give.
    'importance' asks for it everywhere (and warns with the note where it is not taken); 'auto' (the default) takes it
    where the coalitions are `sampled` (Shapley values by permutations, beyond `exact_up_to` parties: at 12 parties it
    valued 337 coalitions in 8.2 minutes against about 42 by the chains, and agreed with the exact values, RMS z 1.15;
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
    executor = ImportanceExecutor(
        caps.importance_draws, layout.num_parties, layout.config, k, log_density, caps.importance_programs
    )
    return executor, note


def route_diagnostics(executor: ImportanceExecutor | None, note: str | None) -> dict:
    """The diagnostics a game starts with on its route: each coalition's route and k-hat (filled as they are
    sampled) where it takes importance sampling, and the note of a route not taken."""
    return ({} if executor is None else {"route": [], "k_hat": []}) | ({} if note is None else {"surprise_note": note})


class ImportanceExecutor:
    """Draws rows by the model's `importance_draws` (`draw`) and estimates each row's KL from them: `num_parties`,
    the game's budget `config` (each row draws IMPORTANCE_DRAWS weighted and resampled draws, or the config's
    `draws_per_repeat` where fewer, rounded up to even), the k-NN estimator's `k` and the prior's log density
    (`log_density`). Where the config shows progress bars, each call shows one whose rows advance as they are drawn:
    at 50 parties a batch of 612 coalitions took half an hour, under a permutation bar that moves at the batch's end.
    Where the model names the programs a call of `draw` calls (`programs`, its `importance_programs`), each width's
    are compiled in the background while the rows of the widths before it are drawn, once a process."""

    def __init__(
        self,
        draw: Callable,
        num_parties: int,
        config: SamplerConfig,
        k: int,
        log_density,
        programs: Callable | None = None,
    ) -> None:
        self.draw, self.num_parties, self.k, self.log_density = draw, num_parties, k, log_density
        self.programs, self.compiling = programs, {}
        self.progress_bar = config.progress_bar
        self.repeats, self.reruns = config.num_repeats, RERUNS_PER_CHAIN_RERUN * config.reruns
        draws = min(config.draws_per_repeat, IMPORTANCE_DRAWS)
        self.num_draws = max(draws + draws % 2, 20)
        # the chains' flag, where a row can meet it: its effective draws are at most its draws, so where those are
        # ESS_THRESHOLD or fewer a rerun cannot help (the flag then marks the coalition, as it marks the chains')
        self.wanted_ess = ESS_THRESHOLD if self.num_draws > ESS_THRESHOLD else 0

    def coalitions(
        self, key: jax.Array, codes: list[int], data: NoiseAwareData, repeats: int, attempt: int = 0
    ) -> ImportanceRows:
        """Every repeat of the coalitions `codes` (bitmasks), row (code, repeat) keyed as the chains' rows are
        (`Rows.repeated`), drawn by the model's `attempt` (0 the first, then the reruns): each part (codes,
        repeats)."""
        masks = (np.array(codes)[:, None] >> np.arange(self.num_parties)) & 1
        rows = Rows.repeated(key, codes, masks, [data] * len(codes), [False] * len(codes), repeats)
        label = "importance draws" if attempt == 0 else f"rerun {attempt} of the importance draws"
        with progress.stage(f"{label} of {len(codes)} coalition posteriors x {repeats} repeats"):
            done = self.run(rows.keys, rows.masks, data, attempt)
        return ImportanceRows(*(part.reshape(len(codes), repeats) for part in done))

    def until_effective(
        self, key: jax.Array, codes: list[int], data: NoiseAwareData
    ) -> tuple[ImportanceRows, np.ndarray]:
        """Every repeat of the coalitions `codes` (`coalitions`), then, up to RERUNS_PER_CHAIN_RERUN times the budget's
        reruns, the coalitions drawn again that in some repeat are not trusted, hold fewer than ESS_THRESHOLD effective
        draws (400, the chains' flag, where a row's draws can hold them: `wanted_ess`) or are noisy unevenly over theta
        (`NOISE_SPREAD`), from the rerun keys of the attempt (`bayesval.parties.keys.rerun_key`), each member's
        likelihood estimated from RERUN_INNER times the inner draws of the attempt before (up to MOST_INNER_ATTEMPT),
        the rerun's estimates filed over the ones before (`ImportanceRows.replaced`), as a chain's rerun, with twice the
        sweeps, is. On the coalitions of 12 parties that fell to the chains before, a rerun's weights held 1.6-4 times
        the effective draws (docs/importance.md, "When it draws again"). Then, up to UNTRUSTED_RETRIES times, the
        coalitions still not trusted are drawn again from the keys of the next attempts, at the last rerun's inner
        draws. Returns the rows (codes, repeats) and the rerun that drew each coalition (0: the first attempt)."""
        done = self.coalitions(key, codes, data, self.repeats)
        reruns = np.zeros(len(codes), int)
        for attempt in range(1, self.reruns + UNTRUSTED_RETRIES + 1):
            weak = ~done.trusted.all(axis=1)
            if attempt <= self.reruns:
                weak |= (done.ess.min(axis=1) < self.wanted_ess) | (done.noise_spread.max(axis=1) > NOISE_SPREAD)
            weak = np.flatnonzero(weak)
            if not len(weak):
                break
            rerun = self.coalitions(rerun_key(key, attempt), [codes[i] for i in weak], data, self.repeats, attempt)
            done = done.replaced(weak, rerun)
            reruns[weak] = attempt
        return done, reruns

    def run(self, keys: jax.Array, masks: np.ndarray, data: NoiseAwareData, attempt: int = 0) -> ImportanceRows:
        """Every row of the model's `attempt` (a retry beyond the reruns draws as the last rerun: the model's attempt is
        at most the reruns' and MOST_INNER_ATTEMPT): its key (rows,), coalition mask (rows, n), the game's releases;
        its members packed to the planner's width (`member_width`: from 6 parties on, a third of the parties at a
        time, so at most three compiled programs an attempt), ROWS_PER_CALL rows a call. A rerun's rows are packed as
        the first attempt's are: the inner draws follow the width (`bayesval.inference.importance.inner_draw_count`),
        and a narrow coalition drawn again at every party's slot paid the widest row's inner draws, 4 times over
        (docs/benchmarks.md, "Inner draws by width")."""
        masks = np.asarray(masks, bool)
        widths = np.array([member_width(int(mask.sum()), self.num_parties) for mask in masks])
        attempt = min(attempt, self.reruns, MOST_INNER_ATTEMPT)
        self._compile_ahead(keys, masks, widths, data, attempt)
        parts = [np.empty(len(masks)) for _ in ImportanceRows._fields]
        bar = tqdm(
            total=len(masks),
            desc=progress.describe("importance"),
            disable=not progress.shown(self.progress_bar),
            unit="row",
        )
        for width in np.unique(widths):
            rows = np.flatnonzero(widths == width)
            _compiled(self.compiling.get((int(width), attempt)))
            for start in range(0, len(rows), ROWS_PER_CALL):
                chunk = rows[start : start + ROWS_PER_CALL]
                packed = [data.members(masks[row], int(width)) for row in chunk]
                out = self.draw(
                    keys[chunk],
                    NoiseAwareData.per_row([inputs for inputs, _ in packed]),
                    np.stack([mask for _, mask in packed]),
                    self.num_draws,
                    attempt,
                )
                if out is None:
                    raise RuntimeError(
                        "the model's importance_draws gave no draws for rows of a game it was chosen for; a model that "
                        "cannot draw a game's coalitions offers importance_draws = None, and its chains value them"
                    )
                window = min(IMPORTANCE_WINDOW, self.num_draws // 4)
                kl = np.asarray(_kl(out.draws[:, None], self.k, self.log_density, window))
                trusted = out.converged & (out.k_hat <= k_hat_threshold(self.num_draws)) & np.isfinite(kl)
                for part, value in zip(parts, (kl, out.k_hat, out.ess, out.noise_spread, trusted)):
                    part[chunk] = value
                bar.update(len(chunk))  # the chunk's estimates are on the host: its rows are drawn
        bar.close()
        return ImportanceRows(*parts[:-1], parts[-1].astype(bool))

    def _compile_ahead(self, keys, masks, widths, data: NoiseAwareData, attempt: int) -> None:
        """Start compiling, in the background (`bayesval.compilation.compile_for_later`), the programs of every width
        of these rows but the first (whose programs the first call compiles at once, the background's compiling
        beside it), on the model's `attempt`, where the model names them and they were not started before; each
        width's future is kept (`compiling`, by width and attempt). A width's programs compile while the widths
        before it are drawn: at 12 parties the row programs of three widths and their reruns' were 87 s of a 339 s
        valuation's compiling, on its critical path (docs/benchmarks.md, "Importance programs compiled ahead")."""
        if self.programs is None:
            return
        for width in np.unique(widths)[1:]:
            if (int(width), attempt) in self.compiling:
                continue
            row = int(np.flatnonzero(widths == width)[0])
            inputs, mask = data.members(masks[row], int(width))
            rows = NoiseAwareData.per_row([inputs])
            programs = self.programs(keys[row : row + 1], rows, mask[None], self.num_draws, attempt)
            self.compiling[int(width), attempt] = compile_for_later(programs)


def _compiled(future) -> None:
    """Wait for a width's programs compiled ahead (None: none were), so that its first call finds them rather than
    compiling them a second time beside the background. A program that failed to compile there is left to fail, with
    the same error, where it is called."""
    if future is not None:
        try:
            future.result()
        except Exception:  # raised again by the call that compiles the program
            pass


@partial(jax.jit, static_argnames=("k", "window"))
def _kl(draws, k: int, log_density, window: int):
    """k-NN KL (B,) of single-chain draws (B, 1, S, d) against the prior's log density."""
    log_prior = jax.vmap(jax.vmap(jax.vmap(log_density)))(draws)
    kept = jax.numpy.ones(draws.shape[:2], bool)
    return batched_kl(draws, kept, k, log_prior=log_prior, window=window)
