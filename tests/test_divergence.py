"""k-NN KL estimators against closed forms (Sim et al. 2023, App. C.3; Kozachenko-Leonenko entropy) and
brute-force reimplementations; diagnostics against arviz."""

import jax
import numpy as np
import pytest

import bayesval as bv
from bayesval.divergence import (
    THEILER_WINDOW,
    batched_kl,
    gaussian_kl,
    kl_between,
    knn_entropy,
    knn_kl,
    knn_kl_to_density,
    nig_kl,
    theiler_window,
)
from bayesval.inference.conjugate import nig_draws, nig_log_density
from bayesval.inference.diagnostics import chain_diagnostics


def whiten(posterior, prior):
    """Centre both samples and map them by L^-1, L the Cholesky factor of their pooled covariance."""
    pooled = np.concatenate([posterior, prior])
    chol = np.linalg.cholesky(np.cov(pooled, rowvar=False))
    return [np.linalg.solve(chol, (a - pooled.mean(axis=0)).T).T for a in (posterior, prior)]


@pytest.mark.parametrize("dim", [4, 8])
def test_knn_kl_within_3_percent_of_gaussian_closed_form(dim, rng):
    """Posterior N(0.5, 0.1 R) with AR(1) correlation R_ij = 0.5^|i-j| against the prior N(0, I),
    m = 30,000 draws each. As in valuation, the estimate is the mean of repeats on fresh draws
    (here 3): at d = 8 one repeat scatters by ~2.5 % around a ~+2 % bias (docs/benchmarks.md)."""
    lags = np.abs(np.arange(dim)[:, None] - np.arange(dim)[None, :])
    cov_p, mean_p = 0.1 * 0.5**lags, np.full(dim, 0.5)
    exact = gaussian_kl(mean_p, cov_p, np.zeros(dim), np.eye(dim))
    estimates = [
        knn_kl(rng.multivariate_normal(mean_p, cov_p, 30_000), rng.normal(size=(30_000, dim))) for _ in range(3)
    ]
    assert np.mean(estimates) == pytest.approx(exact, rel=0.03), estimates
    assert np.all(np.abs(np.array(estimates) / exact - 1) < 0.08), estimates


def test_knn_kl_within_3_percent_for_exact_nig_posterior_on_syn(syn, syn_parties):
    model = bv.models.LinearRegression()
    parties = syn_parties()
    statistic = sum(p.exact_statistic() for p in parties)
    count = sum(len(p.X) for p in parties)
    posterior = model.exact_posterior(statistic, count, num_features=2)
    prior = model.priors(2).model
    exact = nig_kl(posterior, prior)
    draws_post = np.asarray(nig_draws(jax.random.key(0), posterior, 30_000))
    draws_prior = np.asarray(nig_draws(jax.random.key(1), prior, 30_000))
    assert exact > 5
    assert knn_kl(draws_post, draws_prior) == pytest.approx(exact, rel=0.03)


def test_nig_kl_closed_form_matches_monte_carlo(syn, syn_parties):
    """KL = E_p[log p - log q], by Monte Carlo with NumPyro log densities."""
    import numpyro.distributions as dist

    model = bv.models.LinearRegression()
    parties = syn_parties()
    posterior = model.exact_posterior(parties[0].exact_statistic(), len(parties[0].X), 2)
    prior = model.priors(2).model
    draws = np.asarray(nig_draws(jax.random.key(2), posterior, 200_000))

    def log_density(params, theta):
        w, s2 = theta[:, :-1], theta[:, -1]
        lp = dist.InverseGamma(params.shape, params.scale).log_prob(s2)
        cov = np.linalg.inv(np.asarray(params.precision))
        return lp + dist.MultivariateNormal(params.mean, s2[:, None, None] * cov).log_prob(w)

    log_ratio = np.asarray(log_density(posterior, draws) - log_density(prior, draws))
    assert nig_kl(posterior, prior) == pytest.approx(log_ratio.mean(), abs=4 * log_ratio.std() / np.sqrt(len(draws)))


def test_brute_force_backend_equals_kdtree(rng):
    posterior = rng.normal(size=(3000, 4)) * 0.3 + 1
    prior = rng.normal(size=(3000, 4))
    assert knn_kl(posterior, prior, backend="brute") == pytest.approx(knn_kl(posterior, prior, backend="kdtree"))


def test_duplicated_draws_raise_k_past_ties(rng):
    """A sampler that repeats each draw 6 times (> k) makes the k-th neighbour distance zero; the
    estimator raises k per point to the first non-zero distance, for both distances (spec Sec. 7.8).
    Checked against a direct full-distance-matrix implementation of that rule."""
    k = 4
    posterior = np.repeat(rng.normal(size=(60, 3)) * 0.5, 6, axis=0)
    prior = rng.normal(size=(500, 3))
    n, d = posterior.shape
    white_post, white_prior = whiten(posterior, prior)
    within = np.sort(np.linalg.norm(white_post[:, None] - white_post[None], axis=2), axis=1)[:, 1:]
    across = np.sort(np.linalg.norm(white_post[:, None] - white_prior[None], axis=2), axis=1)
    terms = []
    for i in range(n):
        rank = k - 1 + np.argmax(within[i, k - 1 :] > 0)
        terms.append(np.log(across[i, rank] / within[i, rank]))
    expected = d * np.mean(terms) + np.log(len(prior) / (n - 1))
    assert within[:, k - 1].max() == 0.0  # without the rule every log ratio would be infinite
    assert knn_kl(posterior, prior, k=k) == pytest.approx(expected)


def test_entropy_within_half_a_percent_of_gaussian_closed_form(rng):
    """Kozachenko-Leonenko at n = 20,000, d = 4, a correlated Gaussian: H = d/2 log(2 pi e) + 1/2 log det cov."""
    lags = np.abs(np.arange(4)[:, None] - np.arange(4)[None, :])
    cov = 0.3 * 0.6**lags
    exact = 0.5 * 4 * np.log(2 * np.pi * np.e) + 0.5 * np.linalg.slogdet(cov)[1]
    assert knn_entropy(rng.multivariate_normal(np.ones(4), cov, 20_000)) == pytest.approx(exact, abs=0.03)


def test_prior_density_estimator_is_within_1_percent_and_far_less_noisy_on_syn(syn, syn_parties):
    """On Syn's exact NIG posterior (n = 3,200, as at the fast preset), KL = -H - E[log prior] stays within 1 %
    of the closed form in every one of 8 repeats, and scatters at least 5 times less than the two-sample form
    (measured 0.028 against 0.37 nats, docs/benchmarks.md)."""
    model = bv.models.LinearRegression()
    party = syn_parties()[2]
    posterior = model.exact_posterior(party.exact_statistic(), len(party.X), num_features=2)
    prior = model.priors(2).model
    exact = nig_kl(posterior, prior)
    log_prior = jax.vmap(lambda t: nig_log_density(prior, t[:-1], t[-1]))
    density, two_sample = [], []
    for seed in range(8):
        key_post, key_prior = jax.random.split(jax.random.key(seed))
        draws = np.asarray(nig_draws(key_post, posterior, 3200))
        density.append(knn_kl_to_density(draws, log_prior(draws)))
        two_sample.append(knn_kl(draws, np.asarray(nig_draws(key_prior, prior, 3200))))
    assert np.all(np.abs(np.array(density) / exact - 1) < 0.01), (density, exact)
    assert np.std(two_sample) > 5 * np.std(density), (two_sample, density)


@pytest.mark.parametrize("backend", ["kdtree", "brute"])
def test_batched_estimates_equal_row_by_row_and_ignore_dropped_chains(backend, rng):
    """A batch of 3 posteriors of 3 chains, one chain of row 1 dropped and moved far away: each row's estimate
    equals the single-posterior one on its kept chains, for both estimators, with ties in row 2."""
    draws = rng.normal(size=(3, 3, 200, 2)) * np.array([0.3, 0.5, 0.4])[:, None, None, None]
    draws[2, :, 100:] = draws[2, :, :100]  # every draw of row 2 twice: ties, k raised past them
    draws[2, :, 50:100] = draws[2, :, :50]
    kept = np.ones((3, 3), bool)
    kept[1, 2] = False
    draws[1, 2] += 1e6
    log_prior = -0.5 * np.sum(draws**2, axis=-1)
    prior = rng.normal(size=(3, 900, 2))
    density = batched_kl(draws, kept, 4, log_prior=log_prior, backend=backend)
    two_sample = batched_kl(draws, kept, 4, prior=prior, backend=backend)
    for row in range(3):
        mine = draws[row][kept[row]].reshape(-1, 2)
        mine_log_prior = log_prior[row][kept[row]].ravel()
        assert density[row] == pytest.approx(knn_kl_to_density(mine, mine_log_prior, backend="kdtree"), rel=1e-9)
        assert two_sample[row] == pytest.approx(knn_kl(mine, prior[row], backend="kdtree"), rel=1e-9)


@pytest.mark.parametrize("backend", ["kdtree", "brute"])
def test_a_posterior_without_spread_is_nan_and_leaves_the_rest_of_the_batch(backend, rng):
    """A stuck sampler (every draw of row 1 at one point, so its covariance cannot whiten) or a non-finite draw
    (row 2) gives NaN for that row only, on both backends: no crash inside the KD-tree callback."""
    draws = rng.normal(size=(3, 2, 100, 2))
    draws[1] = 0.5
    draws[2, 0, 7, 1] = np.inf
    kept = np.ones((3, 2), bool)
    log_prior = -0.5 * np.sum(np.where(np.isfinite(draws), draws, 0.0) ** 2, axis=-1)
    for estimate in (
        batched_kl(draws, kept, 4, log_prior=log_prior, backend=backend),
        batched_kl(draws, kept, 4, prior=rng.normal(size=(3, 400, 2)), backend=backend),
    ):
        assert np.isfinite(estimate[0]) and np.isnan(estimate[1]) and np.isnan(estimate[2]), estimate


def test_diagnostics_equal_arviz_rank_normalised_split_r_hat_and_bulk_ess(rng):
    """AR(1) chains of several lengths (odd ones lose their middle draw when split) and correlations; with one
    chain dropped the result equals arviz's on the kept chains."""
    import arviz as az

    for chains, length, correlation in [(4, 800, 0.5), (4, 801, 0.9), (8, 100, -0.3), (3, 50, 0.99)]:
        noise = rng.normal(size=(chains, length, 3))
        draws = np.zeros_like(noise)
        for t in range(1, length):
            draws[:, t] = correlation * draws[:, t - 1] + noise[:, t]
        draws += rng.normal(size=(chains, 1, 3)) * 0.05
        kept = np.ones((1, chains), bool)
        kept[0, 1] = False
        draws_with_outlier = draws.copy()
        draws_with_outlier[1] += 100.0
        r_hat, ess = chain_diagnostics(draws_with_outlier[None], kept)
        expected = az.convert_to_dataset({"theta": np.delete(draws, 1, axis=0)})
        assert np.asarray(r_hat[0]) == pytest.approx(az.rhat(expected)["theta"].values, rel=1e-6)
        assert np.asarray(ess[0]) == pytest.approx(az.ess(expected)["theta"].values, rel=1e-5)


def test_knn_kl_rejects_bad_samples():
    with pytest.raises(ValueError, match="need \\(n, d\\) and \\(m, d\\)"):
        knn_kl(np.zeros((10, 2)), np.zeros((10, 3)))
    with pytest.raises(ValueError, match="finite"):
        knn_kl(np.full((10, 2), np.nan), np.zeros((10, 2)))


def _ar1_chains(rng, chains, length, dim, correlation):
    """Stationary AR(1) chains with N(0, I) marginals."""
    noise = rng.normal(size=(chains, length, dim))
    draws = np.empty_like(noise)
    draws[:, 0] = noise[:, 0]
    for t in range(1, length):
        draws[:, t] = correlation * draws[:, t - 1] + np.sqrt(1 - correlation**2) * noise[:, t]
    return draws


def test_theiler_window_removes_the_autocorrelation_bias_of_the_entropy(rng):
    """4 AR(1) chains of 1,600 draws at lag-1 correlation 0.95, N(0, I_4) marginals: with every draw a neighbour
    the entropy comes out ~0.3 nats low (chain neighbours are too close); keeping each chain's 10 nearest
    steps out leaves the error of independent draws."""
    exact = 0.5 * 4 * np.log(2 * np.pi * np.e)
    draws = _ar1_chains(rng, 4, 1600, 4, 0.95)[None]
    entropy = {
        window: -float(
            batched_kl(draws, np.ones((1, 4), bool), 4, log_prior=np.zeros(draws.shape[:3]), window=window)[0]
        )
        for window in (0, 10)
    }
    assert entropy[0] < exact - 0.15, entropy
    assert entropy[10] == pytest.approx(exact, abs=0.1), entropy


def test_theiler_window_is_the_same_on_both_backends(rng):
    """Brute force and the KD-tree exclude the same neighbours, with a dropped chain and repeated draws."""
    draws = _ar1_chains(rng, 3, 300, 3, 0.7)[None].repeat(2, axis=0)
    draws[1, :, 1::2] = draws[1, :, ::2]  # consecutive repeats, as a rejecting sampler makes
    kept = np.array([[True, True, True], [True, False, True]])
    log_prior = -0.5 * np.sum(draws**2, axis=-1)
    kdtree, brute = (
        batched_kl(draws, kept, 4, log_prior=log_prior, window=3, backend=backend) for backend in ("kdtree", "brute")
    )
    np.testing.assert_allclose(np.asarray(kdtree), np.asarray(brute), rtol=1e-10)
    assert not np.isnan(np.asarray(kdtree)).any()


def test_brute_force_search_in_small_blocks_gives_the_same_estimates(rng, monkeypatch):
    """The brute-force search bounds its block of distances (one that passed int32 indexing crashed an H200) by
    taking fewer queries and posteriors at a time; at a block of 2,000 elements (2 queries of one posterior) both
    estimators still equal the KD-tree's."""
    import bayesval.divergence as divergence

    draws = _ar1_chains(rng, 3, 300, 3, 0.7)[None].repeat(3, axis=0) * np.array([1.0, 2.0, 0.5])[:, None, None, None]
    kept = np.array([[True, True, True], [True, False, True], [True, True, True]])
    log_prior = -0.5 * np.sum(draws**2, axis=-1)
    prior = rng.normal(size=(3, 700, 3)) * 2
    estimates = {}
    for backend, block in (("kdtree", divergence.MAX_DISTANCE_BLOCK), ("brute", 2_000)):
        monkeypatch.setattr(divergence, "MAX_DISTANCE_BLOCK", block)
        for function in (divergence._kl_to_density, divergence._kl_two_sample):
            function.clear_cache()  # the block is read while tracing
        estimates[backend] = [
            np.asarray(batched_kl(draws, kept, 4, log_prior=log_prior, window=3, backend=backend)),
            np.asarray(batched_kl(draws, kept, 4, prior=prior, window=3, backend=backend)),
        ]
    assert divergence._query_chunk(2048, 900) == 2
    for kdtree, brute in zip(estimates["kdtree"], estimates["brute"]):
        np.testing.assert_allclose(kdtree, brute, rtol=1e-10)
        assert np.isfinite(kdtree).all()
    for function in (divergence._kl_to_density, divergence._kl_two_sample):
        function.clear_cache()


def test_a_posterior_with_every_chain_dropped_does_not_crash_the_batch(rng):
    """A row whose chains were all dropped (BFMI) has nothing to estimate from; the KD-tree path skips it instead of
    failing inside its callback, and the other rows keep their estimates (the caller reports the empty row as NaN)."""
    draws = rng.normal(size=(2, 2, 300, 2))
    kept = np.array([[True, True], [False, False]])
    prior = rng.normal(size=(2, 600, 2)) * 2.0
    estimates = np.asarray(batched_kl(draws, kept, 4, prior=prior, backend="kdtree"))
    alone = float(batched_kl(draws[:1], kept[:1], 4, prior=prior[:1], backend="kdtree")[0])
    assert estimates[0] == pytest.approx(alone)


def test_kl_between_is_the_two_sample_estimate_with_the_theiler_window_of_its_chains(rng):
    """kl_between (a reward's similarity, Sim et al. 2023, Sec. 5.4) is knn_kl on one chain, and on several chains
    the batched estimate with the valuation's Theiler window; draws that are not whole chains are refused."""
    p, q = rng.normal(size=(400, 2)), rng.normal(0.5, 1.5, size=(300, 2))
    assert kl_between(p, q, 4) == knn_kl(p, q, 4)
    window = theiler_window(100)
    assert window == min(THEILER_WINDOW, 25)
    chains = batched_kl(p.reshape(1, 4, 100, 2), np.ones((1, 4), bool), 4, prior=q[None], window=window)
    assert kl_between(p, q, 4, chain_length=100) == float(chains[0])
    with pytest.raises(ValueError, match="not chains of length 300"):
        kl_between(p, q, 4, chain_length=300)
