"""The Bayesian surprise of coalitions, v_C = KL(p(theta | o_C) || p(theta)) (Sim et al. 2023, Sec. 3;
Algorithm 2, lines 4-13), as a cached utility of the game layer.

Each coalition is valued `num_repeats` times, each time from fresh chains. The k-NN KL estimator uses the
prior's density where the model knows it (`prior_density`), else a fresh prior sample per repeat, shared by
every coalition of that repeat (common random numbers, as Sim et al. 2023, App. C.3): the coalitions' errors
within a repeat are then correlated, so Shapley values and their standard errors are computed per repeat
(`per_repeat`), which is right either way. Rows (coalition, repeat) are sampled in fixed-size batches, padded and
chunked to `SamplerConfig.memory_limit_mb` per device and laid out over the global device mesh: every device
of every process after `jax.distributed.initialize()` (docs/multihost.md), each process sampling its block and
receiving every row's results. Each row's key is folded from its coalition and repeat, so values do not depend on
the batch size, the device layout or the number of processes. Asked for (kl='rao-blackwell', `conjugate_prior`), a
Gibbs model's conjugate conditionals give a Rao-Blackwellised KL instead, with no nearest neighbours
(`bayesval.divergence.batched_mixture_kl`; docs/architecture.md).
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Collection, Iterator
from concurrent.futures import Future, wait
from functools import partial
from typing import NamedTuple

import jax
import numpy as np

from bayesval import progress
from bayesval.batching import batches, pad_rows, padded_size
from bayesval.compilation import Program, compile_ahead, compile_for_later, sampler_jit
from bayesval.divergence import (  # noqa: F401
    EXTRA_NEIGHBOURS,
    MIXTURE_GAP,
    THEILER_WINDOW,
    batched_kl,
    batched_mixture_kl,
    theiler_window,
)
from bayesval.games.shapley import mask_codes
from bayesval.inference.batching import coalition_keys, gather_rows, process_block, same_in_every_process, shard_rows
from bayesval.inference.config import KERNEL_FIELDS, SamplerConfig
from bayesval.inference.data import NoiseAwareData
from bayesval.inference.diagnostics import ESS_THRESHOLD, R_HAT_THRESHOLD, chain_diagnostics
from bayesval.results.state import CoalitionEstimates

MAX_BATCH_ROWS = 256  # rows a process samples per call on CPU
MAX_BATCH_ROWS_ACCELERATOR = 16384  # on a GPU or TPU, where a wider call costs little more (docs/benchmarks.md)
CALL_ROWS_STEP = 64  # a width's last call is cut to its rows rounded up to a multiple of this (`call_rows`)
_MIXTURE_STREAM = 1  # folded into a row's sampler key: the key of the points the Rao-Blackwellised KL scores
# Reruns (`SamplerConfig.reruns`) go to the coalitions that failed the convergence flags only where they are one, or
# at most this share of the coalitions sampled together: the slow posteriors of a game (9 of 4,095 in a 12-party
# valuation on a GPU, 12 of 63 for six parties at half the fast preset's sweeps; docs/benchmarks.md), not a budget too
# short for the game. A rerun of 2x the sweeps after warm-up costs ~5/3 of a first call per row, so at this share it
# costs at most ~0.4 of the first call's sweeps where the batch is large, against at least a whole valuation for a
# budget raised for every coalition; a small game pays one padded call.
RERUN_SHARE = 0.25
_BYTES_PER_DRAW_COORDINATE = 8 * 4  # float64 draws, plus the sampler's trace, state and the host copy


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


def cuts_calls(config: SamplerConfig) -> bool:
    """Whether sampler calls are cut to `call_rows` rather than padded to a full call: on CPU, where a call's time
    grows with its rows, at a budget where packing pays (`worth_packing`: a compiled program costs less than the
    sweeps it saves; each 64 rows cut from a 256-row call at the fast preset save minutes of sweeps against seconds
    of compiling, docs/benchmarks.md, "A width's last call cut to its rows"). Not on an accelerator, where a call's
    time grows less than its rows and a first compilation takes tens of seconds: where a cut pays there is yet to be
    measured (docs/architecture.md, "Coalitions are masks")."""
    return jax.default_backend() == "cpu" and worth_packing(config)


def draw_dimension(model, data) -> int:
    """The coordinates of one draw of theta, as the model's prior draws tell: from their shape alone where
    `prior_draws` is a JAX function (traced, not compiled: a first valuation would otherwise compile and run a
    prior-sampling program before its sampler's, 0.7 s for `LinearRegression` on a CPU), else from one draw."""
    draw = partial(model.prior_draws, data=data, num_draws=1)
    try:
        return int(jax.eval_shape(draw, jax.random.key(0)).shape[-1])
    except jax.errors.JAXTypeError:  # prior_draws leaves JAX (NumPy on the draws): one concrete draw
        return int(np.shape(draw(jax.random.key(0)))[-1])


def whole_runs(rows: int, run: int) -> int:
    """The rows of a call that holds only whole runs of `run` rows (a coalition's repeats, never split between
    calls): `rows` less its remainder, or `rows` itself where it holds less than one run."""
    return rows - rows % run if rows >= run else rows


def batch_rows(
    model, data, config: SamplerConfig, most_rows: int, kl: str = "auto", dimension: int | None = None
) -> int:
    """Rows per batch: what fits `config.memory_limit_mb` on each device times the device count, and no more than
    `most_rows` (padded to a multiple of the device count) or `max_rows_per_process` per process. The devices are
    those of the global mesh, `jax.devices()`: after `jax.distributed.initialize()`, every device of every process.
    With kl='rao-blackwell' each draw also carries its conditional's parameters. `dimension`: the draws'
    coordinates where the caller knows them (`draw_dimension`)."""
    dimension = draw_dimension(model, data) if dimension is None else dimension
    conjugate = conjugate_prior(model, data, kl)
    if conjugate is not None:
        dimension += sum(np.size(part) for part in conjugate)
    per_row = config.draws_per_repeat * dimension * _BYTES_PER_DRAW_COORDINATE
    per_device = int(config.memory_limit_mb * 2**20 // per_row)
    if per_device < 1:
        raise ValueError(
            f"SamplerConfig.memory_limit_mb={config.memory_limit_mb:g} is too small for one coalition posterior of "
            f"{config.draws_per_repeat} draws of {dimension} parameters, which needs {per_row / 2**20:.3g} MB; raise "
            "memory_limit_mb or lower num_samples / num_chains"
        )
    devices = jax.device_count()
    per_process = max_rows_per_process(jax.default_backend())
    return min(per_device * devices, padded_size(min(most_rows, per_process * jax.process_count()), devices))


PACK_FROM_PARTIES = 6
PACK_FROM_CHAIN_SWEEPS = 4_000


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


KL_ESTIMATORS = ("auto", "prior-density", "two-sample", "rao-blackwell")


def prior_density(model, data, estimator: str):
    """The model's prior log density (a `jax.tree_util.Partial` theta -> log p(theta)) if the k-NN KL estimator
    is to use it, else None.

    'auto' uses it where the model knows it (`prior_log_density`, not None), 'prior-density' requires it and
    'two-sample' (Sim et al. 2023, App. C.3 as printed) never uses it; 'rao-blackwell' needs no k-NN estimate
    (`conjugate_prior`)."""
    if estimator not in KL_ESTIMATORS:
        raise ValueError(f"kl must be one of {KL_ESTIMATORS}, got {estimator!r}")
    if estimator in ("two-sample", "rao-blackwell"):
        return None
    density = model.prior_log_density(data) if hasattr(model, "prior_log_density") else None
    if density is None and estimator == "prior-density":
        raise ValueError(
            f"kl='prior-density' needs theta's marginal prior density, which {model.name} does not give (its "
            "parameter sites' priors depend on other latent sites, or it has no prior_log_density); use kl='auto' "
            "or 'two-sample'"
        )
    return density


def conjugate_prior(model, data, estimator: str):
    """The model's conjugate NIG prior if the KL estimator is 'rao-blackwell', else None: that estimator scores
    the mixture of the sampler's conjugate conditionals p(theta | s_C) against it (`batched_mixture_kl`), which
    only a model whose sampler draws theta from such conditionals offers (`conjugate_prior`, and
    `posterior_draws(..., conditionals=True)`: `LinearRegression` with its Gibbs sampler)."""
    if estimator != "rao-blackwell":
        return None
    if not hasattr(model, "conjugate_prior"):
        raise ValueError(
            f"kl='rao-blackwell' needs a sampler that draws theta from conjugate conditionals p(theta | s) (the "
            f"Gibbs sampler of bayesval.models.LinearRegression); {model.name} does not give them (no "
            "conjugate_prior); use kl='auto', 'prior-density' or 'two-sample'"
        )
    return model.conjugate_prior(data)


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


class SurpriseGame(NamedTuple):
    """What a coalition's surprise is a function of: the model, the released statistics (`NoiseAwareData`), the
    sampler settings, the neighbours k and the KL estimator ('prior-density', 'two-sample' or 'rao-blackwell').
    Read-only: the reward mechanisms (`bayesval.parties.rewards.sampling`) build their modified inputs from `data`
    and size their trials by `config`."""

    model: object
    data: NoiseAwareData
    config: SamplerConfig
    k: int
    kl_estimator: str

    @property
    def num_parties(self) -> int:
        return int(self.data.counts.shape[0])


UNFINGERPRINTED = ("progress_bar", "reruns", "sampled_repeats")  # sampler settings two runs of one game may differ in


def game_fingerprint(game: SurpriseGame) -> str:
    """What makes two valuations the same game, hashed (hex SHA-256): the model's name and simple settings, every
    sampler setting but the progress bar and the reruns, k, the KL estimator and the released statistics. Not the
    key, nor the reruns: estimates from any key, and a rerun's, are estimates of the same values, so a result of the
    same game may be resumed with another key or another number of reruns. Nor `sampled_repeats`: the repeats the
    game ran are its num_repeats (`SamplerConfig.for_sampled_game`)."""
    settings = {name: value for name, value in vars(game.config).items() if name not in UNFINGERPRINTED}
    if hasattr(game.model, "kernel"):  # a NUTS model: its kernel settings stand where the config held them
        effective = game.model.kernel_settings(game.config)
        settings |= {name: float(getattr(effective, name)) for name in KERNEL_FIELDS}
    simple = (int, float, str, bool, type(None))
    model_settings = {
        name: value
        for name, value in vars(game.model).items()
        if isinstance(value, simple) and name not in KERNEL_FIELDS
    }
    digest = hashlib.sha256(repr((game.model.name, sorted(model_settings.items()), settings, game.k)).encode())
    digest.update(game.kl_estimator.encode())
    for array in game.data:
        digest.update(np.ascontiguousarray(np.asarray(array, np.float64)).tobytes())
    return digest.hexdigest()


class _RowsOfWidth(NamedTuple):
    """The rows of one sampler width: calls of up to `batch_rows` rows (`_padded_batches`), each row's key, packed
    mask, repeat and packed releases, whether its draws are kept, and the budget they are sampled with (the game's,
    or a rerun's)."""

    config: SamplerConfig
    batch_rows: int
    keys: jax.Array  # (rows,)
    masks: np.ndarray
    repeats: list[int]
    inputs: list
    keep: np.ndarray


class _BatchInputs(NamedTuple):
    """A padded batch as this process samples it (`CoalitionSurprise._batch_inputs`): its budget, keys, masks and
    releases per row, the prior draws per row for the two-sample KL (else None), and the run of rows R-hat pools."""

    config: SamplerConfig
    keys: jax.Array
    masks: jax.Array
    data: NoiseAwareData
    prior: np.ndarray | None
    group: int


class _CoalitionRun(NamedTuple):
    """One coalition's repeats as a sampler call left them: the KL per repeat (a repeat that kept no chain takes the
    others' mean), the worst R-hat and bulk ESS over its repeats, its dropped chains and divergences, its draws
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

    @property
    def converged(self) -> bool:
        """Within the flags: R-hat <= 1.01 over its repeats' chains and bulk ESS >= 400 in every repeat."""
        return self.r_hat <= R_HAT_THRESHOLD and self.ess >= ESS_THRESHOLD


class CoalitionSurprise:
    """v_C of coalition masks, per repeat, sampled on demand and cached by coalition.

    `surprise(masks)` returns the (num_repeats, B) KL estimates of masks (B, n) (the empty coalition is 0).
    `values` maps each sampled coalition's bitmask to its (num_repeats,) estimates; `diagnostics` holds
    R-hat, bulk ESS, dropped chains and divergences per sampled coalition. A batch of rows goes from the
    sampler to KL and diagnostics on the device (`summarise`); the host only files the results.

    The public surface other modules read: `game` (a read-only `SurpriseGame`), `batch_rows` (rows per sampler
    call at most) and `rows_per_batch(width)` (for the coalitions of one `width`), `of_inputs` (the surprise of
    modified releases, for rewards), `prior_draws`, `estimates()` (the typed resume state) and `restore`. The
    attributes `model`, `data`, `config` and `k` are kept for older callers.
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
    ) -> None:
        self.model, self.data, self.config, self.k = model, data, config, k
        # with keep_draws, each sampled coalition's posterior draws (repeats, chains, kept, d), on the host
        self.draws: dict[int, np.ndarray] | None = {} if keep_draws else None
        # the coalitions (bitmasks) whose draws are kept pooled over repeats and kept chains (m, d) once sampled:
        # the rewards' grand coalition and each party alone, whose draws the reward metrics compare
        self._pooled_codes = frozenset(int(code) for code in pooled_draws_of)
        self.pooled_draws: dict[int, np.ndarray] = {}
        self.key_posterior, self.key_prior = jax.random.split(key)
        self.values: dict[int, np.ndarray] = {0: np.zeros(config.num_repeats)}
        self.diagnostics: dict = {"converged": True, "coalitions": [], "r_hat": [], "ess": []}
        self.diagnostics |= {"dropped_chains": [], "divergences": [], "reruns": []}
        self._draw_dimension = draw_dimension(model, data)
        self.batch_rows = batch_rows(
            model, data, config, max_coalitions * config.num_repeats, kl, dimension=self._draw_dimension
        )
        self._log_density = prior_density(model, data, kl)
        self._conjugate_prior = conjugate_prior(model, data, kl)
        if self._conjugate_prior is not None:
            self.kl_estimator = "rao-blackwell"
        else:
            self.kl_estimator = "two-sample" if self._log_density is None else "prior-density"
        self._prior_samples: dict[int, np.ndarray] = {}
        if jax.process_count() > 1:  # the processes that split one valuation value one game with one key
            key_data = np.asarray(jax.random.key_data(key)).tobytes()
            # the reruns too: a process that reruns a coalition meets the others in its sampler calls
            game = f"{self.fingerprint}; reruns {config.reruns}".encode()
            same_in_every_process("game, reruns or key", hashlib.sha256(game + key_data).digest())

    @property
    def game(self) -> SurpriseGame:
        """The game this surprise values (model, releases, sampler settings, k, KL estimator)."""
        return SurpriseGame(self.model, self.data, self.config, self.k, self.kl_estimator)

    @property
    def fingerprint(self) -> str:
        """`game_fingerprint` of this game: equal for two valuations whose estimates can stand in for each other."""
        return game_fingerprint(self.game)

    def prior_draws(self, key: jax.Array, num_draws: int) -> np.ndarray:
        """`num_draws` draws (num_draws, d) of the prior p(theta) of this game's model and releases."""
        return np.asarray(self.model.prior_draws(key, self.data, num_draws))

    def width(self, size: int) -> int:
        """The party slots the sampler is given for a coalition of `size` members: its `member_width` where the
        model packs members (`packs_members`) and the budget makes it pay (`worth_packing`), else every party."""
        num_parties = int(self.data.counts.shape[0])
        if getattr(self.model, "packs_members", False) and worth_packing(self.config):
            return member_width(size, num_parties)
        return num_parties

    def rows_per_batch(self, width: int) -> int:
        """Rows per sampler call for the coalitions given `width` party slots: `batch_rows`, or fewer where every
        coalition of that width, times the repeats, fits in fewer. A call is padded to this size (its width's last
        call, on CPU, to `call_rows`), so a width has few compiled programs, and it is never larger than the width's
        rows: padding them all to the whole game's batch would sample up to three times the rows packing leaves."""
        rows = padded_size(self._coalitions_of_width(width) * self.config.num_repeats, jax.device_count())
        return min(self.batch_rows, rows)

    def _coalitions_of_width(self, width: int) -> int:
        """The number of the game's coalitions that the sampler is given `width` party slots for."""
        num_parties = int(self.data.counts.shape[0])
        return sum(math.comb(num_parties, size) for size in range(1, num_parties + 1) if self.width(size) == width)

    def sampler_calls(self, sizes) -> int:
        """The sampler calls that sampling coalitions of these `sizes` (every repeat of each) takes."""
        counts = np.bincount([self.width(int(size)) for size in sizes]) if len(sizes) else np.zeros(0, int)
        return sum(self._calls_at(width, int(count)) for width, count in enumerate(counts) if count)

    def _calls_at(self, width: int, coalitions: int) -> int:
        """The padded sampler calls of `width` (`rows_per_batch`) that every repeat of `coalitions` posteriors takes."""
        repeats = self.config.num_repeats
        return math.ceil(coalitions * repeats / whole_runs(self.rows_per_batch(width), repeats))

    def _rerun_width(self, failed: list[int], codes: list[int]) -> int:
        """The party slots a rerun samples the `failed` coalitions with, all of them at one width: among the widths
        of this call's `codes` (their programs compiled), those that hold every failed coalition's members, the one
        whose calls would carry the fewest party slots if each held every coalition of its width (calls x coalitions
        of the width x width; the smallest on a tie). On an accelerator a call is padded to its width's rows, so a
        few slow coalitions of a populous width cost less in a sparse wider one: of 12 parties with 32 GiB a call, a
        call of width 8 is 9,009 rows and one of width 12 is 897. (On CPU the rerun's call is cut to its rows,
        `call_rows`, and the narrowest width that holds them would often do; the ranking is kept everywhere so that
        the width does not depend on the platform either.) The ranking counts the game's coalitions, not the
        rows a call holds, so the width, and with it the rerun's estimates (a coalition at all n slots is not packed,
        so its chains draw other keys), does not depend on the batch size, the devices or the processes."""
        needed = max(self.width(code.bit_count()) for code in failed)
        widths = sorted({self.width(code.bit_count()) for code in codes} - set(range(needed)))
        held = {width: self._coalitions_of_width(width) for width in widths}
        return min(widths, key=lambda width: math.ceil(len(failed) / held[width]) * held[width] * width)

    def estimates(self) -> CoalitionEstimates:
        """Every sampled coalition's estimates with this game's fingerprint: the state a result carries so that a
        later valuation of the same game resumes (`restore`) instead of sampling them again."""
        codes = sorted(set(self.values) - {0})
        return CoalitionEstimates(self.fingerprint, {code: self.values[code] for code in codes})

    def restore(self, state: CoalitionEstimates, diagnostics: dict) -> None:
        """Take the coalition estimates (`state`, of this game: the caller compares fingerprints) and the
        per-coalition diagnostics of an earlier valuation (its result's `diagnostics`, saved and loaded or not):
        those coalitions are not sampled again, and the diagnostics go on from theirs."""
        self.values.update({int(code): np.asarray(value, np.float64) for code, value in state.estimates.items()})
        for name in ("coalitions", "r_hat", "ess", "dropped_chains", "divergences"):
            self.diagnostics[name] = list(diagnostics[name])
        # a result saved before reruns existed: none of its coalitions was rerun
        self.diagnostics["reruns"] = list(diagnostics.get("reruns", [0] * len(diagnostics["coalitions"])))
        self.diagnostics["converged"] = bool(diagnostics["converged"])

    @property
    def num_sampled(self) -> int:
        return len(self.values) - 1

    def __call__(self, masks: np.ndarray) -> np.ndarray:
        masks = np.asarray(masks, bool)
        codes = mask_codes(masks)
        new = [int(c) for c in dict.fromkeys(codes.tolist()) if c not in self.values]
        if new:
            self._sample(new, masks.shape[1])
        return np.stack([self.values[int(c)] for c in codes], axis=1)

    def _sample(self, codes: list[int], num_parties: int) -> None:
        """Sample every repeat of the coalitions `codes`, rerun the few that fail the convergence flags
        (`SamplerConfig.reruns`, `RERUN_SHARE`, counted among these `codes`: the coalitions of one call), and file
        each one's estimates, draws and diagnostics. A rerun that loses every chain of some coalition (NUTS's BFMI
        rule, stuck chains) leaves the estimates before it standing, flagged unconverged."""
        runs = self._sample_coalitions(codes, num_parties, self.config, self.key_posterior)
        for attempt in range(1, self.config.reruns + 1):
            failed = [code for code in codes if not runs[code].converged]
            if not failed or len(failed) > max(1, RERUN_SHARE * len(codes)):
                break
            label = f"rerun of {len(failed)} unconverged coalition posteriors with {2**attempt}x the sweeps"
            width = self._rerun_width(failed, codes)
            try:
                with progress.stage(label, calls=self._calls_at(width, len(failed))):
                    runs |= self._sample_coalitions(
                        failed, num_parties, self.config.rerun(attempt), self._rerun_key(attempt), attempt, width
                    )
            except RuntimeError:  # the rerun lost every chain of some coalition: the first estimates stand, flagged
                break
        for code in codes:
            self._file(code, runs[code], num_parties)

    def _rerun_key(self, attempt: int) -> jax.Array:
        """The key the rows of the `attempt`-th rerun are folded from (`coalition_keys`): the posterior key folded
        with 0, the code of the empty coalition, which is never sampled, so no coalition's row key, nor any key
        folded from one, is on this stream; then with the attempt."""
        return jax.random.fold_in(jax.random.fold_in(self.key_posterior, 0), attempt)

    def _sample_coalitions(
        self,
        codes: list[int],
        num_parties: int,
        config: SamplerConfig,
        key: jax.Array,
        reruns: int = 0,
        width: int | None = None,
    ) -> dict[int, _CoalitionRun]:
        """Every repeat of the coalitions `codes` sampled with the budget `config`, row (code, repeat) from
        `coalition_keys(key, ...)`, each at its own `width` or all at the one given: each coalition's
        `_CoalitionRun`, the draws kept where this game keeps them."""
        repeats = config.num_repeats
        rows = [(code, repeat) for code in codes for repeat in range(repeats)]
        masks = (np.array([code for code, _ in rows])[:, None] >> np.arange(num_parties)) & 1
        keys = coalition_keys(key, [code for code, _ in rows], [repeat for _, repeat in rows])
        with_draws = np.array([self.draws is not None or code in self._pooled_codes for code in codes])
        kl, r_hat, ess, dropped, divergences, row_draws, row_kept = self._sample_rows(
            keys,
            masks.astype(bool),
            [repeat for _, repeat in rows],
            keep_draws=np.repeat(with_draws, repeats),
            config=config,
            width=width,
        )
        by_code = (len(codes), repeats)
        kl = kl.reshape(by_code)
        if np.isnan(kl).all(axis=1).any():
            raise RuntimeError(
                "every chain of some coalition posterior was dropped (low BFMI or stuck); raise num_warmup"
            )
        kl = np.where(np.isnan(kl), np.nanmean(kl, axis=1, keepdims=True), kl)  # a repeat without chains
        drawn = iter(row_draws.reshape((-1, repeats) + row_draws.shape[1:]) if with_draws.any() else ())
        kept = row_kept.reshape(by_code + row_kept.shape[1:])
        r_hat, ess = r_hat.reshape(by_code).max(axis=1), ess.reshape(by_code).min(axis=1)
        dropped, divergences = dropped.reshape(by_code).sum(axis=1), divergences.reshape(by_code).sum(axis=1)
        return {
            code: _CoalitionRun(
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

    def _file(self, code: int, run: _CoalitionRun, num_parties: int) -> None:
        """Keep a sampled coalition's estimates, its draws where this game keeps them, and its diagnostics."""
        self.values[code] = run.kl
        if self.draws is not None:
            self.draws[code] = run.draws
        if code in self._pooled_codes:
            self.pooled_draws[code] = run.draws[run.kept].reshape(-1, run.draws.shape[-1])
        self.diagnostics["coalitions"].append(((code >> np.arange(num_parties)) & 1).tolist())
        self.diagnostics["r_hat"].append(run.r_hat)
        self.diagnostics["ess"].append(run.ess)
        self.diagnostics["dropped_chains"].append(run.dropped)
        self.diagnostics["divergences"].append(run.divergences)
        self.diagnostics["reruns"].append(run.reruns)
        self.diagnostics["converged"] &= run.converged

    def of_inputs(self, key: jax.Array, inputs: list, masks: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The surprise of coalition masks (J, n) under modified releases, one `NoiseAwareData` per mask (the reward
        mechanisms' tempered or noisier inputs, Sim et al. 2023, App. E.3), against this game's prior: estimates
        (num_repeats, J) and, for each mask, the draws of every chain it kept (m_j, d), pooled over repeats (NUTS
        chains dropped for low BFMI are left out, as in the estimates). Rows of every variant share the
        valuation's compiled batch shapes (`_padded_batches`); row (j, repeat) samples from
        `coalition_keys(key, [j], [repeat])`. Not cached."""
        repeats = self.config.num_repeats
        rows = [(j, repeat) for j in range(len(inputs)) for repeat in range(repeats)]
        kl, *_, draws, kept = self._sample_rows(
            coalition_keys(key, [j for j, _ in rows], [repeat for _, repeat in rows]),
            np.repeat(np.asarray(masks, bool), repeats, axis=0),
            [repeat for _, repeat in rows],
            inputs=[inputs[j] for j, _ in rows],
            keep_draws=True,
        )
        kl = kl.reshape(len(inputs), repeats)
        if np.isnan(kl).all(axis=1).any():
            raise RuntimeError("every chain of some reward posterior was dropped (low BFMI or stuck); raise num_warmup")
        kl = np.where(np.isnan(kl), np.nanmean(kl, axis=1, keepdims=True), kl)
        by_input = (len(inputs), repeats * draws.shape[1])  # (J, repeats x chains)
        draws, kept = draws.reshape(by_input + draws.shape[2:]), kept.reshape(by_input)
        return kl.T, [d[k].reshape(-1, d.shape[-1]) for d, k in zip(draws, kept)]

    def _sample_rows(
        self,
        keys: jax.Array,
        masks: np.ndarray,
        repeats: list[int],
        inputs=None,
        keep_draws=False,
        config: SamplerConfig | None = None,
        width: int | None = None,
    ):
        """Rows (key, mask, repeat[, releases]) sampled to KL and diagnostics on the device: per row KL (NaN without
        kept chains), max R-hat, min ESS, dropped chains, divergences, the draws (rows, chains, kept, d) of the rows
        `keep_draws` asks for (True: every row; or one bool per row; None if none), in row order, and which chains
        were kept (rows, chains). Only the asked rows' draws are held on the host. Where the model packs members
        (`packs_members`), each row passes the sampler only its coalition's members, padded to its `member_width`,
        and the rows of one width are batched together, the next width's programs compiling while one width samples
        (`_compile_for_later`); the outputs come back in the rows' order. `config`: the budget, the game's unless a
        rerun's (`SamplerConfig.rerun`). `width`: every row's party slots, at least its members (`_rerun_width`),
        instead of each row's own."""
        masks = np.asarray(masks, bool)
        inputs = [self.data] * len(keys) if inputs is None else list(inputs)
        if width is None:
            widths = np.array([self.width(int(size)) for size in masks.sum(axis=1)], int)
        else:
            widths = np.full(len(keys), width)
        keep = np.broadcast_to(np.asarray(keep_draws, bool), (len(keys),))
        position = np.cumsum(keep) - 1  # a kept row's index among the returned draws
        by_width = []
        for slots in np.unique(widths):
            rows = np.flatnonzero(widths == slots)
            packed = [inputs[row].members(masks[row], int(slots)) for row in rows]
            rows_of_width = _RowsOfWidth(
                self.config if config is None else config,
                self.rows_per_batch(int(slots)),
                keys[rows],
                np.stack([mask for _, mask in packed]),
                [repeats[row] for row in rows],
                [data for data, _ in packed],
                keep[rows],
            )
            by_width.append((rows, rows_of_width))
        outputs, draws, compiling = None, None, None
        for index, (rows, rows_of_width) in enumerate(by_width):
            if compiling is not None:  # this width's programs, compiling since the width before began: finish them
                wait([compiling])
            compiling = None  # the next width's programs compile while this width samples
            if index + 1 < len(by_width):
                compiling = self._compile_for_later(by_width[index + 1][1])
            *per_row, group_draws, group_kept = self._sample_batches(rows_of_width)
            if outputs is None:
                outputs = [np.empty((len(keys),) + part.shape[1:], part.dtype) for part in (*per_row, group_kept)]
            for output, part in zip(outputs, (*per_row, group_kept)):
                output[rows] = part
            if group_draws is not None:
                if draws is None:
                    draws = np.empty((int(keep.sum()),) + group_draws.shape[1:], group_draws.dtype)
                draws[position[rows[keep[rows]]]] = group_draws
        *per_row, kept = outputs
        return (*per_row, draws, kept)

    def _sample_batches(self, rows: _RowsOfWidth):
        """`_sample_rows` for rows whose releases (one `NoiseAwareData` each) have one width, in the padded batches
        of `_padded_batches` (`_sample_batch`); the draws of the rows `rows.keep` marks (one bool per row), or None.
        Where the rows come as runs of every repeat of one posterior (as `_sample` and `of_inputs` build them), no
        run is split between calls, so that each posterior's R-hat is computed over the chains of all its
        repeats."""
        num_rows = len(rows.keys)
        kl, r_hat, ess = np.full(num_rows, np.nan), np.full(num_rows, np.inf), np.zeros(num_rows)
        dropped, divergences = np.zeros(num_rows, int), np.zeros(num_rows, int)
        row_draws, row_kept = [], []
        for here, batch in self._padded_batches(rows):
            wanted = rows.keep[here]
            sampled = self._sample_batch(batch, bool(wanted.any()))
            rows_here = {name: values[: here.stop - here.start] for name, values in sampled.items()}
            if wanted.any():
                row_draws.append(rows_here["draws"][wanted])
            row_kept.append(rows_here["kept"])
            any_kept = rows_here["kept"].any(axis=1)
            kl[here] = np.where(any_kept, rows_here["kl"], np.nan)
            r_hat[here] = np.where(any_kept, rows_here["r_hat"], np.inf)
            ess[here] = np.where(any_kept, rows_here["ess"], 0.0)
            dropped[here] = (~rows_here["kept"]).sum(axis=1)
            if "divergences" in rows_here:
                divergences[here] = rows_here["divergences"].sum(axis=1)
            if (any_kept & np.isnan(rows_here["kl"])).any():
                raise RuntimeError(self._unestimated())
        draws = np.concatenate(row_draws) if row_draws else None
        return kl, r_hat, ess, dropped, divergences, draws, np.concatenate(row_kept)

    def _repeat_runs(self, repeats: list[int], batch_rows: int) -> int:
        """`num_repeats` where the rows are runs of repeats 0, 1, ..., num_repeats - 1 (one posterior each) and a
        call holds at least one run, else 1."""
        runs = self.config.num_repeats
        if runs == 1 or batch_rows < runs or len(repeats) % runs:
            return 1
        return runs if np.array_equal(repeats, np.tile(np.arange(runs), len(repeats) // runs)) else 1

    def _padded_batches(self, rows: _RowsOfWidth) -> Iterator[tuple[slice, _BatchInputs]]:
        """Each sampler call of `rows`: the rows it holds and its padded inputs (`_batch_inputs`), in order, made as
        they are asked for. Calls hold up to `rows.batch_rows` rows, padded to that size, or where the game's budget
        makes it pay (`cuts_calls`) to `call_rows`: in practice a width's last call, which holds what is left. Runs
        of a posterior's repeats are never split between calls (`_repeat_runs`). Releases per row, the valuation's
        own or a reward's modified ones: one compiled program serves both."""
        group = self._repeat_runs(rows.repeats, rows.batch_rows)
        cut, devices = cuts_calls(self.config), jax.device_count()
        for batch in batches(len(rows.keys), whole_runs(rows.batch_rows, group)):
            here = slice(batch.start, batch.stop)
            inputs = (rows.keys[here], rows.masks[here], rows.repeats[here], rows.inputs[here])
            size = call_rows(batch.stop - batch.start, rows.batch_rows, devices * group) if cut else rows.batch_rows
            yield here, self._batch_inputs(rows.config, size, *inputs, group)

    def _batch_inputs(
        self,
        config: SamplerConfig,
        batch_rows: int,
        keys: jax.Array,
        masks: np.ndarray,
        repeats: list[int],
        row_inputs: list,
        group: int,
    ) -> _BatchInputs:
        """One batch of rows padded to `batch_rows`, as this process samples it: its block of the global device mesh
        (`process_block`), sharded over its devices; with one process, the block is the batch. Runs of `group` rows
        are one posterior's repeats: R-hat pools their chains (`summarise`) where the block starts a run."""
        padding = batch_rows - len(keys)
        block = process_block(batch_rows)
        chunk_keys, chunk_masks = shard_rows(pad_rows(keys, batch_rows)[block], pad_rows(masks, batch_rows)[block])
        data = NoiseAwareData.per_row((row_inputs + [row_inputs[0]] * padding)[block])
        prior = None
        if self._log_density is None and self._conjugate_prior is None:
            repeat_of_row = (repeats + [repeats[0]] * padding)[block]
            prior = np.stack([self._prior_sample(repeat) for repeat in repeat_of_row])
        return _BatchInputs(config, chunk_keys, chunk_masks, data, prior, group if block.start % group == 0 else 1)

    def _summary_program(self, batch: _BatchInputs) -> Program:
        """The k-NN summary program (`summarise`) of a batch's draws."""
        config = batch.config
        shape = (len(batch.keys), config.num_chains, config.num_samples // config.thinning, self._draw_dimension)
        draws, kept = jax.ShapeDtypeStruct(shape, np.float64), jax.ShapeDtypeStruct(shape[:2], bool)
        return Program(summarise, (draws, kept, self.k, self._log_density, batch.prior), {"group": batch.group})

    def _compile_for_later(self, rows: _RowsOfWidth) -> Future | None:
        """Start compiling the programs of the first batch of `rows` in the background (`compile_for_later`): the
        model's sampler programs where it names them (`posterior_programs`) and the k-NN summary. None where the
        model does not name them."""
        if not hasattr(self.model, "posterior_programs"):
            return None
        _, batch = next(self._padded_batches(rows))
        arguments = (batch.keys, batch.data, batch.masks, batch.config)
        if self._conjugate_prior is None:
            return compile_for_later(self.model.posterior_programs(*arguments) + [self._summary_program(batch)])
        return compile_for_later(self.model.posterior_programs(*arguments, conditionals=True))

    def _sample_batch(self, batch: _BatchInputs, keep_draws: bool):
        """One batch (`_batch_inputs`), sampler to KL and diagnostics on the device, on the host for every padded
        row: 'kl', 'r_hat' (max), 'ess' (min bulk), 'kept' chains (rows, chains), 'divergences' per chain where the
        sampler counts them, and the 'draws' with `keep_draws`. Every process's block is gathered into every
        process (`gather_rows`)."""
        mixture, summary_program = {}, None
        if self._conjugate_prior is None:
            # the k-NN summary compiles while the sampler compiles and runs (bayesval.compilation)
            summary = self._summary_program(batch)
            summary_program = compile_ahead(summary.function, *summary.args, **summary.kwargs)
            sample = self.model.posterior_draws(batch.keys, batch.data, batch.masks, batch.config)
        else:  # the conditionals, and a key per row for the points the mixture is scored at
            sample = self.model.posterior_draws(batch.keys, batch.data, batch.masks, batch.config, conditionals=True)
            keys_of_points = jax.vmap(partial(jax.random.fold_in, data=_MIXTURE_STREAM))(batch.keys)
            mixture = dict(conditionals=sample.conditionals, conjugate=self._conjugate_prior, keys=keys_of_points)
        draws, kept = jax.numpy.asarray(sample.draws), jax.numpy.asarray(sample.kept_chains)
        if summary_program is not None:
            summary_program.result()
        summary = summarise(draws, kept, self.k, self._log_density, batch.prior, **mixture, group=batch.group)
        rows = dict(zip(("kl", "r_hat", "ess"), summary))
        rows["kept"] = kept
        if sample.info.get("divergences") is not None:
            rows["divergences"] = sample.info["divergences"]
        if keep_draws:
            rows["draws"] = draws
        return gather_rows(rows)

    def _unestimated(self) -> str:
        """Why a coalition posterior's KL came out NaN, by estimator."""
        if self.kl_estimator == "rao-blackwell":
            return (
                "kl='rao-blackwell': the Gibbs conditionals p(theta | s_C) of some coalition are too narrow for their "
                f"mixture to give its entropy (its leave-one-out and own-included estimates differ by more than "
                f"{MIXTURE_GAP} nats): DP noise dominates there; use kl='prior-density' (docs/architecture.md)"
            )
        return (
            f"more than {EXTRA_NEIGHBOURS} identical draws around some point of a coalition posterior: the sampler is "
            "stuck (raise num_warmup, or check the model)"
        )

    def _prior_sample(self, repeat: int) -> np.ndarray:
        """The prior draws every coalition of `repeat` is compared with (two-sample estimator)."""
        if repeat not in self._prior_samples:
            key = jax.random.fold_in(self.key_prior, repeat)
            self._prior_samples[repeat] = self.model.prior_draws(key, self.data, self.config.draws_per_repeat)
        return self._prior_samples[repeat]


def per_repeat(estimates: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Mean and standard error over the leading (repeat) axis of per-repeat estimates."""
    estimates = np.asarray(estimates, np.float64)
    return estimates.mean(axis=0), estimates.std(axis=0, ddof=1) / np.sqrt(len(estimates))
