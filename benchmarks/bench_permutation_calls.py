"""Permutation sampling of many parties: one batch of permutations valued at the fast preset, each run in a fresh
process (compilation included), one after the other: this working tree against the package at an earlier commit, or
with the last calls' cut forced off and on, in plain permutations (the workload the cut was first measured on; the
valuation now samples Latin blocks up to 32 parties, `parties.valuation.permutation_sampler`); or plain permutations
against Latin blocks; or Latin blocks with each coalition valued 3 times against 2 times, or with chains of other
lengths.

    python benchmarks/bench_permutation_calls.py --against 55dc989            # 12 parties, 8 permutations
    python benchmarks/bench_permutation_calls.py --against 55dc989 --parties 12 --permutations 32
    python benchmarks/bench_permutation_calls.py --cuts off on --memory-limit-mb 32768   # on a GPU: cut forced
    python benchmarks/bench_permutation_calls.py --designs plain latin --permutations 36  # the two designs
    python benchmarks/bench_permutation_calls.py --repeats 3 2 --parties 8 --permutations 16  # repeats a coalition
    python benchmarks/bench_permutation_calls.py --budgets 800:1600 400:1200 --parties 12 --permutations 24  # chains

`--cuts off on` values the batch twice in this tree, with every call padded to a full call and with each width's
last call cut to its rows (`plan.cuts_calls` forced either way), to measure where a cut pays on an accelerator,
where the package does not cut calls.

`--designs plain latin` values a batch of plain permutations and one of Latin blocks (the permutations a multiple of
the parties), each as the package cuts its calls: the time and standard errors of each design on the noisy game, and
from them the permutations and the time that every standard error <= `--target` would take at the batch's rate
(a standard error falls as one over the root of the permutations).

`--repeats 3 2` values a batch of Latin blocks with each coalition valued 3 times and 2 times
(`SamplerConfig.sampled_repeats`; the fast preset's 3 repeats before, 2 now), as the package cuts its calls: the same
permutations and, with them, the same coalitions. The other modes value each coalition 3 times, as their recorded
runs did and as a package from before `sampled_repeats` does, so that `--against` compares like with like.
`--budgets 800:1600 400:1200` values a batch of Latin blocks with chains of each budget (warm-up:kept sweeps, the
preset's 4 chains and the Gibbs presets' sampled repeats, 2), as the package packs members, cuts its calls and reruns
coalitions, and prints, for each run after the first, the mean difference of the coalition values both runs valued by
coalition size, with its error: a mean that departs from zero is a bias of one budget against the other
(docs/benchmarks.md, "Shorter chains where coalitions are sampled"). With `--packing off on` each budget is valued
with members packed and (on CPU) calls cut, forced off and on (`plan.worth_packing`; docs/benchmarks.md, "Where
packing starts to pay").

These modes print each run's smallest degrees of freedom of a standard error (`TRUSTED_DOF` decides convergence) and
the spread of one repeat's estimate of a coalition (root mean square), the Monte Carlo error that more repeats would
shrink.

A batch of permutations holds only some coalitions of each width, so the last sampler call of a width is mostly
padding when calls are as large as the width's whole set of coalitions allows. Prints each path's `bv.valuate` time,
the coalitions valued, the rows its sampler calls held against the rows they were padded to, and whether the two
paths' values agree (their rows are the same chains, so up to rounding: XLA may vectorise a program of another
shape differently).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import warnings
from pathlib import Path

import numpy as np


def child(
    num_parties: int,
    permutations: int,
    cut: str,
    memory_limit_mb: float | None,
    design: str,
    repeats: int | None,
    budget: tuple[int, int] | None = None,
    packing: str = "package",
    game: str = "syn",
) -> None:
    """One valuation in this process; prints a JSON line. `game`: 'syn' (the Syn parties of `bench_scale`,
    `LinearRegression`, the Gibbs fast preset) or 'diab' (Diab's training rows split evenly among the parties at
    epsilon 0.5, `LogisticRegression`, the NUTS fast preset). `cut`: 'package' (the package decides), 'on' or 'off';
    `design`: 'plain' permutations or 'latin' blocks; `repeats`: the sampled repeats (None: the preset's);
    `budget`: (warm-up, kept) sweeps of a chain (None: the preset's); `packing`: 'package' (the package decides,
    `plan.worth_packing`), 'on' or 'off' (members packed and calls cut, or neither)."""
    import jax

    import bayesval as bv
    from bayesval.games.samplers import PermutationSampler
    from bayesval.games.stopping import MaxEvaluations
    from bayesval.parties import plan
    from bayesval.parties import valuation as party_valuation
    from bayesval.parties.execute import CallExecutor

    sys.path.insert(0, str(Path(__file__).parent))
    from bench_scale import releases_of
    from bench_valuation import diab_parties

    widths, calls = [], []  # the rows of each width sampled, and the rows each sampler call was padded to
    run_plan, run = CallExecutor.run_plan, CallExecutor.run

    def recording_plan(self, planned, rows):
        for width in dict.fromkeys(call.width for call in planned):
            widths.append(sum(len(call.rows) for call in planned if call.width == width))
        return run_plan(self, planned, rows)

    def recording_call(self, call, rows):
        calls.append(call.size)
        return run(self, call, rows)

    CallExecutor.run_plan, CallExecutor.run = recording_plan, recording_call
    if cut != "package":
        plan.cuts_calls = lambda config: cut == "on"
    if packing != "package":
        plan.worth_packing = lambda config: packing == "on"
    # plain: the workload the cut was first measured on; a package before Latin blocks knows no `latin` option
    sampler = PermutationSampler(latin=True) if design == "latin" else PermutationSampler()
    party_valuation.permutation_sampler = lambda num_parties, resumed=None: (sampler, permutations)
    party_valuation.PERMUTATION_BATCH = permutations  # the batch of a package before `permutation_sampler`
    if game == "diab":
        model, releases = diab_parties((1 / num_parties,) * num_parties)  # evenly split
        config = bv.SamplerConfig.preset("fast", "nuts")
    else:
        model, releases = bv.models.LinearRegression(), releases_of(num_parties)
        config = bv.SamplerConfig.preset("fast")
    if memory_limit_mb is not None:
        config = config.with_(memory_limit_mb=memory_limit_mb)
    if hasattr(config, "sampled_repeats"):  # 3 repeats outside --repeats, as the tables of the other modes ran
        config = config.with_(sampled_repeats=3 if repeats is None else repeats)
    if budget is not None:
        config = config.with_(num_warmup=budget[0], num_samples=budget[1])
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        result = bv.valuate(
            model,
            releases,
            key=0,
            config=config,
            stop=MaxEvaluations(permutations * (num_parties + 1)),
            exact_up_to=num_parties - 1,  # sampled at any number of parties (by default up to 10 are enumerated)
            progress_bar=False,
            control_variate=False,  # plain sampling, as docs/benchmarks.md measured it
        )
    seconds = time.perf_counter() - start
    record = {
        "seconds": seconds,
        "coalitions": len(result.coalition_values),
        "rows": sum(widths),
        "padded": sum(calls),
        "calls": calls,
        "values": result.values.tolist(),
        "stderr": result.stderr.tolist(),
        "max_r_hat": float(np.max(result.diagnostics["r_hat"])),
        "platform": jax.default_backend(),
        "repeats": result.state.num_repeats,
        "min_dof": float(np.min(result.state.estimate().dof)),
        "repeat_spread": float(np.sqrt(np.mean(result.coalition_stderr**2) * result.state.num_repeats)),
        "coalition_codes": (result.coalition_masks.astype(np.int64) @ (1 << np.arange(num_parties))).tolist(),
        "coalition_values": result.coalition_values.tolist(),
        "reruns": int(np.count_nonzero(result.diagnostics["reruns"])),  # coalitions rerun
        "min_ess": float(np.min(result.diagnostics["ess"])),
    }
    print(json.dumps(record))


def run(
    args: argparse.Namespace,
    package_root: Path | None,
    cut: str = "package",
    design: str = "plain",
    repeats: int | None = None,
    budget: str | None = None,
    packing: str = "package",
) -> dict:
    from bench_compile import run_json

    command = [sys.executable, __file__, "--child", "--parties", str(args.parties)]
    command += ["--permutations", str(args.permutations), "--cuts", cut, "--designs", design, "--game", args.game]
    if args.memory_limit_mb is not None:
        command += ["--memory-limit-mb", str(args.memory_limit_mb)]
    if repeats is not None:
        command += ["--repeats", str(repeats)]
    if budget is not None:
        command += ["--budgets", budget, "--packing", packing]
    return run_json(command, package_root)


def sweep_budget(text: str) -> tuple[int, int]:
    """'WARMUP:KEPT' sweeps of a chain, as two ints (warm-up >= 0, kept >= 1)."""
    warmup, _, kept = text.partition(":")
    try:
        budget = int(warmup), int(kept)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not WARMUP:KEPT, e.g. 800:1600") from None
    if budget[0] < 0 or budget[1] < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: warm-up sweeps must be >= 0 and kept sweeps >= 1")
    return budget


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--parties", type=int, default=12)
    parser.add_argument("--permutations", type=int, default=8, help="permutations in the one batch valued")
    parser.add_argument(
        "--game", choices=["syn", "diab"], default="syn", help="Syn parties (Gibbs) or Diab split evenly (NUTS)"
    )
    parser.add_argument("--against", metavar="REV", help="the commit whose package to compare with")
    parser.add_argument(
        "--cuts", nargs="+", choices=["package", "off", "on"], default=["package"], help="this tree's runs"
    )
    parser.add_argument(
        "--designs", nargs="+", choices=["plain", "latin"], help="value a batch of each design (the package's cut)"
    )
    parser.add_argument(
        "--repeats", nargs="+", type=int, help="value a batch of Latin blocks with each of these sampled repeats"
    )
    parser.add_argument(
        "--budgets",
        nargs="+",
        type=sweep_budget,
        metavar="WARMUP:KEPT",
        help="value a batch of Latin blocks with each of these chain budgets (the preset's sampled repeats)",
    )
    parser.add_argument(
        "--packing",
        nargs="+",
        choices=["package", "off", "on"],
        default=["package"],
        help="with --budgets: value each budget with members packed (and calls cut) as the package decides, or forced",
    )
    parser.add_argument(
        "--target", type=float, default=0.02, help="with --designs, --repeats, --budgets: the stderr to reach"
    )
    parser.add_argument("--memory-limit-mb", type=float, help="SamplerConfig.memory_limit_mb (default: the preset's)")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        design = (args.designs or ["plain"])[0]
        repeats = None if args.repeats is None else args.repeats[0]
        budget = None if args.budgets is None else args.budgets[0]
        return child(
            args.parties,
            args.permutations,
            args.cuts[0],
            args.memory_limit_mb,
            design,
            repeats,
            budget,
            args.packing[0],
            args.game,
        )
    if args.packing != ["package"] and not args.budgets:
        parser.error("--packing applies to --budgets runs")
    modes = [mode for mode in (args.designs, args.repeats, args.budgets) if mode]
    if modes:
        if args.against or args.cuts != ["package"] or len(modes) > 1:
            parser.error(
                "--designs, --repeats and --budgets each compare runs in this tree: one at a time, without --against"
                " or --cuts"
            )
        if (args.repeats or args.budgets or "latin" in args.designs) and args.permutations % args.parties:
            parser.error(f"Latin blocks need --permutations a multiple of the {args.parties} parties")
        for name in ("designs", "repeats", "budgets", "packing"):
            if len(set(getattr(args, name) or [])) < len(getattr(args, name) or []):
                parser.error(f"--{name}: each value once (a run is labelled by its values)")
        if args.repeats and min(args.repeats) < 2:
            parser.error("--repeats: a coalition needs 2 repeats or more (one has no spread)")
        if args.designs:
            return compare(args, {design: run(args, None, design=design) for design in args.designs})
        if args.budgets:
            from bayesval.inference.config import SAMPLED_REPEATS

            budgets = {
                f"{warmup}+{kept}" + ("" if packing == "package" else f" packing {packing}"): run(
                    args, None, "package", "latin", SAMPLED_REPEATS, f"{warmup}:{kept}", packing
                )
                for warmup, kept in args.budgets
                for packing in args.packing
            }
            return compare(args, budgets)
        runs = {f"{repeats} repeats": run(args, None, design="latin", repeats=repeats) for repeats in args.repeats}
        return compare(args, runs)
    results = {}
    if args.against:
        from bench_compile import checkout

        with checkout(args.against) as tree:
            results[args.against] = run(args, tree)
    for cut in args.cuts:
        results["today" if cut == "package" else f"cut {cut}"] = run(args, None, cut)
    platforms = sorted({result["platform"] for result in results.values()})
    print(f"{args.parties} parties, one batch of {args.permutations} permutations, fast preset, key 0, on {platforms}:")
    for label, result in results.items():
        print(
            f"  {label:>10}: bv.valuate {result['seconds']:7.1f} s   {result['coalitions']} coalitions   "
            f"rows {result['rows']} in calls padded to {result['padded']} {result['calls']}   "
            f"max stderr {max(result['stderr']):.4f}   max R-hat {result['max_r_hat']:.4f}"
        )
    if len(results) == 2:
        (first, before), (second, after) = results.items()
        print(f"  ratio {second} / {first}: {after['seconds'] / before['seconds']:.2f}")
        print(
            f"  values equal: {before['values'] == after['values']}; largest difference "
            f"{np.max(np.abs(np.subtract(before['values'], after['values']))):.3g}"
        )


def compare(args: argparse.Namespace, results: dict[str, dict]) -> None:
    """Runs of one batch each (fresh processes, one after the other): what each spent and what the target would
    cost at its rate, and each later run's ratios to the first (with the coalition values' differences, `offsets`)."""
    print(f"{args.parties} {args.game} parties, one batch of {args.permutations} permutations, fast preset, key 0:")
    for label, result in results.items():
        worst = max(result["stderr"])
        needed = args.permutations * (worst / args.target) ** 2
        print(
            f"  {label:>9} on {result['platform']}: bv.valuate {result['seconds']:7.1f} s   "
            f"{result['coalitions']} coalitions   rows {result['rows']}   max R-hat {result['max_r_hat']:.4f}\n"
            f"         phi {np.round(result['values'], 3).tolist()}\n"
            f"         stderr {np.round(result['stderr'], 4).tolist()}\n"
            f"         {result['repeats']} repeats a coalition, one repeat's spread {result['repeat_spread']:.4f}; "
            f"smallest degrees of freedom {result['min_dof']:.1f}\n"
            f"         coalitions rerun {result.get('reruns', 'n/a')}, "
            f"smallest ESS {result.get('min_ess', float('nan')):.0f}\n"
            f"         every stderr <= {args.target:g}: about {needed:.0f} permutations, "
            f"{needed / args.permutations * result['seconds'] / 60:.0f} min at this batch's rate"
        )
    (first, before), *others = results.items()
    for second, after in others:  # each run against the first
        for label, summary in (("largest", np.max), ("mean over the parties of the", np.mean)):
            variances = [summary(np.square(result["stderr"])) for result in (before, after)]
            variance_seconds = [variance * result["seconds"] for variance, result in zip(variances, (before, after))]
            print(
                f"  {label} variance, {first} / {second}: {variances[0] / variances[1]:.2f}; precision per second, "
                f"{second} / {first}: {variance_seconds[0] / variance_seconds[1]:.2f}"
            )
        if "coalition_values" in before and "coalition_values" in after:
            offsets(before, after, f"{second} - {first}")


def offsets(before: dict, after: dict, label: str) -> None:
    """The two runs' values of the coalitions both valued, by size: the mean and spread of their differences (where
    the two runs value the same game, a mean that departs from zero by more than its error is a bias of one run's
    settings against the other's)."""
    first = dict(zip(before["coalition_codes"], before["coalition_values"]))
    second = dict(zip(after["coalition_codes"], after["coalition_values"]))
    shared = sorted(set(first) & set(second))
    differences = np.array([second[code] - first[code] for code in shared])
    sizes = np.array([bin(code).count("1") for code in shared])
    print(f"  coalition values, {label}, over the {len(shared)} coalitions both valued:")
    for size in np.unique(sizes):
        chosen = differences[sizes == size]
        sd = chosen.std(ddof=1) if len(chosen) > 1 else float("nan")
        error = sd / np.sqrt(len(chosen))
        print(f"    size {size:2d}: {len(chosen):3d} coalitions, mean {chosen.mean():+.4f} ± {error:.4f}, sd {sd:.4f}")
    print(f"    all: mean {differences.mean():+.4f} ± {differences.std(ddof=1) / np.sqrt(len(shared)):.4f}")


if __name__ == "__main__":
    main()
