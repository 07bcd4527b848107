"""The run budget of the coalition samplers: `SamplerConfig`, its checks and its presets (fast defaults for
interactive use and the papers' settings).

Settings are split the NumPyro way (`numpyro.infer.MCMC` holds chains, warm-up, samples and thinning; the kernel,
`NUTS(...)`, holds its own settings): `SamplerConfig` is the budget of a run, while a kernel's settings belong to
the model that owns the kernel (`NumPyroModel(target_accept_prob=, max_tree_depth=, min_bfmi=)`, the Gibbs moves
of `LinearRegression`). For one release `SamplerConfig` still takes `target_accept_prob` and `min_bfmi` and
forwards them to the NUTS kernel, over the model's own; passing one explicitly warns (`KERNEL_FIELDS`), and so does
the NUTS 'paper' preset's target acceptance where a run uses it over the model's (`PresetKernel`).
"""

from __future__ import annotations

import re
import warnings
from dataclasses import dataclass, fields, replace
from difflib import get_close_matches
from typing import NamedTuple

from bayesval.validation import (
    check_bool,
    check_count,
    check_non_negative,
    check_positive,
    check_probability,
    user_stacklevel,
)

KERNEL_FIELDS = ("target_accept_prob", "min_bfmi")
# The NUTS fast preset's sweeps where chains start warm (`SamplerConfig.for_start`): warm-up then adapts the step
# size alone, and the draws of a dense mass matrix fitted to the posterior mix ~1.8x better per draw (min bulk ESS
# 0.36-0.39 per draw against 0.21 from prior starts on the three Pima hospitals, docs/benchmarks.md)
WARM_WARMUP = 100
WARM_SAMPLES = 325
SAMPLED_REPEATS = 2  # the Gibbs presets' repeats of a coalition where the Shapley values are sampled (`SamplerConfig`)


class ModelDefault(float):
    """A kernel field of `SamplerConfig` that the user left alone: the model's own setting applies. A float of the
    value the field had before the split (so the config's repr, equality and saved diagnostics are as before),
    told apart from a value the user passed by its type."""

    def __repr__(self) -> str:
        return float.__repr__(self)

    def __reduce__(self):
        return (ModelDefault, (float(self),))


class PresetKernel(float):
    """A kernel field that a preset set: the NUTS 'paper' preset's target_accept_prob 0.86 (Sim et al. 2023, App.
    H.1), forwarded to the model's kernel for one release; a run whose model holds another value warns
    (`SamplerConfig.overriding`). Kernel settings are the model's: the next release's presets are run budgets only.
    A float of the value (the config's repr, equality and saved diagnostics are as before), told apart by its type."""

    def __repr__(self) -> str:
        return float.__repr__(self)

    def __reduce__(self):
        return (PresetKernel, (float(self),))


class RunBudget(NamedTuple):
    """What a sampler call spends on each coalition posterior (`SamplerConfig.budget`): its chains, warm-up
    sweeps, sweeps after warm-up and thinning (as NumPyro's `MCMC` takes them), and the memory one device may use for
    the draws of one batch of posteriors."""

    num_chains: int
    num_warmup: int
    num_samples: int
    thinning: int
    memory_limit_mb: float


class ValuationPolicy(NamedTuple):
    """How a party valuation spends those budgets (`SamplerConfig.policy`): the independent repeats of each
    coalition posterior (`sampled_repeats` where the Shapley values are sampled, None: num_repeats), the reruns of
    an unconverged one, whether progress is shown (the one field a sampler call is handed too), the chains of a
    repeat where the Shapley values are sampled (`sampled_chains`; None: num_chains), and the warm-up and sweeps
    where a NUTS model's chains start warm (`SamplerConfig.for_start`; None: the budget's)."""

    num_repeats: int
    sampled_repeats: int | None
    reruns: int
    progress_bar: bool
    sampled_chains: int | None = None
    warm_warmup: int | None = None
    warm_samples: int | None = None


def _kernel_field_warning(names, stacklevel: int) -> None:
    warnings.warn(
        f"SamplerConfig({', '.join(f'{name}=...' for name in names)}): kernel settings belong to the model now "
        "(e.g. bayesval.models.NumPyroModel(..., target_accept_prob=0.86, min_bfmi=0.3), "
        "LogisticRegression(target_accept_prob=...)); the value is forwarded to the NUTS kernel for one release",
        DeprecationWarning,
        stacklevel=stacklevel,
    )


@dataclass(frozen=True)
class SamplerConfig:
    """How much MCMC one coalition posterior gets, and how many independent repeats value it: two typed parts in
    one config, the run budget of each sampler call (`budget`, a `RunBudget`: chains, warm-up, samples, thinning,
    memory) and the valuation policy (`policy`, a `ValuationPolicy`: repeats, sampled repeats, reruns, progress bar).
    Kernel settings are neither: they are the model's (`kernel_settings(data)`).

    num_samples sweeps follow num_warmup burn-in sweeps; every thinning-th is kept (NumPyro's
    convention), so one repeat yields num_chains * num_samples / thinning draws. Each repeat runs
    fresh chains and a fresh prior sample and gives one KL estimate; their spread is the stderr.

    Every field is checked on construction (and so by `with_`): the counts are ints (num_warmup >= 0,
    the others >= 1, num_repeats >= 2 since one repeat has no spread; none above 2^31 - 1), num_samples a
    multiple of thinning, progress_bar a bool, target_accept_prob in (0, 1), min_bfmi a finite number >= 0 and
    memory_limit_mb > 0: the memory one device may use for the draws of one batch of coalition posteriors
    (batches are chunked to it), reruns an int >= 0.

    reruns: how many times a coalition posterior whose chains fail the convergence flags (R-hat over its repeats'
    chains > 1.01, or a repeat's bulk ESS < 400) is sampled again, from fresh chains, each time with twice the
    sweeps of the time before thinned twice as much (`rerun`), so that its draws per chain stay the same, in calls
    of its own rows where calls are cut (`bayesval.parties.plan.rerun_rows`). Only where those coalitions are few
    among the ones sampled together (`bayesval.parties.reruns.RERUN_SHARE`): when most fail, the budget is short for
    the game, and the valuation warns instead. A rerun's estimates replace the failed ones. The importance route
    draws a coalition again up to twice as many times, with 4 times the inner draws each time up to 16 times the
    first's (`bayesval.parties.importance.MOST_INNER_ATTEMPT`), and one it does not
    trust twice more from fresh keys, before it leaves it to the chains
    (`bayesval.parties.importance.RERUNS_PER_CHAIN_RERUN`, `UNTRUSTED_RETRIES`; docs/importance.md, "When it draws
    again").

    sampled_repeats: the repeats of a coalition where the Shapley values are sampled rather than enumerated
    (`for_sampled_game()`; None: num_repeats, >= 2 like it). There a Shapley value's standard error comes from the
    spread of the parties' marginal contributions over the coalitions drawn, and a coalition's Monte Carlo error
    adds a few per cent to their variance, so a repeat more buys less precision than the same sweeps spent on more
    coalitions: the Gibbs presets take 2, the fewest that have a spread (measured on Syn: docs/benchmarks.md, "Fewer
    repeats where coalitions are sampled"). The NUTS presets leave it None: on Diab split among 8 parties, whose
    marginals spread less, 2 repeats gave 0.93-1.31 times the precision per second of 3, no clear gain. A valuation
    that also rewards the parties keeps num_repeats (a reward's standard error comes from the repeats alone). A
    config built by hand leaves it None unless it sets it, and `with_(num_repeats=...)` (the CLI's --num-repeats)
    without it sets it to None: the repeats asked for hold in every game.

    sampled_chains: the chains of each repeat there (None: num_chains; the presets leave it None). A coalition's
    R-hat pools the chains of all its repeats and each repeat must reach a bulk ESS of 400, as everywhere; what a
    chain fewer saves is its warm-up, a third of a fast-preset chain's sweeps. With 2 (a sampled coalition's 2
    repeats then carry 4 chains, the fewest Vehtari et al. (2021) ask R-hat to pool) 12 parties were valued in 27
    minutes (a batch of permutations in 13.6 minutes against 21.4 with 4 chains) and agreed with their exact values,
    but 3 of 584 coalitions stayed below a bulk ESS of 400 after their rerun, so the valuation was flagged
    unconverged (docs/benchmarks.md, "Two chains a repeat where coalitions are sampled"): the presets keep their
    chains. `with_(num_chains=...)` (the CLI's --num-chains) without it sets it to None.

    warm_warmup, warm_samples: the warm-up and the sweeps after it where a NUTS model's chains start warm, from a
    Laplace fit of their coalition posterior with its covariance as a dense mass matrix (`for_start`; None: as
    from prior starts). Warm-up then adapts the step size alone, and the draws mix better, so the NUTS fast
    preset spends fewer sweeps there. `with_(num_warmup=...)` or `with_(num_samples=...)` (the CLI's
    --num-warmup, --num-samples) without its warm field clears it: the sweeps asked for hold from every start.

    target_accept_prob and min_bfmi are kernel settings, kept here for one release: left alone they are the
    model's (`kernel_overrides` is empty); given, they override the NUTS model's with a DeprecationWarning.
    """

    num_chains: int = 4
    num_warmup: int = 800
    num_samples: int = 1600
    thinning: int = 1
    num_repeats: int = 3
    progress_bar: bool = True
    target_accept_prob: float = ModelDefault(0.8)
    min_bfmi: float = ModelDefault(0.3)
    memory_limit_mb: float = 2048.0
    reruns: int = 1
    sampled_repeats: int | None = None
    sampled_chains: int | None = None
    warm_warmup: int | None = None
    warm_samples: int | None = None

    def __post_init__(self) -> None:
        minimums = {"num_chains": 1, "num_warmup": 0, "num_samples": 1, "thinning": 1, "num_repeats": 2, "reruns": 0}
        if self.sampled_repeats is not None:
            minimums["sampled_repeats"] = 2
        if self.sampled_chains is not None:
            minimums["sampled_chains"] = 1
        for name, minimum in (("warm_warmup", 0), ("warm_samples", 1)):
            if getattr(self, name) is not None:
                minimums[name] = minimum
        for name, minimum in minimums.items():
            self._set(name, check_count(f"SamplerConfig.{name}", getattr(self, name), minimum=minimum))
        self._set("progress_bar", check_bool("SamplerConfig.progress_bar", self.progress_bar))
        checks = {"target_accept_prob": check_probability, "min_bfmi": check_non_negative}
        for name, check in checks.items():
            if not isinstance(getattr(self, name), (ModelDefault, PresetKernel)):
                self._set(name, check(f"SamplerConfig.{name}", getattr(self, name)))
        self._set("memory_limit_mb", check_positive("SamplerConfig.memory_limit_mb", self.memory_limit_mb))
        if self.reruns >= 31 or self.num_samples >= 2 ** (31 - self.reruns):  # num_samples 2^reruns > 2^31 - 1
            raise ValueError(
                f"SamplerConfig: num_samples={self.num_samples} with reruns={self.reruns} would ask the last rerun for "
                f"num_samples x 2^{self.reruns} sweeps, past 2^31 - 1; lower reruns or num_samples"
            )
        for name in ("num_samples", "warm_samples"):
            if getattr(self, name) is not None and getattr(self, name) % self.thinning:
                raise ValueError(
                    f"SamplerConfig.{name}={getattr(self, name)} must be a multiple of thinning={self.thinning}"
                )
        given = list(self.kernel_overrides)
        if given and not _quiet:
            _kernel_field_warning(given, stacklevel=4)  # past __post_init__ and the dataclass's __init__

    def _set(self, name: str, value) -> None:
        """Store the checked value (a python int / bool / float even if a numpy scalar came in)."""
        object.__setattr__(self, name, value)

    @property
    def draws_per_repeat(self) -> int:
        return self.num_chains * self.num_samples // self.thinning

    def for_sampled_game(self) -> SamplerConfig:
        """The budget of a game whose coalitions are sampled: num_repeats = sampled_repeats and num_chains =
        sampled_chains where they are set."""
        sampled = {"num_repeats": self.sampled_repeats, "num_chains": self.sampled_chains}
        changes = {name: value for name, value in sampled.items() if value is not None}
        if not changes:
            return self
        with _quietly():
            return replace(self, **changes)

    def for_start(self, warm: bool) -> SamplerConfig:
        """The budget of a run whose chains start warm (`warm`: from a Laplace fit of their posterior, with a dense
        mass matrix, `bayesval.inference.warm_start`) or from prior draws: where they start warm, warm_warmup and
        warm_samples (where set) replace num_warmup and num_samples; either way the warm fields are cleared, so the
        config a result records is the budget that ran."""
        if self.warm_warmup is None and self.warm_samples is None:
            return self
        changes = {"warm_warmup": None, "warm_samples": None}
        if warm and self.warm_warmup is not None:
            changes["num_warmup"] = self.warm_warmup
        if warm and self.warm_samples is not None:
            changes["num_samples"] = self.warm_samples
        with _quietly():
            return replace(self, **changes)

    def rerun(self, attempt: int) -> SamplerConfig:
        """The budget of the `attempt`-th rerun of an unconverged coalition (`reruns`): 2^attempt times the sweeps
        after warm-up, every (thinning 2^attempt)-th kept, so each chain keeps num_samples / thinning draws, as
        before (and warm_samples / thinning where chains start warm); a budget that is not rerun itself (reruns 0)."""
        factor = 2**attempt
        warm = None if self.warm_samples is None else self.warm_samples * factor
        with _quietly():
            return replace(
                self,
                num_samples=self.num_samples * factor,
                thinning=self.thinning * factor,
                reruns=0,
                warm_samples=warm,
            )

    @property
    def kernel_overrides(self) -> dict:
        """The kernel settings passed to this config (deprecated), which override the model's: {} if none."""
        return {
            name: getattr(self, name) for name in KERNEL_FIELDS if not isinstance(getattr(self, name), ModelDefault)
        }

    def overriding(self, kernel_settings):
        """A model's `kernel_settings` (a NamedTuple, e.g. `NUTSSettings`) as a run under this config uses them:
        with every kernel field this config was passed (deprecated, `kernel_overrides`) that they hold over theirs.
        A field a preset set (`PresetKernel`) that changes the model's value warns, for one release."""
        fields_there = getattr(type(kernel_settings), "_fields", ())
        overrides = {name: value for name, value in self.kernel_overrides.items() if name in fields_there}
        changed = {
            name: (getattr(kernel_settings, name), value)
            for name, value in overrides.items()
            if isinstance(value, PresetKernel) and value != getattr(kernel_settings, name)
        }
        if changed:
            described = ", ".join(
                f"{name} {value:g} over the model's {own:g}" for name, (own, value) in changed.items()
            )
            settings = ", ".join(f"{name}={value:g}" for name, (_, value) in changed.items())
            warnings.warn(
                f"the 'paper' preset sets the NUTS kernel's {described}, for one release: kernel settings are the "
                f"model's (e.g. LogisticRegression({settings}) or NumPyroModel(..., {settings}), which the preset "
                "then leaves as they are); the next release's presets are run budgets only",
                DeprecationWarning,
                stacklevel=user_stacklevel(),
            )
        return kernel_settings._replace(**overrides) if overrides else kernel_settings

    @property
    def budget(self) -> RunBudget:
        """The run budget of a sampler call: `RunBudget`, the fields a model's `posterior_draws` reads."""
        return RunBudget(*(getattr(self, name) for name in RunBudget._fields))

    @property
    def policy(self) -> ValuationPolicy:
        """The valuation policy: `ValuationPolicy`, the fields the party valuation reads."""
        return ValuationPolicy(*(getattr(self, name) for name in ValuationPolicy._fields))

    @property
    def chain_settings(self) -> dict:
        """The per-call settings every coalition sampler takes (num_chains ... progress_bar)."""
        names = ("num_chains", "num_warmup", "num_samples", "thinning", "progress_bar")
        return {name: getattr(self, name) for name in names}

    def with_(self, **changes) -> SamplerConfig:
        """A copy with the given fields changed, checked like a new SamplerConfig."""
        valid = [f.name for f in fields(self)]
        unknown = [name for name in changes if name not in valid]
        if unknown:
            hints = []
            for name in unknown:
                close = get_close_matches(name, valid, n=1)
                hints.append(f"{name!r} (did you mean {close[0]!r}?)" if close else repr(name))
            raise TypeError(
                f"SamplerConfig.with_() got unknown field(s) {', '.join(hints)}; valid fields: {', '.join(valid)}"
            )
        for asked, sampled in (("num_repeats", "sampled_repeats"), ("num_chains", "sampled_chains")):
            if asked in changes and sampled not in changes:  # the repeats or chains asked for, in every game
                changes = changes | {sampled: None}
        for asked, warm in (("num_warmup", "warm_warmup"), ("num_samples", "warm_samples")):
            if asked in changes and warm not in changes:  # the sweeps asked for, from every start
                changes = changes | {warm: None}
        with _quietly():
            copy = replace(self, **changes)
        given = [name for name in KERNEL_FIELDS if name in changes]
        if given:  # a checked value, forwarded
            _kernel_field_warning(given, stacklevel=3)
        return copy

    BUDGET_FIELDS = (
        "num_chains",
        "num_warmup",
        "num_samples",
        "thinning",
        "num_repeats",
        "reruns",
        "sampled_repeats",
        "sampled_chains",
        "warm_warmup",
        "warm_samples",
    )

    @classmethod
    def add_arguments(cls, parser) -> None:
        """NumPyro-style budget flags on an argparse parser: --preset (fast / paper), and --num-chains,
        --num-warmup, --num-samples, --thinning, --num-repeats, --reruns, --sampled-repeats, --sampled-chains
        overriding the preset's fields."""
        group = parser.add_argument_group("sampler budget")
        group.add_argument(
            "--preset",
            default="fast",
            choices=["fast", "paper"],
            help="the budget to start from: fast (the default) or paper (Sim et al.'s precision, several times slower)",
        )
        helps = {
            "num_chains": "Markov chains per coalition posterior, in every game (without --sampled-chains)",
            "num_warmup": "warm-up steps per chain (discarded)",
            "num_samples": "draws kept per chain after warm-up (before thinning)",
            "thinning": "keep every THINNING-th draw",
            "num_repeats": "independent samplings of each coalition posterior (the ± comes from their spread), in "
            "every game (without --sampled-repeats)",
            "reruns": "times an unconverged coalition posterior is sampled again with twice the sweeps",
            "sampled_repeats": "repeats of a coalition where the Shapley values are sampled rather than enumerated",
            "sampled_chains": "chains a repeat where the Shapley values are sampled rather than enumerated",
            "warm_warmup": "warm-up sweeps per chain where NUTS chains start warm (from a Laplace fit)",
            "warm_samples": "sweeps after warm-up per chain where NUTS chains start warm",
        }
        for name in cls.BUDGET_FIELDS:
            flag, help_text = f"--{name.replace('_', '-')}", f"{helps[name]}; overrides the preset"
            group.add_argument(flag, type=int, default=None, help=help_text)

    @classmethod
    def from_arguments(cls, arguments, sampler: str = "gibbs", **changes) -> SamplerConfig:
        """The config the flags of `add_arguments` ask for (the preset of `sampler`, then the given fields, then
        `changes`); an error names the flag."""
        given = {name: getattr(arguments, name) for name in cls.BUDGET_FIELDS if getattr(arguments, name) is not None}
        try:
            return cls.preset(arguments.preset, sampler).with_(**given, **changes)
        except (TypeError, ValueError) as error:  # in the flags' words: --num-repeats, not SamplerConfig.num_repeats
            message = str(error).removeprefix("SamplerConfig: ")
            for name in cls.BUDGET_FIELDS:
                message = re.sub(rf"\b(SamplerConfig\.)?{name}\b", f"--{name.replace('_', '-')}", message)
            raise type(error)(message) from None

    @classmethod
    def preset(cls, name: str, sampler: str = "gibbs") -> SamplerConfig:
        """'fast' (the default) or 'paper', for the 'gibbs' or the 'nuts' sampler.

        The Gibbs presets value a coalition twice where the Shapley values are sampled (sampled_repeats 2), and as
        below where they are enumerated; the NUTS presets as below in every game.
        Gibbs, fast: 4 chains of 800 + 1,600 sweeps, 3 repeats: Syn's demo converges (R-hat <= 1.01, bulk
        ESS >= 400 per coalition) with Shapley standard errors ~0.01 in under a minute on 2 cores.
        Gibbs, paper: tuned to the precision of Sim et al.'s runs (every Shapley value's standard error
        <= 0.005 on Syn), not to their sweep counts (App. H.1: 16 chains, 10,000 burn-in, 30,000 sweeps
        thinned by 16, 5 repeats, 1,058 s here): 8 chains of 400 + 4,000 sweeps, 6 repeats. Every sweep is
        kept: the KL estimate keeps a chain's near draws out of each other's neighbours (Theiler window),
        so thinning would only discard information (docs/architecture.md).
        NUTS, fast: 4 chains of 250 warm-up and 700 draws, 3 repeats: with `LogisticRegression`'s shallow trees
        and target acceptance 0.65, Diab's valuation converges (max R-hat 1.003-1.004 over 3 keys, min bulk ESS
        >= 824) in 26-27 s on 2 idle cores (docs/benchmarks.md, "Diab toward 30 s" and "Diab under 30 s").
        Where the chains start warm (`LogisticRegression` from 30 unconstrained coordinates, 7 features:
        `bayesval.models.numpyro_model.WARM_START_FROM`), 100 warm-up and 325 draws (`for_start`): the three Pima
        hospitals of docs/own_data.md (8 features, 45 coordinates) converge in 84 s on 2 idle cores on one set of
        releases (157 s from prior starts) and in 81-90 s on another (155-167 s from prior starts; 98-99 s in the
        two runs of another session: docs/benchmarks.md, "The three hospitals in a minute and a half").
        NUTS, paper: 25 chains of 400 warm-up and 2,000 draws, target acceptance 0.86, chains with
        BFMI < 0.3 dropped, split into 5 groups of 10,000 draws with one KL estimate each (Sim et al.
        2023, App. H.1): here 5 repeats of 5 chains. The target acceptance is a kernel setting, the model's: this
        preset still sets 0.86 over the model's for one release, with a DeprecationWarning where that changes it
        (`PresetKernel`); `LogisticRegression(target_accept_prob=0.86)` is the paper's kernel.
        """
        for argument, value in (("name", name), ("sampler", sampler)):
            if not isinstance(value, str):
                raise TypeError(
                    f"SamplerConfig.preset: {argument} must be a string, got {value!r} ({type(value).__name__})"
                )
        with _quietly():  # the paper's target acceptance warns where a run uses it over the model's (`PresetKernel`)
            presets = cls._presets()
        if sampler not in presets:
            raise ValueError(f"unknown sampler {sampler!r}; choose one of {sorted(presets)}")
        if name not in presets[sampler]:
            raise ValueError(f"unknown preset {name!r}; choose one of {sorted(presets[sampler])}")
        return presets[sampler][name]

    @classmethod
    def _presets(cls) -> dict:
        sampled = {"sampled_repeats": SAMPLED_REPEATS}
        warm = {"warm_warmup": WARM_WARMUP, "warm_samples": WARM_SAMPLES}  # the sweeps of chains that start warm
        return {
            "gibbs": {
                "fast": cls(**sampled),
                "paper": cls(num_chains=8, num_warmup=400, num_samples=4000, thinning=1, num_repeats=6, **sampled),
            },
            "nuts": {
                "fast": cls(num_chains=4, num_warmup=250, num_samples=700, thinning=1, num_repeats=3, **warm),
                "paper": cls(
                    num_chains=5,
                    num_warmup=400,
                    num_samples=2000,
                    thinning=1,
                    num_repeats=5,
                    target_accept_prob=PresetKernel(0.86),
                ),
            },
        }


_quiet = False


class _quietly:
    """Within it, configs are built without the kernel-field warning: for copies (`with_`) of a config whose
    fields the user gave once already, and for the presets."""

    def __enter__(self) -> None:
        global _quiet
        self._before, _quiet = _quiet, True

    def __exit__(self, *exc) -> None:
        global _quiet
        _quiet = self._before
