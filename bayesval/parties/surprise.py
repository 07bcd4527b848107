"""The Bayesian surprise of coalitions, v_C = KL(p(theta | o_C) || p(theta)) (Sim et al. 2023, Sec. 3;
Algorithm 2, lines 4-13), as a cached utility of the game layer.

Each coalition is valued `num_repeats` times, each time from fresh chains. The k-NN KL estimator uses the
prior's density where the model knows it (`prior_density`), else a fresh prior sample per repeat, shared by
every coalition of that repeat (common random numbers, as Sim et al. 2023, App. C.3): the coalitions' errors
within a repeat are then correlated, so Shapley values and their standard errors are computed per repeat
(`per_repeat`), which is right either way. Asked for (kl='rao-blackwell', `conjugate_prior`), a Gibbs model's
conjugate conditionals give a Rao-Blackwellised KL instead, with no nearest neighbours
(`bayesval.divergence.batched_mixture_kl`; docs/architecture.md).

The path has one home per job: `bayesval.parties.plan` lays rows (coalition, repeat) out in sampler calls (pure),
`bayesval.parties.execute` runs a call (gathering rows across processes, compiling the next width ahead),
`bayesval.parties.keys` derives every row's key from its coalition and repeat alone (so values do not depend on the
batch size, the device layout or the number of processes), `bayesval.parties.reruns` decides which coalitions are
sampled again, and this module caches each coalition's estimates and diagnostics (`CoalitionSurprise`).
"""

from __future__ import annotations

import hashlib
from collections.abc import Collection
from functools import partial
from typing import NamedTuple

import jax
import numpy as np

from bayesval import progress
from bayesval.digests import SIMPLE, array_digest, content_digest, is_array_tree, stable_repr
from bayesval.divergence import EXTRA_NEIGHBOURS, MIXTURE_GAP
from bayesval.games.shapley import mask_codes
from bayesval.inference.batching import same_in_every_process
from bayesval.inference.config import KERNEL_FIELDS, SamplerConfig
from bayesval.inference.data import NoiseAwareData
from bayesval.inference.diagnostics import ESS_THRESHOLD, R_HAT_THRESHOLD
from bayesval.models.protocol import Capabilities, capabilities
from bayesval.parties.execute import CallExecutor, Rows, RowSummary, surprise_of_inputs
from bayesval.parties.importance import importance_executor, route_diagnostics
from bayesval.parties.keys import rerun_key
from bayesval.parties.plan import CallLayout, rows_that_fit
from bayesval.parties.reruns import to_rerun
from bayesval.results.state import CoalitionDiagnostics, CoalitionEstimates


def draw_dimension(model, data) -> int:
    """The coordinates of one draw of theta, as the model's prior draws tell: from their shape alone where
    `prior_draws` is a JAX function (traced, not compiled: a first valuation would otherwise compile and run a
    prior-sampling program before its sampler's, 0.7 s for `LinearRegression` on a CPU), else from one draw."""
    draw = partial(model.prior_draws, data=data, num_draws=1)
    try:
        return int(jax.eval_shape(draw, jax.random.key(0)).shape[-1])
    except jax.errors.JAXTypeError:  # prior_draws leaves JAX (NumPy on the draws): one concrete draw
        return int(np.shape(draw(jax.random.key(0)))[-1])


def batch_rows(
    model,
    data,
    config: SamplerConfig,
    most_rows: int,
    kl: str = "auto",
    dimension: int | None = None,
    caps: Capabilities | None = None,
) -> int:
    """Rows per sampler call of `model`'s draws on `data` (`bayesval.parties.plan.rows_that_fit`): what fits
    `config.memory_limit_mb` on each device, at most `most_rows`. With kl='rao-blackwell' each draw also carries its
    conditional's parameters. `dimension`: the draws'
    coordinates where the caller knows them (`draw_dimension`); `caps`: the model's `Capabilities` where read."""
    dimension = draw_dimension(model, data) if dimension is None else dimension
    caps = capabilities(model) if caps is None else caps
    conjugate = conjugate_prior(caps, model.name, data, kl)
    if conjugate is not None:
        dimension += sum(np.size(part) for part in conjugate)
    return rows_that_fit(config, dimension, most_rows)


KL_ESTIMATORS = ("auto", "prior-density", "two-sample", "rao-blackwell")


def prior_density(caps: Capabilities, name: str, data, estimator: str):
    """The model's prior log density (a `jax.tree_util.Partial` theta -> log p(theta)) if the k-NN KL estimator
    is to use it, else None.

    'auto' uses it where the model knows it (`caps.prior_log_density`, not None), 'prior-density' requires it and
    'two-sample' (Sim et al. 2023, App. C.3 as printed) never uses it; 'rao-blackwell' needs no k-NN estimate
    (`conjugate_prior`). `name`: the model's, for errors."""
    if estimator not in KL_ESTIMATORS:
        raise ValueError(f"kl must be one of {KL_ESTIMATORS}, got {estimator!r}")
    if estimator in ("two-sample", "rao-blackwell"):
        return None
    density = None if caps.prior_log_density is None else caps.prior_log_density(data)
    if density is None and estimator == "prior-density":
        raise ValueError(
            f"kl='prior-density' needs theta's marginal prior density, which {name} does not give (its "
            "parameter sites' priors depend on other latent sites, or it has no prior_log_density); use kl='auto' "
            "or 'two-sample'"
        )
    return density


def conjugate_prior(caps: Capabilities, name: str, data, estimator: str):
    """The model's conjugate NIG prior if the KL estimator is 'rao-blackwell', else None: that estimator scores
    the mixture of the sampler's conjugate conditionals p(theta | s_C) against it (`batched_mixture_kl`), which
    only a model whose sampler draws theta from such conditionals offers (`conjugate_prior`, and
    `posterior_draws(..., conditionals=True)`: `LinearRegression` with its Gibbs sampler)."""
    if estimator != "rao-blackwell":
        return None
    if caps.conjugate_prior is None:
        raise ValueError(
            f"kl='rao-blackwell' needs a sampler that draws theta from conjugate conditionals p(theta | s) (the "
            f"Gibbs sampler of bayesval.models.LinearRegression); {name} does not give them (no "
            "conjugate_prior); use kl='auto', 'prior-density' or 'two-sample'"
        )
    return caps.conjugate_prior(data)


class SurpriseGame(NamedTuple):
    """What a coalition's surprise is a function of: the model, the released statistics (`NoiseAwareData`), the
    sampler settings, the neighbours k, the KL estimator ('prior-density', 'two-sample' or 'rao-blackwell') and the
    route its posteriors take ('mcmc', or 'importance': docs/importance.md). Read-only: the reward mechanisms
    (`bayesval.parties.rewards.sampling`) build their modified inputs from `data` and size their trials by `config`."""

    model: object
    data: NoiseAwareData
    config: SamplerConfig
    k: int
    kl_estimator: str
    route: str = "mcmc"

    @property
    def num_parties(self) -> int:
        return int(self.data.counts.shape[0])


def kernel_settings_that_run(caps: Capabilities, data, config: SamplerConfig) -> dict[str, float]:
    """The kernel settings of `SamplerConfig` (`KERNEL_FIELDS`) as a run of the releases `data` under `config` uses
    them, where the model's kernel has them (`Capabilities.kernel_settings`, a NUTS kernel's: the model's own, or a
    deprecated config field over them, `SamplerConfig.overriding`), else {} (a Gibbs kernel has none of them)."""
    if caps.kernel_settings is None:
        return {}
    ran = config.overriding(caps.kernel_settings(data))
    held = getattr(type(ran), "_fields", ())
    return {name: float(getattr(ran, name)) for name in KERNEL_FIELDS if name in held}


def start_that_runs(caps: Capabilities, data, config: SamplerConfig) -> dict[str, str]:
    """How NUTS chains start and what their warm-up adapts in a run of the releases `data` under `config`, in words
    ({"nuts_start": ...}, `bayesval.inference.nuts.NUTSSettings.describe_start`), where the model's kernel is a NUTS
    kernel; else {}."""
    if caps.kernel_settings is None:
        return {}
    describe = getattr(config.overriding(caps.kernel_settings(data)), "describe_start", None)
    return {} if describe is None else {"nuts_start": describe()}


def budget_that_runs(caps: Capabilities, data, config: SamplerConfig) -> SamplerConfig:
    """The budget a run of the releases `data` under `config` spends: the config's warm budget where the model's
    NUTS chains start warm for these releases (`SamplerConfig.for_start`, `NumPyroModel.kernel_settings(data)`),
    else its own; without the warm fields, so that a result records what ran."""
    if caps.kernel_settings is None or (config.warm_warmup is None and config.warm_samples is None):
        return config.for_start(False)
    return config.for_start(getattr(config.overriding(caps.kernel_settings(data)), "warm_start", False) is True)


# sampler settings two runs of one game may differ in (a NUTS start changes how chains reach the posterior, not which;
# the memory limit, how a game's rows are packed into calls, and each row's keys come from its coalition and repeat)
UNFINGERPRINTED = (
    "memory_limit_mb",
    "progress_bar",
    "reruns",
    "sampled_repeats",
    "sampled_chains",
    "nuts_start",
    "warm_start",
    "warm_warmup",
    "warm_samples",
)


def model_content(model, settable: dict) -> list[tuple[str, bytes]]:
    """What a model was built from beyond its simple settings, each as a digest (`bayesval.digests.content_digest`),
    in name order: arrays and pytrees of them (`LinearRegression`'s prior and data prior) by their leaves' dtype,
    shape and bytes; a function it was given (a `NumPyroModel`'s model_fn) by its code, defaults and what it closes
    over, and then the model's other settings too (a `NumPyroModel`'s parameters: the sites its draws are made of).
    Private attributes (derived state) and methods of the model's own class are left out: the class, which the
    model's name names, defines them, so a built-in model's fingerprint is the one its results were saved with. A
    global a given function reads is not seen: two models whose functions differ only there need different names.
    Bytecode differs between Python versions, so a result of a model given a function resumes under the Python it
    was saved with."""
    content, others, given_function = [], [], False
    for name, value in sorted(settable.items()):
        if name.startswith("_") or isinstance(value, SIMPLE) or getattr(value, "__self__", None) is model:
            continue
        if callable(value):
            content.append((name, content_digest(value)))
            given_function = True
        elif is_array_tree(value):
            content.append((name, array_digest(value)))
        else:
            others.append((name, stable_repr(value)))
    return sorted(content + (others if given_function else []))


def game_fingerprint(game: SurpriseGame, saved_memory_limit_mb: float | None = None) -> str:
    """What makes two valuations the same game, hashed (hex SHA-256): the model's name and simple settings, what it was
    built from beyond them (`model_content`: its priors, a function it was given), every sampler setting but the
    progress bar and the reruns, k, the KL estimator and the released statistics. Not the key, nor the reruns: estimates
    from any key, and a rerun's, are estimates of the same values, so a result of the same game may be resumed with
    another key or another number of reruns. Nor `sampled_repeats` or `sampled_chains`: the repeats and chains the game
    ran are its num_repeats and num_chains (`SamplerConfig.for_sampled_game`). Nor a NUTS model's `warm_start`: where
    its chains start changes how they mix, not the posterior. The importance route is part of it (its estimates are not
    the chains'), and today's route adds nothing, so games valued before the route hash alike. Nor the memory limit,
    since 2026-12-02 (a run that ran out of memory resumes with a lower one): a result saved before hashed it too, and
    `saved_memory_limit_mb` gives the fingerprint it was saved with (the limit in its `diagnostics["sampler"]`)."""
    settings = {
        name: saved_memory_limit_mb if name == "memory_limit_mb" else value
        for name, value in vars(game.config).items()
        if name not in UNFINGERPRINTED or (name == "memory_limit_mb" and saved_memory_limit_mb is not None)
    }
    settings |= kernel_settings_that_run(capabilities(game.model), game.data, game.config)
    settable = {name: value for name, value in vars(game.model).items() if name not in KERNEL_FIELDS + UNFINGERPRINTED}
    model_settings = {name: value for name, value in settable.items() if isinstance(value, SIMPLE)}
    digest = hashlib.sha256(repr((game.model.name, sorted(model_settings.items()), settings, game.k)).encode())
    for name, content in model_content(game.model, settable):
        digest.update(name.encode() + content)
    digest.update(game.kl_estimator.encode())
    if game.route != "mcmc":
        digest.update(game.route.encode())
    for array in game.data:
        digest.update(np.ascontiguousarray(np.asarray(array, np.float64)).tobytes())
    return digest.hexdigest()


class CoalitionRun(NamedTuple):
    """One coalition's repeats as its sampler calls left them: the KL per repeat (a repeat that kept no chain takes
    the others' mean), the worst R-hat and bulk ESS over its repeats, its dropped chains and divergences, its draws
    (repeats, chains, kept, d) where the game keeps them (else None), its kept chains (repeats, chains), and the
    rerun that sampled it (0: the first call)."""

    kl: np.ndarray
    r_hat: float
    ess: float
    dropped: int
    divergences: int
    draws: np.ndarray | None
    kept: np.ndarray
    reruns: int
    route: str = "mcmc"  # or 'importance' (`bayesval.parties.importance`)
    k_hat: float = float("nan")  # the largest Pareto k-hat over its repeats, on the importance route

    @classmethod
    def by_importance(cls, kl: np.ndarray, ess: np.ndarray, k_hat: float, rerun: int = 0) -> CoalitionRun:
        """A coalition's repeats on the importance route (KL and the weights' effective sample size per repeat, the
        largest k-hat, the rerun that drew them): no chains, so R-hat 1 and one kept draw sequence a repeat."""
        kept = np.ones((len(kl), 1), bool)
        return cls(kl, 1.0, float(np.min(ess)), 0, 0, None, kept, int(rerun), "importance", float(k_hat))

    @property
    def converged(self) -> bool:
        """Within the flags: R-hat <= 1.01 over its repeats' chains and bulk ESS >= 400 in every repeat."""
        return self.r_hat <= R_HAT_THRESHOLD and self.ess >= ESS_THRESHOLD


def coalition_runs(
    codes: list[int], repeats: int, summary: RowSummary, with_draws: np.ndarray, reruns: int
) -> dict[int, CoalitionRun]:
    """Each coalition's `CoalitionRun` from the summary of its rows (code, repeat), in the order of `codes` then
    repeats; `with_draws` (one bool per code) marks the coalitions whose draws the summary holds."""
    by_code = (len(codes), repeats)
    kl = summary.kl.reshape(by_code)
    if np.isnan(kl).all(axis=1).any():
        raise RuntimeError("every chain of some coalition posterior was dropped (low BFMI or stuck); raise num_warmup")
    kl = np.where(np.isnan(kl), np.nanmean(kl, axis=1, keepdims=True), kl)  # a repeat without chains
    drawn = iter(summary.draws.reshape((-1, repeats) + summary.draws.shape[1:]) if with_draws.any() else ())
    kept = summary.kept.reshape(by_code + summary.kept.shape[1:])
    r_hat, ess = summary.r_hat.reshape(by_code).max(axis=1), summary.ess.reshape(by_code).min(axis=1)
    dropped, divergences = (
        summary.dropped.reshape(by_code).sum(axis=1),
        summary.divergences.reshape(by_code).sum(axis=1),
    )
    return {
        code: CoalitionRun(
            kl[index],
            float(r_hat[index]),
            float(ess[index]),
            int(dropped[index]),
            int(divergences[index]),
            next(drawn) if with_draws[index] else None,
            kept[index],
            reruns,
        )
        for index, code in enumerate(codes)
    }


def unestimated(kl_estimator: str) -> str:
    """Why a coalition posterior's KL came out NaN, by estimator."""
    if kl_estimator == "rao-blackwell":
        return (
            "kl='rao-blackwell': the Gibbs conditionals p(theta | s_C) of some coalition are too narrow for their "
            f"mixture to give its entropy (its leave-one-out and own-included estimates differ by more than "
            f"{MIXTURE_GAP} nats): DP noise dominates there; use kl='prior-density' (docs/architecture.md)"
        )
    return (
        f"more than {EXTRA_NEIGHBOURS} identical draws around some point of a coalition posterior: the sampler is "
        "stuck (raise num_warmup, or check the model)"
    )


DIAGNOSTICS_PER_COALITION = CoalitionDiagnostics._fields[:-1]  # coalitions, r_hat, ess, ..., reruns


class FiledCoalitions:
    """What a `CoalitionSurprise` keeps of the coalitions it sampled, filed by coalition code: each one's estimates
    per repeat (`values`, code -> (repeats,), the empty coalition's zeros under 0), its draws where the game keeps
    them (`draws`: (repeats, chains, kept, d) of every coalition with keep_draws, else None; `pooled_draws`: (m, d)
    of the `pooled` codes, for the reward metrics: the grand coalition and each party alone) and its diagnostics,
    one entry a coalition in the order filed (`diagnostics`, with "converged"; with `routed`, each one's route and
    k-hat). `repeats` counts each coalition's estimates: the config's, or more where repeats were added."""

    def __init__(self, repeats: int, keep_draws: bool, pooled: Collection[int], routed: bool) -> None:
        self.repeats, self.routed, self.pooled = repeats, routed, frozenset(int(code) for code in pooled)
        self.values: dict[int, np.ndarray] = {0: np.zeros(repeats)}
        self.draws: dict[int, np.ndarray] | None = {} if keep_draws else None
        self.pooled_draws: dict[int, np.ndarray] = {}
        self.diagnostics: dict = {"converged": True} | {name: [] for name in DIAGNOSTICS_PER_COALITION}

    def keeps_draws(self, code: int) -> bool:
        """Whether the draws of coalition `code` are kept (every coalition's with keep_draws, else the pooled)."""
        return self.draws is not None or code in self.pooled

    def file(self, code: int, run: CoalitionRun, num_parties: int) -> None:
        """Keep a sampled coalition's estimates, its draws where they are kept, and its diagnostics."""
        self.values[code] = run.kl
        if self.draws is not None:
            self.draws[code] = run.draws
        if code in self.pooled:
            self.pooled_draws[code] = run.draws[run.kept].reshape(-1, run.draws.shape[-1])
        members = ((code >> np.arange(num_parties)) & 1).tolist()
        for name, value in zip(DIAGNOSTICS_PER_COALITION, (members, *run[1:5], run.reruns)):
            self.diagnostics[name].append(value)
        if self.routed:
            self.diagnostics["route"].append(run.route)
            self.diagnostics["k_hat"].append(run.k_hat)
        self.diagnostics["converged"] &= run.converged

    def file_more(self, code: int, run: CoalitionRun) -> None:
        """File added repeats of a coalition after its others: estimates and draws appended, its diagnostics the
        worst of both runs (largest R-hat and rerun, smallest ESS, dropped chains and divergences summed). Its pooled
        draws stay those of its first repeats (as many as a reward's, which the rewards compare them with; none where
        the coalitions were restored, and the rewards then sample them again)."""
        self.values[code] = np.concatenate([self.values[code], run.kl])
        if self.draws is not None:
            self.draws[code] = np.concatenate([self.draws[code], run.draws])
        index = mask_codes(np.array(self.diagnostics["coalitions"], bool)).tolist().index(code)
        worst = {"r_hat": max, "ess": min, "dropped_chains": sum, "divergences": sum, "reruns": max}
        for name, value in zip(DIAGNOSTICS_PER_COALITION[1:], (*run[1:5], run.reruns)):
            self.diagnostics[name][index] = worst[name]((self.diagnostics[name][index], value))
        self.diagnostics["converged"] &= run.converged

    def count_repeats(self, repeats: int) -> None:
        """Every coalition now has `repeats` estimates (the empty one's zeros follow)."""
        self.repeats = repeats
        self.values[0] = np.zeros(repeats)

    def estimates(self, fingerprint: str) -> CoalitionEstimates:
        """Every filed coalition's estimates and diagnostics, as the typed state of the game `fingerprint`."""
        codes = sorted(set(self.values) - {0})
        lists = [list(self.diagnostics[name]) for name in DIAGNOSTICS_PER_COALITION]
        sampled = CoalitionDiagnostics(*lists, bool(self.diagnostics["converged"]))
        return CoalitionEstimates(fingerprint, {code: self.values[code] for code in codes}, sampled)

    def restore(self, state: CoalitionEstimates) -> None:
        """File the coalitions of an earlier valuation's state (estimates and diagnostics): routed, they say
        'resumed' (the typed record holds no route)."""
        self.values.update({int(code): np.asarray(value, np.float64) for code, value in state.estimates.items()})
        self.count_repeats(max(len(value) for value in self.values.values()))  # an enumerated game's added repeats
        for name in DIAGNOSTICS_PER_COALITION:
            self.diagnostics[name] = list(getattr(state.diagnostics, name))
        self.diagnostics["converged"] = bool(state.diagnostics.converged)
        if self.routed:
            count = len(self.diagnostics["coalitions"])
            self.diagnostics["route"], self.diagnostics["k_hat"] = ["resumed"] * count, [float("nan")] * count


class CoalitionSurprise:
    """v_C of coalition masks, per repeat, sampled on demand and cached by coalition.

    `surprise(masks)` returns the (repeats, B) KL estimates of masks (B, n) (the empty coalition is 0), filed in
    `filed` (`FiledCoalitions`: `values`, `diagnostics`, `draws`, `pooled_draws`, read here too as attributes of the
    surprise; num_repeats estimates a coalition, more after `add_repeats`). Coalitions not cached are laid
    out in sampler calls (`layout`, a `bayesval.parties.plan.CallLayout`) and run (`executor`, a
    `bayesval.parties.execute.CallExecutor`); the few that fail the convergence flags are sampled again
    (`bayesval.parties.reruns`), or drawn by importance sampling (`bayesval.parties.importance.route`).

    The public surface other modules read: `game` (a read-only `SurpriseGame`), `batch_rows` (rows per sampler
    call at most), `layout` (rows per call by width: `CallLayout.rows_per_batch`), `sampler_calls(sizes)`,
    `of_inputs` (the surprise of modified releases, for rewards), `prior_draws`, `estimates()` (the typed resume
    state), `restore`, `add_repeats`, `vectorised`; `model`, `data`, `config` and `k` are kept for older callers.
    """

    def __init__(
        self,
        model,
        data,
        config: SamplerConfig,
        k: int,
        key: jax.Array,
        max_coalitions: int,
        kl: str = "auto",
        keep_draws: bool = False,
        pooled_draws_of: Collection[int] = (),
        surprise: str = "mcmc",
        sampled: bool = False,
    ) -> None:
        self.capabilities = caps = capabilities(model)
        config = budget_that_runs(caps, data, config)
        self.model, self.data, self.config, self.k = model, data, config, k
        self.key_posterior, self.key_prior = jax.random.split(key)
        dimension = draw_dimension(model, data)
        self.batch_rows = batch_rows(model, data, config, max_coalitions * config.num_repeats, kl, dimension, caps)
        self.layout = CallLayout(int(data.counts.shape[0]), config, self.batch_rows, caps.packs_members)
        log_density, conjugate = prior_density(caps, model.name, data, kl), conjugate_prior(caps, model.name, data, kl)
        self.kl_estimator = kl_estimator_name(log_density, conjugate)
        self._prior_samples: dict[int, np.ndarray] = {}
        programs, estimator = caps.posterior_programs is not None, unestimated(self.kl_estimator)
        executor = (model, k, log_density, conjugate, self._prior_sample, dimension, programs, estimator)
        self.executor = CallExecutor(*executor)
        route = (caps, model.name, surprise, kl, sampled, self.layout, k, log_density)
        self.importance, note = importance_executor(*route)
        self.filed = FiledCoalitions(config.num_repeats, keep_draws, pooled_draws_of, self.importance is not None)
        self.filed.diagnostics |= route_diagnostics(self.importance, note)
        self.values, self.diagnostics = self.filed.values, self.filed.diagnostics  # as filed, for other modules
        self.draws, self.pooled_draws = self.filed.draws, self.filed.pooled_draws
        self.vectorised = self.importance is None  # by the chains' vectorised calls, not rows one after another
        if jax.process_count() > 1:  # the processes that split one valuation value one game with one key
            one_game_in_every_process(self.fingerprint, config, key)

    @property
    def game(self) -> SurpriseGame:
        """The game this surprise values (model, releases, sampler settings, k, KL estimator)."""
        route = "mcmc" if self.importance is None else "importance"
        return SurpriseGame(self.model, self.data, self.config, self.k, self.kl_estimator, route)

    @property
    def fingerprint(self) -> str:
        """`game_fingerprint` of this game: equal for two valuations whose estimates can stand in for each other."""
        return game_fingerprint(self.game)

    def prior_draws(self, key: jax.Array, num_draws: int) -> np.ndarray:
        """`num_draws` draws (num_draws, d) of the prior p(theta) of this game's model and releases."""
        return np.asarray(self.model.prior_draws(key, self.data, num_draws))

    def sampler_calls(self, sizes) -> int:
        """The sampler calls that sampling coalitions of these `sizes` (every repeat of each) takes: the calls of
        their plan (`CallLayout.plan`)."""
        repeats = self.config.num_repeats
        return len(self.layout.plan(np.repeat(sizes, repeats), np.tile(np.arange(repeats), len(sizes))))

    def estimates(self) -> CoalitionEstimates:
        """Every sampled coalition's estimates and diagnostics with this game's fingerprint: the state a result
        carries so that a later valuation of the same game resumes (`restore`) instead of sampling them again."""
        return self.filed.estimates(self.fingerprint)

    def restore(self, state: CoalitionEstimates) -> None:
        """Take the coalition estimates and diagnostics of an earlier valuation (`state`, of this game: the caller
        compares fingerprints; with its `CoalitionDiagnostics`), a typed record alone: those coalitions are not
        sampled again, and the diagnostics go on from theirs."""
        self.filed.restore(state)

    @property
    def num_sampled(self) -> int:
        return len(self.values) - 1

    def __call__(self, masks: np.ndarray) -> np.ndarray:
        masks = np.asarray(masks, bool)
        codes = mask_codes(masks)
        new = [int(c) for c in dict.fromkeys(codes.tolist()) if c not in self.values]
        if new:
            self._sample(new)
        return np.stack([self.values[int(c)] for c in codes], axis=1)

    def _sample(self, codes: list[int]) -> None:
        """Sample every repeat of the coalitions `codes`, rerun the few that fail the convergence flags
        (`bayesval.parties.reruns.to_rerun`, counted among these `codes`: the coalitions of one call), and file
        each one's estimates, draws and diagnostics. A rerun that loses every chain of some coalition (NUTS's BFMI
        rule, stuck chains) leaves the estimates before it standing, flagged unconverged."""
        runs, fallen = self._by_importance(codes)
        chained = [code for code in codes if code not in runs]
        if chained:
            by_mcmc = self._by_mcmc(chained)
            runs |= {
                code: run._replace(route="mcmc, after importance", k_hat=fallen[code]) if code in fallen else run
                for code, run in by_mcmc.items()
            }
        for code in codes:
            self.filed.file(code, runs[code], self.layout.num_parties)
        if self.filed.repeats > self.config.num_repeats:  # a game whose repeats were added: as many for these
            self._extend(codes, self.config.num_repeats, self.filed.repeats - self.config.num_repeats)

    def add_repeats(self, count: int) -> None:
        """`count` more repeats (a multiple of `num_repeats`: calls of whole runs) of every coalition sampled so far,
        and as many of any sampled later, by the chains from their rows' keys (`row_keys`): an enumerated game given a
        tolerance (`bayesval.parties.valuation.repeats_to_tolerance`). Not on the importance route."""
        if self.importance is not None:
            raise ValueError("repeats are added by the chains; this game's coalitions take importance sampling")
        if count <= 0 or count % self.config.num_repeats:
            raise ValueError(f"repeats are added in multiples of num_repeats = {self.config.num_repeats}, got {count}")
        self._extend(sorted(set(self.values) - {0}), self.filed.repeats, count)
        self.filed.count_repeats(self.filed.repeats + count)

    def _extend(self, codes: list[int], first_repeat: int, count: int) -> None:
        """Repeats first_repeat, ..., first_repeat + count - 1 of the coalitions `codes`, filed after their others."""
        for code, run in self._by_mcmc(codes, first_repeat, count).items():
            self.filed.file_more(code, run)

    def _by_importance(self, codes: list[int]) -> tuple[dict[int, CoalitionRun], dict[int, float]]:
        """The runs of the coalitions among `codes` that the importance route values and trusts, and the largest
        k-hat of each it does not (none off the route; a coalition whose draws are kept is left to the chains)."""
        wanted = [code for code in codes if not self.filed.keeps_draws(code)]
        if self.importance is None or not wanted:
            return {}, {}
        done, reruns = self.importance.until_effective(self.key_posterior, wanted, self.data)
        trusted, k_hat = done.trusted.all(axis=1), done.k_hat.max(axis=1)
        runs = map(CoalitionRun.by_importance, done.kl, done.ess, k_hat, reruns)
        return (
            {code: run for code, run, ok in zip(wanted, runs, trusted) if ok},
            {code: float(k) for code, k, ok in zip(wanted, k_hat, trusted) if not ok},
        )

    def _by_mcmc(self, codes: list[int], first_repeat: int = 0, repeats: int | None = None) -> dict[int, CoalitionRun]:
        """The repeats (every one, or `repeats` of them from `first_repeat`) of the coalitions `codes` by MCMC, the
        few that fail the convergence flags sampled again."""
        span = (first_repeat, self.config.num_repeats if repeats is None else repeats)
        runs = self._sample_coalitions(codes, self.config, self.key_posterior, span=span)
        for attempt in range(1, self.config.reruns + 1):
            failed = to_rerun(runs, codes)
            if not failed:
                break
            width = self.layout.rerun_width(failed, codes)
            key = rerun_key(self.key_posterior, attempt)
            try:
                runs |= self._sample_coalitions(failed, self.config.rerun(attempt), key, attempt, width, span)
            except RuntimeError:  # the rerun lost every chain of some coalition: the first estimates stand, flagged
                break
        return runs

    def _sample_coalitions(
        self,
        codes: list[int],
        config: SamplerConfig,
        key: jax.Array,
        attempt: int = 0,
        width: int | None = None,
        span: tuple[int, int] | None = None,
    ) -> dict[int, CoalitionRun]:
        """The repeats of the coalitions `codes` (`span`: the first and how many; default every one of `config`)
        sampled with the budget `config`, row (code, repeat) from `row_keys(key, ...)` (`Rows.repeated`), each at
        its own width or all at the one given (a rerun's, `attempt` >= 1): each coalition's `CoalitionRun`, the draws
        kept where this game keeps them."""
        first, repeats = (0, config.num_repeats) if span is None else span
        masks = (np.array(codes)[:, None] >> np.arange(self.layout.num_parties)) & 1
        with_draws = np.array([self.filed.keeps_draws(code) for code in codes])
        rows = Rows.repeated(key, codes, masks, [self.data] * len(codes), with_draws, repeats, first)
        calls = self.layout.plan(rows.masks.sum(axis=1), rows.repeats, config, width, rerun=attempt > 0)
        if not attempt:
            return coalition_runs(codes, repeats, self.executor.run_plan(calls, rows), with_draws, attempt)
        label = f"rerun of {len(codes)} unconverged coalition posteriors with {2**attempt}x the sweeps"
        with progress.stage(label, calls=len(calls)):
            return coalition_runs(codes, repeats, self.executor.run_plan(calls, rows), with_draws, attempt)

    def of_inputs(self, key: jax.Array, inputs: list, masks: np.ndarray) -> tuple[np.ndarray, list[np.ndarray]]:
        """The surprise of coalition masks (J, n) under modified releases, one `NoiseAwareData` per mask, against this
        game's prior, in the valuation's compiled batch shapes (`bayesval.parties.execute.surprise_of_inputs`). Not
        cached."""
        return surprise_of_inputs(self.executor, self.layout, self.config.num_repeats, key, inputs, masks)

    def _prior_sample(self, repeat: int) -> np.ndarray:
        """The prior draws every coalition of `repeat` is compared with (two-sample estimator)."""
        if repeat not in self._prior_samples:
            key = jax.random.fold_in(self.key_prior, repeat)
            self._prior_samples[repeat] = self.model.prior_draws(key, self.data, self.config.draws_per_repeat)
        return self._prior_samples[repeat]


def kl_estimator_name(log_density, conjugate) -> str:
    """The KL estimator a game runs: 'rao-blackwell' from conjugate conditionals (`conjugate_prior`), else the k-NN
    estimator with the prior's density where known ('prior-density', `prior_density`), else 'two-sample'."""
    if conjugate is not None:
        return "rao-blackwell"
    return "two-sample" if log_density is None else "prior-density"


def one_game_in_every_process(fingerprint: str, config: SamplerConfig, key: jax.Array) -> None:
    """The processes that split one valuation value one game, with one key, the same reruns (a process that reruns a
    coalition meets the others in its sampler calls) and the same memory limit (which packs the rows into those
    calls): refused otherwise (`same_in_every_process`)."""
    key_data = np.asarray(jax.random.key_data(key)).tobytes()
    game = f"{fingerprint}; reruns {config.reruns}; memory {config.memory_limit_mb!r}".encode()
    same_in_every_process("game, reruns, memory limit or key", hashlib.sha256(game + key_data).digest())


def per_repeat(estimates: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Mean and standard error over the leading (repeat) axis of per-repeat estimates."""
    estimates = np.asarray(estimates, np.float64)
    return estimates.mean(axis=0), estimates.std(axis=0, ddof=1) / np.sqrt(len(estimates))
