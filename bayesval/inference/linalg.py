"""Small dense linear algebra in plain jax.numpy, for the batched Gibbs program and the party route's programs
(the Laplace fits, the importance rows, the party product, the k-NN KL's whitening).

Why not `jnp.linalg`: on CPU its Cholesky, triangular-solve, LU and eigh lower to LAPACK custom calls
whose batched kernels (jaxlib 0.10) split a large batch over XLA's intra-op thread pool and then block
that pool thread until the pieces finish. When XLA runs two such calls at once on pool threads and the
pool has no free thread (2 threads on a 2-core machine), every thread waits on work that none can run:
the valuation of 6+ parties deadlocked this way, and the Laplace fits of 36 and 50 parties (docs/architecture.md,
"Why the Gibbs program has its own linear algebra"). The matrices here are tiny (the statistic of w features is
(w+2)(w+3)/2 - 1 long). The Cholesky factor and the triangular solves are `fori_loop`s over columns or rows whose
body is a few whole-matrix operations, so under `vmap` each compiles to a handful of kernels at any
size; the Jacobi eigendecomposition is unrolled over the entries within a sweep, which runs several
times faster than a loop of rotations for the small matrices it serves (docs/architecture.md). None
calls a library kernel. Each function takes one matrix; `vmap` batches it.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.special import gammaln, multigammaln


def _basis(index: jnp.ndarray, dim: int, ndim: int = 1) -> jnp.ndarray:
    """Boolean indicator of position `index` along the leading axis of an array with `ndim` axes."""
    return (jnp.arange(dim) == index).reshape((dim,) + (1,) * (ndim - 1))


# Up to this size the factorisation and substitutions are written on the entries as scalars: under `vmap` every
# step is then an elementwise operation over the batch, and XLA fuses them into a few kernels (docs/architecture.md).
SCALAR_LIMIT = 10


def _cholesky_entries(matrix) -> list[list]:
    """The lower Cholesky factor as nested lists of scalars (entries above the diagonal are None), of a matrix or
    of its entries as nested lists."""
    dim = len(matrix)
    lower = [[None] * dim for _ in range(dim)]
    for j in range(dim):
        pivot = jnp.sqrt(matrix[j][j] - sum((lower[j][k] ** 2 for k in range(j)), 0.0))
        lower[j][j] = pivot
        for i in range(j + 1, dim):
            lower[i][j] = (matrix[i][j] - sum((lower[i][k] * lower[j][k] for k in range(j)), 0.0)) / pivot
    return lower


def _substitute_entries(lower: list[list], rhs: list) -> list:
    """Forward substitution on scalars: x with L x = rhs for L as `_cholesky_entries` gives it."""
    solution = []
    for i, value in enumerate(rhs):
        solution.append((value - sum((lower[i][k] * solution[k] for k in range(i)), 0.0)) / lower[i][i])
    return solution


def _back_substitute_entries(lower: list[list], rhs: list) -> list:
    """Back substitution on scalars: x with L^T x = rhs for L as `_cholesky_entries` gives it."""
    dim = len(rhs)
    solution = [None] * dim
    for i in reversed(range(dim)):
        above = sum((lower[k][i] * solution[k] for k in range(i + 1, dim)), 0.0)
        solution[i] = (rhs[i] - above) / lower[i][i]
    return solution


def spd_solve_entries(matrix, rhs) -> list:
    """`spd_solve` on scalars: x (a list) with matrix @ x = rhs, the matrix given as its entries (nested lists, or
    an array up to SCALAR_LIMIT)."""
    lower = _cholesky_entries(matrix)
    return _back_substitute_entries(lower, _substitute_entries(lower, list(rhs)))


def cholesky_times_entries(matrix, vector) -> list:
    """L @ vector on scalars, for L the lower Cholesky factor of the matrix (given as `spd_solve_entries` takes
    it): a Gaussian draw's offset from standard normal `vector`."""
    lower = _cholesky_entries(matrix)
    return [sum((lower[i][k] * vector[k] for k in range(i + 1)), 0.0) for i in range(len(lower))]


def cholesky(matrix: jnp.ndarray, on_scalars: bool | None = None) -> jnp.ndarray:
    """Lower Cholesky factor L (L L^T = matrix); NaN where the matrix is not PD. `on_scalars` (by default up to
    SCALAR_LIMIT) it is written on scalars; otherwise one column per loop step (column j is matrix[:, j] - L L[j]^T
    over the whole row, the columns not yet computed being zero). A function differentiated twice takes the loop at
    any size: the second derivatives of the Laplace fit's 9 x 9 factor compiled in 18 s as loops and 74 s on scalars
    (docs/architecture.md, "Why the Gibbs program has its own linear algebra")."""
    matrix = jnp.asarray(matrix)
    dim = matrix.shape[-1]
    if dim <= SCALAR_LIMIT if on_scalars is None else on_scalars:
        lower = _cholesky_entries(matrix)
        zero = jnp.zeros((), matrix.dtype)
        return jnp.stack([jnp.stack([lower[i][j] if j <= i else zero for j in range(dim)]) for i in range(dim)])
    rows = jnp.arange(dim)

    def column(j, factor):
        residual = matrix[:, j] - factor @ factor[j]
        pivot = jnp.sqrt(residual[j])
        new = jnp.where(rows > j, residual / pivot, jnp.where(rows == j, pivot, 0.0))
        return jnp.where(rows == j, new[:, None], factor)

    return jax.lax.fori_loop(0, dim, column, jnp.zeros_like(matrix))


def _substitute(triangular: jnp.ndarray, rhs: jnp.ndarray, order: jnp.ndarray, on_scalars: bool | None) -> jnp.ndarray:
    """Solve a triangular system by substitution in `order` (rows whose unknowns are already known first).
    `on_scalars` (by default up to SCALAR_LIMIT) on scalars (rows of rhs); otherwise one row per loop step, the
    unknowns not yet solved being zero so that each row's known part is a full dot product."""
    triangular, rhs = jnp.asarray(triangular), jnp.asarray(rhs)
    dim = triangular.shape[-1]
    if dim <= SCALAR_LIMIT if on_scalars is None else on_scalars:
        order, solution = np.asarray(order).tolist(), [None] * dim
        for step, i in enumerate(order):
            known = sum((triangular[i, k] * solution[k] for k in order[:step]), 0.0)
            solution[i] = (rhs[i] - known) / triangular[i, i]
        return jnp.stack(solution)
    order = jnp.asarray(order)

    def row(step, solution):
        i = order[step]
        value = (rhs[i] - triangular[i] @ solution) / triangular[i, i]
        return jnp.where(_basis(i, dim, rhs.ndim), value, solution)

    return jax.lax.fori_loop(0, dim, row, jnp.zeros_like(rhs))


def solve_lower(lower: jnp.ndarray, rhs: jnp.ndarray, on_scalars: bool | None = None) -> jnp.ndarray:
    """x with lower @ x = rhs (rhs a vector or a matrix of columns), by forward substitution (`on_scalars` as
    `cholesky` takes it)."""
    return _substitute(lower, rhs, np.arange(lower.shape[-1]), on_scalars)


def solve_upper(upper: jnp.ndarray, rhs: jnp.ndarray) -> jnp.ndarray:
    """x with upper @ x = rhs, by back substitution."""
    return _substitute(upper, rhs, np.arange(upper.shape[-1])[::-1], None)


# Below this size `lower_inverse` substitutes; above, it halves the matrix (`lower_inverse`).
INVERSE_BLOCK = 16


def lower_inverse(lower: jnp.ndarray) -> jnp.ndarray:
    """The inverse of a lower-triangular matrix by halves: [[A, 0], [B, D]]^-1 = [[A^-1, 0], [-D^-1 B A^-1, D^-1]]
    (Golub & Van Loan 2013, Sec. 3.1), the halves inverted alike down to INVERSE_BLOCK rows, which are substituted
    (`solve_lower`). Almost all of its work is matrix products: XLA's batched triangular solve with a matrix of
    right-hand sides, `jax.scipy.linalg.solve_triangular(lower, I)`, ran 20x slower on a CPU for the 53 x 53
    covariance of an 8-feature logistic statistic (docs/benchmarks.md, "Cost against the number of features")."""
    dim = lower.shape[-1]
    if dim <= INVERSE_BLOCK:
        return solve_lower(lower, jnp.eye(dim, dtype=lower.dtype))
    half = dim // 2
    first, last = lower_inverse(lower[:half, :half]), lower_inverse(lower[half:, half:])
    corner = -last @ (lower[half:, :half] @ first)
    return jnp.block([[first, jnp.zeros((half, dim - half), lower.dtype)], [corner, last]])


def cholesky_and_inverse(matrix: jnp.ndarray, block: int = INVERSE_BLOCK) -> tuple[jnp.ndarray, jnp.ndarray]:
    """The lower Cholesky factor L of a symmetric positive-definite matrix and L^-1, by halves:
    [[A, B^T], [B, D]] = L L^T with L = [[L_A, 0], [B L_A^-T, L_S]], L_S the factor of the Schur complement
    D - (B L_A^-T)(B L_A^-T)^T, and L^-1 = [[L_A^-1, 0], [-L_S^-1 (B L_A^-T) L_A^-1, L_S^-1]] (Golub & Van Loan 2013,
    Secs. 3.1 and 4.2), the halves factored alike down to `block` rows (`cholesky`, `solve_lower`). Nearly all of
    its work is matrix products: on a CPU, for the 53 x 53 covariances of an 8-feature logistic statistic, it runs
    several times faster than LAPACK's batched factorisation followed by `lower_inverse` (docs/benchmarks.md,
    "A warm start for NUTS"). NaN where the matrix is not positive definite."""
    dim = matrix.shape[-1]
    if dim <= block:
        lower = cholesky(matrix)
        return lower, solve_lower(lower, jnp.eye(dim, dtype=matrix.dtype))
    half = dim // 2
    first, first_inverse = cholesky_and_inverse(matrix[:half, :half], block)
    below = matrix[half:, :half] @ first_inverse.T
    last, last_inverse = cholesky_and_inverse(matrix[half:, half:] - below @ below.T, block)
    zeros = jnp.zeros((half, dim - half), matrix.dtype)
    corner = -last_inverse @ (below @ first_inverse)
    return jnp.block([[first, zeros], [below, last]]), jnp.block([[first_inverse, zeros], [corner, last_inverse]])


def cho_solve(lower: jnp.ndarray, rhs: jnp.ndarray) -> jnp.ndarray:
    """x with (lower lower^T) x = rhs."""
    return solve_upper(lower.T, solve_lower(lower, rhs))


def spd_solve(matrix: jnp.ndarray, rhs: jnp.ndarray) -> jnp.ndarray:
    """x with matrix @ x = rhs for a symmetric positive-definite matrix."""
    return cho_solve(cholesky(matrix), rhs)


def spd_inverse(matrix: jnp.ndarray) -> jnp.ndarray:
    return spd_solve(matrix, jnp.eye(matrix.shape[-1], dtype=matrix.dtype))


def log_det_from_cholesky(lower: jnp.ndarray) -> jnp.ndarray:
    return 2.0 * jnp.sum(jnp.log(jnp.diagonal(lower)))


def lu_factor(matrix: jnp.ndarray) -> tuple[jnp.ndarray, jnp.ndarray]:
    """LU with partial pivoting (Golub & Van Loan 2013, Sec. 3.4): (lu, order) with matrix[order] = L U, L unit
    lower triangular below lu's diagonal and U upper triangular on and above it. One column per loop step: its
    largest entry on or below the diagonal is swapped up and the rows below eliminated by one outer product. For the
    square matrices a Newton step solves with, which need not be positive definite away from a mode; inf or NaN
    where the matrix is singular, as LAPACK's."""
    matrix = jnp.asarray(matrix)
    dim = matrix.shape[-1]
    rows = jnp.arange(dim)

    def column(k, carry):
        lu, order = carry
        pivot = jnp.argmax(jnp.where(rows >= k, jnp.abs(lu[:, k]), -1.0))
        swap = jnp.where(rows == k, pivot, jnp.where(rows == pivot, k, rows))
        lu, order = lu[swap], order[swap]
        factors = jnp.where(rows > k, lu[:, k] / lu[k, k], 0.0)
        lu = lu - factors[:, None] * jnp.where(rows > k, lu[k], 0.0)[None, :]
        return jnp.where(rows[None, :] == k, jnp.where(rows > k, factors, lu[:, k])[:, None], lu), order

    return jax.lax.fori_loop(0, dim, column, (matrix, rows))


def solve(matrix: jnp.ndarray, rhs: jnp.ndarray) -> jnp.ndarray:
    """x with matrix @ x = rhs (rhs a vector or a matrix of columns) for a square matrix, by `lu_factor`."""
    lu, order = lu_factor(matrix)
    unit_lower = jnp.tril(lu, -1) + jnp.eye(lu.shape[-1], dtype=lu.dtype)
    return solve_upper(jnp.triu(lu), solve_lower(unit_lower, jnp.asarray(rhs)[order]))


def inverse(matrix: jnp.ndarray) -> jnp.ndarray:
    return solve(matrix, jnp.eye(matrix.shape[-1], dtype=matrix.dtype))


def log_abs_det(matrix: jnp.ndarray) -> jnp.ndarray:
    """log |det matrix| of a square matrix (`jnp.linalg.slogdet`'s second part), by `lu_factor`."""
    return jnp.sum(jnp.log(jnp.abs(jnp.diagonal(lu_factor(matrix)[0]))))


def eigh(matrix: jnp.ndarray) -> tuple[jnp.ndarray, jnp.ndarray]:
    """Eigenvalues and eigenvectors (columns) of a symmetric matrix by cyclic Jacobi rotations, written on the
    matrix's entries as scalars so that each rotation is a handful of fused elementwise operations."""
    dim = matrix.shape[-1]

    def sweep(_, carry):
        a = [[carry[0][i, j] for j in range(dim)] for i in range(dim)]
        v = [[carry[1][i, j] for j in range(dim)] for i in range(dim)]
        for p in range(dim - 1):
            for q in range(p + 1, dim):
                off = a[p][q]
                rotate = off != 0.0
                tau = (a[q][q] - a[p][p]) / (2.0 * jnp.where(rotate, off, 1.0))
                tangent = jnp.where(tau >= 0, 1.0, -1.0) / (jnp.abs(tau) + jnp.sqrt(1.0 + tau**2))
                cos = jnp.where(rotate, 1.0 / jnp.sqrt(1.0 + tangent**2), 1.0)
                sin = jnp.where(rotate, tangent * cos, 0.0)
                for rows in (a, v):  # columns p, q of A J and of V J
                    for row in rows:
                        row[p], row[q] = cos * row[p] - sin * row[q], sin * row[p] + cos * row[q]
                a[p], a[q] = (  # rows p, q of J^T (A J)
                    [cos * x - sin * y for x, y in zip(a[p], a[q])],
                    [sin * x + cos * y for x, y in zip(a[p], a[q])],
                )
        return jnp.asarray(a), jnp.asarray(v)

    sweeps = 0 if dim == 1 else 6 if dim <= 6 else 10  # quadratic convergence: float64 precision (tests)
    diagonalised, vectors = jax.lax.fori_loop(0, sweeps, sweep, (matrix, jnp.eye(dim, dtype=matrix.dtype)))
    return jnp.diagonal(diagonalised), vectors


def psd_project(matrix: jnp.ndarray, floor: float = 0.0) -> jnp.ndarray:
    """Nearest symmetric matrix (Frobenius) with every eigenvalue >= floor."""
    values, vectors = eigh(0.5 * (matrix + matrix.T))
    return (vectors * jnp.maximum(values, floor)) @ vectors.T


def mvn_log_prob_cholesky(value: jnp.ndarray, mean: jnp.ndarray, lower: jnp.ndarray) -> jnp.ndarray:
    """log N(value; mean, L L^T)."""
    standard = solve_lower(lower, value - mean)
    dim = value.shape[-1]
    return -0.5 * (standard @ standard + log_det_from_cholesky(lower) + dim * jnp.log(2 * jnp.pi))


def mvt_log_prob_cholesky(value: jnp.ndarray, mean: jnp.ndarray, lower: jnp.ndarray, dof: float) -> jnp.ndarray:
    """log t_dof(value; mean, L L^T): the multivariate Student t with scale matrix L L^T."""
    standard = solve_lower(lower, value - mean)
    dim = value.shape[-1]
    normaliser = gammaln((dof + dim) / 2) - gammaln(dof / 2) - dim / 2 * jnp.log(dof * jnp.pi)
    return normaliser - 0.5 * log_det_from_cholesky(lower) - (dof + dim) / 2 * jnp.log1p(standard @ standard / dof)


def mvn_log_prob(value: jnp.ndarray, mean: jnp.ndarray, cov: jnp.ndarray) -> jnp.ndarray:
    """log N(value; mean, cov); up to SCALAR_LIMIT the factorisation and the forward substitution run on scalars,
    together (`mvn_log_prob_entries`)."""
    if cov.shape[-1] > SCALAR_LIMIT:
        return mvn_log_prob_cholesky(value, mean, cholesky(cov))
    return mvn_log_prob_entries(value, mean, cov)


def mvn_log_prob_entries(value, mean, cov) -> jnp.ndarray:
    """log N(value; mean, cov) on scalars: `mean` and `value` vectors or lists of scalars, `cov` a matrix or its
    entries as nested lists (`bayesval.inference.clt.pair_product_entries`), which are then never stacked."""
    dim = len(cov)
    lower = _cholesky_entries(cov)
    standard = _substitute_entries(lower, [value[i] - mean[i] for i in range(dim)])
    log_det = sum(2.0 * jnp.log(lower[i][i]) for i in range(dim))
    return -0.5 * (sum(z**2 for z in standard) + log_det + dim * jnp.log(2 * jnp.pi))


def mvn_sample(key: jax.Array, mean: jnp.ndarray, cov: jnp.ndarray) -> jnp.ndarray:
    return mean + cholesky(cov) @ jax.random.normal(key, mean.shape, mean.dtype)


def inverse_wishart_sample(key: jax.Array, dof: jnp.ndarray, scale: jnp.ndarray) -> jnp.ndarray:
    """Sigma ~ InvWishart(dof, scale) (mean scale / (dof - d - 1)): Sigma^-1 ~ Wishart(dof, scale^-1) by the
    Bartlett decomposition, Sigma^-1 = (L A)(L A)^T with L L^T = scale^-1, A lower triangular,
    A_ii^2 ~ chi^2(dof - i), A_ij ~ N(0, 1) below the diagonal."""
    dim = scale.shape[-1]
    key_diag, key_below = jax.random.split(key)
    chi2 = 2.0 * jax.random.gamma(key_diag, 0.5 * (dof - jnp.arange(dim)), dtype=scale.dtype)
    below = jnp.tril(jax.random.normal(key_below, (dim, dim), scale.dtype), -1)
    bartlett = below + jnp.diag(jnp.sqrt(chi2))
    factor = cholesky(spd_inverse(scale)) @ bartlett  # precision = factor factor^T
    inverse_factor = solve_lower(factor, jnp.eye(dim, dtype=scale.dtype))
    return inverse_factor.T @ inverse_factor


def inverse_wishart_log_prob(value: jnp.ndarray, dof: jnp.ndarray, scale: jnp.ndarray) -> jnp.ndarray:
    """log InvWishart(value; dof, scale)."""
    dim = scale.shape[-1]
    value_chol = cholesky(value)
    trace = jnp.trace(cho_solve(value_chol, scale))
    return (
        0.5 * dof * log_det_from_cholesky(cholesky(scale))
        - 0.5 * dof * dim * jnp.log(2.0)
        - multigammaln(0.5 * dof, dim)
        - 0.5 * (dof + dim + 1) * log_det_from_cholesky(value_chol)
        - 0.5 * trace
    )


def pd_from_unconstrained(unconstrained: jnp.ndarray, dim: int) -> jnp.ndarray:
    """Sigma = L L^T, L lower triangular filled row-major from the vector, its diagonal exponentiated."""
    rows, cols = np.tril_indices(dim)
    entries = jnp.where(rows == cols, jnp.exp(unconstrained), unconstrained)
    lower = jnp.zeros((dim, dim), unconstrained.dtype).at[rows, cols].set(entries)
    return lower @ lower.T


def unconstrained_from_pd(matrix: jnp.ndarray) -> jnp.ndarray:
    """The inverse of `pd_from_unconstrained`: the Cholesky factor's lower triangle, log on its diagonal."""
    dim = matrix.shape[-1]
    rows, cols = np.tril_indices(dim)
    lower = cholesky(matrix)
    entries = lower[rows, cols]
    return jnp.where(rows == cols, jnp.log(entries), entries)


def pd_log_abs_det_jacobian(unconstrained: jnp.ndarray, dim: int) -> jnp.ndarray:
    """log |d Sigma / d u| of `pd_from_unconstrained`: d log 2 + sum_i (d - i + 1) log L_ii (i from 0)."""
    rows, cols = np.tril_indices(dim)
    log_diagonal = unconstrained[np.flatnonzero(rows == cols)]
    return dim * jnp.log(2.0) + jnp.sum((dim - jnp.arange(dim) + 1) * log_diagonal)
