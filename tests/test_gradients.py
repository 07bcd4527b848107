"""Semivalues from DP gradient trajectories with correlated noise (Zhou et al. 2024; spec_correlated_noise.md):
the permutation importance weights by enumeration, the scanned trajectory against a literal loop of the corrected
Algorithm 1, the X* noise covariance, the calibration and ledger, the scaling of the DP variance with k, and bad
input."""

import importlib
import itertools
import math
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy.stats import betabinom
from sklearn.datasets import load_breast_cancer, load_diabetes

import bayesval as bv
from bayesval.estimators import (
    GradientSemivalues,
    LinearModel,
    LogisticModel,
    MLPModel,
    burn_in_values,
    dp_noise_covariance,
    gradient_marginals,
    mean_adjusted_variance,
    permutation_weights,
    released_gradients,
    weighted_marginals,
)
from bayesval.estimators.gradients.estimator import NOISE_MODES, release_covariance, release_step
from bayesval.experiments import (
    detection_auroc,
    flip_labels,
    standardise,
)
from bayesval.experiments.gradients import detection_auroc_bound, dp_variance_by_k, fitted_slope, stderr_calibration
from bayesval.games import BANZHAF, LEAVE_ONE_OUT, SHAPLEY, beta_shapley
from bayesval.games.masks import coalition_masks
from bayesval.games.weights import semivalue_matrix
from bayesval.privacy import DPGuarantee, Mechanism, SeedReuseError
from bayesval.privacy.rounded_gaussian import RandomWords, RoundedGaussianSampler

SEMIVALUES = [SHAPLEY, BANZHAF, beta_shapley(4, 1), beta_shapley(16, 1), beta_shapley(0.5, 2), LEAVE_ONE_OUT]


@pytest.fixture(scope="module")
def cancer():
    X, y = load_breast_cancer(return_X_y=True)
    order = np.random.default_rng(0).permutation(len(y))
    X_train, X_val = standardise(X[order[:40]], X[order[400:]])
    return X_train, y[order[:40]], X_val, y[order[400:]]


def release_matrix_transpose(cotangent, noise: str, noise_variance: float, gradient_variance: float = 0.0):
    """X^T D for the (k, k) lower-triangular release matrix X of `noise` (z*_t = sum_l X_tl z_l, Zhou et al. 2024,
    Sec. 5.2, Eq. 4 for X*) and D (k, ...): the vector-Jacobian product of the linear map `release_step` applies to
    the raw noise, so it is X of the implementation by construction: the reference `release_covariance` is tested
    against."""
    mode = NOISE_MODES.index(noise)
    cotangent = jnp.asarray(cotangent)
    k = cotangent.shape[0]

    def released(raw):
        def step(buffer, inputs):
            t, z = inputs
            return release_step(mode, buffer, z, t, k, noise_variance, gradient_variance)[::-1]

        return jax.lax.scan(step, jnp.zeros_like(raw[0]), (jnp.arange(1, k + 1), raw))[1]

    return jax.vjp(released, jnp.zeros_like(cotangent))[1](cotangent)[0]


@pytest.mark.parametrize("n", [3, 4, 5, 6])
def test_permutation_weights_make_the_permutation_mean_exact(n):
    """E_pi[p m_j] = phi_j and E_pi[p] = 1 over all n! permutations, for random utilities (spec Sec. 1.2, A1)."""
    masks = coalition_masks(n, include_empty=True)
    codes = {tuple(m): c for c, m in enumerate(masks.astype(int).tolist())}
    utility = np.random.default_rng(n).normal(size=len(masks))
    permutations = list(itertools.permutations(range(n)))
    for semivalue in SEMIVALUES:
        p = permutation_weights(semivalue, n)
        total, weight_sum = np.zeros(n), np.zeros(n)
        for order in permutations:
            coalition = [0] * n
            for position, j in enumerate(order):
                before = utility[codes[tuple(coalition)]]
                coalition[j] = 1
                total[j] += p[position] * (utility[codes[tuple(coalition)]] - before)
                weight_sum[j] += p[position]
        np.testing.assert_allclose(total / len(permutations), semivalue_matrix(n, semivalue) @ utility, atol=1e-12)
        np.testing.assert_allclose(weight_sum / len(permutations), 1.0, atol=1e-12)


def test_permutation_weights_closed_forms():
    """Spec Sec. 1.1's table: Shapley 1, Banzhaf n C(n-1, r-1) / 2^(n-1), Beta n BetaBinom(r-1; n-1, beta, alpha),
    leave-one-out n 1[r = n]."""
    n, r = 7, np.arange(1, 8)
    np.testing.assert_allclose(permutation_weights(SHAPLEY, n), 1.0)
    binomials = np.array([math.comb(n - 1, int(i) - 1) for i in r])
    np.testing.assert_allclose(permutation_weights(BANZHAF, n), n * binomials / 2 ** (n - 1))
    np.testing.assert_allclose(permutation_weights(beta_shapley(16, 1), n), n * betabinom.pmf(r - 1, n - 1, 1, 16))
    np.testing.assert_allclose(permutation_weights(LEAVE_ONE_OUT, n), n * (r == n))


def algorithm_1(noise, grid, sampling_key, model, party_x, party_y, x_val, y_val, k, alpha, clip, noise_std, mode, s2):
    """Algorithm 1 (corrected: the buffer is the raw running mean, A2) as a literal loop over t and j, each release
    grid * (the party's clipped gradients in whole grid steps, summed, + its integer noise)."""
    n, rows = party_x.shape[:2]
    d = model.num_parameters
    running_mean, previous = np.zeros((n, d)), np.zeros((n, d))
    marginals = np.zeros((k, n))
    loss = jax.jit(model.loss)
    grad = jax.jit(jax.grad(model.loss))
    for t in range(1, k + 1):
        perm_key, init_key = jax.random.split(jax.random.fold_in(sampling_key, t))
        order = np.asarray(jax.random.permutation(perm_key, n))
        theta = np.asarray(model.init(init_key), np.float64)
        before = -float(loss(theta, x_val, y_val))
        for j in order:
            steps = np.zeros(d)
            for b in range(rows):
                g = np.asarray(grad(theta, party_x[j, b : b + 1], party_y[j, b : b + 1]))
                steps += np.round(g / max(1.0, np.linalg.norm(g) / clip) / grid)
            noisy = (steps + noise[t - 1, j]) * grid
            if mode == "iid":
                released = noisy
            elif mode == "fl":
                released = noisy if t == 1 else (0.25 + 0.7 * t / k) * previous[j] + (0.75 - 0.7 * t / k) * noisy
                previous[j] = released
            else:
                a = noise_std**2
                x_tt = 1 / t if mode == "correlated" else (a + t * s2) / (t * (a + s2))
                released = (1 - x_tt) * running_mean[j] + x_tt * noisy
            running_mean[j] = (t - 1) / t * running_mean[j] + noisy / t
            theta = theta - alpha * released / rows
            after = -float(loss(theta, x_val, y_val))
            marginals[t - 1, j] = after - before
            before = after
    return marginals


@pytest.mark.parametrize("mode, s2", [("iid", 0.0), ("correlated", 0.0), ("adaptive", 0.3), ("fl", 0.0)])
def test_the_scanned_trajectory_is_algorithm_1(mode, s2):
    rng = np.random.default_rng(1)
    n, rows, f, k = 4, 2, 3, 5
    model = LogisticModel(f, 3)
    party_x, party_y = rng.normal(size=(n, rows, f)), rng.integers(0, 3, (n, rows))
    x_val, y_val = rng.normal(size=(20, f)), rng.integers(0, 3, 20)
    grid = 2.0**-10
    noise = RoundedGaussianSampler(RandomWords(b"noise")).sample(717, k * n * model.num_parameters)
    noise = noise.reshape(k, n, model.num_parameters)  # 0.7 / grid steps
    marginals, positions, finite, within = gradient_marginals(
        jax.random.key(6), party_x, party_y, x_val, y_val, jnp.asarray(noise, jnp.int32), 0.7, model=model,
        num_permutations=k, learning_rate=0.5, clip=0.8, mode=bv.estimators.NOISE_MODES.index(mode), grid=grid,
        gradient_variance=s2,
    )  # fmt: skip
    data = (party_x, party_y, x_val, y_val)
    expected = algorithm_1(noise, grid, jax.random.key(6), model, *data, k, 0.5, 0.8, 0.7, mode, s2)
    np.testing.assert_allclose(np.asarray(marginals), expected, rtol=1e-9, atol=1e-12)
    assert bool(finite) and bool(within)
    assert sorted(np.asarray(positions)[0].tolist()) == list(range(n))


def test_correlated_release_has_the_running_mean_covariance():
    """Under X* the released noise has Cov(z*_s, z*_t) = k (C sigma)^2 / max(s, t) (spec Sec. 2.2), with the noise
    calibrated for k releases at (1, 5e-5)-DP: std^2 = k (C sigma)^2, sigma = 1 / mu = 3.356 (spec Sec. 1.4);
    i.i.d. releases are uncorrelated with variance k (C sigma)^2. Coordinates (d = 20,000) are the samples."""
    k, d = 6, 20_000
    sigma = Mechanism.gaussian(DPGuarantee(1.0, 5e-5), 1.0, num_compositions=k).noise_scale
    assert sigma**2 == pytest.approx(k * 3.356**2, rel=2e-3)
    clean = jnp.tile(jnp.linspace(-0.5, 0.5, d), (k, 1))
    expected = sigma**2 / np.maximum.outer(np.arange(1, k + 1), np.arange(1, k + 1))
    for noise, target in (("correlated", expected), ("iid", sigma**2 * np.eye(k))):
        z = np.asarray(released_gradients(jax.random.key(3), clean, sigma, noise)) - np.asarray(clean)
        np.testing.assert_allclose(np.cov(z), target, atol=0.05 * sigma**2)
    adaptive = released_gradients(jax.random.key(4), clean, sigma, "adaptive", gradient_variance=0.0)
    np.testing.assert_allclose(adaptive, released_gradients(jax.random.key(4), clean, sigma, "correlated"), atol=1e-12)
    no_reuse = released_gradients(jax.random.key(4), clean, sigma, "adaptive", gradient_variance=1e12)
    np.testing.assert_allclose(no_reuse, released_gradients(jax.random.key(4), clean, sigma, "iid"), atol=1e-6)


def test_no_score_of_the_releases_detects_flips_beyond_the_gdp_bound():
    """detection_auroc_bound: k Gaussian releases at (1, 5e-5)-DP are mu-GDP with mu = 0.298, so no score ranks a
    flipped point below a clean one with expected AUROC above Phi(sqrt(2) mu) = 0.663 (Table 2's private columns,
    0.735-0.788, lie above it). The bound is attained by the likelihood-ratio score when the clean and flipped
    clipped gradients are antipodal (+C and -C): the sum of the i.i.d. releases, or k times the last X* release
    (the running mean). Noise calibrated too small would exceed it. Each coordinate is one 1-d party."""
    k, parties, clip = 50, 8_000, 1.0
    std = Mechanism.gaussian(DPGuarantee(1.0, 5e-5), clip, num_compositions=k).noise_scale
    bound = detection_auroc_bound(std / clip, k)
    assert bound == pytest.approx(0.6633, abs=5e-4)
    flipped = np.arange(parties) >= parties // 2
    clean = jnp.tile(jnp.where(flipped, -clip, clip), (k, 1))
    iid = np.asarray(released_gradients(jax.random.key(5), clean, std, "iid")).sum(axis=0)
    running_mean = np.asarray(released_gradients(jax.random.key(6), clean, std, "correlated"))[-1] * k
    for score in (iid, running_mean):
        assert detection_auroc(score, flipped) == pytest.approx(bound, abs=0.02)
    assert detection_auroc_bound(std / clip / 2, k) > 0.79  # half the noise: the bound (and the attack) move
    with pytest.raises(ValueError, match="noise_multiplier must be a finite number > 0"):
        detection_auroc_bound(0.0, k)
    with pytest.raises(ValueError, match="num_releases must be an integer >= 1"):
        detection_auroc_bound(1.0, 0)


def test_private_valuation_is_calibrated_for_k_releases_and_recorded(cancer):
    X, y, X_val, y_val = cancer
    estimator = GradientSemivalues(num_permutations=200, epsilon=1.0, delta=5e-5, learning_rate=0.003, noise_seed=11)
    result = bv.valuate(estimator, (X, y), validation=(X_val, y_val))
    assert result.diagnostics["noise_std"] == pytest.approx(47.5, rel=2e-3)  # spec Sec. 1.4's table
    (release,) = result.privacy.releases
    assert release.event.count == 200 and release.event.event.noise_multiplier == pytest.approx(47.5, rel=2e-3)
    assert release.sensitivity == 1.0 and release.adjacency == "add-or-remove-one"
    assert release.noise == "gaussian_on_grid" and release.floating_point_safe  # docs/privacy.md
    assert result.diagnostics["grid"] == release.grid and release.grid * math.sqrt(62) <= 1e-3
    assert result.privacy.spent(release.owner).epsilon <= 1.0 + 1e-3
    estimator.value(X_val, y_val)  # asking again is a new release
    assert len(estimator.ledger_) == 2
    assert result.counts.tolist() == [200] * 40 and result.diagnostics["noise"] == "correlated"
    plain = GradientSemivalues(num_permutations=200, learning_rate=0.003).fit(X, y).value(X_val, y_val)
    assert len(plain.privacy) == 0 and plain.method == "gradient_shapley_no_dp"


def test_values_are_the_burn_in_mean_of_weighted_marginals(cancer):
    X, y, X_val, y_val = cancer
    estimator = GradientSemivalues(
        semivalue=BANZHAF, num_permutations=20, epsilon=2.0, delta=1e-5, burn_in=0.7, noise_seed=12
    )
    result = estimator.fit(X, y).value(X_val, y_val)
    weighted = permutation_weights(BANZHAF, 40)[estimator.positions_] * estimator.marginals_
    np.testing.assert_allclose(result.values, weighted[14:].mean(axis=0))
    monte_carlo = weighted[14:].std(axis=0, ddof=1) / np.sqrt(6)
    np.testing.assert_allclose(result.diagnostics["monte_carlo_stderr_without_shared_noise"], monte_carlo)
    # X* shares its noise across permutations: the reported error adds the covariances the spread cannot see
    assert np.all(result.stderr > monte_carlo)
    assert result.counts.tolist() == [6] * 40
    np.testing.assert_allclose(weighted_marginals(estimator.marginals_, estimator.positions_, BANZHAF), weighted)
    psi, _, kept = burn_in_values(weighted, 0.0)
    assert kept == 20 and np.allclose(psi, weighted.mean(axis=0))
    m = weighted
    expected = np.mean(m.var(axis=0, ddof=1) / 20 / np.abs(m.mean(axis=0)))
    assert mean_adjusted_variance(m) == pytest.approx(expected)
    # the diagnostic is over the permutations that were averaged (t > kq), not the burn-in
    assert result.diagnostics["mean_adjusted_variance"] == pytest.approx(mean_adjusted_variance(weighted[14:]))


def test_one_permutation_has_an_unknown_standard_error_not_zero(cancer):
    """From one permutation (k = 1, or a burn-in that keeps one) the Monte Carlo error is unknown: inf, not 0, while
    the value itself carries that permutation's variance and the DP noise (docs/gradients.md)."""
    X, y, X_val, y_val = cancer
    values, stderr, kept = burn_in_values(np.arange(6.0).reshape(3, 2), burn_in=0.7)
    assert kept == 1 and values.tolist() == [4.0, 5.0] and np.isinf(stderr).all()
    private = GradientSemivalues(num_permutations=1, epsilon=1.0, delta=1e-5, noise_seed=28)
    result = private.fit(X[:6], y[:6]).value(X_val, y_val)
    assert np.isinf(result.stderr).all() and np.isfinite(result.values).all() and result.counts.tolist() == [1] * 6
    assert "± inf" in repr(result)


def test_mean_adjusted_variance_of_parties_without_value():
    """With V = accuracy a party's marginals are often all 0: 0/0 is left out; a zero mean with spread is inf."""
    spread = np.array([[1.0, 0.0, 2.0], [3.0, 0.0, -2.0], [2.0, 0.0, 0.0]])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert mean_adjusted_variance(spread[:, :2]) == pytest.approx(1.0 / 3 / 2)
        assert mean_adjusted_variance(spread) == np.inf
        assert np.isnan(mean_adjusted_variance(np.zeros((4, 3))))


def test_no_dp_values_find_flipped_labels_and_datasets_and_mlp_run(cancer):
    X, y, X_val, y_val = cancer
    labels, flipped = flip_labels(jax.random.key(0), y, 0.3)
    values = GradientSemivalues(num_permutations=20, learning_rate=0.05).fit(X, labels).value(X_val, y_val).values
    assert detection_auroc(values, flipped) > 0.85
    mlp = GradientSemivalues("mlp", hidden=4, party_size=4, num_permutations=5, epsilon=1.0, delta=1e-5, noise="fl")
    result = mlp.fit(X, y).value(X_val, y_val)
    assert len(result) == 10 and np.isfinite(result.values).all()
    assert result.privacy.releases[0].dimension == MLPModel(30, 2, 4).num_parameters


def test_dp_variance_grows_with_k_under_iid_noise_only():
    """The central claim (Table 1; spec Sec. 5 target 1): the DP-noise variance of psi (Eq. 3) grows like k under
    i.i.d. noise (Prop. 5.1) and is nearly flat under X* (O(log^2 k)) and Y*(0.5) (k-free), at (1, 5e-5)-DP."""
    X, y = load_diabetes(return_X_y=True)
    X_train, X_val = standardise(X[:8], X[100:])
    y = (y - y.mean()) / y.std()
    ks = (50, 100, 200, 400, 800)
    results = dp_variance_by_k(
        LinearModel(10), X_train[:, None], y[:8, None], X_val, y[100:], ks, learning_rate=0.01, trials=12
    )
    slopes = {arm: fitted_slope(ks, r["variance"]) for arm, r in results.items()}
    assert slopes["iid", 0.0] > 0.7
    assert slopes["correlated", 0.0] < 0.45 and slopes["correlated", 0.5] < 0.45
    assert results["iid", 0.0]["variance"][-1] > 10 * results["correlated", 0.5]["variance"][-1]


@pytest.mark.parametrize(
    "settings, match",
    [
        ({"semivalue": "shapely"}, "semivalue must be one of"),
        ({"burn_in": 1.0}, r"burn_in \(q\) must lie in \[0, 1\), got 1.0"),
        ({"burn_in": -0.1}, r"burn_in \(q\) must lie in \[0, 1\)"),
        ({"burn_in": float("nan")}, "burn_in must be a finite number"),
        ({"num_permutations": 0}, "num_permutations must be an integer >= 1, got 0"),
        ({"epsilon": 0.0, "delta": 1e-5}, "epsilon must be a finite number > 0, got 0.0"),
        ({"epsilon": float("inf"), "delta": 1e-5}, "epsilon must be a finite number > 0"),
        ({"epsilon": 1.0, "delta": 1.0}, r"delta must lie in \(0, 1\), got 1.0"),
        ({"epsilon": 1.0, "delta": 0.0}, r"delta must lie in \(0, 1\)"),
        ({"epsilon": 1.0}, "epsilon and delta must be given together"),
        ({"epsilon": 1.0, "delta": 1e-5, "noise": "pink"}, "noise must be one of"),
        ({"noise": "correlated"}, "set epsilon and delta too"),
        ({"model": "cnn"}, "model must be one of"),
        ({"learning_rate": -1.0}, "learning_rate must be a finite number > 0"),
    ],
)
def test_bad_settings_are_refused_before_any_work(settings, match):
    with pytest.raises((ValueError, TypeError), match=match):
        GradientSemivalues(**settings)


def test_bad_data_and_non_finite_gradients_are_refused(cancer):
    X, y, X_val, y_val = cancer
    bad = X.copy()
    bad[3, 2] = np.nan
    with pytest.raises(ValueError, match="X has 1 non-finite entries"):
        GradientSemivalues().fit(bad, y)
    with pytest.raises(ValueError, match="not a multiple of party_size=3"):
        GradientSemivalues(party_size=3).fit(X, y)
    with pytest.raises(RuntimeError, match=r"call GradientSemivalues.fit\(X, y\) before"):
        GradientSemivalues().value(X_val, y_val)
    fitted = GradientSemivalues(num_permutations=2).fit(X, y)
    with pytest.raises(ValueError, match="X_val has 29 features but X had 30"):
        fitted.value(X_val[:, 1:], y_val)
    with pytest.raises(ValueError, match="y_val has labels not seen in y"):
        fitted.value(X_val, y_val + 2)
    with pytest.raises(ValueError, match="clipped gradients has 1 non-finite entries"):
        released_gradients(jax.random.key(0), np.array([[1.0, np.inf]]), 1.0)
    diverging = GradientSemivalues(num_permutations=20, learning_rate=1e37, epsilon=1.0, delta=1e-5).fit(X, y)
    with pytest.raises(FloatingPointError, match="non-finite gradients or utilities .* lower the learning rate"):
        diverging.value(X_val, y_val)
    assert len(diverging.ledger_) == 1  # the noise was drawn: the release counts


@pytest.mark.parametrize("noise", ["iid", "correlated", "adaptive", "fl"])
def test_release_matrix_transpose_and_variances_match_the_release_rule(noise):
    """X^T D and diag(X X^T) against X read off the release rule itself (its releases of unit noise vectors), and
    Cov[z*_s, z*_t] = 1/max(s, t) under X* (Zhou et al. 2024, Eq. 4)."""
    k, variance = 9, 4.0
    released = released_gradients(jax.random.key(0), jnp.zeros((k, 1)), 0.0, noise, gradient_variance=1.5)
    assert np.allclose(released, 0.0)
    cotangent = np.random.default_rng(1).normal(size=(k, 3))
    identity = np.asarray(release_matrix_transpose(jnp.eye(k), noise, variance, 1.5))  # X^T I = X^T
    np.testing.assert_allclose(
        np.asarray(release_matrix_transpose(jnp.asarray(cotangent, jnp.float32), noise, variance, 1.5)),
        identity @ cotangent,
        rtol=1e-5,
        atol=1e-6,
    )
    x = identity.T
    assert np.allclose(np.triu(x, 1), 0.0) and np.allclose(x.sum(axis=1), 1.0)  # causal, rows sum to 1 (P2)
    np.testing.assert_allclose(release_covariance(k, noise, variance, 1.5)[0], np.sum(x**2, axis=1), rtol=1e-5)
    if noise == "correlated":
        t = np.arange(1, k + 1)
        np.testing.assert_allclose(x @ x.T, 1.0 / np.maximum.outer(t, t), rtol=1e-5)
    if noise == "iid":
        np.testing.assert_allclose(x, np.eye(k))


@pytest.mark.parametrize("noise", ["iid", "correlated", "adaptive", "fl"])
@pytest.mark.parametrize("k, n, d, burn_in", [(1, 3, 2, 0.0), (9, 4, 3, 0.3), (20, 6, 62, 0.0), (150, 7, 2, 0.5)])
def test_dp_noise_covariance_is_the_sum_over_release_pairs(noise, k, n, d, burn_in, monkeypatch):
    """The blocked, chunked sum against the brute-force sum_{s != t} M_st d_s . d_t with M = X X^T built densely
    from the release rule (`release_matrix_transpose` of the identity), over the own term (d_t = own_t) and every
    predecessor i of j (d_t = change_t 1[i before j in pi^t]): equal to 1e-8 across blocks of releases (k = 150),
    chunks of parties (a small memory budget) and burn-in."""
    estimator_module = importlib.import_module("bayesval.estimators.gradients.estimator")
    monkeypatch.setattr(estimator_module, "COVARIANCE_MEMORY", 1)  # one party per chunk
    rng = np.random.default_rng(k + n)
    gradients = rng.normal(size=(k, n, 2, d)).astype(np.float32)  # the trajectory's precision
    positions = np.array([rng.permutation(n) for _ in range(k)])
    weights = rng.uniform(0.5, 2.0, size=(k, n))
    settings = dict(noise=noise, noise_std=1.7, step_scale=0.3, burn_in=burn_in, gradient_variance=0.8)
    x = np.asarray(release_matrix_transpose(jnp.eye(k), noise, 1.7**2, 0.8)).T
    pairs = x @ x.T
    np.fill_diagonal(pairs, 0.0)  # s != t
    scale = -0.3 * weights
    scale[: int(np.floor(k * burn_in + 1e-9))] = 0.0
    wide = gradients.astype(np.float64)
    own = scale[..., None] * wide[:, :, 1]
    change = scale[..., None] * (wide[:, :, 1] - wide[:, :, 0])
    expected = np.zeros(n)
    for j in range(n):
        expected[j] = np.sum(pairs * (own[:, j] @ own[:, j].T))
        for i in range(n):
            before = positions[:, i] < positions[:, j]
            expected[j] += np.sum(pairs * np.outer(before, before) * (change[:, j] @ change[:, j].T))
    expected *= 1.7**2
    covariance = dp_noise_covariance(gradients, positions, weights, **settings)
    if noise == "iid" or k == 1:
        np.testing.assert_allclose(covariance, 0.0, atol=1e-12)
        np.testing.assert_allclose(expected, 0.0, atol=1e-12)
    else:
        np.testing.assert_allclose(covariance, expected, rtol=1e-8)
    monkeypatch.setattr(estimator_module, "COVARIANCE_MEMORY", 2**28)  # every party in one chunk
    np.testing.assert_allclose(dp_noise_covariance(gradients, positions, weights, **settings), covariance, rtol=1e-12)


def test_stderr_is_calibrated_under_shared_noise(cancer):
    """The reported error of one run against the spread of the values over runs with fresh keys and noise: under
    X* and Y*(0.5) the Monte Carlo error over permutations alone is several times too small (the released noise is
    shared across permutations, Cov = sigma^2 / max(s, t)), while the error with `dp_noise_covariance` is close to
    the actual spread (docs/gradients.md, "Standard errors"; benchmarks/bench_gradient_stderr.py at full size)."""
    X, y, X_val, y_val = cancer
    for noise, q in [("correlated", 0.0), ("correlated", 0.5)]:
        spread, reported, monte_carlo = stderr_calibration(
            (X[:6], y[:6]),
            (X_val, y_val),
            noise=noise,
            burn_in=q,
            runs=12,
            num_permutations=60,
            seed=9_310_000 + 100 * int(10 * q),
            learning_rate=0.003,
            epsilon=1.0,
            delta=5e-5,
        )
        ratio = np.median(spread / reported)
        assert np.median(spread / monte_carlo) > 3.0  # the old error: far too small
        assert 0.6 < ratio < 1.6, ratio


def test_dp_noise_covariance_is_zero_for_independent_noise(cancer):
    """Under i.i.d. noise the summands are independent: the reported error is the Monte Carlo one."""
    X, y, X_val, y_val = cancer
    result = (
        GradientSemivalues(num_permutations=10, epsilon=1.0, delta=1e-5, noise="iid", noise_seed=9_320_001)
        .fit(X[:6], y[:6])
        .value(X_val, y_val)
    )
    np.testing.assert_array_equal(result.stderr, result.diagnostics["monte_carlo_stderr_without_shared_noise"])
    gradients = np.ones((4, 3, 2, 5))
    positions = np.tile(np.arange(3), (4, 1))
    assert np.all(
        dp_noise_covariance(gradients, positions, np.ones((4, 3)), noise="iid", noise_std=2.0, step_scale=0.1) == 0
    )
    # X*, the own-noise term alone (constant validation gradient, no change across a step): sigma^2 a^2 |g|^2
    # sum_{s != t} 1/max(s, t) = sigma^2 a^2 |g|^2 sum_t 2 (t - 1) / t
    covariance = dp_noise_covariance(
        gradients, positions, np.ones((4, 3)), noise="correlated", noise_std=2.0, step_scale=0.1
    )
    expected = 4.0 * 0.01 * 5 * sum(2 * (t - 1) / t for t in range(1, 5))
    np.testing.assert_allclose(covariance, expected, rtol=1e-5)


def test_one_noise_seed_refuses_a_different_gradient_release(cancer):
    """A seeded noise source perturbs one release only: a second GradientSemivalues with the same noise_seed but
    another sampling key, release rule or learning rate is a different release and is refused (SeedReuseError), as
    for every other private estimator; the same release repeated is not (docs/privacy.md)."""
    X, y, X_val, y_val = cancer

    def run(**settings):
        options = dict(num_permutations=5, learning_rate=0.003, epsilon=1.0, delta=1e-5, noise="iid", key=0)
        options.update(settings)
        return GradientSemivalues(**options).fit(X[:6], y[:6]).value(X_val, y_val).values

    first = run(noise_seed=9_330_001)
    np.testing.assert_array_equal(run(noise_seed=9_330_001), first)  # the same release: the same noise
    for change in [dict(key=1), dict(noise="correlated"), dict(learning_rate=0.01), dict(model="mlp")]:
        with pytest.raises(SeedReuseError):
            run(noise_seed=9_330_001, **change)
    run(noise_seed=9_330_001, key=1, allow_seed_reuse=True)  # an experiment may still reuse it explicitly


def test_shared_noise_whose_gradients_exceed_the_memory_budget_reports_an_unknown_error(cancer, monkeypatch):
    """Where the validation gradients the shared-noise error needs would exceed GRADIENT_MEMORY, the run keeps none
    and reports the error as inf with a warning, not the Monte Carlo part alone (which under X* is several times too
    small); the values are those of the same release with the gradients kept."""
    X, y, X_val, y_val = cancer
    settings = {"num_permutations": 10, "epsilon": 1.0, "delta": 1e-5, "noise": "correlated", "allow_seed_reuse": True}
    measured = GradientSemivalues(noise_seed=9_330_001, **settings).fit(X[:6], y[:6]).value(X_val, y_val)
    estimator_module = importlib.import_module("bayesval.estimators.gradients.estimator")
    monkeypatch.setattr(estimator_module, "GRADIENT_MEMORY", 1000)
    with pytest.warns(UserWarning, match="reported as inf"):
        unknown = GradientSemivalues(noise_seed=9_330_001, **settings).fit(X[:6], y[:6]).value(X_val, y_val)
    assert np.isinf(unknown.stderr).all() and np.isfinite(measured.stderr).all()
    np.testing.assert_allclose(unknown.values, measured.values, rtol=1e-6)
    np.testing.assert_allclose(
        unknown.diagnostics["monte_carlo_stderr_without_shared_noise"],
        measured.diagnostics["monte_carlo_stderr_without_shared_noise"],
        rtol=1e-6,
    )
