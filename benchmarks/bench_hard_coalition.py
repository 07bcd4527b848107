"""One coalition's surprise by importance sampling at each attempt's inner draws against today's Gibbs chains, side
by side in one run: the coalitions of 24 parties that the importance route did not trust, or drew again.

    python benchmarks/bench_hard_coalition.py                       # the two coalitions of docs/benchmarks.md
    python benchmarks/bench_hard_coalition.py --coalitions 573840 --attempts 0 1 2 --repeats 4

A coalition is a bitmask of the 24 Syn parties of `bench_scale.releases_of` (100 points each, epsilon 0.5). Each
attempt draws `--repeats` repeats of the coalition with that attempt's inner draws of each member's data model
(`bayesval.inference.importance.inner_draw_count`: 6 at the coalition's width of 8 slots, 4 times as many each
attempt) at the fast preset's 2,048 weighted draws, and prints each repeat's Pareto k-hat, effective draws, the spread
of its likelihoods' noise over theta (the route draws a coalition again above 0.4) and KL; the chains sample the
same repeats at the fast preset's budget (4 chains x 1,600 kept sweeps after 800 of warm-up). The mean and standard
error over the repeats of each are printed last. Seconds include compiling.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time
import warnings
from pathlib import Path

import jax
import numpy as np

import bayesval as bv
from bayesval.games.masks import code_masks, members
from bayesval.inference.data import NoiseAwareData
from bayesval.parties.importance import ImportanceExecutor
from bayesval.parties.surprise import CoalitionSurprise, per_repeat

sys.path.insert(0, str(Path(__file__).parent))
from bench_scale import releases_of  # noqa: E402

PARTIES = 24
COALITIONS = (573840, 5387456)  # of an exploratory run of 40 coalitions a width: untrusted, and drawn again


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--coalitions", type=int, nargs="+", default=COALITIONS)
    parser.add_argument("--attempts", type=int, nargs="+", default=(0, 1, 2))
    parser.add_argument("--repeats", type=int, default=4)
    args = parser.parse_args()
    warnings.simplefilter("ignore")
    data = NoiseAwareData.from_releases(releases_of(PARTIES))
    model = bv.models.LinearRegression()
    config = bv.SamplerConfig.preset("fast").for_sampled_game()
    executor = ImportanceExecutor(model.importance_draws, PARTIES, config, 4, model.prior_log_density(data))
    chains = dataclasses.replace(config, num_repeats=args.repeats, progress_bar=False)
    for code in args.coalitions:
        mask = code_masks(np.array(code), PARTIES)
        print(f"coalition {code}: parties {members(mask)}", flush=True)
        summary = {}
        for attempt in args.attempts:
            start = time.perf_counter()
            rows = executor.coalitions(jax.random.key(100 + attempt), [code], data, args.repeats, attempt)
            seconds = time.perf_counter() - start
            print(
                f"  importance, attempt {attempt}: k-hat {np.round(rows.k_hat[0], 2)}, effective draws "
                f"{np.round(rows.ess[0]).astype(int)}, noise spread {np.round(rows.noise_spread[0], 2)}, "
                f"KL {np.round(rows.kl[0], 3)} ({seconds:.0f} s)",
                flush=True,
            )
            summary[f"importance, attempt {attempt}"] = rows.kl[0]
        surprise = CoalitionSurprise(model, data, chains, 4, jax.random.key(7), 8, surprise="mcmc")
        start = time.perf_counter()
        kl = surprise(mask[None])[:, 0]
        seconds = time.perf_counter() - start
        print(
            f"  Gibbs chains: R-hat {surprise.diagnostics['r_hat'][0]:.3f}, bulk ESS "
            f"{surprise.diagnostics['ess'][0]:.0f}, KL {np.round(kl, 3)} ({seconds:.0f} s)",
            flush=True,
        )
        summary["Gibbs chains"] = kl
        for name, values in summary.items():
            mean, error = per_repeat(values)
            print(f"  {name}: KL {mean:.3f} +- {error:.3f}", flush=True)


if __name__ == "__main__":
    main()
