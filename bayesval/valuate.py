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
import numpy as np

from bayesval.divergence import knn_kl
from bayesval.games.shapley import coalition_masks, exact_shapley, mask_codes, permutation_shapley
from bayesval.inference.diagnostics import R_HAT_THRESHOLD, chain_diagnostics
from bayesval.inference.gibbs import NoiseAwareData
from bayesval.parties import Party, PerturbedStatistic
from bayesval.presets import SamplerConfig
from bayesval.privacy import PrivacyLedger
from bayesval.results import ValuationResult


def valuate(
    model,
    parties: Sequence[Party | PerturbedStatistic] | tuple[np.ndarray, np.ndarray],
    *,
    validation: tuple[np.ndarray, np.ndarray] | None = None,
    key: int | jax.Array = 0,
    config: SamplerConfig | str = "fast",
    k: int = 4,
    exact_up_to: int = 10,
    tolerance: float = 0.05,
    progress_bar: bool | None = None,
) -> ValuationResult:
    """Value each party by the Shapley value of the Bayesian surprise v_C = KL(p(theta | o_C) || p(theta)),
    or, given a data-point estimator, each training point.

    model: a party model such as `bayesval.models.LinearRegression()`, or a data-point estimator
        such as `bayesval.estimators.TKNNShapley()`; then `parties` is the training data (X, y),
        `validation` is (X_val, y_val), and `key` also drives any privacy noise of the estimator.
    parties: `Party` objects (released here, with their own noise keys) or `PerturbedStatistic`s
        already released; the mediator side below never sees raw data.
    key: the sampling key (an int seed or a jax key); privacy noise never comes from it.
    config: a `SamplerConfig` or a preset name ('fast', 'paper') of the model's sampler.
    k: neighbours in the KL estimator. exact_up_to: largest party count valued by enumerating
    all 2^n coalitions; beyond it, permutation sampling until every stderr < tolerance.
    """
    key = jax.random.key(key) if isinstance(key, int) else key
    if hasattr(model, "fit") and hasattr(model, "value"):
        if validation is None:
            raise ValueError(f"{type(model).__name__} values data points: pass validation=(X_val, y_val)")
        X, y = parties
        return model.fit(X, y).value(*validation, key=key)
    config = SamplerConfig.preset(config, model.sampler) if isinstance(config, str) else config
    if progress_bar is not None:
        config = config.with_(progress_bar=progress_bar)
    releases = release_all(model, parties)
    names = [r.owner for r in releases]
    data = NoiseAwareData.from_releases(releases)
    ledger = PrivacyLedger([r.release for r in releases])
    surprise = CoalitionSurprise(model, data, config, k)
    n = len(releases)
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
        privacy=ledger,
        diagnostics=surprise.diagnostics | {"sampler": vars(config), "k": k},
    )


def release_all(model, parties: Sequence[Party | PerturbedStatistic]) -> list[PerturbedStatistic]:
    """Check the parties fit together and release every raw `Party` through its mechanism."""
    if len(parties) < 2:
        raise ValueError(f"valuation needs at least 2 parties, got {len(parties)}")
    named = []
    for index, party in enumerate(parties):
        if not isinstance(party, (Party, PerturbedStatistic)):
            raise TypeError(f"parties[{index}] must be a bayesval.Party or PerturbedStatistic, got {type(party)}")
        if isinstance(party, Party) and party.name is None:
            party.name = f"party {index + 1}"
        named.append(party)
    widths = {p.name if isinstance(p, Party) else p.owner: _width(p) for p in named}
    if len(set(widths.values())) > 1:
        raise ValueError(f"parties disagree on the number of features / statistic length: {widths}")
    if len(widths) < len(named):
        raise ValueError(f"party names must be unique, got {[getattr(p, 'name', None) or p.owner for p in named]}")
    releases = [p.release(model.statistic(p.num_features)) if isinstance(p, Party) else p for p in named]
    for r in releases:
        if not np.isfinite(r.perturbed).all() or r.count < 1 or not r.noise_std > 0:
            raise ValueError(f"{r.owner}: released statistic must be finite with count >= 1 and noise_std > 0")
    clipped = {r.owner: r.release.clipped_rows for r in releases if r.release.clipped_rows}
    if clipped:
        warnings.warn(f"rows clipped to the declared bounds (recorded in the ledger): {clipped}", stacklevel=3)
    return releases


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
