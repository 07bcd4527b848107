"""Twelve parties, too many to enumerate comfortably (4,095 coalitions): Shapley values by permutation sampling on
the game layer, stopped once every party's standard error is at most 0.02, each party reporting how many
permutations reached it and whether it converged. Parties differ only in their privacy budget (Syn, 100 records
each, epsilon from 0.05 to 2), so the values should rise with epsilon (Sim et al. 2023, Fig. 2a).

    python examples/many_parties.py                # the fast preset, stderr <= 0.02, against the party product
    python examples/many_parties.py --num-chains 2 --num-warmup 10 --num-samples 20 --num-repeats 2 \
        --tolerance 0.5 --max-permutations 100 --no-control-variate    # a smoke run (~2 minutes)

The control variate (the default) samples each coalition's difference from a surrogate of its surprise, the party
product (each party's likelihood a quadratic in theta, a coalition's posterior the prior times its members'; every
coalition's in about 24 s): on 12 Syn parties of 100 points at epsilon = 0.5, where plain sampling needs about 315
permutations, the default route needed 36 (docs/benchmarks.md, "The party product as the 12-party control"; this
example's parties have other budgets, and were not timed).

At a tiny budget (2 chains x 30 sweeps x 2 repeats) every coalition posterior carries all 12 parties' latent
statistics and data models, so one costs ~75 ms here, and stderr <= 0.02 needs nearly all 4,095 coalitions: the
run sampled 3,862 of them in 577 s and stopped at its cap with stderrs of 0.05-0.7, the coalitions' own Monte Carlo
error (R-hat up to 3.1). From 4,000 chain-sweeps per coalition (the fast preset has 19,200 here: 2 repeats of a
sampled game) each coalition's chains carry its members only, 1/3 to 3/4 of the cost of carrying all 12
(docs/benchmarks.md, "A coalition costs what its members cost"). Larger budgets are for a GPU or a long run.
"""

from __future__ import annotations

import argparse
import time
import warnings

import numpy as np

import bayesval as bv
from bayesval.datasets.synthetic import make_syn


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tolerance", type=float, default=0.02, help="stop once every stderr is at most this")
    parser.add_argument("--max-permutations", type=int, default=2000)
    parser.add_argument(
        "--control-variate",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="sample against the party product of every coalition (the default; about 24 s for its 4,095 "
        "coalitions, and on 12 Syn parties at epsilon 0.5 the default route then needed 36 permutations, not about "
        "315: docs/games.md, 'Control variates'); --no-control-variate for a smoke run",
    )
    bv.SamplerConfig.add_arguments(parser)
    args = parser.parse_args()
    config = bv.SamplerConfig.from_arguments(args, progress_bar=False)
    syn = make_syn(seed=0, sizes=(100,) * 12)
    epsilons = np.geomspace(0.05, 2.0, 12)
    parties = [
        bv.Party(X, y, epsilon=float(eps), bounds=syn.bounds, name=f"party {i + 1}", noise_seed=100 + i)
        for i, ((X, y), eps) in enumerate(zip(syn.parties, epsilons))
    ]
    stop = bv.games.StandardError(args.tolerance, min_count=32) | bv.games.MaxEvaluations(args.max_permutations * 13)
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # short chains: convergence is reported below
        result = bv.valuate(
            bv.models.LinearRegression(), parties, key=0, config=config, stop=stop, control_variate=args.control_variate
        )
    seconds = time.perf_counter() - start

    print(f"{len(parties)} parties, {len(result.diagnostics['coalitions'])} coalitions sampled, {seconds:.0f} s")
    print("party        epsilon   phi      stderr   permutations  converged")
    for name, eps, value, stderr, count, done in zip(
        result.names, epsilons, result.values, result.stderr, result.counts, result.converged
    ):
        print(f"{name:10s}  {eps:7.3f}  {value:7.3f}  {stderr:7.4f}  {count:12d}  {done}")
    rank = np.corrcoef(np.argsort(np.argsort(epsilons)), np.argsort(np.argsort(result.values)))[0, 1]
    print(f"rank correlation of phi with epsilon: {rank:.2f}; max R-hat {max(result.diagnostics['r_hat']):.3f}")


if __name__ == "__main__":
    main()
