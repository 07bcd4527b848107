"""The front door: value the parties of a private collaboration (Sim et al. 2023, Algorithm 2, lines 1-14).

Parties release perturbed statistics (or arrive already released); the model samples the
noise-aware posterior of every coalition in one batched program, once per repeat; the k-NN KL
of each posterior to fresh prior draws is the coalition's Bayesian surprise v_C; Shapley values
follow exactly (up to `exact_up_to` parties) or by permutation sampling.
"""

from __future__ import annotations

import hashlib
import math
import warnings
from collections.abc import Sequence

import jax
import jax.numpy as jnp
import numpy as np

from bayesval import progress
from bayesval.games.samplers import PermutationSampler
from bayesval.games.semivalues import semivalue
from bayesval.games.shapley import coalition_masks, exact_shapley_per_repeat
from bayesval.games.stopping import MaxEvaluations, StandardError, When, capped
from bayesval.games.weights import SHAPLEY
from bayesval.inference.config import SamplerConfig
from bayesval.inference.data import NoiseAwareData
from bayesval.inference.diagnostics import ESS_THRESHOLD, R_HAT_THRESHOLD
from bayesval.parties.boundary import PerturbedStatistic, describe_statistic
from bayesval.parties.party import Party
from bayesval.parties.rewards.allocation import allocate
from bayesval.parties.rewards.control import NoiseAddition, Tempering, as_mechanism
from bayesval.parties.rewards.sampling import RewardSampler
from bayesval.parties.rewards.targets import check_rho
from bayesval.parties.surprise import CoalitionSurprise, batch_rows, per_repeat, prior_density
from bayesval.privacy import PrivacyLedger
from bayesval.results.result import ValuationResult
from bayesval.validation import check_bool, check_int, check_key, check_positive


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
) -> ValuationResult:
    """Value each party by the Shapley value of the Bayesian surprise v_C = KL(p(theta | o_C) || p(theta)),
    or, given a data-point estimator, each training point.

    model: a party model such as `bayesval.models.LinearRegression()`, or a data-point estimator such as
        `bayesval.estimators.TKNNShapley()`; then `parties` is the training data (X, y) and `validation`
        is (X_val, y_val), and the sampler arguments below do not apply.
    parties: `Party` objects (each releases once, on first use; later valuations reuse that release and
        say so) or already released `PerturbedStatistic`s (e.g. `PerturbedStatistic.load(file)`); the
        mediator side below never sees raw data.
    key: the sampling key (an int seed or a jax key; default 0). Privacy noise never comes from it.
    config: a `SamplerConfig` or a preset name ('fast', the default, or 'paper') of the model's sampler.
    k: neighbours in the KL estimator (default 4).
    kl: the KL estimator: 'prior-density' (-H(posterior) by k-NN minus E[log prior]; far less noisy),
        'two-sample' (posterior against prior draws, Sim et al. 2023, App. C.3 as printed) or 'auto' (the
        default: prior-density where the model knows its prior density).
    exact_up_to: largest party count valued by enumerating all 2^n coalitions (default 10); beyond it,
        permutation sampling (`bayesval.games.semivalue`) until `stop` holds: a stopping rule of
        `bayesval.games.stopping` (default: every stderr <= tolerance, 0.05 by default, after 64 permutations,
        at most 10,000 permutations), or once every coalition is known (then the values are exact). The result
        carries each party's permutation count and converged flag.
    resume_from: a result of the same game (same model, releases, sampler settings, k and KL estimator) to
        continue: its coalition estimates are reused, not sampled again, and a stopped permutation run goes on
        where it stopped; with the same key the values equal an uninterrupted run's with the total budget.
    keep_draws: keep every coalition's posterior draws in the result (`result.draws`, for
        `result.to_inference_data()`); off by default, so memory stays bounded by one batch of posteriors.
    rewards: also reward each party with posterior samples whose surprise meets its rho-Shapley target (Sim et al.
        2023, Sec. 5): 'tempering' (likelihood tempering, recommended), 'noise' (noise addition) or a configured
        `bayesval.rewards.Tempering` / `NoiseAddition`; the result's `rewards` holds the samples, values, kappa / tau,
        similarity and each party's effective privacy inside the others' rewards.
    rho: the targets' rho in (0, 1] (default 0.2, as Sim et al. 2023, Sec. 6).
    ledger: a `PrivacyLedger` carried across calls; every release of the valued parties is recorded in it
        once, so `ledger.spent(owner)` is the cumulative spend.
    All arguments are checked before any release, compilation or sampling.
    """
    if isinstance(model, type):
        raise TypeError(
            f"model must be an instance of a party model or data-point estimator, e.g. {model.__name__}(), "
            f"got the class {model.__name__}"
        )
    if ledger is not None and not isinstance(ledger, PrivacyLedger):
        raise TypeError(f"ledger must be a bayesval.PrivacyLedger or None, got {type(ledger).__name__}")
    if progress_bar is not None:
        check_bool("progress_bar", progress_bar)
    if _is_estimator(model):
        result = _valuate_points(
            model,
            parties,
            validation,
            key=key,
            config=config,
            k=k,
            kl=kl,
            exact_up_to=exact_up_to,
            tolerance=tolerance,
            keep_draws=keep_draws,
            progress_bar=progress_bar,
            rewards=rewards,
            rho=rho,
        )
        if ledger is not None:
            ledger.merge(result.privacy)
        return result
    _check_party_model(model)
    if validation is not None:
        raise ValueError(
            f"validation= applies to data-point estimators; {model.name} values parties from their releases"
        )
    key = check_key("key", 0 if key is None else key)
    config = _sampler_config(model, config, progress_bar)
    k = check_int("k", 4 if k is None else k, minimum=1)
    if k >= config.draws_per_repeat:
        raise ValueError(
            f"k={k} neighbours need more than k posterior draws per repeat; the sampler config gives "
            f"{config.draws_per_repeat}"
        )
    kl = "auto" if kl is None else kl
    exact_up_to = check_int("exact_up_to", 10 if exact_up_to is None else exact_up_to, minimum=1)
    tolerance = check_positive("tolerance", 0.05 if tolerance is None else tolerance)
    names = check_parties(model, parties)
    if hasattr(model, "check"):
        model.check(_placeholder_data(model, parties))
    batch_rows(model, _placeholder_data(model, parties), config, 1)  # memory_limit_mb fits one posterior
    if kl != "auto":
        prior_density(model, _placeholder_data(model, parties), kl)  # the estimator asked for is available
    if stop is not None:
        stop = capped(stop)
    if rewards is None and rho is not None:
        raise ValueError("rho sets the reward targets: pass rewards='tempering' or 'noise' with it")
    mechanism = None if rewards is None else as_mechanism(rewards)
    rho = check_rho(0.2 if rho is None else rho)
    keep_draws = check_bool("keep_draws", keep_draws) if keep_draws is not None else False
    if keep_draws and resume_from is not None:
        raise ValueError(
            "keep_draws=True cannot resume an earlier valuation: the draws of the coalitions it sampled were not "
            "kept; run the valuation again with keep_draws=True"
        )
    if resume_from is not None and not (
        isinstance(resume_from, ValuationResult) and "coalition_estimates" in resume_from.diagnostics
    ):
        got = repr(resume_from.method) if isinstance(resume_from, ValuationResult) else type(resume_from).__name__
        raise TypeError(
            f"resume_from must be the ValuationResult of an earlier party valuation (saved and loaded too), got {got}"
        )
    if resume_from is not None and list(resume_from.names) != names:
        raise ValueError(
            f"resume_from is a result of a different game: its parties are {list(resume_from.names)}, these {names}"
        )
    provenance = _provenance(model, parties)
    flagged = {p.owner: p.caveats for p in parties if isinstance(p, PerturbedStatistic) and p.caveats}
    if flagged:
        described = "; ".join(f"{owner}: {', '.join(notes)}" for owner, notes in flagged.items())
        warnings.warn(f"some releases are experiments or not floating-point safe ({described})", stacklevel=2)
    reused = [name for name, how in provenance.items() if how == "reused"]
    if reused:
        warnings.warn(
            f"reusing the earlier releases of {reused}: no new privacy spent (party.release(statistic, fresh=True) "
            "makes a new release, which composes in the ledger)",
            stacklevel=2,
        )
    releases = release_all(model, parties)
    data = NoiseAwareData.from_releases(releases)
    privacy = PrivacyLedger()  # every release of the valued owners: a party's earlier ones compose with this one
    for party in parties:
        if isinstance(party, Party):
            privacy.merge(party.ledger)
        else:
            privacy.record(party.release)
    if ledger is not None:
        ledger.merge(privacy)
    n = len(names)
    key_values, key_permutations = jax.random.split(key)
    surprise = CoalitionSurprise(
        model, data, config, k, key_values, max_coalitions=2**n - 1, kl=kl, keep_draws=keep_draws
    )
    game = _game_fingerprint(model, data, config, k, surprise.kl_estimator)
    if resume_from is not None:
        if resume_from.diagnostics.get("game") != game:
            raise ValueError(
                "resume_from is a result of a different game: its model, releases, parties, sampler settings, k or "
                "KL estimator differ from this valuation's"
            )
        surprise.restore(resume_from.diagnostics)

    def exact() -> tuple[np.ndarray, np.ndarray]:
        """Shapley values per repeat from every coalition's estimates: their mean and standard error."""
        pending = sum(code not in surprise.values for code in range(1, 2**n))
        label = f"valuation: posteriors p(theta | o_C) of {pending} coalitions x {config.num_repeats} repeats"
        with progress.stage(label, calls=math.ceil(pending * config.num_repeats / surprise.batch_rows)):
            return per_repeat(exact_shapley_per_repeat(surprise(coalition_masks(n, include_empty=True))))

    sampled = None
    if n <= exact_up_to:
        (values, value_stderr), method = exact(), "exact Shapley"
    else:
        rule = StandardError(tolerance, min_count=64) | MaxEvaluations(10_000 * (n + 1)) if stop is None else stop

        def sampled_coalitions(_, masks):
            with progress.stage("valuation: posteriors p(theta | o_C) of the coalitions of a batch of permutations"):
                return surprise(np.asarray(masks))

        sampled = semivalue(
            sampled_coalitions,
            n,
            key_permutations,
            weights=SHAPLEY,
            sampler=PermutationSampler(),
            stop=rule | When(lambda: surprise.num_sampled == 2**n - 1),
            batch_size=32,
            names=names,
            resume_from=resume_from if resume_from is not None and resume_from.state is not None else None,
            progress_bar=config.progress_bar,
        )
        values, value_stderr, count = sampled.values, sampled.stderr, sampled.state.batch_draws
        method = f"permutation Shapley ({count} permutations)"
        if surprise.num_sampled == 2**n - 1:  # every coalition is known: the exact values cost nothing more
            (values, value_stderr), method = exact(), f"exact Shapley (all coalitions sampled in {count} permutations)"
    codes = sorted(set(surprise.values) - {0})
    masks = ((np.array(codes)[:, None] >> np.arange(n)) & 1).astype(bool)
    mean, stderr = per_repeat(np.stack([surprise.values[c] for c in codes], axis=1))
    if not surprise.diagnostics["converged"]:
        worst_r_hat, worst_ess = max(surprise.diagnostics["r_hat"]), min(surprise.diagnostics["ess"])
        warnings.warn(
            f"some coalition posteriors did not converge (max R-hat {worst_r_hat:.3f}, min bulk ESS {worst_ess:.0f}; "
            f"wanted R-hat <= {R_HAT_THRESHOLD} and ESS >= {ESS_THRESHOLD}, or every chain dropped for low BFMI); "
            "see result.diagnostics and raise num_warmup / num_samples",
            stacklevel=2,
        )
    allocated = None
    if mechanism is not None:
        own_and_grand = np.vstack([np.eye(n, dtype=bool), np.ones((1, n), bool)])
        with progress.stage("rewards: posteriors of each party alone and of the grand coalition"):
            own_and_grand_values, own_and_grand_stderr = per_repeat(surprise(own_and_grand))
        allocated = allocate(
            RewardSampler(surprise, jax.random.fold_in(key, 2)),
            mechanism,
            rho,
            names=names,
            releases=releases,
            shapley=values,
            singleton_values=own_and_grand_values[:n],
            grand=(own_and_grand_values[n], own_and_grand_stderr[n]),
        )
    return ValuationResult(
        method=f"{model.name}, Bayesian surprise, {method}",
        values=values,
        stderr=value_stderr,
        names=names,
        coalition_masks=masks,
        coalition_values=mean,
        coalition_stderr=stderr,
        privacy=privacy,
        diagnostics=surprise.diagnostics
        | {"sampler": vars(config), "k": k, "kl_estimator": surprise.kl_estimator, "releases": provenance}
        | {"game": game, "coalition_estimates": {code: surprise.values[code] for code in codes}},
        counts=None if sampled is None else sampled.counts,
        converged=None if sampled is None else sampled.converged,
        state=None if sampled is None else sampled.state,
        draws=None if surprise.draws is None else np.stack([surprise.draws[c] for c in codes]),
        parameter_names=_parameter_names(model, parties),
        rewards=allocated,
    )


def _game_fingerprint(model, data: NoiseAwareData, config: SamplerConfig, k: int, kl_estimator: str) -> str:
    """What makes two valuations the same game, hashed: the model, the released statistics and every setting that
    shapes a coalition's estimates (not the key: estimates from any key are estimates of the same values)."""
    settings = {name: value for name, value in vars(config).items() if name != "progress_bar"}
    simple = (int, float, str, bool, type(None))
    model_settings = {name: value for name, value in vars(model).items() if isinstance(value, simple)}
    digest = hashlib.sha256(repr((model.name, sorted(model_settings.items()), settings, k)).encode())
    digest.update(kl_estimator.encode())
    for array in data:
        digest.update(np.ascontiguousarray(np.asarray(array, np.float64)).tobytes())
    return digest.hexdigest()


def _parameter_names(model, parties) -> list[str] | None:
    """The names of theta's coordinates where the model gives them (`parameter_names(num_features)`) and the
    parties' feature count is known."""
    num_features = parties[0].num_features
    if num_features is None or not hasattr(model, "parameter_names"):
        return None
    return list(model.parameter_names(num_features))


def _is_estimator(model) -> bool:
    return hasattr(model, "fit") and hasattr(model, "value")


def _valuate_points(estimator, data, validation, **party_only) -> ValuationResult:
    """A data-point estimator: fit on the training data, value against the validation data."""
    given = sorted(name for name, value in party_only.items() if value is not None)
    if given:
        raise ValueError(
            f"{', '.join(given)} apply to party models, not to {type(estimator).__name__} (it samples nothing; "
            "its privacy noise, if any, comes from its own noise_seed / OS entropy)"
        )
    for name, pair in (("parties", data), ("validation", validation)):
        if pair is None:
            raise ValueError(f"{type(estimator).__name__} values data points: pass validation=(X_val, y_val)")
        if not isinstance(pair, (tuple, list)) or len(pair) != 2:
            raise TypeError(f"{name} must be a pair (X, y) for {type(estimator).__name__}, got {type(pair).__name__}")
        released = [type(item).__name__ for item in pair if isinstance(item, (Party, PerturbedStatistic))]
        if released:
            raise TypeError(
                f"{name} must be the data (X, y) for {type(estimator).__name__}, which values data points, got "
                f"{released}; parties are valued by party models such as bayesval.models.LinearRegression()"
            )
    return estimator.fit(*data).value(*validation)


def _check_party_model(model) -> None:
    missing = [a for a in ("statistic", "prior_draws", "posterior_draws", "sampler", "name") if not hasattr(model, a)]
    if missing:
        raise TypeError(
            f"model must be a party model (bayesval.models.LinearRegression(), LogisticRegression(), NumPyroModel) "
            f"or a data-point estimator (bayesval.estimators.*); {model!r} lacks {missing}"
        )


def _sampler_config(model, config, progress_bar: bool | None) -> SamplerConfig:
    if config is None:
        config = "fast"
    if isinstance(config, str):
        config = SamplerConfig.preset(config, model.sampler)
    if not isinstance(config, SamplerConfig):
        raise TypeError(f"config must be a SamplerConfig or a preset name ('fast', 'paper'), got {config!r}")
    return config if progress_bar is None else config.with_(progress_bar=progress_bar)


def check_parties(model, parties) -> list[str]:
    """The parties' names, after checking they are 2+ parties / releases with unique names that fit together
    and fit the model (nothing is released here)."""
    if (
        isinstance(parties, (Party, PerturbedStatistic))
        or not isinstance(parties, Sequence)
        or isinstance(parties, str)
    ):
        raise TypeError(
            "parties must be a list of bayesval.Party or PerturbedStatistic objects (training data (X, y) is for "
            f"data-point estimators), got {type(parties).__name__}"
        )
    if len(parties) < 2:
        raise ValueError(f"valuation needs at least 2 parties, got {len(parties)}")
    for index, party in enumerate(parties):
        if not isinstance(party, (Party, PerturbedStatistic)):
            raise TypeError(
                f"parties[{index}] must be a bayesval.Party or PerturbedStatistic, got {type(party).__name__}"
            )
    names = [p.name if isinstance(p, Party) else p.owner for p in parties]
    if len(set(names)) < len(names):
        raise ValueError(f"party names must be unique, got {names}")
    widths = {name: _width(p) for name, p in zip(names, parties)}
    if len(set(widths.values())) > 1:
        raise ValueError(f"parties disagree on the number of features / statistic length: {widths}")
    for party in parties:
        if isinstance(party, PerturbedStatistic):
            _check_release_fits(model, party)
    return names


def release_all(model, parties) -> list[PerturbedStatistic]:
    """Check the parties (`check_parties`) and release every raw `Party` through its mechanism, once: a party
    that released the model's statistic before hands out that same release."""
    check_parties(model, parties)
    return [p.release(model.statistic(p.num_features)) if isinstance(p, Party) else p for p in parties]


def _provenance(model, parties) -> dict[str, str]:
    """Per party, before releasing: a 'new' release, a 'reused' one, or one 'released before this call'."""
    provenance = {}
    for party in parties:
        if isinstance(party, PerturbedStatistic):
            caveats = party.caveats
            provenance[party.owner] = "released before this call" + (f" ({'; '.join(caveats)})" if caveats else "")
        else:
            earlier = party.current_release(model.statistic(party.num_features))
            provenance[party.name] = "new" if earlier is None else "reused"
    return provenance


def _placeholder_data(model, parties) -> NoiseAwareData:
    """Data of the releases' shapes, for checking the model before anything is released."""
    sizes = [model.statistic(p.num_features).size if isinstance(p, Party) else p.perturbed.size for p in parties]
    return NoiseAwareData(jnp.zeros((len(parties), sizes[0])), jnp.ones(len(parties)), jnp.ones(len(parties)))


def _check_release_fits(model, released: PerturbedStatistic) -> None:
    """A release given to `model` must hold the statistic the model reads (when both are known)."""
    if released.num_features is None or released.statistic is None:
        return
    try:
        expected = describe_statistic(model.statistic(released.num_features))
    except TypeError:
        return
    if expected != released.statistic:
        raise ValueError(
            f"{released.owner}: released a {released.statistic} statistic, but {model.name} reads {expected}"
        )


def _width(party: Party | PerturbedStatistic) -> int:
    return party.num_features if isinstance(party, Party) else -len(party.perturbed)
