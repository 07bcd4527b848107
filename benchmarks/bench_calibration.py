"""Calibration of sampled semivalues: are the reported standard errors right, on games whose values are known?

For each cell (game x semivalue x sampler) `bayesval.games.semivalue` runs once per key (K keys, default 24) at a
fixed budget, and its estimates are compared with the game's closed-form semivalue (`bayesval.games.analytic`).
On the indices whose |exact value| is at least 1% of the largest, with z = (estimate - exact) / reported stderr:

* RMS z (1 for calibrated standard errors), the fraction of |z| > 4 and the largest |z| (heavy tails);
* the median over indices of (mean reported stderr over keys) / (standard deviation of the estimates over keys);
* "stderr 0, wrong": (index, key) pairs, over all indices, reporting standard error 0 with an estimate off by more
  than 1e-12 of the largest |exact value| (a run that claims to be exact and is not). Pairs with stderr 0 and the
  exact value count as z = 0.
* "trusted": the share of the scored (index, key) pairs whose run called their standard error trustworthy (exact, or
  at least `bayesval.games.variance.TRUSTED_DOF` degrees of freedom: draws that varied often enough to show their
  spread). Below about 95% the cell is in the rare-event regime, where a run flags its rough standard errors
  (not converged, and said so in `diagnostics["indices"]["verdict"]`) rather than calibrating them.

A cell passes when RMS z is in [0.8, 1.2], at most 1% of |z| exceed 4, max |z| <= 8, the median stderr ratio is in
[0.85, 1.15] and no pair is "stderr 0, wrong"; "exact" when every estimate is the exact value (to 1e-12 of the
largest), whatever standard error it reports (the variance of equal draws from sums of squares is rounding noise);
"exact (all 0)" where every exact value is 0 (leave-one-out of the voting and miner games at odd n).
A cell where bayesval warned (any warning during a run, e.g. about heavy-tailed importance weights) is still
measured and marked.

With `--stop-rule T` each key instead runs until `StandardError(T * max |exact|) | MaxEvaluations(cap)`, and the
table gives, of the (index, key) pairs the rule converged, the fraction with |error| <= 2 T max |exact| (target >= 93%:
a calibrated standard error below T puts 95% of the errors within 2 T; a cell where nothing converged passes, having
promised nothing), the share of pairs converged, the fraction within 2 T over all pairs, and the runs that stopped at
the cap with some index not converged.

Games (all deterministic, jitted): `unanimity`, UnanimitySum.random(60 players, 40 terms of sizes 1..8, seed 0);
`airport`, Airport.random(100 players, seed 0), integer costs uniform in 1..100 (with ties); `voting`,
SymmetricVoting(51); `shoes`, Shoes(25, 25); `miner`, Miner(51); `weighted`, WeightedVoting of 51 players with
weights uniform in 1..10 (seed 0) and half the total weight as quota (not run by default). Budgets: 40,000
evaluations per key, 60,000 for the 100-player airport game. Each sampler's batch size is the largest even one that
leaves about 8 batches in the budget (for Latin permutations whole blocks of n within it), or the smallest the
sampler accepts (stratified sampling needs two draws per coalition size the semivalue weighs, so at 100 players it
may take one or two batches of 40,000 coalitions).
`--quick` runs 3 keys of 2,000 evaluations on small versions of the games (12 to 20 players), as a smoke test.

    python benchmarks/bench_calibration.py                       # the full sweep (all games, semivalues, samplers)
    python benchmarks/bench_calibration.py --quick
    python benchmarks/bench_calibration.py --games airport --semivalues shapley 'beta(16,1)' --samplers permutation
    python benchmarks/bench_calibration.py --evaluations airport=100000 --keys 48 --json calibration.json
    python benchmarks/bench_calibration.py --stop-rule 0.02 --cap 400000
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass

import jax
import numpy as np

import bayesval.games as games
from bayesval.games import (
    BANZHAF,
    LEAVE_ONE_OUT,
    SHAPLEY,
    Airport,
    MaxEvaluations,
    Miner,
    PermutationSampler,
    Shoes,
    StandardError,
    StratifiedSampler,
    SymmetricVoting,
    UnanimitySum,
    UniformSampler,
    WeightedVoting,
    beta_shapley,
    semivalue,
)
from bayesval.games.samplers import default_sampler
from bayesval.results.variance import TRUSTED_DOF

IMPORTANT = 0.01  # indices with |exact| >= 1% of the largest are scored
EXACT_TOLERANCE = 1e-12  # of the largest |exact|: an estimate this close counts as exact
TARGET_BATCHES = 8
QUICK_KEYS, QUICK_EVALUATIONS = 3, 2_000
PASS_RMS_Z, PASS_TAIL, PASS_MAX_Z, PASS_RATIO = (0.8, 1.2), 0.01, 8.0, (0.85, 1.15)
PASS_COVERAGE = 0.93


def weighted_voting(num_players: int, seed: int = 0) -> WeightedVoting:
    weights = np.random.default_rng(seed).integers(1, 11, num_players)
    return WeightedVoting(tuple(weights.tolist()), quota=weights.sum() / 2)


@dataclass(frozen=True)
class GameSpec:
    """A game of the sweep: its full and its quick (small) version, and the full version's evaluations per key."""

    full: Callable[[], games.analytic.AnalyticGame]
    quick: Callable[[], games.analytic.AnalyticGame]
    evaluations: int
    default: bool = True


GAMES = {
    "unanimity": GameSpec(lambda: UnanimitySum.random(60, 40, 8), lambda: UnanimitySum.random(20, 10, 4), 40_000),
    "airport": GameSpec(lambda: Airport.random(100, seed=0), lambda: Airport.random(20, seed=0), 60_000),
    "voting": GameSpec(lambda: SymmetricVoting(51), lambda: SymmetricVoting(13), 40_000),
    "shoes": GameSpec(lambda: Shoes(25, 25), lambda: Shoes(6, 6), 40_000),
    "miner": GameSpec(lambda: Miner(51), lambda: Miner(13), 40_000),
    "weighted": GameSpec(lambda: weighted_voting(51), lambda: weighted_voting(13), 40_000, default=False),
}
SEMIVALUES = ("shapley", "banzhaf", "beta(4,1)", "beta(16,1)", "loo")
SAMPLERS = ("permutation", "antithetic", "latin", "uniform", "stratified", "semivalue", "default")


def parse_semivalue(text: str) -> games.Semivalue:
    """'shapley', 'banzhaf', 'loo', or 'beta(a,b)' (also 'beta-a-b')."""
    named = {"shapley": SHAPLEY, "banzhaf": BANZHAF, "loo": LEAVE_ONE_OUT}
    if text in named:
        return named[text]
    match = re.fullmatch(r"beta\W*([\d.]+)\W+([\d.]+)\W*", text)
    if not match:
        raise argparse.ArgumentTypeError(f"semivalue must be shapley, banzhaf, loo or beta(a,b), got {text!r}")
    return beta_shapley(float(match[1]), float(match[2]))


def make_sampler(name: str):
    """The sampler called `name`; None for the default one; False where this bayesval has no such sampler."""
    if name == "default":
        return None
    if name == "semivalue":
        sampler_class = getattr(games, "SemivalueSampler", None)
        return False if sampler_class is None else sampler_class()
    return {
        "permutation": PermutationSampler(),
        "antithetic": PermutationSampler(antithetic=True),
        "latin": PermutationSampler(latin=True) if "latin" in PermutationSampler.__dataclass_fields__ else False,
        "uniform": UniformSampler(),
        "stratified": StratifiedSampler(),
    }[name]


def accepts(sampler, num_players: int, batch_size: int, weights) -> bool:
    try:
        sampler.plan(num_players, batch_size, weights)
    except ValueError:
        return False
    return True


def batch_size_for(sampler, num_players: int, weights, evaluations: int) -> int:
    """The largest even batch size with about TARGET_BATCHES batches in `evaluations` (for Latin permutations, whole
    blocks of n permutations within it, at least one), or the smallest even one the sampler accepts where that is
    larger (a ValueError where it accepts none up to 2 n)."""
    largest = 2 * num_players  # stratified sampling accepts this for every semivalue
    if not accepts(sampler, num_players, largest, weights):
        raise ValueError(f"{sampler.name} accepts no batch size up to {largest}")
    masks_per_draw = sampler.plan(num_players, largest, weights).num_masks / largest
    target = max(2, 2 * int(evaluations / (TARGET_BATCHES * masks_per_draw) // 2))
    if accepts(sampler, num_players, target, weights):
        return target
    if getattr(sampler, "latin", False):  # whole blocks of n permutations
        return max(num_players, target - target % num_players)
    low, high = target // 2, largest // 2  # bisect over batch size / 2: low refused, high accepted
    while high - low > 1:
        middle = (low + high) // 2
        low, high = (low, middle) if accepts(sampler, num_players, 2 * middle, weights) else (middle, high)
    return 2 * high


def run_keys(game, weights, sampler, batch_size: int, stop, keys: int) -> dict:
    """One run per key: estimates and stderr (K, n), mean evaluations and batches, converged flags (K, n),
    warnings, seconds."""
    estimates, stderr, evaluations, batches, converged, warned, messages = [], [], [], [], [], 0, set()
    trusted = []
    started = time.perf_counter()
    for key in range(keys):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            result = semivalue(
                game.utility,
                game.num_players,
                jax.random.key(key),
                weights=weights,
                sampler=sampler,
                stop=stop,
                batch_size=batch_size,
            )
        warned += bool(caught)
        messages |= {f"{w.category.__name__}: {w.message}" for w in caught}
        estimates.append(result.values)
        stderr.append(result.stderr)
        indices = result.diagnostics["indices"]
        trusted.append(np.array(indices["exact"]) | (np.array(indices["dof"]) >= TRUSTED_DOF))
        evaluations.append(result.diagnostics["evaluations"])
        batches.append(result.diagnostics["batches"])
        converged.append(np.asarray(result.converged, bool))
    return {
        "estimates": np.array(estimates),
        "stderr": np.array(stderr),
        "evaluations": float(np.mean(evaluations)),
        "batches": float(np.mean(batches)),
        "converged": np.array(converged),
        "trusted": np.array(trusted),
        "warned_runs": warned,
        "warnings": sorted(messages),
        "seconds": time.perf_counter() - started,
    }


def calibration_metrics(exact: np.ndarray, estimates: np.ndarray, stderr: np.ndarray, trusted: np.ndarray) -> dict:
    """The z-score and stderr-ratio metrics of the module docstring, over K keys (estimates, stderr, trusted: (K, n)),
    and the share of the scored (index, key) pairs whose run called their standard error trustworthy."""
    scale = np.abs(exact).max()
    errors = estimates - exact
    exact_enough = np.abs(errors) <= EXACT_TOLERANCE * scale
    claimed_exact = stderr == 0
    zero_stderr_wrong = claimed_exact & ~exact_enough
    important = np.abs(exact) >= IMPORTANT * scale
    trusted_share = float(np.mean(trusted[:, important]))
    errors, stderr, claimed_exact = errors[:, important], stderr[:, important], claimed_exact[:, important]
    scored = ~zero_stderr_wrong[:, important]
    z = np.where(claimed_exact, 0.0, errors / np.where(claimed_exact, 1.0, stderr))[scored]
    spread = estimates[:, important].std(axis=0, ddof=1)
    ratios = np.divide(stderr.mean(axis=0), spread, out=np.full(spread.shape, np.nan), where=spread > 0)
    return {
        "indices": int(important.sum()),
        "rms_z": float(np.sqrt(np.mean(z**2))) if z.size else float("nan"),
        "tail_fraction": float(np.mean(np.abs(z) > 4)) if z.size else float("nan"),
        "max_abs_z": float(np.abs(z).max()) if z.size else float("nan"),
        "stderr_ratio": float(np.nanmedian(ratios)) if np.isfinite(ratios).any() else float("nan"),
        "stderr_zero_wrong": int(zero_stderr_wrong.sum()),
        "trusted_share": trusted_share,
        "all_exact": bool(np.all(exact_enough[:, important]) and not zero_stderr_wrong.any()),
        "null_game": bool(scale == 0),  # every value 0: estimates of 0 are right whatever the sampler saw
    }


def calibration_verdict(metrics: dict) -> str:
    if metrics["all_exact"]:
        return "exact (all 0)" if metrics["null_game"] else "exact"
    passed = (
        PASS_RMS_Z[0] <= metrics["rms_z"] <= PASS_RMS_Z[1]
        and metrics["tail_fraction"] <= PASS_TAIL
        and metrics["max_abs_z"] <= PASS_MAX_Z
        and PASS_RATIO[0] <= metrics["stderr_ratio"] <= PASS_RATIO[1]
        and metrics["stderr_zero_wrong"] == 0
    )
    return "PASS" if passed else "FAIL"


def coverage_metrics(exact: np.ndarray, estimates: np.ndarray, converged: np.ndarray, threshold: float) -> dict:
    """Of the (index, key) pairs the rule converged, the fraction within 2 x threshold of the exact value (what a
    converged flag promises); the share of pairs converged; the fraction within over all pairs; the capped runs."""
    within = np.abs(estimates - exact) <= 2 * threshold
    return {
        "coverage": float(np.mean(within[converged])) if converged.any() else float("nan"),
        "converged_share": float(np.mean(converged)),
        "coverage_all": float(np.mean(within)),
        "capped_runs": int((~converged.all(axis=1)).sum()),
    }


def evaluation_budgets(items: list[str], game_names: list[str], quick: bool) -> dict[str, int]:
    """Evaluations per key for each game: the defaults, overridden by 'N' (every game) or 'game=N' items."""
    budgets = {name: QUICK_EVALUATIONS if quick else GAMES[name].evaluations for name in game_names}
    for item in items or []:
        name, _, number = item.rpartition("=")
        for game_name in [name] if name else game_names:
            if game_name not in GAMES:
                raise SystemExit(f"--evaluations: unknown game {game_name!r} (games: {', '.join(GAMES)})")
            budgets[game_name] = int(number)
    return budgets


def cells(args):
    """(game name, game, semivalue, sampler name, sampler) of the sweep; samplers this bayesval lacks are skipped."""
    for game_name in args.games:
        spec = GAMES[game_name]
        game = spec.quick() if args.quick else spec.full()
        for weights in args.semivalues:
            for sampler_name in args.samplers:
                sampler = make_sampler(sampler_name)
                if sampler is False:
                    continue
                yield game_name, game, weights, sampler_name, sampler


def measure(args) -> list[dict]:
    budgets = evaluation_budgets(args.evaluations, args.games, args.quick)
    keys = QUICK_KEYS if args.quick and args.keys is None else args.keys or 24
    rows = []
    for game_name, game, weights, sampler_name, sampler in cells(args):
        exact = game.semivalue(weights)
        row = {"game": game_name, "players": game.num_players, "semivalue": weights.name, "sampler": sampler_name}
        sampler_used = default_sampler(weights) if sampler is None else sampler
        if sampler is None:
            row["sampler"] = f"default ({sampler_used.name})"
        try:
            batch_size = batch_size_for(sampler_used, game.num_players, weights, budgets[game_name])
        except ValueError as refusal:
            rows.append(row | {"verdict": "n/a", "note": str(refusal)})
            print_progress(rows[-1])
            continue
        if args.stop_rule is None:
            stop = MaxEvaluations(budgets[game_name])
        else:
            threshold = args.stop_rule * np.abs(exact).max()
            stop = StandardError(threshold) | MaxEvaluations(args.cap or 10 * budgets[game_name])
        run = run_keys(game, weights, sampler, batch_size, stop, keys)
        row |= {"keys": keys, "batch_size": batch_size, "evaluations": run["evaluations"], "batches": run["batches"]}
        row |= {"warned_runs": run["warned_runs"], "warnings": run["warnings"], "seconds": run["seconds"]}
        if args.stop_rule is None:
            metrics = calibration_metrics(exact, run["estimates"], run["stderr"], run["trusted"])
            row |= metrics | {"verdict": calibration_verdict(metrics)}
        else:
            metrics = coverage_metrics(exact, run["estimates"], run["converged"], threshold)
            passed = not metrics["coverage"] < PASS_COVERAGE  # nothing converged: no promise broken
            row |= metrics | {"verdict": "PASS" if passed else "FAIL"}
        rows.append(row)
        print_progress(row)
    return rows


def print_progress(row: dict) -> None:
    timing = f"{row['seconds']:.1f} s" if "seconds" in row else row.get("note", "")
    print(f"  {row['game']} / {row['semivalue']} / {row['sampler']}: {row['verdict']} ({timing})", file=sys.stderr)


def number(value: float, digits: int = 2) -> str:
    return "—" if value is None or not np.isfinite(value) else f"{value:.{digits}f}"


COMMON_COLUMNS = ["game", "semivalue", "sampler", "batch", "evals/key"]
CALIBRATION_COLUMNS = ["batches", "indices", "RMS z", "abs z > 4", "max abs z", "stderr/spread", "stderr 0, wrong"]
CALIBRATION_COLUMNS += ["trusted"]
STOP_RULE_COLUMNS = ["converged pairs", "of them abs error <= 2t", "all pairs abs error <= 2t", "capped runs"]


def calibration_entries(row: dict) -> list[str]:
    tail = f"{100 * row['tail_fraction']:.1f}%" if np.isfinite(row["tail_fraction"]) else "—"
    return [
        number(row["batches"], 1), str(row["indices"]), number(row["rms_z"]), tail, number(row["max_abs_z"], 1),
        number(row["stderr_ratio"]), str(row["stderr_zero_wrong"]), f"{100 * row['trusted_share']:.0f}%",
    ]  # fmt: skip


def stop_rule_entries(row: dict) -> list[str]:
    shares = (row["converged_share"], row["coverage"], row["coverage_all"])
    return [f"{100 * x:.1f}%" if np.isfinite(x) else "—" for x in shares] + [f"{row['capped_runs']}/{row['keys']}"]


def markdown_table(rows: list[dict], stop_rule: float | None) -> str:
    middle = CALIBRATION_COLUMNS if stop_rule is None else STOP_RULE_COLUMNS
    header = COMMON_COLUMNS + middle + ["warned", "verdict", "s"]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for row in rows:
        entries = [row["game"], row["semivalue"], row["sampler"]]
        if row["verdict"] == "n/a":
            entries += ["—"] * (len(header) - 5) + ["n/a", "—"]
        else:
            entries += [str(row["batch_size"]), f"{row['evaluations']:,.0f}"]
            entries += calibration_entries(row) if stop_rule is None else stop_rule_entries(row)
            warned = f"{row['warned_runs']}/{row['keys']}" if row["warned_runs"] else ""
            entries += [warned, row["verdict"], f"{row['seconds']:.1f}"]
        lines.append("| " + " | ".join(entries) + " |")
    return "\n".join(lines)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--games", nargs="+", choices=list(GAMES), default=[n for n, g in GAMES.items() if g.default])
    parser.add_argument("--semivalues", nargs="+", type=parse_semivalue, default=list(map(parse_semivalue, SEMIVALUES)))
    parser.add_argument("--samplers", nargs="+", choices=SAMPLERS, default=list(SAMPLERS))
    parser.add_argument("--keys", type=int, default=None, help="runs per cell (default 24, 3 with --quick)")
    parser.add_argument("--evaluations", nargs="+", metavar="[GAME=]N", help="evaluations per key, per game or all")
    parser.add_argument("--quick", action="store_true", help="3 keys of 2,000 evaluations on small games (smoke)")
    parser.add_argument("--stop-rule", type=float, default=None, metavar="T", help="StandardError(T max|exact|)")
    parser.add_argument("--cap", type=int, default=None, help="--stop-rule's MaxEvaluations (default 10x budget)")
    parser.add_argument("--json", default=None, metavar="PATH", help="write every cell's numbers here")
    args = parser.parse_args(argv)
    started = time.perf_counter()
    rows = measure(args)
    mode = "calibration" if args.stop_rule is None else f"stop rule StandardError({args.stop_rule:g} max|exact|)"
    print(f"{mode}; {len(rows)} cells in {time.perf_counter() - started:.0f} s; jax {jax.__version__}\n")
    print(markdown_table(rows, args.stop_rule))
    if args.json:
        with open(args.json, "w") as out:
            json.dump(rows, out, indent=1)


if __name__ == "__main__":
    sys.exit(main())
