"""The cost of one coalition posterior against its member count, at n = 3, 6 and 12 parties: each coalition's
chains carrying every party (the path before member packing) against its members only (`NoiseAwareData.members`),
side by side in one run.

    python benchmarks/bench_scale.py                 # n = 3, 6, 12; 2 chains x 300 sweeps, 2 repeats a coalition
    python benchmarks/bench_scale.py --parties 3 6   # fewer sizes
    python benchmarks/bench_scale.py --end-to-end 6  # bv.valuate at the fast preset, each path in a fresh process
    python benchmarks/bench_scale.py --end-to-end 12 --child members --exact --progress
                                                     # today's path alone, every coalition (exact Shapley)
    python benchmarks/bench_scale.py --end-to-end 12 --child members --tolerance 0.02 --progress
                                                     # the default route (Latin permutation blocks) until every
                                                     # stderr <= 0.02
    ... --memory-limit-mb 32768                      # wider sampler calls (on a GPU: every row of a width at once)
    ... --num-samples 3200                           # longer chains than the fast preset's 1,600 kept sweeps
    ... --num-chains 2                               # chains a repeat (fast preset: 4)
    ... --control-variate                            # sampled: the default control variate (the Laplace surprise
                                                     # of every coalition up to 12 parties), not plain sampling
    ... --surprise mcmc                              # coalition posteriors by the chains (the default where they
                                                     # are sampled: importance sampling, docs/importance.md)
    ... --valuation-key 1                            # another key for bv.valuate (default 0)
    ... --max-permutations 48                        # sampled: stop after 48 permutations at most
    python benchmarks/bench_scale.py --sweep-cost 12 24 40
                                                     # one chain-sweep's cost at n slots, with and without the
                                                     # collapsed moves
    python benchmarks/bench_scale.py --mixing 11 --keys 1 2 3 4 5
                                                     # ESS and R-hat of 12 coalitions of 11 of 12 parties, a key
                                                     # at a time (fast preset)

Each cell times the surprise of up to 16 distinct coalitions of k members (2 repeats each), after a warm-up call
of other coalitions of the same size that compiles the program: milliseconds per coalition (the batch's time over
its padded rows, times the repeats), compilation excluded, and the first call's seconds (compilation included) apart.
"""

from __future__ import annotations

import argparse
import itertools
import subprocess
import sys
import time
import warnings

import jax
import numpy as np

import bayesval as bv
from bayesval.datasets.synthetic import make_syn
from bayesval.inference.data import NoiseAwareData
from bayesval.parties import plan as party_plan
from bayesval.parties.plan import member_width
from bayesval.parties.surprise import CoalitionSurprise
from bayesval.parties.valuation import coalitions_rerun

# The exact Shapley values of the 12 parties' releases (`releases_of(12)`): every coalition, 3 repeats at the fast
# preset, converged (max R-hat 1.0091), on one H200 at 5e0276a's code (docs/benchmarks.md, "The 12 parties converged:
# reruns on one H200"), each with a standard error of at most 0.0038 (the largest, for every party: conservative).
REFERENCE_12 = np.array([0.900, 0.901, 0.512, 0.540, 0.551, 0.413, 0.926, 0.653, 0.672, 0.808, 0.857, 0.458])
REFERENCE_12_STDERR = 0.0038
CONFIG = bv.SamplerConfig(num_chains=2, num_warmup=100, num_samples=200, num_repeats=2, progress_bar=False)
ROWS = 16


class AllParties(bv.models.LinearRegression):
    """LinearRegression as before member packing: every coalition's chains carry all n parties."""

    packs_members = False


def coalitions(num_parties: int, size: int, count: int, skip: int = 0) -> np.ndarray:
    chosen = itertools.islice(itertools.combinations(range(num_parties), size), skip, skip + count)
    masks = np.zeros((count, num_parties), bool)
    rows = 0
    for rows, members in enumerate(chosen, start=1):
        masks[rows - 1, list(members)] = True
    return masks[:rows]


def cell(model, data, num_parties: int, size: int) -> tuple[float, float]:
    """(first call's seconds with compilation, milliseconds per coalition warm) for coalitions of `size`."""
    surprise = CoalitionSurprise(model, data, CONFIG, k=4, key=jax.random.key(0), max_coalitions=ROWS)
    warm = coalitions(num_parties, size, ROWS)
    start = time.perf_counter()
    surprise(warm)
    first = time.perf_counter() - start
    timed = coalitions(num_parties, size, ROWS, skip=len(warm))
    if not len(timed):  # too few coalitions of this size: time the same ones again, uncached
        surprise, timed = CoalitionSurprise(model, data, CONFIG, 4, jax.random.key(1), ROWS), warm
    start = time.perf_counter()
    surprise(timed)
    seconds = time.perf_counter() - start
    rows = len(timed) * CONFIG.num_repeats
    padded = -(-rows // surprise.batch_rows) * surprise.batch_rows  # a batch costs its padded rows
    return first, 1e3 * seconds * CONFIG.num_repeats / padded


def releases_of(num_parties: int) -> list:
    """Syn parties of 100 points each at epsilon = 0.5, released with fixed noise seeds."""
    syn = make_syn(seed=0, sizes=(100,) * num_parties)
    return [
        bv.Party(X, y, epsilon=0.5, bounds=syn.bounds, name=f"p{i}", noise_seed=100 + i).release()
        for i, (X, y) in enumerate(syn.parties)
    ]


def valuation(
    path: str,
    num_parties: int,
    progress: bool = False,
    exact: bool = False,
    memory_limit_mb: float | None = None,
    num_samples: int | None = None,
    tolerance: float | None = None,
    control_variate: bool = False,
    num_chains: int | None = None,
    surprise: str = "auto",
    save: str | None = None,
    key: int = 0,
    max_permutations: int | None = None,
) -> None:
    """One `bv.valuate` at the fast preset in this process, compilation included: by the default route for
    `num_parties` (permutation sampling beyond 10 parties, until every stderr <= `tolerance`, the default 0.05 if
    None), or over every coalition if `exact`; with the preset's `memory_limit_mb`, `num_samples` (kept sweeps a
    chain) and `num_chains` (a repeat) unless they are given; sampled without a control variate unless
    `control_variate` (the route's default); each coalition posterior by the `surprise` route ('auto', the
    default: importance sampling where the coalitions are sampled; 'mcmc', the chains; docs/importance.md), the
    result saved to `save` where given, from the valuation's `key`; sampled, stopped after `max_permutations`
    permutations where given, whether or not the rule holds (each party's standard error and its degrees of freedom are
    printed, so that a run that does not stop shows why). Beside the 12 parties' sampled values, their z
    against the exact values of the same releases (`REFERENCE_12`)."""
    model = AllParties() if path == "all" else bv.models.LinearRegression()
    releases = releases_of(num_parties)
    options = {"exact_up_to": num_parties} if exact else {}
    if tolerance is not None:
        options["tolerance"] = tolerance
    if max_permutations is not None:
        threshold = 0.05 if tolerance is None else tolerance
        options["stop"] = bv.games.StandardError(threshold) | bv.games.MaxEvaluations(
            max_permutations * (num_parties + 1)
        )
    config = bv.SamplerConfig.preset("fast", model.sampler)
    if memory_limit_mb is not None:
        config = config.with_(memory_limit_mb=memory_limit_mb)
    if num_samples is not None:
        config = config.with_(num_samples=num_samples)
    if num_chains is not None:
        config = config.with_(num_chains=num_chains)
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        # plain sampling, as the earlier timings in docs/benchmarks.md were measured, unless the control is asked for
        options = ({} if control_variate else {"control_variate": False}) | options | {"surprise": surprise}
        result = bv.valuate(model, releases, key=key, config=config, progress_bar=progress, **options)
    if save is not None:
        result.save(save)
    r_hat, ess = np.array(result.diagnostics["r_hat"]), np.array(result.diagnostics["ess"])
    diagnostics = result.diagnostics
    draws = "" if result.counts is None else f"{result.counts.max()} draws a party   "
    rerun_sizes = [sum(mask) for mask, rerun in zip(diagnostics["coalitions"], diagnostics["reruns"]) if rerun]
    print(
        f"{path:8s} {time.perf_counter() - start:7.1f} s   {result.method}   {len(result.coalition_values)} "
        f"coalitions   {draws}max phi stderr {max(result.stderr):.4f}   max R-hat {r_hat.max():.4f} "
        f"(> 1.01: {(r_hat > 1.01).sum()} of {r_hat.size})   min ESS {ess.min():.0f} (< 400: {(ess < 400).sum()})"
        f"   rerun {coalitions_rerun(result.diagnostics)} (members {rerun_sizes})"
        f"   converged {result.diagnostics['converged']}"
        f"   phi {np.round(result.values, 3).tolist()}",
        flush=True,
    )
    if "indices" in diagnostics:
        dof = np.round(diagnostics["indices"]["dof"], 1).tolist()
        print(f"stderr {np.round(result.stderr, 4).tolist()}\ndegrees of freedom {dof}", flush=True)
    if "route" in diagnostics:
        routes, counts = np.unique(diagnostics["route"], return_counts=True)
        k_hat = np.array(diagnostics["k_hat"], float)
        print(f"routes {dict(zip(routes.tolist(), counts.tolist()))}, largest k-hat {np.nanmax(k_hat):.2f}")
    if num_parties == 12 and not exact:
        z = (result.values - REFERENCE_12) / np.hypot(result.stderr, REFERENCE_12_STDERR)
        print(f"against the exact values: z {np.round(z, 2).tolist()}, RMS z {np.sqrt(np.mean(z**2)):.2f}")


def sweep_cost(parties: list[int]) -> None:
    """Milliseconds per chain-sweep of the Gibbs kernel with n party slots (8 grand-coalition rows, 2 chains, 100
    warm-up and 400 kept sweeps: segments of 10 warm-up or 20 kept sweeps a call, as in a valuation; the second
    call timed, so compilation excluded), with the default collapsed moves against none, side by side."""
    print("  n   collapsed moves (default) ms   collapsed_moves=0 ms   ratio")
    for num_parties in parties:
        data = NoiseAwareData.from_releases(releases_of(num_parties))
        rows, config = 8, bv.SamplerConfig(num_chains=2, num_warmup=100, num_samples=400, progress_bar=False)
        keys, masks = jax.random.split(jax.random.key(0), rows), np.ones((rows, num_parties), bool)
        cost = []
        for model in (bv.models.LinearRegression(), bv.models.LinearRegression(collapsed_moves=0)):
            model.posterior_draws(keys, data, masks, config)  # compiles
            start = time.perf_counter()
            model.posterior_draws(keys, data, masks, config)
            chain_sweeps = rows * config.num_chains * (config.num_warmup + config.num_samples)
            cost.append(1e3 * (time.perf_counter() - start) / chain_sweeps)
        print(f"{num_parties:3d} {cost[0]:30.3f} {cost[1]:22.3f} {cost[0] / cost[1]:7.2f}", flush=True)


def mixing(size: int, keys: list[int], num_parties: int = 12) -> None:
    """Convergence of wide coalitions at the fast preset's enumerated budget, 3 repeats, as the recorded tables ran
    (a valuation that samples the coalitions of 12 parties runs 2, `SamplerConfig.for_sampled_game`): the first 12
    coalitions of `size` members of `num_parties` Syn parties, one `CoalitionSurprise` call per key. For each
    coalition, the min over its repeats of the min bulk ESS over theta's coordinates, and its R-hat pooled over the
    repeats' chains (the flags `valuate` checks)."""
    data = NoiseAwareData.from_releases(releases_of(num_parties))
    config = bv.SamplerConfig.preset("fast", "gibbs").with_(progress_bar=False)
    masks = coalitions(num_parties, size, 12)
    ess, r_hat = [], []
    for key in keys:
        surprise = CoalitionSurprise(bv.models.LinearRegression(), data, config, 4, jax.random.key(key), len(masks))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            surprise(masks)
        key_ess, key_r_hat = surprise.diagnostics["ess"], surprise.diagnostics["r_hat"]
        ess, r_hat = ess + key_ess, r_hat + key_r_hat
        print(f"key {key}: min ESS {min(key_ess):.0f}, max R-hat {max(key_r_hat):.4f}", flush=True)
    ess, r_hat = np.array(ess), np.array(r_hat)
    print(
        f"{len(ess)} coalitions of {size} of {num_parties} parties: min ESS {ess.min():.0f}, 10th percentile "
        f"{np.percentile(ess, 10):.0f}, median {np.median(ess):.0f}, ESS < 400: {(ess < 400).sum()}, "
        f"R-hat > 1.01: {(r_hat > 1.01).sum()}, max R-hat {r_hat.max():.4f}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--parties", type=int, nargs="+", default=[3, 6, 12])
    parser.add_argument("--end-to-end", type=int, default=None, metavar="N", help="time bv.valuate of N parties")
    parser.add_argument("--child", choices=["all", "members"], help=argparse.SUPPRESS)
    parser.add_argument("--progress", action="store_true", help="show the end-to-end valuation's progress bar")
    parser.add_argument("--exact", action="store_true", help="end to end: value every coalition (exact Shapley)")
    parser.add_argument("--memory-limit-mb", type=float, help="end to end: SamplerConfig.memory_limit_mb")
    parser.add_argument("--num-samples", type=int, help="end to end: kept sweeps a chain (fast preset: 1,600)")
    parser.add_argument("--tolerance", type=float, help="end to end, sampled: every stderr <= this (default 0.05)")
    parser.add_argument("--num-chains", type=int, help="end to end: chains a repeat (fast preset: 4)")
    parser.add_argument("--control-variate", action="store_true", help="end to end, sampled: the default control")
    parser.add_argument("--surprise", choices=["auto", "importance", "mcmc"], default="auto", help="end to end: route")
    parser.add_argument("--save", help="end to end, --child: save the result to this path")
    parser.add_argument("--valuation-key", type=int, default=0, help="end to end: bv.valuate's key")
    parser.add_argument(
        "--max-permutations", type=int, help="end to end, sampled: stop after this many permutations at most"
    )
    parser.add_argument("--sweep-cost", type=int, nargs="+", metavar="N", help="ms per chain-sweep at N slots")
    parser.add_argument("--mixing", type=int, metavar="SIZE", help="ESS and R-hat of coalitions of SIZE of 12")
    parser.add_argument("--keys", type=int, nargs="+", default=[1, 2, 3, 4, 5], help="with --mixing: the keys")
    args = parser.parse_args()
    if args.mixing:
        return mixing(args.mixing, args.keys)
    if args.sweep_cost:
        return sweep_cost(args.sweep_cost)
    if args.tolerance is not None and args.exact:
        parser.error("--tolerance applies to the sampled route, not with --exact")
    if args.child:
        return valuation(
            args.child,
            args.end_to_end,
            args.progress,
            args.exact,
            args.memory_limit_mb,
            args.num_samples,
            args.tolerance,
            args.control_variate,
            args.num_chains,
            args.surprise,
            args.save,
            args.valuation_key,
            args.max_permutations,
        )
    if args.end_to_end:
        print(f"bv.valuate of {args.end_to_end} parties at the fast preset, each path in a fresh process:")
        for path in ("all", "members"):
            command = [sys.executable, __file__, "--end-to-end", str(args.end_to_end), "--child", path]
            command += ["--exact"] * args.exact
            if args.memory_limit_mb is not None:
                command += ["--memory-limit-mb", str(args.memory_limit_mb)]
            if args.num_samples is not None:
                command += ["--num-samples", str(args.num_samples)]
            if args.tolerance is not None:
                command += ["--tolerance", str(args.tolerance)]
            command += ["--control-variate"] * args.control_variate
            if args.num_chains is not None:
                command += ["--num-chains", str(args.num_chains)]
            command += ["--surprise", args.surprise, "--valuation-key", str(args.valuation_key)]
            if args.max_permutations is not None:
                command += ["--max-permutations", str(args.max_permutations)]
            subprocess.run(command, check=True)
        return
    party_plan.PACK_FROM_CHAIN_SWEEPS = 0  # pack at this short budget too: the cost per coalition is the question
    print(f"{CONFIG.num_chains} chains x {CONFIG.num_warmup + CONFIG.num_samples} sweeps, {CONFIG.num_repeats} repeats")
    print("  n   k   all parties ms   members only ms   ratio   (first call s: all / members)")
    for num_parties in args.parties:
        data = NoiseAwareData.from_releases(releases_of(num_parties))
        for size in sorted({1, num_parties // 2, num_parties}):
            before_first, before = cell(AllParties(), data, num_parties, size)
            if member_width(size, num_parties) == num_parties:  # not packed: the same program
                after_first, after = before_first, before
            else:
                after_first, after = cell(bv.models.LinearRegression(), data, num_parties, size)
            print(
                f"{num_parties:3d} {size:3d} {before:16.1f} {after:17.1f} {before / after:7.2f}"
                f"   ({before_first:.1f} / {after_first:.1f})",
                flush=True,
            )


if __name__ == "__main__":
    main()
