"""The surprise of a coalition read from the importance weights themselves, beside the route's k-NN estimate of its
resampled conjugate draws, against NumPyro's NUTS on the CLT-marginal model (`bench_reference.py`'s values).

The weights of `bayesval.inference.importance` target the CLT-marginal posterior p(theta | o_C) proportional to
pi(theta) L(theta), L the product of the members' likelihoods, each estimated as the mean of K inner weights. Its
surprise is KL(p || pi) = E_p[log L(theta)] - log Z, Z = E_g[w]: both from one row's weighted draws, with nothing
resampled and no nearest neighbours. Under the weights each member's log L-hat sits above log L by about half its
variance (for a log-normal L-hat of variance v, the size-biased mean of log L-hat is log L + v / 2), so the estimate
takes v / 2 off at each draw, v the delta-method variance the route already computes (`likelihood_noise`). The
route's own estimate at the same K is its attempt: K = 4, 16, 64 are the first attempt and two reruns at Syn's width.

    python benchmarks/bench_weight_kl.py --repeats 8

Six Syn parties of 100 points at epsilon 0.5 (seed 3, noise seeds 7100 + i), the coalitions of `bench_reference.py`.
"""

import argparse
import sys
import time
import warnings
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.special import logsumexp

import bayesval as bv
from bayesval.inference import importance
from bayesval.inference.data import NoiseAwareData
from bayesval.inference.laplace import coalition_terms
from bayesval.inference.psis import pareto_smoothed
from bayesval.parties import release_all
from bayesval.parties.importance import IMPORTANCE_WINDOW, _kl
from bayesval.parties.plan import member_width

sys.path.insert(0, str(Path(__file__).parent))
from bench_reference import COALITIONS, NUTS_SURPRISE, reference_parties  # noqa: E402

NUM_DRAWS = 2048


def weight_kl(key, data, mask, mode, priors, statistic, inner_draws: int):
    """(the weights' KL without and with the noise correction, k-hat) of one row: the route's proposal about its
    highest mode (`mode`), adapted as the route adapts it, then NUM_DRAWS weighted draws."""
    terms = coalition_terms(data, priors.model, priors.data, statistic)
    modes = jax.tree.map(lambda part: part[None], mode)
    mixture, weighted = importance.adapted_draws(key, terms, mask, modes, NUM_DRAWS, inner_draws)
    proposal = mixture.component(0)
    smoothed, k_hat = pareto_smoothed(weighted.log_weights)
    normalised = jax.nn.softmax(smoothed)
    log_mean = logsumexp(weighted.log_inner, axis=1) - jnp.log(inner_draws)
    log_likelihood = jnp.sum(jnp.where(mask, log_mean, 0.0), axis=1)
    # the route's proposal density leaves out the constant its two scales share; Z needs it
    constant = jnp.sum(jnp.log(jnp.diagonal(proposal.chol))) + 0.5 * proposal.chol.shape[0] * jnp.log(2 * jnp.pi)
    log_z = logsumexp(weighted.log_weights) - jnp.log(NUM_DRAWS) + constant
    noise = importance.likelihood_noise(weighted.log_inner)
    return normalised @ log_likelihood - log_z, normalised @ (log_likelihood - 0.5 * noise) - log_z, k_hat


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=8, help="keys per coalition and estimate")
    parser.add_argument("--attempts", type=int, nargs="+", default=[0, 1, 2], help="the route's attempts (K = 4 * 4^a)")
    args = parser.parse_args()
    warnings.simplefilter("ignore", UserWarning)
    model = bv.models.LinearRegression()
    data = NoiseAwareData.from_releases(release_all(model, reference_parties()))
    priors, statistic = model.priors(2), model.statistic(2)
    log_density = model.prior_log_density(data)
    weights = jax.jit(weight_kl, static_argnames=("statistic", "inner_draws"))
    print("coalition     K   NUTS    k-NN of resampled draws   weights, raw      weights, corrected   max k-hat   s")
    for attempt in args.attempts:
        for members, reference in zip(COALITIONS, NUTS_SURPRISE):
            start = time.perf_counter()
            mask = np.isin(np.arange(6), members)
            width = member_width(len(members), 6)
            packed, packed_mask = data.members(mask, width)
            inner_draws = importance.inner_draw_count(width, attempt)
            mode = importance.joint_mode(packed, packed_mask, priors.model, priors.data, statistic)
            keys = jax.random.split(jax.random.key(100 + attempt), args.repeats)
            rows = NoiseAwareData.per_row([packed] * args.repeats)
            masks = np.repeat(packed_mask[None], args.repeats, axis=0)
            drawn = model.importance_draws(keys, rows, masks, NUM_DRAWS, attempt)
            window = min(IMPORTANCE_WINDOW, NUM_DRAWS // 4)
            knn = np.asarray(_kl(drawn.draws[:, None], 4, log_density, window))
            read = [weights(k, packed, packed_mask, mode, priors, statistic, inner_draws) for k in keys]
            read = np.array([[float(x) for x in row] for row in read])
            columns = [knn, read[:, 0], read[:, 1]]
            cells = [f"{c.mean():.3f} ± {c.std(ddof=1) / np.sqrt(len(c)):.3f}" for c in columns]
            k_hat = max(drawn.k_hat.max(), read[:, 2].max())
            label = "{" + ", ".join(str(i + 1) for i in members) + "}"
            print(
                f"{label:13s} {inner_draws:3d} {reference:.3f}   {cells[0]:24s}  {cells[1]:16s} {cells[2]:20s} "
                f"{k_hat:.2f}        {time.perf_counter() - start:.0f}",
                flush=True,
            )


if __name__ == "__main__":
    main()
