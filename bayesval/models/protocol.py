"""The contract every party model of `valuate()` keeps, as a `typing.Protocol`.

Sim et al. (2023, Sec. 3-4) value a coalition C by the KL divergence from the prior p(theta) to the
posterior p(theta | o_C) given the parties' released statistics. A model therefore supplies what a party
computes and releases, `statistic(num_features)` (any object with `size`, `compute(X, y)` and
`sensitivity(bounds)`); i.i.d. draws of theta from the prior, `prior_draws(key, data, num_draws)` (the KL
reference); draws of p(theta | o_C) for a batch of coalition masks, `posterior_draws(key, data, masks, config)`,
as `CoalitionDraws`; `sampler` ('gibbs' or 'nuts', which picks the `SamplerConfig` presets); and a `name` for
the result's method. `check(data)` (refuse releases before sampling), `prior_log_density(data)` (the prior
density the KL estimator can use), `parameter_names(num_features)`, `packs_members` (True where the model's
priors do not depend on the number or order of parties, so a coalition's chains may be given its members' releases
alone: `NoiseAwareData.members`) and `conjugate_prior(data)` (the NIG prior to which the sampler's conditionals
p(theta | s) are conjugate; such a model's `posterior_draws` takes `conditionals=True` and returns them, for
kl='rao-blackwell') and `posterior_programs(key, data, masks, config)` (the compiled programs `posterior_draws` of
those arguments calls, as `bayesval.compilation.Program`s, so that a batch's programs compile while an earlier
batch samples) and `surrogate_surprises(data)` (a deterministic surrogate of every coalition's surprise, an object
whose `values` are 2^n numbers in coalition-code order, or None: the control variate of a sampled valuation
by default (`control_variate`), docs/games.md, "Control variates"), `surrogate_game(data)` (a surrogate of
given coalitions: a function of masks (B, n) giving `bayesval.games.control.SurrogateValues`, or None; the control
variate beyond the parties a table holds, docs/games.md, "Multi-fidelity control variates"),
`kernel_settings(data)` (the settings of the model's own sampler kernel for these releases, one signature for every
model: `LinearRegression`'s `GibbsSettings`, `NumPyroModel`'s `NUTSSettings`, whose target_accept_prob and min_bfmi
a result records as they ran) and `importance_draws(keys, data, masks, num_draws, attempt)` (resampled draws of each
row's coalition posterior by importance sampling, a rerun's (`attempt` >= 1) closer, with their Pareto k-hat,
effective sample size and whether the proposal's fit converged: the route without chains,
docs/importance.md; the member is None where the model cannot take that route, as `LinearRegression`'s with a shared
data model) and `importance_programs(keys, data, masks, num_draws, attempt)` (the compiled programs such a call
calls, as `bayesval.compilation.Program`s, so that the route compiles one width's while another's rows are drawn)
are optional (`OPTIONAL_MEMBERS`).

The party path reads a model's optional members once, into one typed record (`capabilities(model)`, a
`Capabilities`), and asks that record, never the model, what it offers.

`LinearRegression` keeps the contract with its Gibbs kernel, `NumPyroModel` (and `LogisticRegression`) with
batched NUTS; a user's class needs no base class, only these members (structural typing, PEP 544).
"""

from __future__ import annotations

import inspect
import warnings
from collections.abc import Callable
from typing import NamedTuple, Protocol, runtime_checkable

import jax
import numpy as np

from bayesval.inference.config import SamplerConfig
from bayesval.inference.data import CoalitionDraws, NoiseAwareData
from bayesval.validation import user_stacklevel

REQUIRED_MEMBERS = ("statistic", "prior_draws", "posterior_draws", "sampler", "name")
OPTIONAL_MEMBERS = (
    "check",
    "prior_log_density",
    "parameter_names",
    "packs_members",
    "conjugate_prior",
    "posterior_programs",
    "surrogate_surprises",
    "surrogate_game",
    "kernel_settings",
    "importance_draws",
    "importance_programs",
)
# the parameter names of `kernel_settings` before its one signature, kernel_settings(data): LinearRegression's
# kernel_settings(num_features) and NumPyroModel's kernel_settings(config); a user model that kept one is read with a
# DeprecationWarning for one release (`capabilities`)
OLD_KERNEL_SETTINGS = ("num_features", "config")


@runtime_checkable
class PartyModel(Protocol):
    """A model `valuate()` values parties with; `isinstance(model, PartyModel)` checks that every required
    member is present (not their signatures)."""

    name: str
    sampler: str

    def statistic(self, num_features: int): ...

    def prior_draws(self, key: jax.Array, data: NoiseAwareData, num_draws: int) -> np.ndarray | jax.Array: ...

    def posterior_draws(
        self, key: jax.Array, data: NoiseAwareData, masks: np.ndarray, config: SamplerConfig
    ) -> CoalitionDraws: ...


def missing_members(model) -> list[str]:
    """The required members of `PartyModel` that `model` lacks, in the protocol's order (empty if none)."""
    return [] if isinstance(model, PartyModel) else [name for name in REQUIRED_MEMBERS if not hasattr(model, name)]


def is_party_model(model) -> bool:
    """Whether `model` keeps the `PartyModel` contract (has every required member)."""
    return isinstance(model, PartyModel)


def check_party_model(model) -> None:
    """Raise a TypeError naming the members `model` lacks if it is not a `PartyModel`."""
    missing = missing_members(model)
    if missing:
        raise TypeError(
            f"model must be a party model (bayesval.models.LinearRegression(), LogisticRegression(), NumPyroModel) "
            f"or a data-point estimator (bayesval.estimators.*); {model!r} lacks {missing}"
        )


class Capabilities(NamedTuple):
    """What a party model offers beyond the required members, read once by `capabilities`: each optional member
    (`OPTIONAL_MEMBERS`) bound to the model, or None where it lacks it (`packs_members`: False)."""

    check: Callable | None
    prior_log_density: Callable | None
    parameter_names: Callable | None
    packs_members: bool
    conjugate_prior: Callable | None
    posterior_programs: Callable | None
    surrogate_surprises: Callable | None
    kernel_settings: Callable | None
    surrogate_game: Callable | None = None
    importance_draws: Callable | None = None  # last, with defaults: records built before them still build
    importance_programs: Callable | None = None


def capabilities(model) -> Capabilities:
    """`model`'s `Capabilities`, after `check_party_model`: the one place the party path asks a model which optional
    members it has."""
    check_party_model(model)
    members = {name: getattr(model, name, None) for name in OPTIONAL_MEMBERS}
    members["packs_members"] = bool(members["packs_members"])
    members["kernel_settings"] = _one_signature(model, members["kernel_settings"])
    return Capabilities(**members)


def _one_signature(model, kernel_settings: Callable | None) -> Callable | None:
    """`kernel_settings` as kernel_settings(data). A user model's written with the old signatures (its first
    parameter named as in `OLD_KERNEL_SETTINGS`) warns, for one release: kernel_settings(config) is read as the
    model's own settings (a config's deprecated kernel fields go over them where the run uses them:
    `SamplerConfig.overriding`), kernel_settings(num_features) as none a result records."""
    if kernel_settings is None:
        return None
    try:
        first = next(iter(inspect.signature(kernel_settings).parameters), None)
    except (TypeError, ValueError):  # a callable whose signature Python cannot read: taken as the current one
        return kernel_settings
    if first not in OLD_KERNEL_SETTINGS:
        return kernel_settings
    warnings.warn(
        f"{type(model).__name__}.kernel_settings({first}) has the signature of an earlier bayesval: a party model's "
        "kernel settings are kernel_settings(data) now (docs/user_models.md); read the old way for one release",
        DeprecationWarning,
        stacklevel=user_stacklevel(),
    )
    if first == "config":
        return lambda data: kernel_settings(SamplerConfig())
    return None
