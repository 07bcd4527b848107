"""Noise-aware Gibbs sampler (Sim et al. 2023, Algorithm 1): agreement with closed forms and with
NUTS on the same NumPyro model, and numerical stability."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from numpyro.infer import MCMC, NUTS

import bayesval as bv
from bayesval.inference.data import NoiseAwareData
from bayesval.inference.diagnostics import chain_diagnostics
from bayesval.parties import release_all

MODEL = bv.models.LinearRegression()


def mediator_data(parties):
    return NoiseAwareData.from_releases(release_all(MODEL, parties))


def gibbs(data, masks, model=MODEL, **budget):
    config = bv.SamplerConfig(progress_bar=False, **budget)
    return model.posterior_draws(jax.random.key(7), data, np.asarray(masks, bool), config).draws


def summary(draws):
    """Mean, sd and Monte Carlo standard error (from the bulk ESS) per parameter of (chains, kept, d)."""
    _, ess = chain_diagnostics(draws[None])
    flat = draws.reshape(-1, draws.shape[-1])
    return flat.mean(axis=0), flat.std(axis=0), flat.std(axis=0) / np.sqrt(ess[0])


def test_negligible_noise_matches_exact_statistics_posterior(syn_parties):
    """Each coalition of two parties at negligible noise, in a call of its own at the shapes (and default moves) of
    `test_agrees_with_nuts_on_the_marginalised_model[collapsed]`, so that both run one compiled sweep program."""
    parties = syn_parties(epsilons=(1e9, 1e9, 1e9))[:2]
    masks = [[True, False], [False, True], [True, True]]
    data = mediator_data(parties)
    draws = [gibbs(data, [mask], num_chains=4, num_warmup=200, num_samples=2000, thinning=1)[0] for mask in masks]
    for mask, coalition in zip(masks, draws):
        members = [p for p, m in zip(parties, mask) if m]
        posterior = MODEL.exact_posterior(sum(p.exact_statistic() for p in members), sum(len(p.X) for p in members), 2)
        mean, sd, mcse = summary(coalition)
        noise_var_mean = float(posterior.scale / (posterior.shape - 1))
        noise_var_sd = noise_var_mean / float(np.sqrt(posterior.shape - 2))
        weight_sd = np.sqrt(np.diag(np.linalg.inv(posterior.precision)) * noise_var_mean)
        exact_mean = np.append(np.asarray(posterior.mean), noise_var_mean)
        exact_sd = np.append(weight_sd, noise_var_sd)
        assert np.all(np.abs(mean - exact_mean) < 5 * mcse + 1e-3 * exact_sd), (mean, exact_mean, mcse)
        np.testing.assert_allclose(sd, exact_sd, rtol=0.06)


_NUTS_DRAWS = {}


def _nuts_reference(data, shared: bool) -> np.ndarray:
    """NUTS draws (chains, draws, d) of the marginalised model, s integrated out. The model depends on the moves
    only through `shared_data_model`, so the Gibbs variants on the same releases share one run."""
    fingerprint = (shared, *(np.asarray(array).tobytes() for array in data))
    if fingerprint not in _NUTS_DRAWS:
        model = bv.models.LinearRegression(shared_data_model=shared)
        mcmc = MCMC(
            NUTS(model.model),
            num_warmup=500,
            num_samples=1000,
            num_chains=2,
            progress_bar=False,
            chain_method="vectorized",
        )
        mcmc.run(jax.random.key(3), data, jnp.array([True, True]))
        samples = mcmc.get_samples(group_by_chain=True)
        weights, noise_var = np.asarray(samples["weights"]), np.asarray(samples["noise_var"])
        _NUTS_DRAWS[fingerprint] = np.concatenate([weights, noise_var[..., None]], axis=-1)
    return _NUTS_DRAWS[fingerprint]


@pytest.mark.parametrize(
    "moves,shared", [((4, 0), False), ((0, 8), False), ((0, 8), True)], ids=["interweaving", "collapsed", "shared"]
)
def test_agrees_with_nuts_on_the_marginalised_model(syn_parties, moves, shared):
    """Same noise-aware model, two samplers: Gibbs on (theta, omega, s) and NUTS with s integrated out;
    Gibbs with interweaving moves (the default before collapsed moves) and with the default collapsed moves, per-party
    and shared data models."""
    parties = syn_parties(epsilons=(2.0, 2.0, 2.0))[:2]
    data = mediator_data(parties)
    mask = jnp.array([True, True])
    model = bv.models.LinearRegression(interweaving_moves=moves[0], collapsed_moves=moves[1], shared_data_model=shared)
    budget = dict(num_chains=4, num_warmup=1000, num_samples=12_000, thinning=6)
    if moves[1]:
        budget.update(num_chains=4, num_warmup=1000, num_samples=4000, thinning=2)
    draws = gibbs(data, [mask], model, **budget)[0]
    nuts = _nuts_reference(data, shared)
    g_mean, g_sd, g_mcse = summary(draws)
    n_mean, n_sd, n_mcse = summary(nuts)
    assert np.all(np.abs(g_mean - n_mean) < 4 * np.hypot(g_mcse, n_mcse)), (g_mean, n_mean, g_mcse, n_mcse)
    np.testing.assert_allclose(g_sd, n_sd, rtol=0.15)


@pytest.mark.parametrize("moves", [(4, 0), (0, 8)], ids=["interweaving", "collapsed"])
@pytest.mark.parametrize("epsilon,scale", [(0.004, 1), (0.2, 30)])
def test_finite_valid_draws_at_extreme_noise_and_large_parties(syn, epsilon, scale, moves):
    """Two parties, their coalition and one alone, each in a call of one coalition and four chains: the shapes of
    `test_agrees_with_nuts_on_the_marginalised_model`, so that both tests run one compiled sweep program a move."""
    from bayesval.datasets.synthetic import make_syn

    data = syn if scale == 1 else make_syn(seed=1, sizes=(3000, 3000, 3000))
    parties = [
        bv.Party(X, y, epsilon=epsilon, bounds=data.bounds, name=f"p{i}", noise_seed=i)
        for i, (X, y) in enumerate(data.parties[:2])
    ]
    model = bv.models.LinearRegression(interweaving_moves=moves[0], collapsed_moves=moves[1])
    released = mediator_data(parties)
    for mask in ([True, True], [True, False]):
        draws = gibbs(released, [mask], model, num_chains=4, num_warmup=100, num_samples=300, thinning=1)
        assert np.isfinite(draws).all()
        assert (draws[..., -1] > 0).all()  # sigma^2 > 0


def test_one_sweep_program_serves_any_number_of_draws_and_calls_split_no_segment(syn_parties, monkeypatch):
    """The sweep program scans a fixed `KEPT_PER_CALL` kept draws a call: budgets that differ in warm-up, draws and
    thinning compile it once, and a segment's draws are the same to the last bit whether one call holds them or
    several (12 kept draws a segment in calls of 5: 5, 5 and 2 with three places of no sweeps)."""
    from bayesval.inference.gibbs import driver

    data = mediator_data(syn_parties(epsilons=(1.0, 1.0, 1.0))[:2])
    model = bv.models.LinearRegression(interweaving_moves=0, collapsed_moves=0)  # Algorithm 1: the quickest to compile
    run = lambda warmup, samples, thinning: gibbs(  # noqa: E731
        data, [[True, True]], model, num_chains=2, num_warmup=warmup, num_samples=samples, thinning=thinning
    )
    before = driver._advance._cache_size()
    whole, thinned = run(20, 120, 1), run(7, 90, 3)
    assert driver._advance._cache_size() - before == 1
    assert whole.shape == (1, 2, 120, 4) and thinned.shape == (1, 2, 30, 4)
    monkeypatch.setattr(driver, "KEPT_PER_CALL", 5)
    np.testing.assert_array_equal(run(20, 120, 1), whole)


def test_warm_up_moments_are_the_running_mean_and_covariance(rng):
    """The collapsed moves propose from Welford moments; they must equal numpy's mean and covariance."""
    from bayesval.inference.gibbs import RunningMoments

    draws = rng.normal(size=(500, 4)) @ rng.normal(size=(4, 4)) + rng.normal(size=4)
    moments = RunningMoments.empty(4)
    for draw in draws:
        moments = moments.add(jnp.asarray(draw))
    assert float(moments.count) == 500
    np.testing.assert_allclose(moments.mean, draws.mean(axis=0), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(moments.scatter / 499, np.cov(draws.T), rtol=1e-10, atol=1e-12)


def _moments_of(points):
    from bayesval.inference.gibbs import RunningMoments

    moments = RunningMoments.empty(points.shape[-1])
    for point in points:
        moments = moments.add(jnp.asarray(point))
    return moments


def test_chain_pooled_moments_are_those_of_all_chains_draws(rng):
    """Windows end by pooling each posterior's chains: the pooled moments are those of the concatenated draws."""
    from bayesval.inference.gibbs import RunningMoments

    draws = rng.normal(size=(2, 3, 40, 3)) * np.array([1.0, 2.0, 0.5]) + rng.normal(size=(2, 3, 1, 3))
    per_chain = [[_moments_of(chain) for chain in row] for row in draws]
    stacked = jax.tree.map(
        lambda *leaves: jnp.stack(leaves), *[jax.tree.map(lambda *c: jnp.stack(c), *row) for row in per_chain]
    )
    pooled = RunningMoments.pooled(stacked, axis=1)
    for row in range(2):
        flat = draws[row].reshape(-1, 3)
        for chain in range(3):
            assert float(pooled.count[row, chain]) == 120
            np.testing.assert_allclose(pooled.mean[row, chain], flat.mean(axis=0), rtol=1e-12, atol=1e-12)
            np.testing.assert_allclose(pooled.scatter[row, chain] / 119, np.cov(flat.T), rtol=1e-10, atol=1e-12)


def test_conditional_proposals_are_the_fitted_gaussians_conditionals(rng):
    """theta's proposal is the joint fit's conditional given the members' data-model blocks only; each block's is
    its conditional given phi (block Gaussian conditioning, computed here with numpy)."""
    from bayesval.inference.gibbs import PROPOSAL_INFLATION, fit_proposals

    dim_theta, dim_psi, blocks = 2, 2, 3
    dim = dim_theta + dim_psi * blocks
    points = rng.normal(size=(400, dim)) @ rng.normal(size=(dim, dim)) + rng.normal(size=dim)
    moments = _moments_of(points)
    mean, cov = points.mean(axis=0), np.cov(points.T)
    psi = rng.normal(size=(blocks, dim_psi))
    informative = np.array([True, False, True])

    def conditional(target, given, value):
        regression = cov[np.ix_(target, given)] @ np.linalg.inv(cov[np.ix_(given, given)])
        return mean[target] + regression @ (value - mean[given]), cov[np.ix_(target, target)] - regression @ cov[
            np.ix_(given, target)
        ]

    theta_idx = np.arange(dim_theta)
    given = np.concatenate([dim_theta + dim_psi * b + np.arange(dim_psi) for b in np.flatnonzero(informative)])
    expected_mean, expected_cov = conditional(theta_idx, given, psi[informative].ravel())
    proposal = fit_proposals(moments, jnp.asarray(informative), dim_theta).theta(jnp.asarray(psi))
    np.testing.assert_allclose(proposal.mean, expected_mean, rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(proposal.lower @ proposal.lower.T, PROPOSAL_INFLATION**2 * expected_cov, rtol=1e-8)

    phi = rng.normal(size=dim_theta)
    proposals = fit_proposals(moments, jnp.asarray(informative), dim_theta).omega(jnp.asarray(phi))
    for b in range(blocks):
        block = dim_theta + dim_psi * b + np.arange(dim_psi)
        expected_mean, expected_cov = conditional(block, theta_idx, phi)
        np.testing.assert_allclose(proposals.mean[b], expected_mean, rtol=1e-8, atol=1e-10)
        np.testing.assert_allclose(
            proposals.lower[b] @ proposals.lower[b].T, PROPOSAL_INFLATION**2 * expected_cov, rtol=1e-8
        )


@pytest.mark.parametrize("dof, stalls", [(5, False), (1000, True)])  # the t proposal; all but a Gaussian one
def test_independence_moves_cross_a_heavy_tail_that_stalls_a_gaussian_proposal(dof, stalls, monkeypatch):
    """A target with a Student-t(3) tail, proposed from the Gaussian its bulk suggests (mean 0, scale 1.5): once the
    chain is out at 8 (as a wide coalition's sigma^2 chain went), the Gaussian proposal leaves it there for most
    of 400 moves, since the weight target / proposal is far larger there than anywhere it proposes; the t proposal
    (`PROPOSAL_DOF`) brings it back to the bulk at once and samples the target: the share of draws beyond 3 is
    the target's tail mass, 2.9 %."""
    from scipy import stats

    from bayesval.inference.gibbs import moves
    from bayesval.inference.gibbs.adaptation import Proposal

    monkeypatch.setattr(moves, "PROPOSAL_DOF", dof)
    target = lambda x: jax.scipy.stats.t.logpdf(x[0], 3.0)  # noqa: E731
    proposal = Proposal(jnp.zeros(1), jnp.full((1, 1), 1.5))

    def step(position, key):
        position = moves.independence_moves(key, 1, position, target, proposal, jnp.asarray(True))
        return position, position[0]

    keys = jax.random.split(jax.random.key(0), (200, 400))
    _, draws = jax.jit(jax.vmap(lambda k: jax.lax.scan(step, jnp.array([8.0]), k)))(keys)
    stuck = float(np.mean(np.asarray(draws) == 8.0))
    tail = float(np.mean(np.abs(np.asarray(draws)[:, 100:]) > 3.0))
    if stalls:
        assert stuck > 0.5, stuck
    else:
        assert stuck < 0.05, stuck
        assert abs(tail - 2 * stats.t.sf(3.0, 3.0)) < 0.01, tail


@pytest.mark.parametrize("num_features", [2, 3])  # a statistic of 9 entries, on scalars; of 14, on matrices
def test_a_latent_statistic_draw_follows_its_gaussian_conditional(num_features):
    """Algorithm 1's step 7 (Sim et al. 2023): s_i | theta, omega_i, o_i is N(m + A (A + s^2 I)^-1 (o - m),
    A - A (A + s^2 I)^-1 A) for the CLT moments m = c mu_t, A = c Sigma_t; and the release's likelihood with s_i
    integrated out is N(o; m, A + s^2 I). Both against the closed form, on scalars and on matrices."""
    from scipy import stats

    from bayesval.inference.gibbs.kernel import sample_latent_statistic
    from bayesval.inference.gibbs.moves import clt_moments, marginal_log_likelihood

    statistic = bv.models.LinearRegression().statistic(num_features)
    rng = np.random.default_rng(num_features)
    root = rng.normal(size=(num_features, num_features))
    state = (jnp.asarray(rng.normal(size=num_features + 1)), 0.7, jnp.asarray(rng.normal(size=num_features)))
    state += (jnp.asarray(root @ root.T + np.eye(num_features)),)
    count, noise_std = 50.0, 20.0
    mean, cov = (np.asarray(a) for a in clt_moments(statistic, *state, count))
    perturbed = mean + rng.normal(size=mean.shape) * np.sqrt(np.diag(cov) + noise_std**2)
    gain = cov @ np.linalg.inv(cov + noise_std**2 * np.eye(len(mean)))
    expected_mean, expected_cov = mean + gain @ (perturbed - mean), cov - gain @ cov
    keys = jax.random.split(jax.random.key(0), 40_000)
    draw = jax.jit(jax.vmap(lambda k: sample_latent_statistic(k, statistic, state, perturbed, count, noise_std)))
    draws = np.asarray(draw(keys))
    standard_error = np.sqrt(np.diag(expected_cov) / len(keys))
    assert np.all(np.abs(draws.mean(axis=0) - expected_mean) < 4.5 * standard_error)
    np.testing.assert_allclose(np.cov(draws.T).diagonal(), expected_cov.diagonal(), rtol=0.05)
    likelihood = marginal_log_likelihood(statistic, *state, perturbed, count, noise_std)
    expected = stats.multivariate_normal(mean, cov + noise_std**2 * np.eye(len(mean))).logpdf(perturbed)
    np.testing.assert_allclose(float(likelihood), expected, rtol=1e-9)
