"""Where the importance route's surprise of one coalition sits high against NumPyro (issue 61): the coalition {1, 2, 3,
4} of the six Syn parties of `bench_reference.py` (epsilon = 0.5), whose k-NN surprise by the route is 0.08-0.15 nats
above NUTS on the CLT-marginal model (docs/importance.md, "How close"). Each cell draws one row `--repeats` times
(keys 1000 + r) and prints the mean k-NN surprise of its 2,048 resampled draws +- its standard error over the keys,
the weights' effective draws and how many distinct weighted draws were resampled:

* `weighted`: the weighted draws the 2,048 are resampled from (the route draws as many as it resamples). If the
  offset were self-normalised importance sampling's finite-sample bias, it would fall as they grow.
* `smoothed`: whether the theta weights are Pareto-smoothed before resampling (the route smooths them).
* `K`: each member's inner draws per theta (the route's 4 at this width, 16 and 64 on its reruns).
* `centred`: each member's data-model proposal at theta moved by one gradient step of its own log density
  (omega - S g, S the proposal's conditional covariance before its widening; the route proposes from the linear
  regression of omega on theta alone). The weights stay exact for the moved proposal, whose density the inner
  weights divide by.

    python benchmarks/bench_offset_cause.py [--repeats 8]

The NUTS reference is `bench_reference.py`'s (3.520 +- 0.026 nats for this coalition, docs/benchmarks.md).
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from functools import partial
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

import bayesval as bv
from bayesval.inference import importance
from bayesval.inference.data import NoiseAwareData
from bayesval.inference.laplace import coalition_terms
from bayesval.inference.psis import pareto_smoothed
from bayesval.parties import release_all
from bayesval.parties.importance import IMPORTANCE_WINDOW, _kl

sys.path.insert(0, str(Path(__file__).parent))
from bench_reference import reference_parties  # noqa: E402

MEMBERS = (0, 1, 2, 3)
NUM_DRAWS = 2048
# (weighted draws, smoothed, K, centred): the route, then one change at a time
CELLS = [
    (2048, True, 4, False),
    (65536, True, 4, False),
    (65536, False, 4, False),
    (16384, False, 64, False),
    (16384, False, 4, True),
    (2048, True, 4, True),
]


def centred_proposal(terms):
    """`importance._data_models` and `importance.log_inner_weights` with each member's proposal at theta moved by one
    gradient step of its log density (`centred` above), for the coalition of `terms`."""
    plain = importance._data_models

    def centres(proposal, theta):
        linear = proposal.omega_centre + proposal.slope @ (theta - proposal.centre)

        def moved(omega, perturbed, count, noise_std, chol):
            potential = lambda point: terms.party(theta, point, perturbed, count, noise_std, True)  # noqa: E731
            unwidened = chol / importance.OMEGA_INFLATE
            step = unwidened @ (unwidened.T @ jax.grad(potential)(omega))
            return jnp.where(jnp.isfinite(step).all(), omega - step, omega)

        return jax.vmap(moved)(linear, *terms.data, proposal.omega_chol)

    def data_models(proposal, theta, white):
        return centres(proposal, theta) + jnp.einsum("nvw,...nw->...nv", proposal.omega_chol, white)

    def log_inner_weights(terms_, mask, proposal, theta, white):
        """The route's inner weights of the proposal moved at theta (centre moved, slope 0), its data models drawn
        by the route's own `_data_models` while they are taken."""
        shifted = proposal._replace(omega_centre=centres(proposal, theta), slope=jnp.zeros_like(proposal.slope))
        importance._data_models = plain
        try:
            return original_weights(terms_, mask, shifted, theta, white)
        finally:
            importance._data_models = data_models

    original_weights = importance.log_inner_weights
    return plain, original_weights, data_models, log_inner_weights


@partial(jax.jit, static_argnames=("statistic", "num_weighted", "smoothed", "inner_draws", "centred"))
def row(key, data, mask, prior, data_prior, statistic, modes, num_weighted, smoothed, inner_draws, centred):
    """`importance._row_draws` with the cell's changes: (2,048 resampled draws, effective draws, distinct parents)."""
    terms = coalition_terms(data, prior, data_prior, statistic)
    if centred:
        plain, weights, importance._data_models, importance.log_inner_weights = centred_proposal(terms)
    try:
        key_rounds, key_resample, key_inner, key_conjugate = jax.random.split(key, 4)
        proposal, weighted = importance.adapted_draws(key_rounds, terms, mask, modes, num_weighted, inner_draws)
        log_weights = pareto_smoothed(weighted.log_weights)[0] if smoothed else weighted.log_weights
        normalised = jax.nn.softmax(log_weights)
        chosen = importance._systematic(key_resample, normalised, NUM_DRAWS)
        members = jax.random.categorical(key_inner, weighted.log_inner[chosen], axis=1)
        white = jnp.take_along_axis(weighted.white[chosen], members[:, None, :, None], axis=1)[:, 0]
        keys = jax.random.split(key_conjugate, NUM_DRAWS)

        def conjugate(one):
            one_key, theta, one_white, component = one
            return importance._conjugate_draw(one_key, terms, mask, proposal.component(component), theta, one_white)

        draws = jax.lax.map(conjugate, (keys, weighted.thetas[chosen], white, weighted.components[chosen]))
    finally:
        if centred:
            importance._data_models, importance.log_inner_weights = plain, weights
    distinct = jnp.sum(jnp.diff(jnp.sort(chosen)) > 0) + 1
    return draws, 1.0 / jnp.sum(normalised**2), distinct


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=8)
    args = parser.parse_args()
    warnings.simplefilter("ignore", UserWarning)
    model = bv.models.LinearRegression()
    data = NoiseAwareData.from_releases(release_all(model, reference_parties()))
    mask = np.isin(np.arange(data.counts.shape[0]), MEMBERS)
    priors, statistic = model.priors(2), model.statistic(2)
    log_density = model.prior_log_density(data)
    found = importance.joint_modes(data, mask, priors.model, priors.data, statistic)
    modes = jax.tree.map(lambda *parts: jnp.stack(parts), *found)
    window = min(IMPORTANCE_WINDOW, NUM_DRAWS // 4)  # the route's Theiler window (`ImportanceExecutor`)
    print("weighted  smoothed  K   centred   surprise (nats)   effective draws   distinct parents   seconds")
    for num_weighted, smoothed, inner_draws, centred in CELLS:
        start = time.perf_counter()
        surprises, effective, distinct = [], [], []
        for repeat in range(args.repeats):
            draws, ess, parents = row(
                jax.random.key(1000 + repeat),
                data,
                mask,
                priors.model,
                priors.data,
                statistic,
                modes,
                num_weighted,
                smoothed,
                inner_draws,
                centred,
            )
            surprises.append(float(_kl(jnp.asarray(draws)[None, None], 4, log_density, window)[0]))
            effective.append(float(ess))
            distinct.append(int(parents))
        stderr = np.std(surprises, ddof=1) / np.sqrt(args.repeats)
        print(
            f"{num_weighted:8d}  {str(smoothed):8s}  {inner_draws:2d}  {str(centred):8s}  "
            f"{np.mean(surprises):.3f} +- {stderr:.3f}   {np.median(effective):8.0f}          "
            f"{np.median(distinct):8.0f}         {time.perf_counter() - start:5.0f}",
            flush=True,
        )


if __name__ == "__main__":
    main()
