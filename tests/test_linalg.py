"""The Gibbs program's own small-matrix linear algebra against NumPy / SciPy, and the property it exists for:
no LAPACK custom call in the compiled sampler (those deadlocked 6+ party valuations on 2 cores)."""

import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import stats

import bayesval  # noqa: F401  (64-bit mode)
from bayesval.inference import linalg


def _spd(rng, dim, condition=1e3):
    q, _ = np.linalg.qr(rng.normal(size=(dim, dim)))
    return (q * np.geomspace(1.0, condition, dim)) @ q.T


@pytest.mark.parametrize("dim", [1, 2, 4, 9, linalg.SCALAR_LIMIT + 3])  # scalar code, then the loops
def test_factorisations_and_solves_match_numpy(dim):
    rng = np.random.default_rng(dim)
    matrix, rhs = _spd(rng, dim), rng.normal(size=(dim, 3))
    lower = np.asarray(linalg.cholesky(jnp.asarray(matrix)))
    np.testing.assert_allclose(lower, np.linalg.cholesky(matrix), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(linalg.spd_solve(matrix, rhs), np.linalg.solve(matrix, rhs), rtol=1e-8)
    np.testing.assert_allclose(linalg.solve_upper(lower.T, rhs), np.linalg.solve(lower.T, rhs), rtol=1e-8)
    np.testing.assert_allclose(linalg.spd_inverse(matrix), np.linalg.inv(matrix), rtol=1e-8, atol=1e-12)
    np.testing.assert_allclose(linalg.log_det_from_cholesky(lower), np.linalg.slogdet(matrix)[1], rtol=1e-12)
    assert np.isnan(np.asarray(linalg.cholesky(-jnp.eye(dim)))).any()  # not PD: NaN, as LAPACK's
    if dim <= linalg.SCALAR_LIMIT:  # the same on entries given as nested lists of scalars, never stacked
        entries = [[jnp.asarray(value) for value in row] for row in matrix]
        vector = rhs[:, 0]
        solved = linalg.spd_solve_entries(entries, vector)
        np.testing.assert_allclose(solved, np.linalg.solve(matrix, vector), rtol=1e-8)
        np.testing.assert_allclose(linalg.cholesky_times_entries(entries, vector), np.linalg.cholesky(matrix) @ vector)
        expected = stats.multivariate_normal(rhs[:, 1], matrix).logpdf(vector)
        np.testing.assert_allclose(linalg.mvn_log_prob_entries(vector, list(rhs[:, 1]), entries), expected, rtol=1e-10)


@pytest.mark.parametrize("dim", [2, 4, 7])
def test_jacobi_eigh_and_psd_projection(dim):
    rng = np.random.default_rng(10 + dim)
    symmetric = rng.normal(size=(dim, dim))
    symmetric = symmetric + symmetric.T
    # one program for both: the projection's rotations are the decomposition's, compiled once (~10 s at dim 7)
    decompose_and_project = jax.jit(lambda matrix: (linalg.eigh(matrix), linalg.psd_project(matrix, 0.5)))
    (values, vectors), projected = decompose_and_project(jnp.asarray(symmetric))
    values, vectors = np.asarray(values), np.asarray(vectors)
    np.testing.assert_allclose(np.sort(values), np.linalg.eigvalsh(symmetric), atol=1e-10)
    np.testing.assert_allclose((vectors * values) @ vectors.T, symmetric, atol=1e-10)
    np.testing.assert_allclose(vectors.T @ vectors, np.eye(dim), atol=1e-12)
    true_values, true_vectors = np.linalg.eigh(symmetric)
    expected = (true_vectors * np.maximum(true_values, 0.5)) @ true_vectors.T
    np.testing.assert_allclose(projected, expected, atol=1e-10)
    diagonal = np.diag(np.arange(1.0, dim + 1))  # already diagonal: no rotation, no division by zero
    np.testing.assert_allclose(decompose_and_project(jnp.asarray(diagonal))[0][0], np.arange(1.0, dim + 1))


def test_gaussian_and_inverse_wishart_densities_match_scipy():
    rng = np.random.default_rng(3)
    for dim in (3, linalg.SCALAR_LIMIT + 2):
        cov, mean, value = _spd(rng, dim, 10.0), rng.normal(size=dim), rng.normal(size=dim)
        expected = stats.multivariate_normal(mean, cov).logpdf(value)
        np.testing.assert_allclose(linalg.mvn_log_prob(value, mean, cov), expected, rtol=1e-10)
    scale, point = _spd(rng, 3, 5.0), _spd(rng, 3, 3.0)
    expected = stats.invwishart(df=7.5, scale=scale).logpdf(point)
    np.testing.assert_allclose(linalg.inverse_wishart_log_prob(point, 7.5, scale), expected, rtol=1e-10)


def test_inverse_wishart_sampler_moments():
    """Mean scale / (dof - d - 1) and the variance of a diagonal entry 2 s_ii^2 / ((dof-d-1)^2 (dof-d-3))."""
    scale, dof, draws = jnp.asarray([[2.0, 0.6], [0.6, 1.0]]), 9.0, 40_000
    keys = jax.random.split(jax.random.key(0), draws)
    samples = np.asarray(jax.vmap(lambda k: linalg.inverse_wishart_sample(k, dof, scale))(keys))
    spread = dof - 2 - 1
    np.testing.assert_allclose(samples.mean(axis=0), np.asarray(scale) / spread, rtol=0.02)
    expected_var = 2 * np.asarray(scale).diagonal() ** 2 / (spread**2 * (spread - 2))
    np.testing.assert_allclose(samples.var(axis=0).diagonal(), expected_var, rtol=0.1)


def test_positive_definite_bijection_and_jacobian():
    dim = 3
    unconstrained = jnp.asarray(np.random.default_rng(4).normal(size=dim * (dim + 1) // 2))
    matrix = linalg.pd_from_unconstrained(unconstrained, dim)
    np.testing.assert_allclose(linalg.unconstrained_from_pd(matrix), unconstrained, atol=1e-12)
    rows, cols = np.tril_indices(dim)
    lower_triangle = lambda u: linalg.pd_from_unconstrained(u, dim)[rows, cols]  # noqa: E731
    jacobian = jax.jacfwd(lower_triangle)(unconstrained)
    np.testing.assert_allclose(
        linalg.pd_log_abs_det_jacobian(unconstrained, dim), np.linalg.slogdet(np.asarray(jacobian))[1], rtol=1e-10
    )


def test_gibbs_program_calls_no_lapack_kernel():
    from bayesval.inference.data import NoiseAwareData
    from bayesval.inference.gibbs import GibbsInputs, _advance, initial_state
    from bayesval.models import LinearRegression

    model, num_parties = LinearRegression(interweaving_moves=1, collapsed_moves=1), 3
    data = NoiseAwareData(jnp.ones((num_parties, 9)), jnp.full(num_parties, 100.0), jnp.ones(num_parties))
    priors, settings = model.priors(2), model.kernel_settings(data)
    init = jax.vmap(jax.vmap(lambda k: initial_state(k, priors, num_parties)))
    states = init(jax.random.split(jax.random.key(0), (2, 2)))
    row_keys, at = jax.random.split(jax.random.key(1), 2), np.int32(0)
    inputs = GibbsInputs(data, jnp.ones((2, num_parties), bool), priors)
    lowered = _advance.lower(row_keys, at, at, states, inputs, settings, jnp.asarray(True), jnp.ones(2, int))
    assert not re.findall(r"lapack_\w+", lowered.as_text())


@pytest.mark.parametrize("dim", [1, 2, 5, linalg.SCALAR_LIMIT + 3])
def test_lu_solve_inverse_and_log_determinant_match_numpy(dim):
    """Partial pivoting: a general matrix, one whose first pivot is 0 (no factorisation without a row swap) and an
    indefinite symmetric one (a Newton step's system away from a mode); a singular matrix gives non-finite values."""
    rng = np.random.default_rng(30 + dim)
    general, rhs = rng.normal(size=(dim, dim)), rng.normal(size=(dim, 2))
    swapped = np.roll(np.eye(dim), 1, axis=0) + 0.1 * np.tril(rng.normal(size=(dim, dim)), -1)
    indefinite = general + general.T
    for matrix in (general, swapped, indefinite):
        np.testing.assert_allclose(jax.jit(linalg.solve)(matrix, rhs), np.linalg.solve(matrix, rhs), rtol=1e-8)
        np.testing.assert_allclose(linalg.solve(matrix, rhs[:, 0]), np.linalg.solve(matrix, rhs[:, 0]), rtol=1e-8)
        np.testing.assert_allclose(linalg.inverse(matrix), np.linalg.inv(matrix), rtol=1e-8, atol=1e-10)
        np.testing.assert_allclose(linalg.log_abs_det(matrix), np.linalg.slogdet(matrix)[1], atol=1e-10)
    batched = jax.vmap(linalg.solve)(jnp.stack([general, indefinite]), jnp.asarray(rhs.T))
    np.testing.assert_allclose(batched[1], np.linalg.solve(indefinite, rhs[:, 1]), rtol=1e-8)
    if dim > 1:
        assert not np.isfinite(np.asarray(linalg.solve(np.ones((dim, dim)), rhs))).all()


def test_loops_and_scalars_give_one_factor():
    """`on_scalars=False`, the form a twice-differentiated function takes, against the scalar form."""
    rng = np.random.default_rng(5)
    matrix, rhs = _spd(rng, 9), rng.normal(size=9)
    for on_scalars in (True, False):
        lower = linalg.cholesky(jnp.asarray(matrix), on_scalars=on_scalars)
        np.testing.assert_allclose(lower, np.linalg.cholesky(matrix), rtol=1e-10, atol=1e-12)
        solved = linalg.solve_lower(lower, rhs, on_scalars=on_scalars)
        np.testing.assert_allclose(solved, np.linalg.solve(np.asarray(lower), rhs), rtol=1e-10)


def test_party_route_programs_call_no_lapack_kernel():
    """The Laplace fits, the importance rows, the party product and the k-NN KL hold no LAPACK custom call: at 50
    parties the fit's batched triangular solves (34 x 9 x 81) passed the batch size from which jaxlib 0.10's kernel
    splits a batch over XLA's intra-op pool and blocks its thread, two ran at once, and the valuation stalled with
    every thread asleep (docs/architecture.md, "Why the Gibbs program has its own linear algebra")."""
    from bayesval.divergence import _kl_to_density, _kl_two_sample
    from bayesval.inference import importance, laplace, party_product
    from bayesval.inference.data import NoiseAwareData
    from bayesval.models import LinearRegression

    model, num_parties = LinearRegression(), 3
    rng = np.random.default_rng(6)
    data = NoiseAwareData(jnp.asarray(rng.normal(size=(num_parties, 9))), jnp.full(num_parties, 100.0), jnp.ones(3))
    priors, statistic, mask = model.priors(2), model.statistic(2), np.ones(num_parties, bool)
    start = laplace.prior_start(priors.model)
    theta_dim, width = 4, 5
    mode = laplace.JointMode(
        jnp.zeros(theta_dim),
        jnp.zeros((num_parties, width)),
        (
            jnp.zeros(theta_dim),
            jnp.zeros((num_parties, width)),
            jnp.eye(theta_dim),
            jnp.zeros((num_parties, theta_dim, width)),
            jnp.tile(jnp.eye(width), (num_parties, 1, 1)),
        ),
        jnp.eye(theta_dim),
        jnp.asarray(0.0),
        jnp.asarray(0),
        jnp.asarray(0.0),
    )
    messages = party_product.PartyMessages(jnp.tile(jnp.eye(theta_dim), (num_parties, 1, 1)), jnp.zeros((3, 4)), start)
    points, kept = jnp.zeros((2, 64, theta_dim)), jnp.ones((2, 64), bool)
    modes = jax.tree.map(lambda *parts: jnp.stack(parts), mode, mode)  # two modes: the mixture's program
    lowered = {
        "fit": importance._mode.lower(data, mask, priors.model, priors.data, statistic, start, False),
        "fits": laplace._fit_batch.lower(data, mask[None], priors.model, priors.data, statistic, start),
        "draws": importance._row_draws.lower(
            jax.random.key(0), data, mask, priors.model, priors.data, statistic, modes, 64, 4
        ),
        "messages": party_product._messages.lower(
            priors.model, jnp.zeros((3, 4)), jnp.tile(jnp.eye(4), (3, 1, 1)), mask
        ),
        "product": party_product.product_surprises.lower(messages, priors.model, jnp.ones((2, num_parties), bool)),
        "kl": _kl_to_density.lower(points, kept, jnp.zeros((2, 64)), 4, 32, 4, "kdtree", 2048),
        "kl, two samples": _kl_two_sample.lower(points, kept, points, 4, 32, 4, "kdtree", 2048),
    }
    calls = {name: re.findall(r"lapack_\w+", program.as_text()) for name, program in lowered.items()}
    assert calls == {name: [] for name in lowered}


@pytest.mark.parametrize("dim, dof", [(1, 3.0), (4, 5.0), (9, 30.0)])
def test_multivariate_t_log_density_matches_scipy(dim, dof):
    rng = np.random.default_rng(20 + dim)
    scale, mean = _spd(rng, dim, condition=30.0), rng.normal(size=dim)
    lower = jnp.asarray(np.linalg.cholesky(scale))
    for value in rng.normal(size=(3, dim)) * 3.0:
        expected = stats.multivariate_t(mean, scale, df=dof).logpdf(value)
        np.testing.assert_allclose(
            linalg.mvt_log_prob_cholesky(jnp.asarray(value), mean, lower, dof), expected, rtol=1e-10
        )


@pytest.mark.parametrize("dim", [1, 7, 16, 17, 53])
def test_lower_inverse_inverts_a_lower_triangular_matrix_of_any_size(dim):
    """By halves above INVERSE_BLOCK rows (17 and 53 split unevenly), by substitution below, batched by vmap."""
    from bayesval.inference.linalg import lower_inverse

    rng = np.random.default_rng(dim)
    lower = np.tril(rng.normal(size=(3, dim, dim))) + 3 * np.eye(dim)
    inverse = np.asarray(jax.vmap(lower_inverse)(jnp.asarray(lower)))
    np.testing.assert_allclose(inverse, np.linalg.inv(lower), rtol=1e-10, atol=1e-12)
    assert np.all(np.triu(inverse, 1) == 0)


@pytest.mark.parametrize("dim", [1, 7, 17, 53])
def test_cholesky_and_inverse_factor_a_covariance_of_any_size(dim):
    """By halves above INVERSE_BLOCK rows (17 and 53 split unevenly), by the column loop below: the factor of
    numpy's LAPACK and its inverse, batched by vmap; NaN for a matrix that is not positive definite."""
    from bayesval.inference.linalg import cholesky_and_inverse

    rng = np.random.default_rng(dim)
    matrices = np.stack([_spd(rng, dim, condition=1e4) for _ in range(3)])
    lower, inverse = (np.asarray(part) for part in jax.vmap(cholesky_and_inverse)(jnp.asarray(matrices)))
    np.testing.assert_allclose(lower, np.linalg.cholesky(matrices), rtol=1e-9, atol=1e-11)
    np.testing.assert_allclose(inverse, np.linalg.inv(np.linalg.cholesky(matrices)), rtol=1e-8, atol=1e-10)
    assert np.all(np.triu(lower, 1) == 0) and np.all(np.triu(inverse, 1) == 0)
    indefinite = matrices[0] - 2 * np.linalg.eigvalsh(matrices[0]).max() * np.eye(dim)
    assert np.isnan(np.asarray(cholesky_and_inverse(jnp.asarray(indefinite))[0])).any()
