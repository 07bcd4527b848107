"""Packed Gibbs surprises against an independent reference at realistic noise (issue 30).

Six Syn parties of 100 points at epsilon = 0.5 (Gaussian mechanism, fixed noise seeds) are valued by `bv.valuate`
at the `fast` preset: from six parties on, each coalition's Gibbs chains carry its members only (packing). The
reference for a few coalitions is NumPyro's own NUTS on the same noise-aware model with the statistics integrated
out (`LinearRegression.model`, the CLT-marginal likelihood N(o_i; c_i mu(theta, omega_i), c_i Sigma + s_i^2 I)),
run on *every* party's releases with the coalition's mask, as a NumPyro user would write it. Both surprises are
the same k-NN estimate against the prior density (Theiler window), each from the same number of draws, so the
estimator's finite-sample bias is shared; each has a standard error over its repeats.

    python benchmarks/bench_reference.py [--repeats 3] [--warmup 1000] [--samples 1600] [--surprise importance]

`--surprise importance` values every coalition by importance sampling from its Laplace fit instead of the Gibbs chains
(docs/importance.md): the same reference, the route's own number of draws (2,048 a repeat).

Prints, per coalition, our v_C +- s.e., NUTS's v_C +- s.e. and z = difference / combined s.e.
"""

from __future__ import annotations

import argparse
import time
import warnings

import jax
import numpy as np
from numpyro.infer import MCMC, NUTS

import bayesval as bv
from bayesval.datasets.synthetic import make_syn
from bayesval.inference.data import NoiseAwareData
from bayesval.parties import release_all
from bayesval.parties.execute import summarise

COALITIONS = ((0,), (3,), (0, 1), (2, 4, 5), (0, 1, 2, 3), tuple(range(6)))
# The surprise of each of COALITIONS by this script's NUTS, as recorded (4 chains x 512 draws; 8 keys for the last
# two, 3 for the others; docs/benchmarks.md, "Against the independent NumPyro reference, at equal draws"), and its
# standard error over the keys: the reference the importance route's benchmarks compare with
NUTS_SURPRISE = (1.730, 1.788, 2.832, 3.201, 3.520, 4.358)
NUTS_SURPRISE_STDERR = (0.021, 0.026, 0.021, 0.010, 0.026, 0.024)


def reference_parties() -> list[bv.Party]:
    """The six Syn parties of 100 points at epsilon 0.5, each with its fixed noise seed (7100 + i)."""
    syn = make_syn(seed=3, sizes=(100,) * 6)
    return [
        bv.Party(X, y, epsilon=0.5, bounds=syn.bounds, name=f"party {i + 1}", noise_seed=7100 + i)
        for i, (X, y) in enumerate(syn.parties)
    ]


def nuts_surprise(model, data, members, num_parties, key, args) -> float:
    """One k-NN surprise of the coalition from NumPyro NUTS draws of (w, sigma^2), 4 vectorised chains."""
    mask = np.zeros(num_parties, bool)
    mask[list(members)] = True
    mcmc = MCMC(
        NUTS(model.model),
        num_warmup=args.warmup,
        num_samples=args.samples,
        num_chains=4,
        chain_method="vectorized",
        progress_bar=False,
    )
    mcmc.run(key, data, mask)
    samples = mcmc.get_samples(group_by_chain=True)
    draws = np.concatenate([np.asarray(samples["weights"]), np.asarray(samples["noise_var"])[..., None]], axis=-1)
    kl, _, _ = summarise(draws[None], np.ones((1, draws.shape[0]), bool), 4, model.prior_log_density(data))
    return float(kl[0])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=3, help="NUTS runs (keys) per coalition")
    parser.add_argument("--warmup", type=int, default=1000, help="NUTS warm-up per chain")
    parser.add_argument("--samples", type=int, default=1600, help="NUTS draws per chain (the fast preset's count)")
    parser.add_argument("--surprise", choices=["mcmc", "importance"], default="mcmc", help="our route (valuate's)")
    args = parser.parse_args()
    warnings.simplefilter("ignore", UserWarning)
    parties = reference_parties()
    model = bv.models.LinearRegression()
    releases = release_all(model, parties)
    start = time.perf_counter()
    result = bv.valuate(model, releases, key=0, config="fast", progress_bar=False, surprise=args.surprise)
    route = "packed Gibbs chains" if args.surprise == "mcmc" else "importance sampling"
    print(f"bv.valuate, 6 parties, fast preset ({route}): {time.perf_counter() - start:.0f} s")
    frame = result.coalitions_dataframe()
    data = NoiseAwareData.from_releases(releases)
    print("coalition            ours (± s.e.)     NUTS on the CLT-marginal model (± s.e.)   z      NUTS seconds")
    for members in COALITIONS:
        label = "{" + ", ".join(result.names[i] for i in members) + "}"
        ours = frame.loc[label]
        start = time.perf_counter()
        reference = [
            nuts_surprise(model, data, members, len(parties), jax.random.key(100 + r), args)
            for r in range(args.repeats)
        ]
        mean, stderr = np.mean(reference), np.std(reference, ddof=1) / np.sqrt(len(reference))
        z = (ours.value - mean) / np.hypot(ours.stderr, stderr)
        print(
            f"{str(tuple(i + 1 for i in members)):20s} {ours.value:6.3f} ± {ours.stderr:.3f}    "
            f"{mean:6.3f} ± {stderr:.3f}                          {z:+5.2f}  {time.perf_counter() - start:.0f}",
            flush=True,
        )


if __name__ == "__main__":
    main()
