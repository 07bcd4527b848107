"""Layered Shapley and DP Layered Shapley (Watson et al. 2023, Algorithms 1 and 2), and the Monte Carlo permutation
baseline, as data-point estimators on a retraining utility: ``estimator.fit(X, y).value(X_val, y_val)``.

Layered Shapley writes the Shapley value as the mean over coalition sizes k of the layer means
phi_i^k = mean over size-k coalitions C of N minus i of v(C u i) - v(C) (paper Eq. 1), and estimates layer k from
m_k = c^2 / (2 alpha^2 k^2) ln(2n / beta) coalitions (Alg. 1, line 4): Hoeffding per layer and a union bound give
P(|phi_hat_i - phi_i| >= alpha) <= beta when |v_i(C)| <= c / k (Thm 3.3). Where Alg. 1 leaves gaps we fill them
(docs/layered.md, "Where we depart from the paper"): a layer with ceil(m_k) >= binom(n-1, k) coalitions is
enumerated; a layer with m_k < 1 is sampled with probability m_k (Sec. 3.2; estimate 0 when not); each layer's
estimate is the mean of its realised draws (which the App. D sensitivity needs); the empty layer k = 0,
v({i}) - v({}), which Eq. 1 and Thm 3.3's phi_i hold but Alg. 1's loop leaves out, is computed exactly by default
(`include_empty_layer=True`), so that the guarantee is about the Shapley value itself; with
`include_empty_layer=False` (Alg. 1 as printed) the target is the Shapley value less (v({i}) - v({})) / n, and the
result's diagnostics["target"] says so. The coalitions of every layer come from the game layer's stratified sampler in
its fixed mode (`bayesval.games.samplers.StratifiedSampler.fixed_draws`), given the counts per point and layer.
Each value's standard error estimates its spread over keys: the sampled layers' variances (finite-population
corrected, a few-draw layer's shrunk toward its neighbouring layers') and the random inclusion of the layers of
m_k < 1, whose moments are pooled over a point's drawn ones under the c / k scaling.

DP Layered Shapley (Alg. 2) adds Laplace noise to each value, of scale about Delta / epsilon, floating-point safe:
each value rounded to a power-of-two grid and the rounded Laplace noise drawn exactly in integers
(`bayesval.privacy.Mechanism.laplace_on_grid`; float Laplace noise would give the value away through its low-order
bits, docs/privacy.md), with the Appendix D sensitivity Delta = s L^2 kappa^2 H_{n-1} / (n lambda), with s = 2 for
replace-one neighbours (the paper's Def. 2.1), where a swap moves each loss by twice the removal stability of
Def. 3.2, and s = 1, the paper's value, for add-or-remove. No amplification by subsampling (Thm 3.5 and App. D divide by
epsilon_0 = ln(1 + (e^epsilon - 1) / p) instead). That bound needs the subsample to be secret, and here the coalitions
come from the sampling key, which is public (`bayesval.privacy.noise`), and the result publishes each point's draw
counts; it also needs each point's own probability of being used, not App. D's expected count p. Both readings of
App. D are argued in docs/layered.md, "Where we depart from the paper". Each value is epsilon-DP for the other
points; releasing all n composes to n epsilon, which is what the ledger records. A private result publishes nothing
else computed from the data: its standard errors are the noise's, sqrt(2) b, and it has no fallback count.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import replace
from functools import partial
from math import comb

import jax
import numpy as np

from bayesval.batching import map_in_batches
from bayesval.estimators.base import PointEstimator, sampling_key
from bayesval.estimators.layered.utilities import LogisticRegressionUtility, power_of_two
from bayesval.games.samplers import PermutationSampler, StratifiedSampler, samples_without_replacement
from bayesval.games.semivalues import checked_values, semivalue
from bayesval.games.stopping import MaxEvaluations
from bayesval.games.utilities import KeylessUtility
from bayesval.privacy import Mechanism, NoiseSource
from bayesval.privacy.ledger import ADJACENCIES
from bayesval.privacy.release import check_noise_options, perturb
from bayesval.results.result import ValuationResult
from bayesval.validation import (
    check_bool,
    check_count,
    check_int,
    check_key,
    check_positive,
    check_probability,
)

TARGETS = {  # what a value estimates, by include_empty_layer (docs/layered.md, "Where we depart from the paper")
    True: "shapley value",
    False: "shapley value less its layer-0 term (v({i}) - v({})) / n",
}
EVALUATION_BUDGET = 10**7  # utility evaluations a Monte Carlo plan may take without an explicit max_evaluations


def layer_sample_sizes(num_players: int, alpha: float, beta: float, c: float) -> np.ndarray:
    """m_k = c^2 / (2 alpha^2 k^2) ln(2n / beta) for k = 1 .. n-1 (Alg. 1, line 4), with m_0 = 0 (index k)."""
    sizes = np.arange(1, num_players)
    return np.concatenate([[0.0], c**2 / (2 * alpha**2 * sizes**2) * math.log(2 * num_players / beta)])


def check_some_layer_sampled(num_players: int, alpha: float, beta: float, c: float) -> None:
    """Refuse settings whose every m_k < 1 (Alg. 1, line 4; m_1 is the largest): each layer would then be drawn only
    with probability m_k (Sec. 3.2), so the values would rest on a few coin flips, and under some keys on no
    coalition at all."""
    largest = layer_sample_sizes(num_players, alpha, beta, c)[1]
    if largest < 1:
        needed = math.sqrt(2 / math.log(2 * num_players / beta))
        raise ValueError(
            f"every layer's sample size m_k = c^2 ln(2n / beta) / (2 alpha^2 k^2) is below 1 (the largest, m_1 = "
            f"{largest:.3g}, for n={num_players}, alpha={alpha:g}, beta={beta:g}, c={c:g}): Layered Shapley would "
            "draw each layer only with probability m_k, a few coalitions or none. Lower alpha or beta, or raise c "
            f"(m_1 >= 1 needs c / alpha >= {needed:.3g})"
        )


def layer_counts(key, num_players: int, alpha: float, beta: float, c: float, include_empty_layer: bool = False):
    """Coalitions drawn per point and layer, (n, n) int: min(binom(n-1, k), ceil(m_k)) where m_k >= 1, else one with
    probability m_k (Alg. 1's inclusion probability p_k of line 6 capped at 1, whole counts for m_k >= 1, and
    Sec. 3.2's reading of m_k < 1); 1 in layer 0 with `include_empty_layer`, a layer Alg. 1 leaves out
    (docs/layered.md, "Where we depart from the paper")."""
    sample_sizes = layer_sample_sizes(num_players, alpha, beta, c)
    fixed = np.array(
        [min(comb(num_players - 1, k), math.ceil(m)) if m >= 1 else 0 for k, m in enumerate(sample_sizes)], np.int64
    )
    rare = np.asarray(jax.random.uniform(key, (num_players, num_players))) < np.where(sample_sizes < 1, sample_sizes, 0)
    counts = np.where(sample_sizes >= 1, fixed, rare.astype(np.int64))
    counts[:, 0] = int(include_empty_layer)
    return counts


def layered_shapley(
    utility,
    num_players: int,
    key,
    *,
    alpha: float = 0.05,
    beta: float = 0.05,
    c: float = 0.5,
    include_empty_layer: bool = True,
    batch_size: int = 4096,
) -> ValuationResult:
    """Layered Shapley values (Watson et al. 2023, Alg. 1, completed as in docs/layered.md, "Where we depart from
    the paper") of a utility `utility(key, masks)`.

    Every sampled coalition costs two values, v(C) and v(C u i); each distinct coalition is valued once, in
    batches of `batch_size` masks. The standard error per value estimates its standard deviation over keys: the
    sampled layers' sampling variance and the rare layers' random inclusion (`_layer_statistics`); it is 0 only
    where every layer was enumerated or the point's draws vary nowhere (equal within each sampled layer, 0 in each
    rare one: a null player). It leaves out the estimate's bias,
    E[phi_hat_i] = (1 / n) sum_k min(m_k, 1) phi_i^k, from the rare layers' estimate 0 when not drawn.

    The target is the Shapley value phi_i of Eq. 1 with `include_empty_layer` (the default: layer 0,
    v({i}) - v({}), valued exactly); without it, Alg. 1 as printed, it is phi_i - (v({i}) - v({})) / n, and
    the (alpha, beta) guarantee of Thm 3.3 and the standard errors are about that (docs/layered.md, "The empty
    layer"). diagnostics["target"] names it."""
    num_players = check_count("num_players", num_players, minimum=2)
    key = check_key("key", key)
    alpha, beta = check_probability("alpha", alpha), check_probability("beta", beta)
    c = check_positive("c", c)
    check_bool("include_empty_layer", include_empty_layer)
    batch_size = check_count("batch_size", batch_size, minimum=1)
    check_some_layer_sampled(num_players, alpha, beta, c)
    started = time.perf_counter()
    counts_key, coalition_key, utility_key = jax.random.split(key, 3)
    counts = layer_counts(counts_key, num_players, alpha, beta, c, include_empty_layer)
    without, owners, layers = StratifiedSampler.fixed_draws(coalition_key, counts)
    with_point = without.copy()
    with_point[np.arange(len(owners)), owners] = True
    coalitions, inverse = np.unique(
        np.packbits(np.concatenate([with_point, without]), axis=1), axis=0, return_inverse=True
    )
    masks = np.unpackbits(coalitions, axis=1, count=num_players).astype(bool)
    values = _chunked_values(utility, utility_key, masks, batch_size)
    gains = values[inverse[: len(owners)]] - values[inverse[len(owners) :]]
    sample_sizes = layer_sample_sizes(num_players, alpha, beta, c)
    layer_means, variance = _layer_statistics(gains, owners, layers, counts, sample_sizes, c)
    return ValuationResult(
        method="layered shapley",
        values=layer_means.sum(axis=1) / num_players,
        stderr=np.sqrt(variance) / num_players,
        names=[str(i) for i in range(num_players)],
        counts=counts.sum(axis=1),
        diagnostics={
            "alpha": alpha,
            "beta": beta,
            "c": c,
            "include_empty_layer": include_empty_layer,
            "target": TARGETS[include_empty_layer],
            "coalitions_per_layer": counts.mean(axis=0).tolist(),
            "enumerated_layers": [k for k in range(1, num_players) if counts[0, k] == comb(num_players - 1, k)],
            "marginals": len(gains),
            "evaluations": len(masks),
            "padding_coalitions": -len(masks) % min(batch_size, power_of_two(len(masks))),
            "seconds": time.perf_counter() - started,
        },
    )


def _chunked_values(utility, key, masks: np.ndarray, batch_size: int) -> np.ndarray:
    """The utility's values (checked: finite, one per coalition) of `masks`, in batches of a power-of-two size (the
    last padded with empty coalitions, `bayesval.batching.map_in_batches`), so that a compiled utility sees few
    shapes; batch b's key is fold_in(key, b)."""
    names = [str(i) for i in range(masks.shape[1])]

    def values(b: int, batch: np.ndarray):
        return checked_values(utility(jax.random.fold_in(key, b), batch), batch, names)[0]

    return map_in_batches(values, masks, min(batch_size, power_of_two(len(masks))), fill=False)


def _layer_statistics(gains, owners, layers, counts, sample_sizes, c: float):
    """Layer means (n, n), 0 where a layer drew nothing, and the variance (n,) of each point's sum of layer
    estimates over the draws of Alg. 1: that of its sampled layers' means plus that of its rare layers' inclusion.
    Enumerated layers are exact and add none."""
    num_players = counts.shape[0]
    drawn = counts.astype(np.float64)
    sums = _layer_sums(gains, owners, layers, num_players)
    means = np.divide(sums, drawn, out=np.zeros_like(sums), where=drawn > 0)
    squares = _squared_deviations(gains, owners, layers, drawn)
    totals = np.array([comb(num_players - 1, k) for k in range(num_players)], np.float64)
    rare = np.broadcast_to((sample_sizes < 1) & (np.arange(num_players) > 0), counts.shape)
    listed = samples_without_replacement(num_players, counts)
    variance = _sampled_layer_variance(squares, drawn, totals, rare, listed) + _rare_layer_variance(
        sums, drawn > 0, sample_sizes, rare[0], c
    )
    return means, variance


def _layer_sums(values, owners, layers, num_players: int) -> np.ndarray:
    """Sums of `values` per point and layer, (n, n)."""
    groups = owners * num_players + layers
    return np.bincount(groups, values, num_players * num_players).reshape(num_players, num_players)


def _squared_deviations(gains, owners, layers, drawn) -> np.ndarray:
    """sum (x - mean)^2 per point and layer, (n, n), from the draws shifted by their layer's smallest, so that equal
    draws give exactly 0."""
    num_players = len(drawn)
    smallest = np.full(num_players * num_players, np.inf)
    np.minimum.at(smallest, owners * num_players + layers, gains)
    shifted = gains - smallest[owners * num_players + layers]
    sums = _layer_sums(shifted, owners, layers, num_players)
    squares = _layer_sums(shifted**2, owners, layers, num_players)
    return np.maximum(squares - np.divide(sums**2, drawn, out=np.zeros_like(sums), where=drawn > 0), 0.0)


def _sampled_layer_variance(squares, drawn, totals, rare, listed) -> np.ndarray:
    """sum_k s_k^2 / m_k (1 - m_k / N_k) per point over its layers of m_k >= 1 draws without replacement from the
    N_k = binom(n-1, k) coalitions (`listed`; Cochran, Sampling Techniques, Thm 2.2), and s_k^2 / m_k over those
    drawn independently, where N_k is too large to list (no finite-population correction: their draws repeat).
    s_k^2 is the layer's sample variance shrunk toward its neighbours' (`_shrunk_variances`). Only an enumerated
    layer, every coalition once (m_k = N_k, which `StratifiedSampler.fixed_draws` lists whatever N_k), is exact
    and adds 0."""
    dof = np.maximum(drawn - 1.0, 0.0)  # 0 for a rare layer, drawn once at most
    variances = np.divide(squares, dof, out=np.zeros_like(squares), where=dof > 0)
    sampled = ~rare & (drawn > 0) & ~(listed & (drawn >= totals))
    correction = np.where(listed, 1.0 - drawn / totals, 1.0)
    shrunk = _shrunk_variances(variances, dof)
    return np.where(sampled, shrunk / np.maximum(drawn, 1.0) * correction, 0.0).sum(axis=1)


SHRINKAGE_DOF = 1.0  # the prior's weight in degrees of freedom: a layer of 2 draws (1 dof) is half prior


def _shrunk_variances(variances, dof) -> np.ndarray:
    """Each layer's sample variance shrunk toward a prior from the same point's other layers, with weights dof_k and
    SHRINKAGE_DOF: (dof_k s_k^2 + d_0 prior_k) / (dof_k + d_0) (Smyth 2004, moderated variances; Watson et al.'s
    layers differ in size, so the prior is scaled by their diminishing-returns bound c / k, Sec. 3). A layer of a
    few draws, all equal, thus gets its neighbours' variance rather than 0; one of hundreds keeps its own.

    The prior for layer k pools the scaled variances j^2 s_j^2 of the point's layers j in [k/2, 2k] (sampled or
    enumerated, weighted by dof_j), divided by k^2; where those hold no spread, of all its layers. The window keeps
    the prior local: a layer's variance falls faster than the bound (as k^-3 for a mean of k points), and pooling
    every layer at k^2 would overstate the few-draw layers, which lie at the top of the sampled range."""
    num_players = variances.shape[1]
    sizes = np.arange(num_players)
    scaled = np.concatenate([np.zeros((len(dof), 1)), np.cumsum(dof * sizes**2 * variances, axis=1)], axis=1)
    weights = np.concatenate([np.zeros((len(dof), 1)), np.cumsum(dof, axis=1)], axis=1)
    low, high = (sizes + 1) // 2, np.minimum(2 * sizes, num_players - 1) + 1
    window = np.divide(
        scaled[:, high] - scaled[:, low],
        weights[:, high] - weights[:, low],
        out=np.zeros_like(variances),
        where=weights[:, high] > weights[:, low],
    )
    point = np.divide(scaled[:, -1:], weights[:, -1:], out=np.zeros((len(dof), 1)), where=weights[:, -1:] > 0)
    prior = np.where(window > 0, window, point) / np.maximum(sizes, 1) ** 2
    return (dof * variances + SHRINKAGE_DOF * prior) / (dof + SHRINKAGE_DOF)


def _rare_layer_variance(sums, seen, sample_sizes, rare, c: float) -> np.ndarray:
    """Var(sum_k 1[D_k] x_k) per point over its rare layers (Watson et al., Alg. 1, line 4: m_k < 1 coalitions),
    each drawn with probability m_k (D_k), then as one uniform coalition's marginal x_k:
    sum_k m_k E[x_k^2] - m_k^2 E[x_k]^2, layers being independent.

    Each rare layer is seen once at most, so its moments are pooled over the point's seen rare layers, scaled by the
    diminishing-returns bound c / k (Sec. 3): y_k = k x_k, with h = E[y^2] and g = E[y] shared, the variance is
    A h - B g^2, A = sum_k m_k / k^2, B = sum_k m_k^2 / k^2. Both moments are Hajek (ratio) estimates (Hajek 1971)
    with each seen layer weighted by its target weight over its inclusion probability: 1 / k^2 for h,
    m_k / k^2 for g^2, estimated without bias from the pairs of distinct seen layers. g^2 <= h caps the estimate
    of g^2, so the variance stays at least (A - B) h > 0. A point with fewer than two seen rare layers leaves out
    g^2 (an upper bound); one with none borrows h from every point's seen rare layers, and where no point saw one,
    takes the bound c^2."""
    sizes = np.arange(len(sample_sizes), dtype=np.float64)
    inverse_square = np.where(rare, 1.0 / np.maximum(sizes, 1.0) ** 2, 0.0)
    seen = seen & rare
    mean_square = np.where(seen, inverse_square, 0.0)  # the Hajek weights of h
    square_sums = (seen * sums**2).sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        pooled = square_sums.sum() / mean_square.sum() if seen.any() else c**2
        h = np.where(seen.any(axis=1), square_sums / mean_square.sum(axis=1), pooled)
        weights = mean_square * sample_sizes  # those of g^2
        pairs = weights.sum(axis=1) ** 2 - (weights**2).sum(axis=1)
        products = (weights * sizes * sums).sum(axis=1) ** 2 - ((weights * sizes * sums) ** 2).sum(axis=1)
        g_squared = np.where(seen.sum(axis=1) >= 2, np.clip(products / pairs, 0.0, h), 0.0)
    return (sample_sizes * inverse_square).sum() * h - (sample_sizes**2 * inverse_square).sum() * g_squared


def expected_coalitions_with(coalitions_per_layer) -> float:
    """p: the expected number of a point's sampled coalitions that hold a given other point,
    sum_k E[M_k] k / (n - 1), from the mean draws per layer k = 0 .. n-1. This is Watson et al.'s Thm 3.4 with its
    proof's probability corrected: a size-k coalition of the n - 1 other points holds a given one with probability
    k / (n - 1), not k / n (docs/layered.md, "Where we depart from the paper")."""
    per_layer = np.asarray(coalitions_per_layer, np.float64)
    return float((per_layer * np.arange(len(per_layer))).sum() / (len(per_layer) - 1))


def layered_sensitivity(num_players: int, lipschitz: float, kappa: float, l2: float, adjacency: str) -> float:
    """Delta = s L^2 kappa^2 H_{n-1} / (n lambda) (Watson et al. 2023, App. D, where s = 1): s = 2 for replace-one
    neighbours, since uniform stability bounds a removal and a swap is a removal and an addition (docs/layered.md,
    "Where we depart from the paper")."""
    harmonic = float(np.sum(1.0 / np.arange(1, num_players)))
    return (2.0 if adjacency == "replace-one" else 1.0) * lipschitz**2 * kappa**2 * harmonic / (num_players * l2)


class _RetrainingValuation(PointEstimator):
    """The retraining family on the shared base: fit keeps the points (at least two; their labels as given, which the
    utility checks), value builds the utility on the validation set and values every point."""

    codes_labels = False  # the utility codes (and checks) the labels itself

    def __init__(self, utility: Callable | None, key, seed, batch_size: int, batch_name: str = "batch_size") -> None:
        self.utility = partial(LogisticRegressionUtility, norm_bound=1.0) if utility is None else utility
        if not callable(self.utility):
            raise TypeError(
                f"utility must be callable as utility(X, y, X_val, y_val), e.g. LogisticRegressionUtility, got "
                f"{self.utility!r}"
            )
        self.key = sampling_key(key, seed, type(self).__name__)
        self.batch_size = check_count(batch_name, batch_size, minimum=1)

    def _check_rows(self, features) -> None:
        if features.shape[0] < 2:
            raise ValueError(f"X has {features.shape[0]} rows; valuing data points needs at least 2")

    def _store(self, features, labels) -> None:
        self.X_, self.y_ = features, np.asarray(labels)

    def _value(self, X_val, y_val) -> ValuationResult:
        """Value every training point by the utility's score on (X_val, y_val)."""
        utility = self.utility(self.X_, self.y_, X_val, y_val)
        before = getattr(utility, "fallbacks", 0)
        result = self._values(utility)
        diagnostics = dict(result.diagnostics)
        padding = diagnostics.pop("padding_coalitions", 0)  # empty coalitions filling the last chunk
        if not result.privacy.releases:  # a count from the raw data is published only where nothing is private
            diagnostics["fallback_coalitions"] = getattr(utility, "fallbacks", 0) - before - padding
        return replace(result, diagnostics=diagnostics)

    def _values(self, utility) -> ValuationResult:
        raise NotImplementedError


class LayeredShapley(_RetrainingValuation):
    """Layered Shapley (Watson et al., Alg. 1), private with `epsilon` (Alg. 2, Laplace output noise).

    alpha, beta    the (alpha, beta) guarantee: P(|phi_hat_i - phi_i| >= alpha) <= beta per point, in (0, 1), phi_i
                   the Shapley value (Eq. 1; with include_empty_layer=False, less (v({i}) - v({})) / n)
    c              the diminishing-returns constant, |v_i(C)| <= c / |C| (taken as the marginals' range, as the
                   paper's Hoeffding step does; |v_i| <= c / k spans 2c / k, so pass 2c for a rigorous bound).
                   Default: from the utility's uniform stability gamma_k = L^2 kappa^2 / (2 lambda k) (Bousquet &
                   Elisseeff 2002, as Watson et al. use it in Sec. 3.1), c = L^2 kappa^2 / (2 lambda)
    include_empty_layer   value the layer k = 0, v({i}) - v({}), exactly (default True: in Eq. 1 and in the phi_i of
                   Thm 3.3, but not in Alg. 1's loop; v({}) is the utility's value of the empty coalition, for
                   LogisticRegressionUtility an uninformed model's score). False follows Alg. 1 as printed and
                   estimates the Shapley value less (v({i}) - v({})) / n
    epsilon        per-value DP budget (> 0); the n values together are n epsilon-DP (recorded in the ledger)
    adjacency      'replace-one' (the paper's Def. 2.1; sensitivity factor 2) or 'add-or-remove-one' (factor 1,
                   the paper's Appendix D)
    utility        a factory utility(X, y, X_val, y_val) -> utility(key, masks) (default LogisticRegressionUtility
                   with norm_bound=1: rows scaled to norm <= 1, log-loss, lambda = 1; `functools.partial` sets other
                   options); DP needs one with `stability()` (L, kappa, lambda)
    key            the sampling key (an int seed or a jax.random.key); privacy noise comes from `noise_seed` / OS
                   entropy instead. `seed=`, its former name, works for one more release (DeprecationWarning)
    """

    def __init__(
        self,
        alpha: float = 0.05,
        beta: float = 0.05,
        c: float | None = None,
        *,
        include_empty_layer: bool = True,
        epsilon: float | None = None,
        adjacency: str = "replace-one",
        utility: Callable | None = None,
        key=0,
        batch_size: int = 4096,
        noise_seed: int | None = None,
        allow_seed_reuse: bool = False,
        seed=None,
    ) -> None:
        super().__init__(utility, key, seed, batch_size)
        self.alpha, self.beta = check_probability("alpha", alpha), check_probability("beta", beta)
        self.c = None if c is None else check_positive("c", c)
        self.include_empty_layer = check_bool("include_empty_layer", include_empty_layer)
        self.epsilon = None if epsilon is None else check_positive("epsilon", epsilon)
        if adjacency not in ADJACENCIES:
            raise ValueError(f"adjacency must be one of {ADJACENCIES}, got {adjacency!r}")
        self.adjacency = adjacency
        check_noise_options(self.epsilon is not None, noise_seed, allow_seed_reuse, "DP Layered Shapley", "epsilon")
        self.noise = None if self.epsilon is None else NoiseSource(noise_seed, allow_reuse=allow_seed_reuse)
        self.method = "layered shapley" if self.epsilon is None else "dp layered shapley"

    def _values(self, utility) -> ValuationResult:
        needs_stability = self.epsilon is not None or self.c is None
        if needs_stability and not hasattr(utility, "stability"):
            raise ValueError(
                f"{type(utility).__name__} declares no stability bound (L, kappa, lambda): DP Layered Shapley cannot "
                "derive its sensitivity, and c must be given"
            )
        stability = utility.stability() if needs_stability else None
        c = self.c if self.c is not None else stability[0] ** 2 * stability[1] ** 2 / (2 * stability[2])
        num_players = utility.num_players
        result = layered_shapley(
            utility,
            num_players,
            self.key,
            alpha=self.alpha,
            beta=self.beta,
            c=c,
            include_empty_layer=self.include_empty_layer,
            batch_size=self.batch_size,
        )
        result = replace(result, method=self.method)
        if self.epsilon is None:
            return result
        # No amplification by subsampling: the coalitions follow from the public sampling key and the draw counts
        # are published, so each value is the Laplace mechanism on known coalitions (docs/layered.md)
        sensitivity = layered_sensitivity(num_players, *stability, self.adjacency)
        mechanism = Mechanism.laplace_on_grid(
            num_players * self.epsilon, sensitivity, num_players, num_compositions=num_players, adjacency=self.adjacency
        )
        what = f"Layered Shapley values of {num_players} points, each {self.epsilon:g}-DP for the other points"
        released, ledger = perturb(mechanism, result.values, self.noise, what)
        self._record(ledger)
        [release] = ledger.releases
        return replace(
            result,
            values=released,
            stderr=np.full(num_players, release.noise_std),  # the noise's; nothing un-noised
            privacy=ledger,
            diagnostics=result.diagnostics
            | {
                "epsilon": self.epsilon,
                "sensitivity": sensitivity,
                "noise_scale": mechanism.noise_scale,
                "adjacency": self.adjacency,
                "privacy_noise": repr(self.noise),
            },
        )


class MonteCarloShapley(_RetrainingValuation):
    """The Monte Carlo permutation baseline (Castro et al. 2009; Watson et al. Sec. 2.1.1, the green line of Fig. 1):
    m = ceil(ln(2 / beta) c^2 / (2 alpha^2)) permutations (Maleki et al.'s (alpha, beta) bound), each giving every
    point its marginal contribution to its predecessors, through the game layer (`bayesval.games.semivalue` with a
    `PermutationSampler`; a `LogisticRegressionUtility`, a deterministic fit, as a `KeylessUtility`, so that its first
    and last positions are exact, where another utility's are draws). Not truncated: the paper does not say its
    baseline truncates, and the truncation of Ghorbani & Zou's (2019) TMC-Shapley biases the values.
    `num_permutations` overrides m; it is rounded up to whole batches of `permutations_per_batch`. `key` is the
    sampling key (an int seed or a jax.random.key; `seed=`, its former name, works for one more release).

    A plan of more than `max_evaluations` utility evaluations (default `EVALUATION_BUDGET`, 10^7) is refused, with
    its size, rather than run for days (docs/layered.md, "The Monte Carlo baseline"): m (n + 1) evaluations for n
    points, checked at construction for the fewest points (n = 2) and again by `value`. Pass a larger
    `max_evaluations` to run such a plan on purpose."""

    method = "monte carlo shapley"

    def __init__(
        self,
        alpha: float = 0.05,
        beta: float = 0.05,
        c: float = 0.5,
        *,
        num_permutations: int | None = None,
        utility: Callable | None = None,
        key=0,
        permutations_per_batch: int = 8,
        max_evaluations: int | None = None,
        seed=None,
    ) -> None:
        super().__init__(utility, key, seed, permutations_per_batch, "permutations_per_batch")
        self.alpha, self.beta = check_probability("alpha", alpha), check_probability("beta", beta)
        self.c = check_positive("c", c)
        self.max_evaluations = (
            EVALUATION_BUDGET if max_evaluations is None else check_int("max_evaluations", max_evaluations, minimum=1)
        )
        if num_permutations is None:
            try:  # a float, which may be huge
                required = math.log(2 / self.beta) / 2 * (self.c / self.alpha) ** 2
            except OverflowError:
                required = math.inf
            self._source = f"to meet alpha={self.alpha:g}, beta={self.beta:g}, c={self.c:g}"
            self._check_plan(required, 2)
            self.num_permutations = math.ceil(required)
        else:
            self.num_permutations = check_count("num_permutations", num_permutations, minimum=1)
            self._source = "num_permutations"
            self._check_plan(self.num_permutations, 2)

    def _planned_evaluations(self, permutations: float, num_players: int) -> float:
        """Utility evaluations of `permutations` permutations of `num_players` points, rounded up to whole batches."""
        if not math.isfinite(permutations):
            return math.inf
        batch = min(self.batch_size, permutations)
        return math.ceil(permutations / batch) * batch * (num_players + 1)

    def _check_plan(self, permutations: float, num_players: int) -> None:
        """Refuse a plan of more than max_evaluations evaluations (at construction: for the fewest points, 2)."""
        planned = self._planned_evaluations(permutations, num_players)
        if planned > self.max_evaluations:
            permutations = math.ceil(permutations) if math.isfinite(permutations) else permutations
            fewest = " at least" if num_players == 2 else ""
            raise ValueError(
                f"MonteCarloShapley would take{fewest} {planned:.3g} utility evaluations: {permutations:.3g} "
                f"permutations ({self._source}) times n + 1 = {num_players + 1} for {num_players} points, more than "
                f"max_evaluations={self.max_evaluations:,}; pass a larger max_evaluations= to run it on purpose, or "
                "ask for fewer (a larger alpha or beta, or num_permutations=)"
            )

    def _values(self, utility) -> ValuationResult:
        num_players = utility.num_players
        self._check_plan(self.num_permutations, num_players)
        batch = min(self.batch_size, self.num_permutations)
        batches = -(-self.num_permutations // batch)
        result = semivalue(
            KeylessUtility(partial(utility, None)) if isinstance(utility, LogisticRegressionUtility) else utility,
            num_players,
            self.key,
            sampler=PermutationSampler(),
            stop=MaxEvaluations(batches * batch * (num_players + 1)),
            batch_size=batch,
        )
        return replace(result, method=self.method, diagnostics=result.diagnostics | {"permutations": batches * batch})


__all__ = [
    "LayeredShapley",
    "MonteCarloShapley",
    "layer_counts",
    "layer_sample_sizes",
    "layered_sensitivity",
    "layered_shapley",
]
