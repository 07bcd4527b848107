"""KL divergence between posterior and prior from samples, and closed forms to test it.

Two k-NN estimators of KL(q || p) from n posterior draws x_i (d dimensions), both batched over posteriors
as one jitted program (`batched_kl`):

* two-sample (Perez-Cruz 2008; Wang, Kulkarni & Verdu 2009), as Sim et al. (2023, App. C.3) use it, from
  m prior draws:  D = (d / n) sum_i log(nu_k(i) / rho_k(i)) + log(m / (n - 1));
* prior-density: KL = -H(q) - E_q[log p], with H(q) the Kozachenko-Leonenko entropy estimate
  H = psi(n) - psi(k) + log V_d + (d / n) sum_i log rho_k(i) and E_q[log p] averaged over the draws.
  Where the prior density is known (it is for every model bayesval ships) this removes the prior sample's
  nearest-neighbour noise, the dominant error of the two-sample form: on Syn's exact posterior its
  standard deviation falls from 0.37 to 0.028 nats at n = 3,200 and from 0.27 to 0.008 at n = 30,000
  (docs/benchmarks.md). Its bias is upward and shrinks slowly with n: on any Gaussian posterior in d = 4 (the
  draws are whitened, so all look alike) +0.038 nats at n = 6,400 and +0.023 at 32,000; where DP noise shapes the
  posterior it differs by coalition (docs/benchmarks.md, "The k-NN estimate's bias by draws a repeat").

rho_k(i): distance from draw i to its k-th nearest other posterior draw; nu_k(i): to its k-th nearest prior
draw. Distances are Euclidean after whitening (by the posterior's covariance, or the pooled one for the
two-sample form; the estimate is invariant to the map, its bias is not). Where MCMC repeats a draw, k is
raised per point to the first neighbour at non-zero distance, for both distances (Sim et al. 2023, App. H.1, raise
k from 4 "until the distance to the k-th neighbor is non-zero"; doing it per point and with one k for both
distances, which keeps their digamma terms equal, is our reading: docs/architecture.md, "Choices").
Dropped chains enter as a mask, so a batch keeps one shape. Neighbours come from scipy's KD-tree through a
host callback on CPU (faster there) and from a blocked brute-force search in JAX on accelerators.
"""

from __future__ import annotations

from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.special import digamma, gammaln, logsumexp
from scipy.spatial import cKDTree

from bayesval.inference.conjugate import NIG, nig_expected_log_density, nig_log_density, sample_nig
from bayesval.inference.linalg import cholesky, solve_lower

EXTRA_NEIGHBOURS = 16  # how far past k a point looks for a non-zero distance among repeated MCMC draws
# The brute-force search's largest block of squared distances (posteriors x queries x points), 512 MiB in float64.
# Unbounded, Syn's paper preset (48 posteriors of 32,000 draws, 2,048 queries a chunk) asked for a 3.1e9-element
# block: past int32 indexing, it stopped an H200 with an illegal memory access (docs/benchmarks.md).
MAX_DISTANCE_BLOCK = 2**26
# Autocorrelated neighbours from the same chain bias the k-NN entropy down (KL up): at thinning 1 the demo's
# phi_3 rose by 0.07 nats without a window. 10 kept draws cover several autocorrelation times of the
# default samplers (docs/architecture.md).
THEILER_WINDOW = 10


def theiler_window(draws_per_chain: int) -> int:
    """Steps of a draw's own chain kept out of its neighbours in the KL estimate: THEILER_WINDOW, at most a
    quarter of the chain."""
    return min(THEILER_WINDOW, draws_per_chain // 4)


def knn_kl(posterior, prior, k: int = 4, backend: str = "auto", chunk_size: int = 2048) -> float:
    """Two-sample k-NN estimate of KL(posterior || prior) from draws of shape (n, d) and (m, d)."""
    posterior, prior = _check_draws(posterior, k, prior)
    return _one_posterior(posterior, k, backend, chunk_size, prior=prior[None])


def knn_kl_to_density(posterior, log_prior, k: int = 4, backend: str = "auto", chunk_size: int = 2048) -> float:
    """KL(posterior || prior) = -H(posterior) - E[log prior] from draws (n, d) and the prior's log density at
    each of them (n,): the k-NN entropy estimate plus the average log prior."""
    posterior, _ = _check_draws(posterior, k)
    log_prior = np.asarray(log_prior, np.float64)
    if log_prior.shape != posterior.shape[:1] or not np.isfinite(log_prior).all():
        raise ValueError(f"log_prior must be finite with one value per draw, shape {posterior.shape[:1]}")
    return _one_posterior(posterior, k, backend, chunk_size, log_prior=log_prior[None, None])


def knn_entropy(draws, k: int = 4, backend: str = "auto", chunk_size: int = 2048) -> float:
    """Kozachenko-Leonenko k-NN estimate of the differential entropy (nats) of draws (n, d)."""
    draws, _ = _check_draws(draws, k)
    return -_one_posterior(draws, k, backend, chunk_size, log_prior=np.zeros((1, 1, len(draws))))


def kl_between(p_draws, q_draws, k: int, chain_length: int | None = None) -> float:
    """KL(p || q) from draws of each, the two-sample k-NN estimator (Sim et al. 2023, App. C.3): how far a model
    reward q_i lies from the grand coalition's posterior p (its similarity r'_i = -KL(p || q_i), Sec. 5.4). With
    chain_length, p_draws are consecutive MCMC chains of that length, and a draw's neighbours exclude its own chain's
    nearby steps (`theiler_window`, as in a valuation's estimates)."""
    p_draws = np.asarray(p_draws, np.float64)
    length = p_draws.shape[0] if chain_length is None else int(chain_length)
    if p_draws.shape[0] % length:
        raise ValueError(f"{p_draws.shape[0]} draws are not chains of length {length}")
    chains = p_draws.reshape(1, -1, length, p_draws.shape[-1])
    window = 0 if chain_length is None else theiler_window(length)
    kept = np.ones(chains.shape[:2], bool)
    return float(batched_kl(chains, kept, k, prior=np.asarray(q_draws)[None], window=window)[0])


def _one_posterior(draws, k, backend, chunk_size, **reference) -> float:
    """`batched_kl` of i.i.d. draws (n, d) as a batch of one single-chain posterior."""
    kl = batched_kl(draws[None, None], np.ones((1, 1), bool), k, backend=backend, chunk_size=chunk_size, **reference)
    return float(_finite(kl)[0])


def batched_kl(
    draws,
    kept_chains,
    k: int,
    *,
    prior=None,
    log_prior=None,
    window: int = 0,
    backend: str = "auto",
    chunk_size: int = 2048,
) -> jnp.ndarray:
    """KL estimates (B,) of a batch of posteriors, draws (B, chains, kept, d) of which the chains in kept_chains
    (B, chains) count, against prior draws (B, m, d) (two-sample) or the prior's log density at each draw
    (B, chains, kept) (prior-density). A draw's neighbours exclude the draws of its own chain within `window`
    steps (a Theiler window: autocorrelated MCMC neighbours would shrink rho and bias the KL upwards). NaN
    where more than EXTRA_NEIGHBOURS draws repeat around some point or the draws have no spread in some direction
    (a stuck sampler)."""
    if (prior is None) == (log_prior is None):
        raise ValueError("pass exactly one of prior= (draws) and log_prior= (the prior's log density at the draws)")
    if backend == "auto":
        backend = "kdtree" if jax.default_backend() == "cpu" else "brute"
    if backend not in ("kdtree", "brute"):
        raise ValueError(f"backend must be 'auto', 'kdtree' or 'brute', got {backend!r}")
    draws = jnp.asarray(draws, jnp.float64)
    kept = jnp.repeat(jnp.asarray(kept_chains, bool), draws.shape[2], axis=1)
    points = draws.reshape(draws.shape[0], -1, draws.shape[-1])
    layout = (k, draws.shape[2], window, backend, chunk_size)
    if prior is None:
        return _kl_to_density(points, kept, jnp.asarray(log_prior, jnp.float64).reshape(kept.shape), *layout)
    return _kl_two_sample(points, kept, jnp.asarray(prior, jnp.float64), *layout)


_LAYOUT = ("k", "per_chain", "window", "backend", "chunk_size")


@partial(jax.jit, static_argnames=_LAYOUT)
def _kl_to_density(points, kept, log_prior, k, per_chain, window, backend, chunk_size):
    centre, chol = jax.vmap(_whitening)(points, kept)
    white = jax.vmap(_whiten)(points, centre, chol)
    rho, _, rank = _neighbours(white, kept, None, k, per_chain, window, backend, chunk_size)
    d = points.shape[-1]
    log_ball = d / 2 * jnp.log(jnp.pi) - gammaln(d / 2 + 1)
    log_det = jnp.sum(jnp.log(jnp.diagonal(chol, axis1=1, axis2=2)), axis=1)
    candidates = _candidates(kept, per_chain, window)
    terms = d * jnp.log(rho) - digamma(rank + 1.0) + digamma(candidates + 1.0) + log_prior  # -KL = H + E[log p]
    entropy_plus_log_prior = log_ball + log_det + _kept_mean(terms, kept)
    return jnp.where(_stuck(rho, kept), jnp.nan, -entropy_plus_log_prior)


@partial(jax.jit, static_argnames=_LAYOUT)
def _kl_two_sample(points, kept, prior, k, per_chain, window, backend, chunk_size):
    pooled = jnp.concatenate([points, prior], axis=1)
    centre, chol = jax.vmap(_whitening)(pooled, jnp.concatenate([kept, jnp.ones(prior.shape[:2], bool)], axis=1))
    white, white_prior = jax.vmap(_whiten)(points, centre, chol), jax.vmap(_whiten)(prior, centre, chol)
    rho, nu, _ = _neighbours(white, kept, white_prior, k, per_chain, window, backend, chunk_size)
    d = points.shape[-1]
    candidates = _candidates(kept, per_chain, window)
    kl = _kept_mean(d * jnp.log(nu / rho) + jnp.log(prior.shape[1] / candidates), kept)
    return jnp.where(_stuck(rho, kept) | _stuck(nu, kept), jnp.nan, kl)


def _candidates(kept, per_chain, window):
    """How many draws may be each draw's neighbour (B, N): the kept ones, less itself and its own chain's
    draws within the window."""
    step = jnp.arange(kept.shape[1]) % per_chain
    near = jnp.minimum(step, window) + jnp.minimum(per_chain - 1 - step, window)
    return kept.sum(axis=1, keepdims=True) - 1.0 - near


def _kept_mean(values, kept):
    return jnp.sum(jnp.where(kept, values, 0.0), axis=1) / kept.sum(axis=1)


def _stuck(distances, kept):
    return jnp.any(kept & ~((distances > 0) & jnp.isfinite(distances)), axis=1)


def _whitening(points, kept):
    """Mean and Cholesky factor of the covariance of the kept points."""
    weights = kept / kept.sum()
    centre = weights @ points
    centred = points - centre
    cov = (centred * weights[:, None]).T @ centred * (kept.sum() / (kept.sum() - 1))
    return centre, cholesky(cov)


def _whiten(points, centre, chol):
    return solve_lower(chol, (points - centre).T).T


def _neighbours(white, kept, white_prior, k, per_chain, window, backend, chunk_size):
    """rho (B, N), nu (B, N) (None without a prior sample) and the rank (0-based) they are taken at: the k-th
    neighbour, or the first past zero distances among the k + EXTRA_NEIGHBOURS nearest. A draw's own chain
    within `window` steps (itself included) and masked draws are nobody's neighbours."""
    if backend == "kdtree":
        host = partial(_kdtree_rows, k=k, per_chain=per_chain, window=window)
        shapes = [jax.ShapeDtypeStruct(kept.shape, jnp.float64)] * 2 + [jax.ShapeDtypeStruct(kept.shape, jnp.int32)]
        arguments = (white, kept) if white_prior is None else (white, kept, white_prior)
        rho, nu, rank = jax.pure_callback(host, tuple(shapes), *arguments, vmap_method="sequential")
        return rho, None if white_prior is None else nu, rank
    depth = k + EXTRA_NEIGHBOURS
    index = jnp.arange(kept.shape[1])

    def within_row(inputs, query_chunk):
        points, kept_row = inputs

        def excluded(i):
            return ~kept_row | ((index // per_chain == i // per_chain) & (jnp.abs(index - i) <= window))

        return _brute_knn(points, points, depth, query_chunk, excluded)

    within = _in_blocks(within_row, (white, kept), white.shape[1], chunk_size)
    rank = _first_positive_rank(within, k)
    rho = jnp.take_along_axis(within, rank[..., None], -1)[..., 0]
    if white_prior is None:
        return rho, None, rank
    across_row = lambda inputs, query_chunk: _brute_knn(*inputs, depth, query_chunk)  # noqa: E731
    across = _in_blocks(across_row, (white, white_prior), white_prior.shape[1], chunk_size)
    return rho, jnp.take_along_axis(across, rank[..., None], -1)[..., 0], rank


def _in_blocks(search, rows, num_points: int, chunk_size: int):
    """`search(row, query_chunk)` of each posterior (a row of the arrays `rows`) against its `num_points` points, in
    blocks of distances within MAX_DISTANCE_BLOCK: `chunk_size` queries a chunk (fewer where one chunk alone would
    pass the bound), and as many posteriors at once as the bound allows."""
    query_chunk = _query_chunk(chunk_size, num_points)
    rows_at_once = max(1, MAX_DISTANCE_BLOCK // (query_chunk * num_points))
    return jax.lax.map(partial(search, query_chunk=query_chunk), rows, batch_size=rows_at_once)


def _query_chunk(chunk_size: int, num_points: int) -> int:
    """Queries a chunk of the brute-force search: `chunk_size`, fewer where their distances to `num_points` points
    would pass MAX_DISTANCE_BLOCK."""
    return max(1, min(chunk_size, MAX_DISTANCE_BLOCK // num_points))


def _first_positive_rank(within, k, xp=jnp):
    """The 0-based rank of the k-th neighbour, or of the first one past zero distances (array module xp)."""
    positive = within[..., k - 1 :] > 0
    return k - 1 + xp.where(positive.any(axis=-1), positive.argmax(axis=-1), 0)


def _brute_knn(queries, points, num_neighbours, chunk_size, excluded=None):
    """Sorted distances from each query to its `num_neighbours` nearest points, in query chunks; excluded(i) masks
    the points query i may not take (inf where fewer remain)."""
    squared_points = jnp.sum(points**2, axis=1)

    def nearest(inputs):
        query, i = inputs
        squared = query @ query - 2.0 * (points @ query) + squared_points
        if excluded is not None:
            squared = jnp.where(excluded(i), jnp.inf, squared)
        negative, _ = jax.lax.top_k(-squared, num_neighbours)
        return jnp.sqrt(jnp.maximum(-negative, 0.0))

    return jax.lax.map(nearest, (queries, jnp.arange(queries.shape[0])), batch_size=chunk_size)


def _kdtree_rows(white, kept, *white_prior, k, per_chain, window):
    """Host side of the KD-tree path (NumPy only: no JAX inside a callback), one posterior after another."""
    white, kept = np.asarray(white), np.asarray(kept)
    rho, nu, rank = np.ones(kept.shape), np.ones(kept.shape), np.full(kept.shape, k - 1, np.int32)
    for row in range(white.shape[0]):
        prior = np.asarray(white_prior[0][row]) if white_prior else None
        mine = np.flatnonzero(kept[row])
        if mine.size == 0:  # every chain dropped: nothing to estimate from (the caller's KL is NaN for this row)
            continue
        if not (np.isfinite(white[row][mine]).all() and (prior is None or np.isfinite(prior).all())):
            rho[row, mine] = np.nan  # degenerate draws (no spread to whiten by, or non-finite): NaN, as the brute path
            continue
        found = _kdtree_row(white[row][mine], mine // per_chain, mine, prior, k, window)
        rho[row, mine], nu[row, mine], rank[row, mine] = found
    return rho, nu, rank


def _kdtree_row(points, chain, step, prior, k, window):
    """rho, nu (ones without a prior sample) and rank of every point, looking past ties only where needed."""
    trees = cKDTree(points), None if prior is None else cKDTree(prior)

    def at_rank(rows, depth):
        reach = min(depth + 2 * window + 1, len(points))
        distance, neighbour = trees[0].query(points[rows], k=reach, workers=-1)
        distance, neighbour = distance.reshape(len(rows), reach), neighbour.reshape(len(rows), reach)
        near = (chain[neighbour] == chain[rows][:, None]) & (np.abs(step[neighbour] - step[rows][:, None]) <= window)
        within = np.sort(np.where(near, np.inf, distance), axis=1)[:, :depth]
        rank = _first_positive_rank(within, k, np)
        pick = lambda a: np.take_along_axis(a, rank[:, None], 1)[:, 0]  # noqa: E731
        if trees[1] is None:
            return pick(within), np.ones(len(rows)), rank
        across = trees[1].query(points[rows], k=depth, workers=-1)[0].reshape(len(rows), depth)
        return pick(within), pick(across), rank

    rho, nu, rank = at_rank(np.arange(len(points)), k)
    redo = np.flatnonzero(rho == 0)  # ties (repeated MCMC draws): look past them
    if redo.size:
        rho[redo], nu[redo], rank[redo] = at_rank(redo, k + EXTRA_NEIGHBOURS)
    return rho, nu, rank


def _check_draws(draws, k, prior=None):
    draws = np.asarray(draws, np.float64)
    if prior is not None:
        prior = np.asarray(prior, np.float64)
        if draws.ndim != 2 or prior.ndim != 2 or draws.shape[1] != prior.shape[1]:
            raise ValueError(f"need (n, d) and (m, d) samples, got {draws.shape} and {prior.shape}")
        if len(prior) < k:
            raise ValueError(f"k={k} needs at least k prior draws, got {len(prior)}")
    elif draws.ndim != 2:
        raise ValueError(f"need (n, d) samples, got shape {draws.shape}")
    if k < 1 or len(draws) <= k + 1:
        raise ValueError(f"k={k} needs more than k+1 posterior draws (got {len(draws)})")
    if not np.isfinite(draws).all() or (prior is not None and not np.isfinite(prior).all()):
        raise ValueError("posterior and prior draws must be finite")
    return draws, prior


def _finite(kl) -> np.ndarray:
    kl = np.asarray(kl, np.float64)
    if np.isnan(kl).any():
        raise ValueError(
            f"more than {EXTRA_NEIGHBOURS} identical draws around some point: the sampler is stuck (check diagnostics)"
        )
    return kl


def gaussian_kl(mean_p, cov_p, mean_q, cov_q) -> float:
    """KL(N(mean_p, cov_p) || N(mean_q, cov_q)) in closed form."""
    mean_p, cov_p, mean_q, cov_q = (jnp.asarray(a, jnp.float64) for a in (mean_p, cov_p, mean_q, cov_q))
    dim = mean_p.shape[0]
    chol_q = jnp.linalg.cholesky(cov_q)
    solved = jax.scipy.linalg.cho_solve((chol_q, True), cov_p)
    diff = mean_q - mean_p
    logdet_q = 2 * jnp.sum(jnp.log(jnp.diag(chol_q)))
    logdet_p = jnp.linalg.slogdet(cov_p)[1]
    maha = diff @ jax.scipy.linalg.cho_solve((chol_q, True), diff)
    return float(0.5 * (jnp.trace(solved) - dim + maha + logdet_q - logdet_p))


def nig_kl(p: NIG, q: NIG) -> float:
    """KL(NIG p || NIG q) over theta = (w, sigma^2) in closed form: E_p[log p] - E_p[log q]
    (`nig_expected_log_density`)."""
    return float(nig_expected_log_density(p, p) - nig_expected_log_density(p, q))


# Components of a mixture (and points drawn from them) that the Rao-Blackwellised KL scores against each other:
# O(MIXTURE_COMPONENTS^2) log densities per posterior (docs/architecture.md, "Rao-Blackwellised KL").
MIXTURE_COMPONENTS = 1024
# The most the leave-one-out and own-included estimates of a mixture's KL may differ (nats) before the estimate is
# refused (NaN): the gap bounds the Jensen bias of either. 0.01 nats is a third of the k-NN estimator's spread over
# repeats on Syn (docs/benchmarks.md).
MIXTURE_GAP = 0.01


@partial(jax.jit, static_argnames=("num_components",))
def batched_mixture_kl(keys, conditionals: NIG, kept_chains, prior: NIG, num_components: int = MIXTURE_COMPONENTS):
    """Rao-Blackwellised KL(q || p) estimates (B,) of a batch of posteriors q, each given as the mixture of the
    conjugate conditionals a Gibbs chain drew theta from, q(theta) ~= (1/M) sum_m NIG(theta | c_m) (Gelfand &
    Smith 1990, Sec. 2.2; Liu, Wong & Kong 1994), against the NIG prior p. `conditionals` holds NIG parameters
    with leading axes (B, chains, kept); chains off in kept_chains (B, chains) do not count; keys (B,) draw the
    points the mixture's density is scored at.

    KL(q || p) = E_m[KL(c_m || p)] - E_m[KL(c_m || q)]: the first term is the mean of closed-form NIG KLs over
    every component, the second (how far the components spread around their mixture; 0 when they coincide, as at
    negligible DP noise) is estimated from one draw theta_j ~ c_j per component of an evenly strided subset of
    M' = `num_components`, as the mean of log c_j(theta_j) - log q_-j(theta_j), with q_-j the subset's mixture
    without c_j (leave one out). The log of a mixture average is biased low by Jensen's inequality, by about
    (R - 1) / 2M' with R = E[c_m(theta)^2 / q(theta)^2], which biases the KL low; scoring a point against its own
    component too biases it high, by about (R - 1) / M'. Where the two estimates differ by more than MIXTURE_GAP
    nats the components are too narrow for their number (R of the order of M': DP noise dominates and
    p(theta | s) is far narrower than p(theta | o)), and the estimate is NaN (docs/architecture.md,
    "Rao-Blackwellised KL")."""
    per_row = partial(_mixture_kl, prior=prior, num_components=num_components)
    flat = jax.tree.map(lambda a: a.reshape((a.shape[0], -1) + a.shape[3:]), conditionals)
    kept = jnp.repeat(jnp.asarray(kept_chains, bool), conditionals.mean.shape[2], axis=1)
    kl, gap = jax.vmap(per_row)(keys, flat, kept)
    return jnp.where(gap > MIXTURE_GAP, jnp.nan, kl)


def _mixture_kl(key, components: NIG, kept, prior: NIG, num_components: int):
    """`batched_mixture_kl` of one posterior, components (M, ...) and kept (M,): the leave-one-out estimate and how
    far the own-included one lies above it."""
    own_kl = jax.vmap(lambda c: nig_expected_log_density(c, c) - nig_expected_log_density(c, prior))(components)
    total = components.mean.shape[0]
    chosen = (np.arange(min(num_components, total)) * total) // min(num_components, total)
    subset = jax.tree.map(lambda a: a[chosen], components)
    member = kept[chosen]
    weights, noise_var = jax.vmap(sample_nig)(jax.random.split(key, chosen.size), subset)

    def log_densities(w, v):  # log c_i(theta) for every component i of the subset
        return jax.vmap(lambda c: nig_log_density(c, w, v))(subset)

    scores = jnp.where(member[None, :], jax.vmap(log_densities)(weights, noise_var), -jnp.inf)  # (points, components)
    own = jnp.diagonal(scores)
    others = jnp.where(jnp.eye(chosen.size, dtype=bool), -jnp.inf, scores)
    log_mixture = logsumexp(others, axis=1) - jnp.log(member.sum() - member)
    log_with_own = logsumexp(scores, axis=1) - jnp.log(member.sum())
    spread = _kept_mean((own - log_mixture)[None], member[None])[0]
    gap = _kept_mean((log_with_own - log_mixture)[None], member[None])[0]
    return _kept_mean(own_kl[None], kept[None])[0] - spread, gap
