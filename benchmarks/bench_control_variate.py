"""A noise-aware surrogate game as a control variate for permutation sampling, measured (issue 30).

A control variate replaces the sampled game v by v - beta u, where u is a surrogate whose Shapley values are cheap
to compute exactly, and adds beta phi(u) back; it pays as far as the marginals of u track those of v. The marginals
of the noisy game follow the noise draws, which a surrogate of the data alone (the exact statistics' posterior)
cannot see. This one sees them: u_C is the KL from the prior of a Laplace approximation to the coalition's posterior
under the CLT-marginal model of the releases (`LinearRegression.model`, the statistics integrated out, every party's
data model kept). The approximation is taken in (w, log sigma^2), and its cross-entropy against the prior comes from
fixed Monte Carlo draws.

Six Syn parties of 100 points at epsilon = 0.5 (`bench_scale.py`'s releases), every coalition valued by `bv.valuate`
at the fast preset (exact enumeration), key 0. Latin permutation blocks stratify by coalition size, so what is left
of a marginal's variance is its spread within a size: printed per party for v, v - u and v - beta* u (beta* the
slope of a party's marginal of v on that of u within a size, pooled over parties and sizes: the variance-minimising
coefficient), with the share of v's variance each leaves (on the largest party's and on the mean).

    python benchmarks/bench_control_variate.py [--parties 6]
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from itertools import combinations
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import scipy.optimize
from jax.flatten_util import ravel_pytree
from numpyro.infer.util import initialize_model, potential_energy

import bayesval as bv
from bayesval.inference.data import NoiseAwareData

sys.path.insert(0, str(Path(__file__).parent))
from bench_scale import releases_of  # noqa: E402

KL_DRAWS = 4096  # fixed draws of the Laplace approximation for its cross-entropy against the prior


def laplace_surprises(model, data: NoiseAwareData, masks: np.ndarray) -> np.ndarray:
    """u_C for each coalition mask: KL(N(mode, H^-1) restricted to (w, log sigma^2) || the prior), where the mode and
    the Hessian H are those of the CLT-marginal posterior's potential in NumPyro's unconstrained space."""
    num_parties = masks.shape[1]
    start = initialize_model(jax.random.key(0), model.model, model_args=(data, jnp.ones(num_parties, bool)))
    flat_start, unravel = ravel_pytree(start.param_info.z)
    offsets = np.cumsum([0] + [int(np.size(start.param_info.z[name])) for name in sorted(start.param_info.z)])
    blocks = dict(zip(sorted(start.param_info.z), zip(offsets[:-1], offsets[1:])))
    theta = np.concatenate([np.arange(*blocks["weights"]), np.arange(*blocks["noise_var"])])
    num_weights = len(theta) - 1

    def potential(flat, mask):
        return potential_energy(model.model, (data, mask), {}, unravel(flat))

    value_and_grad, hessian = jax.jit(jax.value_and_grad(potential)), jax.jit(jax.hessian(potential))
    prior_log_density = model.prior_log_density(data)
    normal = jax.random.normal(jax.random.key(1), (KL_DRAWS, len(theta)))

    @jax.jit
    def kl(mode, precision):
        cov = jnp.linalg.inv(precision)[jnp.ix_(theta, theta)]
        draws = mode[theta] + normal @ jnp.linalg.cholesky(cov).T  # (w, log sigma^2)
        natural = jnp.concatenate([draws[:, :num_weights], jnp.exp(draws[:, num_weights:])], axis=1)
        log_prior = jax.vmap(prior_log_density)(natural) + draws[:, num_weights]  # the Jacobian of log sigma^2
        entropy = 0.5 * jnp.linalg.slogdet(2 * jnp.pi * jnp.e * cov)[1]
        return -entropy - log_prior.mean()

    def objective(flat, mask):
        return [np.asarray(part) for part in value_and_grad(jnp.asarray(flat), mask)]

    surprises = []
    for mask in masks:
        mask = jnp.asarray(mask)
        fit = scipy.optimize.minimize(
            objective,
            np.asarray(flat_start),
            args=(mask,),
            jac=True,
            method="L-BFGS-B",
            options={"maxiter": 3000, "gtol": 1e-9},
        )
        mode = jnp.asarray(fit.x)
        surprise = float(kl(mode, hessian(mode, mask)))
        if not fit.success or not np.isfinite(surprise):
            raise RuntimeError(f"the Laplace fit of coalition {np.flatnonzero(mask).tolist()} failed: {fit.message}")
        surprises.append(surprise)
    return np.array(surprises)


def centred_marginals(game: dict[frozenset, float], num_parties: int) -> np.ndarray:
    """Each party's marginals v(S u i) - v(S) over the coalitions S of each size 1..n-2 (sizes 0 and n - 1 hold one
    coalition each), less their mean within the size: (n, sizes, coalitions of a size)."""
    centred = []
    for party in range(num_parties):
        others = [j for j in range(num_parties) if j != party]
        per_size = [
            [game[frozenset(s) | {party}] - game[frozenset(s)] for s in combinations(others, size)]
            for size in range(1, num_parties - 1)
        ]
        centred.append([np.asarray(row) - np.mean(row) for row in per_size])
    return centred


def within_size_variances(centred) -> np.ndarray:
    """Each party's mean over the sizes of its marginals' variance within a size (n,)."""
    return np.array([np.mean([np.mean(row**2) for row in party]) for party in centred])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--parties", type=int, default=6)
    args = parser.parse_args()
    jax.config.update("jax_enable_x64", True)
    warnings.simplefilter("ignore", UserWarning)
    model, releases = bv.models.LinearRegression(), releases_of(args.parties)
    start = time.perf_counter()
    result = bv.valuate(model, releases, key=0, config="fast", exact_up_to=args.parties, progress_bar=False)
    print(f"bv.valuate, {args.parties} parties, every coalition: {time.perf_counter() - start:.0f} s")
    masks, values = np.asarray(result.coalition_masks, bool), np.asarray(result.coalition_values)
    start = time.perf_counter()
    surrogate = laplace_surprises(model, NoiseAwareData.from_releases(releases), masks)
    print(f"Laplace surrogate of {len(masks)} coalitions: {time.perf_counter() - start:.0f} s")
    slope = np.polyfit(surrogate, values, 1)[0]
    print(
        f"v: {values.min():.3f} to {values.max():.3f} nats; u: {surrogate.min():.3f} to {surrogate.max():.3f}; "
        f"correlation {np.corrcoef(values, surrogate)[0, 1]:.4f}; slope beta {slope:.3f}"
    )
    keys = [frozenset(np.flatnonzero(mask).tolist()) for mask in masks]
    marginals_v, marginals_u = (centred_marginals(dict(zip(keys, game)), args.parties) for game in (values, surrogate))
    pairs = [(dv, du) for party_v, party_u in zip(marginals_v, marginals_u) for dv, du in zip(party_v, party_u)]
    best = sum((dv * du).sum() for dv, du in pairs) / sum((du**2).sum() for dv, du in pairs)
    print(f"beta* (pooled within-size slope of v's marginals on u's): {best:.3f}")
    base = within_size_variances(marginals_v)
    for label, beta in (("v", 0.0), ("v - u", 1.0), (f"v - {slope:.2f} u", slope), (f"v - {best:.2f} u", best)):
        game = values - beta * surrogate
        variances = within_size_variances(centred_marginals(dict(zip(keys, game)), args.parties))
        largest, mean = variances.max() / base.max(), variances.mean() / base.mean()
        print(
            f"  {label:>12}: spread within a size, by party {np.round(np.sqrt(variances), 3).tolist()}; of v's "
            f"variance it leaves {largest:.2f} on the largest, {mean:.2f} on the mean"
        )


if __name__ == "__main__":
    main()
