"""The front door: `valuate(model, ...)` dispatches by the model's contract (docs/api/valuate.md).

A data-point estimator (anything with `fit` and `value`, e.g. `bayesval.estimators.TKNNShapley()`) is fitted on the
training data and values each point against the validation data; a party model (`bayesval.models`) values parties
from their releases by the Bayesian surprise of coalitions (Sim et al. 2023, Algorithm 2), which
`bayesval.parties.valuation` carries out step by step. This module only checks what applies to both paths and
hands every argument on by name, unchanged.
"""

from __future__ import annotations

import inspect
import warnings
from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol, runtime_checkable

import jax
import numpy as np

from bayesval.results.result import ValuationResult
from bayesval.validation import check_bool

if TYPE_CHECKING:
    from bayesval.inference.config import SamplerConfig
    from bayesval.parties.boundary import PerturbedStatistic
    from bayesval.parties.party import Party
    from bayesval.parties.rewards.control import NoiseAddition, Tempering
    from bayesval.parties.valuation import PartyArguments
    from bayesval.privacy import PrivacyLedger

# The party path, the parties and the ledger are imported on the first call: `import bayesval` loads this module
# (`bayesval.valuate` is this function), and a CLI command that fails on its arguments fails before them
# (docs/architecture.md, "Importing on first use").

# Moved to bayesval.parties (de facto API that lived here); importable from this module for one release.
MOVED_TO_PARTIES = ("check_parties", "release_all")


def valuate(
    model,
    parties: Sequence[Party | PerturbedStatistic] | tuple[np.ndarray, np.ndarray],
    *,
    validation: tuple[np.ndarray, np.ndarray] | None = None,
    key: int | jax.Array | None = None,
    config: SamplerConfig | str | None = None,
    k: int | None = None,
    kl: str | None = None,
    exact_up_to: int | None = None,
    tolerance: float | None = None,
    stop=None,
    resume_from: ValuationResult | None = None,
    keep_draws: bool | None = None,
    progress_bar: bool | None = None,
    ledger: PrivacyLedger | None = None,
    rewards: str | Tempering | NoiseAddition | None = None,
    rho: float | None = None,
    control_variate: bool | None = None,
    surprise: str | None = None,
) -> ValuationResult:
    """Value each party by the Shapley value of its Bayesian surprise v_C = KL(p(theta | o_C) || p(theta)) (Sim et
    al. 2023), or, given a data-point estimator, each training point. docs/api/valuate.md gives the details.

    model: a party model such as `bayesval.models.LinearRegression()`, or a data-point estimator such as
        `bayesval.estimators.TKNNShapley()`: then `parties` is the training data (X, y), `validation` is
        (X_val, y_val), and the sampler, KL and reward arguments below do not apply.
    parties: `Party` objects (each releases once, on first use; later valuations reuse that release and say so)
        or already released `PerturbedStatistic`s; the mediator side never sees raw data.
    key: the sampling key (an int seed or a jax key; default 0). Privacy noise never comes from it.
    config: a `SamplerConfig` or a preset name ('fast', the default, or 'paper') of the model's sampler.
    k: neighbours in the KL estimator (default 4).
    kl: the KL estimator: 'prior-density', 'two-sample' (Sim et al. 2023, App. C.3) or 'auto' (the default), all
        k-NN, or 'rao-blackwell' (from the Gibbs sampler's conjugate conditionals; `LinearRegression` only).
    exact_up_to: the most parties valued by enumerating all 2^n coalitions (default 10; given a `tolerance`, with
        repeats added until every stderr meets it, trusted); beyond, permutation sampling (docs/games.md) until
        `stop` holds (a rule of `bayesval.games.stopping`; default: every stderr <= `tolerance`, 0.05, trusted from
        10 degrees of freedom, at most 10,000 permutations) or every coalition is known.
    resume_from: a result of the same game to continue: its coalition estimates are not sampled again.
    keep_draws: keep every coalition's posterior draws (`result.to_inference_data()`); off by default.
    progress_bar: show progress bars (default: as the sampler config says).
    ledger: a `PrivacyLedger` carried across calls; every release of the valued parties is recorded in it once.
    rewards: also reward each party with posterior samples that meet its rho-Shapley target (Sim et al. 2023,
        Sec. 5): 'tempering', 'noise' or a configured `bayesval.rewards.Tempering` / `NoiseAddition`.
    rho: the reward targets' rho in (0, 1] (default 0.2, as Sim et al. 2023, Sec. 6).
    control_variate: sample against the model's surrogate game where the values are sampled (default: wherever
        the model has one, estimated beyond 12 parties; True warns where it cannot; docs/games.md).
    surprise: posteriors by 'importance' sampling, 'mcmc' or 'auto' (where sampled and it pays; docs/importance.md).
    All arguments are checked before any release, compilation or sampling.
    """
    from bayesval.parties.valuation import PartyArguments, value_parties

    _check_both_paths(model, ledger, progress_bar)
    party = (key, config, k, kl, exact_up_to, tolerance, stop, keep_draws, progress_bar, rewards, rho, control_variate)
    arguments = PartyArguments(*party, surprise)
    if _is_estimator(model):
        return _valuate_points(model, parties, validation, ledger, arguments)
    return value_parties(
        model, parties, validation=validation, resume_from=resume_from, ledger=ledger, arguments=arguments
    )


def _check_both_paths(model, ledger, progress_bar) -> None:
    """What applies to both paths: a model instance, not its class; a `PrivacyLedger` or None; a bool or None."""
    from bayesval.privacy import PrivacyLedger

    if isinstance(model, type):
        raise TypeError(
            f"model must be an instance of a party model or data-point estimator, e.g. {model.__name__}(), "
            f"got the class {model.__name__}"
        )
    if ledger is not None and not isinstance(ledger, PrivacyLedger):
        raise TypeError(f"ledger must be a bayesval.PrivacyLedger or None, got {type(ledger).__name__}")
    if progress_bar is not None:
        check_bool("progress_bar", progress_bar)


def _samples(model) -> str:
    """What an estimator samples from, for the error that refuses party arguments: its own `key` where it takes one
    (`LayeredShapley(key=...)` samples permutations or layers), else nothing; and where its privacy noise comes
    from."""
    noise = "its privacy noise, if any, comes from its own noise_seed / OS entropy"
    if "key" in inspect.signature(type(model)).parameters:
        name = type(model).__name__
        return f"it samples from its own key: pass {name}(key=...); {noise}"
    return f"it samples nothing; {noise}"


@runtime_checkable
class DataPointEstimator(Protocol):
    """The data-point contract: an estimator is fitted (`fit(X, y)`) and then values points (`value(X, y)`)."""

    def fit(self, X, y): ...

    def value(self, X, y): ...


def _is_estimator(model) -> bool:
    """Whether `model` keeps the data-point contract (`DataPointEstimator`) rather than the party model's."""
    return isinstance(model, DataPointEstimator)


def _valuate_points(model, parties, validation, ledger, party_only: PartyArguments) -> ValuationResult:
    """A data-point estimator: fit on the training data (`parties`), value against the validation data. The
    arguments of party models (`party_only`) are refused when given (`stop` and `resume_from` are not looked at);
    the estimator's releases, if any, are recorded in `ledger`."""
    from bayesval.parties.boundary import PerturbedStatistic
    from bayesval.parties.party import Party

    given = sorted(name for name, value in party_only._asdict().items() if value is not None and name != "stop")
    if given:
        raise ValueError(f"{', '.join(given)} apply to party models, not to {type(model).__name__} ({_samples(model)})")
    for name, pair in (("parties", parties), ("validation", validation)):
        if pair is None:
            raise ValueError(f"{type(model).__name__} values data points: pass validation=(X_val, y_val)")
        if not isinstance(pair, (tuple, list)) or len(pair) != 2:
            raise TypeError(f"{name} must be a pair (X, y) for {type(model).__name__}, got {type(pair).__name__}")
        released = [type(item).__name__ for item in pair if isinstance(item, (Party, PerturbedStatistic))]
        if released:
            raise TypeError(
                f"{name} must be the data (X, y) for {type(model).__name__}, which values data points, got "
                f"{released}; parties are valued by party models such as bayesval.models.LinearRegression()"
            )
    result = model.fit(*parties).value(*validation)
    if ledger is not None:
        ledger.merge(result.privacy)
    return result


def __getattr__(name: str):
    """`check_parties` and `release_all`, moved to `bayesval.parties`, with a DeprecationWarning."""
    if name not in MOVED_TO_PARTIES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    warnings.warn(
        f"bayesval.valuate.{name} has moved to bayesval.parties.{name}; the old path is kept for one release",
        DeprecationWarning,
        stacklevel=2,
    )
    from bayesval.parties import valuation

    return getattr(valuation, name)
