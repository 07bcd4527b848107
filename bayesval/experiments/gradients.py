"""The experiments of Zhou et al. (2024) on gradient-trajectory semivalues: how the DP-induced variance scales with
the number of permutations k (Table 1's theoretical rates, Sec. 6.1) and mislabel detection (Table 2, Sec. 6.2).

Both post-process one run per noise mode: every semivalue and burn-in q comes from the same releases.
"""

from __future__ import annotations

import math
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np

from bayesval.estimators.gradients.estimator import (
    NOISE_MODES,
    GradientSemivalues,
    burn_in_count,
    burn_in_values,
    gradient_marginals,
    mean_adjusted_variance,
    weighted_marginals,
)
from bayesval.experiments.detection import detection_auroc, flip_labels
from bayesval.games.weights import Semivalue, as_semivalue
from bayesval.privacy import DPGuarantee, Mechanism
from bayesval.privacy.rounded_gaussian import RandomWords, RoundedGaussianSampler
from bayesval.validation import check_count, check_positive


def fitted_slope(ks, values) -> float:
    """Least-squares slope of log(values) against log(k): ~1 for Omega(k), ~0 for a k-free bound."""
    return float(np.polyfit(np.log(np.asarray(ks, np.float64)), np.log(np.asarray(values, np.float64)), 1)[0])


def detection_auroc_bound(noise_multiplier: float, num_releases: int) -> float:
    """The largest expected AUROC with which any score computed from the releases can rank a point with a flipped
    label below a clean one, when every point releases its clipped gradient (per-example sensitivity C)
    `num_releases` = k times with Gaussian noise of std noise_multiplier * C, whatever the release rule.

    The k releases are mu-GDP with mu = sqrt(k) / noise_multiplier (Dong, Roth & Su 2022, Cor. 3.3, adaptive
    composition). Telling which of a flipped and a clean point is the flipped one compares two datasets that differ
    in both points' labels, two replacements of sensitivity 2C: 2 sqrt(2) mu-GDP, so no rule is right with
    probability above Phi(sqrt(2) mu) = Phi(sqrt(2k) / noise_multiplier), and that bounds the expected AUROC.
    At (1, 5e-5)-DP it is 0.663 for every k (mu = 0.298). X* and Y* are post-processing: the same bound."""
    noise_multiplier = check_positive("noise_multiplier", noise_multiplier)
    k = check_count("num_releases", num_releases, minimum=1)
    return 0.5 * math.erfc(-math.sqrt(k) / noise_multiplier)  # Phi(x) = erfc(-x / sqrt(2)) / 2


def dp_variance_by_k(
    model,
    party_x,
    party_y,
    x_val,
    y_val,
    ks,
    *,
    epsilon: float = 1.0,
    delta: float = 5e-5,
    learning_rate: float = 0.01,
    arms: tuple[tuple[str, float], ...] = (("iid", 0.0), ("correlated", 0.0), ("correlated", 0.5)),
    trials: int = 16,
    key: int = 0,
) -> dict[tuple[str, float], dict[str, np.ndarray]]:
    """For each arm (noise mode, burn-in q) and each k: the DP-noise variance of the Shapley psi (Eq. 3: the
    variance over `trials` noise draws with the permutations and initialisations held fixed, averaged over parties)
    and the mean-adjusted variance (Sec. 6.1, averaged over trials), with the noise calibrated for k releases at
    (epsilon, delta). One compiled run of max(ks) permutations serves every k: under 'iid' and 'correlated' a
    run of k permutations is the first k rows of a longer one with the same noise scale.

    The noise is the private runs' (the Gaussian rounded to a grid, `Mechanism.gaussian_on_grid`), drawn from
    explicit experiment seeds (this measures the noise; it releases nothing).
    Returns {(mode, q): {'variance': (len(ks),), 'mean_adjusted_variance': (len(ks),)}}.
    """
    ks = [check_count("k", k, minimum=2) for k in ks]
    trials = check_count("trials", trials, minimum=2)
    for mode, _ in arms:
        if mode not in ("iid", "correlated"):
            raise ValueError(f"dp_variance_by_k compares the k-free release rules 'iid' and 'correlated', got {mode!r}")
    guarantee = DPGuarantee(epsilon, delta)
    dtype = jnp.float32
    inputs = tuple(
        jnp.asarray(a, dtype if jnp.issubdtype(jnp.asarray(a).dtype, jnp.floating) else None)
        for a in (party_x, party_y, x_val, y_val)
    )
    grid = Mechanism.gaussian_on_grid(guarantee, 1.0, model.num_parameters).grid  # the same for every k
    settings = {"model": model, "num_permutations": max(ks), "learning_rate": learning_rate, "clip": 1.0, "grid": grid}
    runs = jax.jit(jax.vmap(partial(_noise_trial, jax.random.key(key), inputs, settings), (0, None, None)))
    results = {arm: {"variance": [], "mean_adjusted_variance": []} for arm in arms}
    for k in ks:
        mechanism = Mechanism.gaussian_on_grid(guarantee, 1.0, model.num_parameters, num_compositions=k, grid=grid)
        sampler = RoundedGaussianSampler(RandomWords(f"dp_variance_by_k {key} {k}".encode()))
        shape = (trials, max(ks), len(inputs[0]), model.num_parameters)
        noise = jnp.asarray(sampler.sample(mechanism.grid_steps, math.prod(shape)).reshape(shape), jnp.int32)
        noise_std = jnp.asarray(mechanism.noise_std, dtype)
        for mode in dict.fromkeys(mode for mode, _ in arms):
            marginals = np.asarray(runs(noise, noise_std, NOISE_MODES.index(mode)))[:, :k]
            for arm in (arm for arm in arms if arm[0] == mode):
                for name, value in _noise_spread(marginals, arm[1]).items():
                    results[arm][name].append(value)
    return {arm: {name: np.asarray(v) for name, v in values.items()} for arm, values in results.items()}


def _noise_trial(sampling_key, inputs, settings, noise, noise_std, mode):
    """The (k, n) marginals of one draw of the integer noise, the permutations and initialisations fixed by
    `sampling_key`."""
    return gradient_marginals(sampling_key, *inputs, noise, noise_std, mode=mode, **settings)[0]


def _noise_spread(marginals: np.ndarray, burn_in: float) -> dict[str, float]:
    """From the (trials, k, n) marginals of one arm: the variance over trials of psi (Y(q) for q = `burn_in`),
    averaged over parties, and the mean-adjusted variance of the averaged permutations, averaged over trials."""
    psi = np.array([burn_in_values(m, burn_in)[0] for m in marginals])
    start = burn_in_count(marginals.shape[1], burn_in)
    return {
        "variance": psi.var(axis=0, ddof=1).mean(),
        "mean_adjusted_variance": np.mean([mean_adjusted_variance(m[start:]) for m in marginals]),
    }


def mislabel_detection(
    X,
    y,
    X_val,
    y_val,
    *,
    semivalues: tuple[str | Semivalue, ...] = ("shapley",),
    burn_ins: tuple[float, ...] = (0.5, 0.9),
    num_permutations: int = 1000,
    epsilon: float = 1.0,
    delta: float = 5e-5,
    learning_rate: float = 0.003,
    fraction: float = 0.3,
    model: str = "logistic",
    trials: int = 5,
    key: int = 0,
    noise_seed: int | None = None,
) -> dict[str, dict[str, np.ndarray]]:
    """AUROC of detecting `fraction` flipped labels by low value (Table 2's protocol): per trial, one no-DP run, one
    i.i.d. run and one X* run at (epsilon, delta) with k permutations, each valued by every semivalue, X* also with
    every burn-in q (Y*(q)), all from the same releases. Returns {semivalue name: {arm: AUROCs over trials}} with
    arms 'no DP', 'iid', 'X*' and 'Y*(q)'. noise_seed: seeds of the privacy noise (seed + 2 trial + arm), for
    reproducible experiments; None draws it from OS entropy.
    """
    trials = check_count("trials", trials, minimum=1)
    check_positive("learning_rate", learning_rate)
    semivalues = [as_semivalue(s) for s in semivalues]
    table = {s.name: {} for s in semivalues}
    arms = (("no DP", {}), ("iid", {"noise": "iid"}), ("X*", {"noise": "correlated"}))
    for trial in range(trials):
        labels, flipped = flip_labels(jax.random.fold_in(jax.random.key(key), trial), y, fraction)
        for index, (arm, settings) in enumerate(arms):
            private = {} if arm == "no DP" else {"epsilon": epsilon, "delta": delta}
            seed = None if noise_seed is None or not private else noise_seed + 2 * trial + index - 1
            estimator = GradientSemivalues(
                model,
                num_permutations=num_permutations,
                learning_rate=learning_rate,
                key=key + trial,
                noise_seed=seed,
                **private,
                **settings,
            ).fit(X, labels)
            estimator.value(X_val, y_val)
            for semivalue in semivalues:
                weighted = weighted_marginals(estimator.marginals_, estimator.positions_, semivalue)
                for q in (0.0, *burn_ins) if arm == "X*" else (0.0,):
                    name = f"Y*({q:g})" if q else arm
                    auroc = detection_auroc(burn_in_values(weighted, q)[0], flipped)
                    table[semivalue.name].setdefault(name, []).append(auroc)
    return {s: {arm: np.asarray(aucs) for arm, aucs in row.items()} for s, row in table.items()}


def stderr_calibration(
    train, validation, *, noise: str, burn_in: float, runs: int, num_permutations: int, seed: int, **options
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """How well a private `GradientSemivalues` run's standard errors describe its values' spread over runs with fresh
    sampling keys and noise (docs/gradients.md, "Standard errors"): per party, the values' standard deviation over
    `runs` runs, the mean reported standard error and the mean Monte Carlo error over permutations alone. Run r takes
    key r and noise_seed seed + r; `options` go to the estimator (epsilon, delta, learning_rate, ...)."""
    values, reported, monte_carlo = [], [], []
    for run in range(check_count("runs", runs, minimum=2)):
        estimator = GradientSemivalues(
            num_permutations=num_permutations, noise=noise, burn_in=burn_in, key=run, noise_seed=seed + run, **options
        )
        result = estimator.fit(*train).value(*validation)
        values.append(result.values)
        reported.append(result.stderr)
        monte_carlo.append(result.diagnostics["monte_carlo_stderr_without_shared_noise"])
    return np.std(values, axis=0, ddof=1), np.mean(reported, axis=0), np.mean(monte_carlo, axis=0)


__all__ = ["detection_auroc_bound", "dp_variance_by_k", "fitted_slope", "mislabel_detection", "stderr_calibration"]
