"""Calibration of the control variate at the size users run: 12 parties, the party valuation's sampler and budget.

    python benchmarks/bench_control_calibration.py [--parties 12] [--keys 200] [--noise 0.02]

The sampled surprise has no closed form at realistic noise, so the game here is the noise-free party game of
`bench_permutations_needed.py` (Syn parties of 100 points, v_C the closed-form KL of the exact statistics' NIG
posterior), valued with independent N(0, noise^2) error per coalition and repeat (the sampled surprise's own error:
two repeats a coalition, as the Gibbs presets give a sampled game), drawn once per key and cached, as the party
surprise caches each coalition's estimates (a coalition's error is shared by every permutation that passes it). The
surrogate is the package's: the Laplace surprise of the same parties' releases at epsilon = 1e7
(`bayesval.inference.laplace.surprise_table`, the control up to 12 parties until 2026-12-01), which misses the
closed form by the CLT model of the statistics and the Gaussian fit (0.2 to 4 % on Syn's three parties,
tests/test_laplace.py). Every phi(v) is known exactly, so over
`--keys` keys this prints, with the control variate and without (the same permutations), and with the coalitions'
own error estimated two ways: the z-scores' mean and spread, the share of |z| < 1.96, the largest |z|, and the
standard errors' median ratio, at the default route's two batches of Latin blocks (72 permutations at 12 parties),
and the standard errors' degrees of freedom. Where the control
variate removes most of the spread between coalitions, what is left is the coalitions' own error. Estimated from the
spread of the per-repeat semivalues (`independent_estimates=False`) its variance has 1 degree of freedom, so fewer
indices reach the 10 that the default stopping rule trusts; as the exact semivalue's error from the cached estimates
(`independent_estimates=True`, what the party route does: `bayesval.results.coalition_noise`) it has dozens.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

import bayesval as bv
from bayesval.games import SHAPLEY, ControlVariate, KeylessUtility, semivalue
from bayesval.games.masks import coalition_masks, mask_codes
from bayesval.games.stopping import MaxEvaluations
from bayesval.games.weights import semivalue_matrix
from bayesval.inference.data import NoiseAwareData
from bayesval.inference.laplace import surprise_table
from bayesval.parties.valuation import permutation_sampler
from bayesval.results.variance import TRUSTED_DOF

sys.path.insert(0, str(Path(__file__).parent))
from bench_permutations_needed import noise_free_game  # noqa: E402

REPEATS = 2  # the sampled surprise's repeats a coalition (SamplerConfig.for_sampled_game)


def near_exact_releases(num_parties: int):
    """The Syn parties of `noise_free_game`, released at epsilon = 1e7 (negligible noise)."""
    from bayesval.datasets.synthetic import make_syn

    syn = make_syn(seed=0, sizes=(100,) * num_parties)
    model = bv.models.LinearRegression()
    return [
        bv.Party(X, y, epsilon=1e7, bounds=syn.bounds, name=f"p{i}", noise_seed=900 + i).release(model.statistic(2))
        for i, (X, y) in enumerate(syn.parties)
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--parties", type=int, default=12)
    parser.add_argument("--keys", type=int, default=200)
    parser.add_argument("--noise", type=float, default=0.02, help="the surprise's error per coalition and repeat")
    args = parser.parse_args()
    jax.config.update("jax_enable_x64", True)
    n = args.parties
    table = jnp.asarray(noise_free_game(n)(coalition_masks(n, include_empty=True)))
    exact = semivalue_matrix(n, SHAPLEY) @ np.asarray(table)
    start = time.perf_counter()
    model, data = bv.models.LinearRegression(), NoiseAwareData.from_releases(near_exact_releases(n))
    priors = model.priors(2)
    surrogate = surprise_table(data, priors.model, priors.data, model.statistic(2))
    print(
        f"{n} parties: Laplace surrogate of {2**n - 1} coalitions in {time.perf_counter() - start:.0f} s, "
        f"{len(surrogate.unconverged)} unconverged; u / v - 1 from {np.min(surrogate.values[1:] / table[1:] - 1):.3f} "
        f"to {np.max(surrogate.values[1:] / table[1:] - 1):.3f}"
    )
    control = ControlVariate(surrogate.values, "the Laplace surprise")
    sampler, batch_size = permutation_sampler(n)
    one_batch = MaxEvaluations(1)  # two batches: the default rule's 64-permutation floor, in whole batches

    ways = {
        "control, record": (control, True),
        "control, per repeat": (control, False),
        "plain, record": (None, True),
        "plain, per repeat": (None, False),
    }
    rows = {label: ([], [], []) for label in ways}
    start = time.perf_counter()
    for seed in range(args.keys):
        noisy = table + args.noise * jax.random.normal(jax.random.key(10**6 + seed), (REPEATS, len(table)))

        utility = KeylessUtility(lambda masks, noisy=noisy: noisy[:, mask_codes(masks)])  # cached, as the route's

        for label, (chosen, pooled) in ways.items():
            options = dict(sampler=sampler, batch_size=batch_size, control=chosen, independent_estimates=pooled)
            first = semivalue(utility, n, seed, stop=one_batch, **options)
            second = MaxEvaluations(first.state.evaluations + 1)
            result = semivalue(utility, n, seed, stop=second, resume_from=first, **options)
            rows[label][0].append((result.values - exact) / result.stderr)
            rows[label][1].append(result.stderr)
            rows[label][2].append(result.diagnostics["indices"]["dof"])
    permutations = result.state.batch_draws
    print(
        f"{args.keys} keys x {n} parties, {permutations} Latin permutations each, noise {args.noise} per coalition "
        f"and repeat ({time.perf_counter() - start:.0f} s)"
    )
    for label, (z, stderr, dof) in rows.items():
        z, dof = np.concatenate(z), np.concatenate(dof)
        print(
            f"  {label:>19}: z mean {z.mean():+.3f}, spread {z.std():.3f}, |z| < 1.96 in "
            f"{np.mean(np.abs(z) < 1.96):.3f}, max |z| {np.abs(z).max():.2f}; stderr median {np.median(stderr):.4f}, "
            f"largest {np.max(stderr):.4f}; degrees of freedom median {np.median(dof):.1f}, >= {TRUSTED_DOF:g} (what "
            f"the stopping rule trusts) in {np.mean(dof >= TRUSTED_DOF):.3f}"
        )
    for way in ("record", "per repeat"):
        ratio = np.median(np.asarray(rows[f"control, {way}"][1]) / np.asarray(rows[f"plain, {way}"][1]))
        print(f"  stderr ratio control / plain ({way}), median over keys and parties: {ratio:.3f}")


if __name__ == "__main__":
    main()
