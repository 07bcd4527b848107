"""The front door: value the parties of a private collaboration (Sim et al. 2023, Algorithm 2, lines 1-14).

Parties release perturbed statistics (or arrive already released); the model samples the
noise-aware posterior of every coalition in one batched program, once per repeat; the k-NN KL
of each posterior to fresh prior draws is the coalition's Bayesian surprise v_C; Shapley values
follow exactly (up to `exact_up_to` parties) or by permutation sampling.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence

import jax
import jax.numpy as jnp
import numpy as np

from bayesval.boundary import PerturbedStatistic, describe_statistic
from bayesval.divergence import knn_kl
from bayesval.games.shapley import coalition_masks, exact_shapley, mask_codes, permutation_shapley
from bayesval.inference.diagnostics import R_HAT_THRESHOLD, chain_diagnostics
from bayesval.inference.gibbs import NoiseAwareData
from bayesval.parties import Party
from bayesval.presets import SamplerConfig
from bayesval.privacy import PrivacyLedger
from bayesval.results import ValuationResult
from bayesval.validation import check_bool, check_int, check_key, check_positive


def valuate(
    model,
    parties: Sequence[Party | PerturbedStatistic] | tuple[np.ndarray, np.ndarray],
    *,
    validation: tuple[np.ndarray, np.ndarray] | None = None,
    key: int | jax.Array | None = None,
    config: SamplerConfig | str | None = None,
    k: int | None = None,
    exact_up_to: int | None = None,
    tolerance: float | None = None,
    progress_bar: bool | None = None,
    ledger: PrivacyLedger | None = None,
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
    k: neighbours in the KL estimator (default 4). exact_up_to: largest party count valued by enumerating
        all 2^n coalitions (default 10); beyond it, permutation sampling until every stderr < tolerance
        (default 0.05).
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
            exact_up_to=exact_up_to,
            tolerance=tolerance,
            progress_bar=progress_bar,
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
    exact_up_to = check_int("exact_up_to", 10 if exact_up_to is None else exact_up_to, minimum=1)
    tolerance = check_positive("tolerance", 0.05 if tolerance is None else tolerance)
    names = check_parties(model, parties)
    if hasattr(model, "check"):
        model.check(_placeholder_data(model, parties))
    provenance = _provenance(model, parties)
    reused = [name for name, how in provenance.items() if how == "reused"]
    if reused:
        warnings.warn(
            f"reusing the earlier releases of {reused}: no new privacy spent (party.release(statistic, fresh=True) "
            "makes a new release, which composes in the ledger)",
            stacklevel=2,
        )
    data = NoiseAwareData.from_releases(release_all(model, parties))
    privacy = PrivacyLedger()  # every release of the valued owners: a party's earlier ones compose with this one
    for party in parties:
        if isinstance(party, Party):
            privacy.merge(party.ledger)
        else:
            privacy.record(party.release)
    if ledger is not None:
        ledger.merge(privacy)
    surprise = CoalitionSurprise(model, data, config, k)
    n = len(names)
    key_values, key_permutations = jax.random.split(key)
    if n <= exact_up_to:
        masks = coalition_masks(n)
        mean, stderr = surprise(key_values, masks)
        values, value_stderr = exact_shapley(np.append(0.0, mean), np.append(0.0, stderr))
        method = "exact Shapley"
    else:
        memo: dict[int, float] = {0: 0.0}

        def utility(batch: np.ndarray) -> np.ndarray:
            codes = mask_codes(batch)
            new = np.unique(codes[[c not in memo for c in codes]])
            if new.size:
                new_masks = (new[:, None] >> np.arange(n)) & 1
                mean_new, _ = surprise(jax.random.fold_in(key_values, len(memo)), new_masks.astype(bool))
                memo.update(zip(new.tolist(), mean_new.tolist()))
            return np.array([memo[c] for c in codes])

        values, value_stderr, count = permutation_shapley(
            utility, n, key_permutations, tolerance=tolerance, progress_bar=config.progress_bar
        )
        masks = (np.array(sorted(set(memo) - {0}))[:, None] >> np.arange(n)) & 1
        masks = masks.astype(bool)
        mean, stderr = np.array([memo[c] for c in mask_codes(masks)]), np.full(len(masks), np.nan)
        method = f"permutation Shapley ({count} permutations)"
    if not surprise.diagnostics["converged"]:
        warnings.warn(
            f"some coalition posteriors did not converge (R-hat above {R_HAT_THRESHOLD}, or every chain "
            "dropped for low BFMI); see result.diagnostics and raise num_warmup / num_samples",
            stacklevel=2,
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
        diagnostics=surprise.diagnostics | {"sampler": vars(config), "k": k, "releases": provenance},
    )


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
            provenance[party.owner] = "released before this call"
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


class CoalitionSurprise:
    """v_C for batches of coalition masks: all repeats x coalitions in one sampler call, then k-NN KL.

    Chains the sampler drops (NUTS chains with low BFMI) are left out of that posterior's sample, and
    the prior sample it is compared with has the same size; the drops are counted in the diagnostics.
    """

    def __init__(self, model, data: NoiseAwareData, config: SamplerConfig, k: int) -> None:
        self.model, self.data, self.config, self.k = model, data, config, k
        self.diagnostics: dict = {
            "converged": True,
            "r_hat": [],
            "ess": [],
            "coalitions": [],
            "dropped_chains": [],
            "divergences": [],
        }

    def __call__(self, key: jax.Array, masks: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        repeats, num_masks = self.config.num_repeats, len(masks)
        key_posterior, key_prior = jax.random.split(key)
        sample = self.model.posterior_draws(key_posterior, self.data, np.tile(masks, (repeats, 1)), self.config)
        draws, kept = sample.draws, sample.kept_chains
        prior_keys = jax.random.split(key_prior, repeats)
        priors = [self.model.prior_draws(pk, self.data, draws.shape[1] * draws.shape[2]) for pk in prior_keys]
        kl, r_hat, ess = np.full(len(draws), np.nan), np.full(len(draws), np.inf), np.zeros(len(draws))
        for i, (chains, keep) in enumerate(zip(draws, kept)):
            if keep.sum() == 0:
                continue
            posterior = chains[keep].reshape(-1, chains.shape[-1])
            kl[i] = knn_kl(posterior, priors[i // num_masks][: len(posterior)], self.k)
            chain_r_hat, chain_ess = chain_diagnostics(chains[keep][None])
            r_hat[i], ess[i] = chain_r_hat.max(), chain_ess.min()
        kl, by_mask = kl.reshape(repeats, num_masks), (repeats, num_masks)
        if np.isnan(kl).all(axis=0).any():
            raise RuntimeError("every chain of some coalition posterior was dropped (BFMI); raise num_warmup")
        r_hat, ess = r_hat.reshape(by_mask).max(axis=0), ess.reshape(by_mask).min(axis=0)
        self.diagnostics["coalitions"] += masks.astype(int).tolist()
        self.diagnostics["r_hat"] += r_hat.tolist()
        self.diagnostics["ess"] += ess.tolist()
        self.diagnostics["dropped_chains"] += (~kept).reshape(repeats, num_masks, -1).sum(axis=(0, 2)).tolist()
        divergences = sample.info.get("divergences", np.zeros(kept.shape, int))
        self.diagnostics["divergences"] += divergences.reshape(repeats, num_masks, -1).sum(axis=(0, 2)).tolist()
        self.diagnostics["converged"] &= bool((r_hat < R_HAT_THRESHOLD).all())
        count = np.sum(~np.isnan(kl), axis=0)
        mean = np.nanmean(kl, axis=0)
        stderr = np.where(count > 1, np.nanstd(kl, axis=0, ddof=1) / np.sqrt(np.maximum(count, 1)), np.nan)
        return mean, stderr
