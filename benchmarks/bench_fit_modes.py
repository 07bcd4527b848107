"""Which coalitions the importance route leaves to the chains, and why: the prefixes of random permutations of n Syn
parties (100 points each, epsilon 0.5, `bench_scale.releases_of`), valued as a sampled game values them
(`ImportanceExecutor.until_effective`: the fast preset's 2 repeats of 2,048 draws, then up to two reruns with 4 and
16 times the inner draws), this tree against the package at an earlier commit, each in a fresh process. Prints the
seconds (compiling included), how many coalitions each attempt drew, how many stayed untrusted (the ones a valuation
would sample by MCMC, a chain call of minutes at 24 parties), and each coalition drawn a second time or untrusted
with its k-hat, effective draws and KL per repeat.

    python benchmarks/bench_fit_modes.py --parties 24 --permutations 8 --against 41012f9
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from pathlib import Path

import numpy as np


def child(num_parties: int, permutations: int) -> dict:
    """Value the prefixes of `permutations` random permutations in this process (`bayesval` as the environment
    imports it)."""
    import jax

    import bayesval as bv
    from bayesval.inference.data import NoiseAwareData
    from bayesval.parties.importance import ImportanceExecutor

    sys.path.insert(0, str(Path(__file__).parent))
    from bench_scale import releases_of

    warnings.simplefilter("ignore")
    data = NoiseAwareData.from_releases(releases_of(num_parties))
    model = bv.models.LinearRegression()
    config = bv.SamplerConfig.preset("fast").for_sampled_game()
    executor = ImportanceExecutor(model.importance_draws, num_parties, config, 4, model.prior_log_density(data))
    rng = np.random.default_rng(5)
    codes: list[int] = []
    for _ in range(permutations):
        code = 0
        for party in rng.permutation(num_parties)[:-1]:
            code |= 1 << int(party)
            codes += [] if code in codes else [code]
    start = time.perf_counter()
    done, reruns = executor.until_effective(jax.random.key(3), codes, data)
    seconds = time.perf_counter() - start
    trusted = done.trusted.all(axis=1)
    shown = np.flatnonzero(~trusted | (reruns == executor.reruns))
    return {
        "coalitions": len(codes),
        "seconds": seconds,
        "by_attempt": np.bincount(reruns, minlength=executor.reruns + 1).tolist(),
        "untrusted": int(np.count_nonzero(~trusted)),
        "shown": [
            {
                "code": codes[i],
                "members": bin(codes[i]).count("1"),
                "trusted": bool(trusted[i]),
                "k_hat": done.k_hat[i].round(2).tolist(),
                "ess": done.ess[i].round(0).tolist(),
                "kl": done.kl[i].round(3).tolist(),
            }
            for i in shown
        ],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--parties", type=int, default=24)
    parser.add_argument("--permutations", type=int, default=8)
    sys.path.insert(0, str(Path(__file__).parent))
    from bench_compile import package_runs, parsed_or_child

    args = parsed_or_child(parser, child, "permutations")
    if args is None:
        return
    runs = package_runs(__file__, args.parties, "permutations", args.permutations, args.against)
    print(f"\n{args.parties} parties, the prefixes of {args.permutations} permutations:")
    print("| package | coalitions | seconds | drawn at attempt 0 / 1 / 2 | untrusted (to the chains) |")
    print("|---|---|---|---|---|")
    for label, run in runs.items():
        attempts = " / ".join(map(str, run["by_attempt"]))
        print(f"| {label} | {run['coalitions']} | {run['seconds']:.0f} | {attempts} | {run['untrusted']} |")
    for label, run in runs.items():
        for row in run["shown"]:
            print(
                f"{label}: coalition {row['code']} ({row['members']} members) trusted {row['trusted']}, k-hat "
                f"{row['k_hat']}, effective draws {row['ess']}, KL {row['kl']}"
            )


if __name__ == "__main__":
    main()
