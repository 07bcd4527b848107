"""Regression sampling (`bayesval.games.RegressionSampler`) against Latin and plain permutations, in one run.

Four tables (docs/games.md, "Regression sampling"):

1. Calibration: on closed-form games (`unanimity50`: UnanimitySum.random(50, 40 terms of sizes 1..8, seed 0);
   `unanimity100`: the same at 100 players, 80 terms; `airport100`: Airport.random(100, seed 0)) without noise and
   with Gaussian noise on each evaluation at sd 5 % and 50 % of the game's largest marginal contribution (fresh
   noise for every evaluation), K keys a cell, 16 batches of 4n coalitions: RMS z, |z| > 4, max |z|, median
   stderr / spread over keys, standard errors of 0, the pass verdict of benchmarks/bench_calibration.py.
2. Mean squared error at equal evaluations: about 50 Latin permutations' worth (one batch of whole Latin blocks,
   the coalitions counted) on unanimity games of 50 and 12 players (`unanimity12`: 15 terms of sizes 1..5), at
   noise 0, 5 % and 50 %; regression sampling spends the same evaluations in 12 batches, and the default sampler
   (`semivalue` with no sampler: it probes the utility, then runs batches of 4.5n coalitions, all within the budget);
   the ratios Latin / regression and Latin / default.
3. StandardError(t): runs to StandardError(t max |phi|) | MaxEvaluations(cap) on unanimity50 (or the games of
   --games) at noise 5 % and 50 %: of the converged indices, the share within 2 t.
4. The estimator's own cost at n = 100: a run's wall time less the utility's, against the run's evaluations at 1 ms.

With `--shapiq-python PATH` (a Python with shapiq installed, e.g. a separate venv) shapiq's KernelSHAP runs on the
table-2 games and budgets in that interpreter (the game passed as its unanimity terms), its MSE beside ours; without
it, shapiq runs only if importable here.

    python benchmarks/bench_regression.py                 # everything, 20 keys a cell
    python benchmarks/bench_regression.py --keys 4 --quick
    python benchmarks/bench_regression.py --shapiq-python /work/venv-shapiq/bin/python
    python benchmarks/bench_regression.py --tables calibration --games mst100 weighted51 shoes50 voting51 miner51
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
import warnings

import jax
import numpy as np
from bench_calibration import calibration_metrics, calibration_verdict, coverage_metrics

from bayesval.games import (
    Airport,
    MaxEvaluations,
    Miner,
    MinimumSpanningTree,
    PermutationSampler,
    RegressionSampler,
    Shoes,
    StandardError,
    SymmetricVoting,
    UnanimitySum,
    WeightedVoting,
    semivalue,
)
from bayesval.games.choice import default_regression_batch
from bayesval.games.fingerprint import PROBES
from bayesval.results.variance import TRUSTED_DOF

NOISE_LEVELS = (0.0, 0.05, 0.5)
GAMES = {
    "unanimity12": lambda: UnanimitySum.random(12, 15, 5, seed=0),
    "unanimity50": lambda: UnanimitySum.random(50, 40, 8, seed=0),
    "unanimity100": lambda: UnanimitySum.random(100, 80, 8, seed=0),
    "airport100": lambda: Airport.random(100, seed=0),
    # pyDVL's analytic test games (bayesval.games.analytic), 50 to 100 players
    "mst100": lambda: MinimumSpanningTree(100),
    "weighted51": lambda: WeightedVoting(tuple(np.random.default_rng(0).integers(1, 20, 51)), quota=250.5),
    "shoes50": lambda: Shoes(25, 25),
    "voting51": lambda: SymmetricVoting(51),
    "miner51": lambda: Miner(51),
}
PYDVL_GAMES = ["mst100", "weighted51", "shoes50", "voting51", "miner51"]


def largest_marginal(game) -> float:
    """The largest marginal contribution v(S u i) - v(S) of the game: max_i sum_{T containing i} a_T for a sum of
    unanimity games of positive coefficients (S = N minus i), the largest cost for the airport game (S empty), the
    source edge for the spanning tree game, 1 for the games of wins and pairs."""
    if isinstance(game, Airport):
        return float(max(game.costs))
    if isinstance(game, MinimumSpanningTree):  # a player with no neighbour in S joins it to the source
        return float(max(abs(game.source_cost), abs(game.ring_cost - game.source_cost)))
    if not isinstance(game, UnanimitySum):  # voting, shoes, miner: a player adds a win, a pair or nothing
        return 1.0
    membership = game._membership().astype(np.float64)
    return float((membership.T @ np.abs(np.array(game.coefficients))).max())


def noisy(game, sd: float):
    """The game's utility plus independent Gaussian noise of sd `sd` on every evaluation, from the utility's key (the
    game's own, of the masks alone, where sd is 0)."""
    if sd == 0:
        return game.utility

    def utility(key, masks):
        values = game.utility(key, masks)
        rng = np.random.default_rng(np.asarray(jax.random.key_data(key)).tolist())
        return values + sd * rng.standard_normal(len(values))

    return utility


def run(game, utility, sampler, batch_size: int | None, stop, keys: int) -> dict:
    """One run per key: estimates, stderr, trusted and converged flags (K, n), mean evaluations, seconds; the default
    sampler and its batch size where `sampler` is None."""
    rows = {"estimates": [], "stderr": [], "trusted": [], "converged": [], "evaluations": []}
    samplers = set()
    started = time.perf_counter()
    for key in range(keys):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            result = semivalue(
                utility, game.num_players, jax.random.key(key), sampler=sampler, batch_size=batch_size, stop=stop
            )
        indices = result.diagnostics["indices"]
        rows["estimates"].append(result.values)
        rows["stderr"].append(result.stderr)
        rows["trusted"].append(np.array(indices["exact"]) | (np.array(indices["dof"]) >= TRUSTED_DOF))
        rows["converged"].append(np.asarray(result.converged, bool))
        rows["evaluations"].append(result.diagnostics["evaluations"])
        samplers.add(result.diagnostics["sampler"].split(":")[0])
    out = {name: np.array(value) for name, value in rows.items()}
    out["evaluations"] = float(np.mean(rows["evaluations"]))
    out["seconds"] = time.perf_counter() - started
    out["sampler"] = " / ".join(sorted(samplers))
    return out


def cells(names: list[str], levels: tuple[float, ...]):
    """(name, game, its exact Shapley values, its largest marginal, noise level) for each game at each level."""
    for name in names:
        game = GAMES[name]()
        exact, scale = game.semivalue("shapley"), largest_marginal(game)
        for level in levels:
            yield name, game, exact, scale, level


def calibration_table(names: list[str], keys: int, batches: int) -> None:
    print(f"\n## Calibration ({keys} keys a cell, {batches} batches of 4n coalitions)\n")
    print("| game | noise | RMS z | \\|z\\| > 4 | max \\|z\\| | stderr / spread | stderr 0 | trusted | verdict | s |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for name, game, exact, scale, level in cells(names, NOISE_LEVELS):
        batch_size = 4 * game.num_players
        stop = MaxEvaluations(batches * (batch_size + 2))
        runs = run(game, noisy(game, level * scale), RegressionSampler(), batch_size, stop, keys)
        m = calibration_metrics(exact, runs["estimates"], runs["stderr"], runs["trusted"])
        print(
            f"| {name} | {level:.0%} | {m['rms_z']:.2f} | {m['tail_fraction']:.1%} | {m['max_abs_z']:.1f} | "
            f"{m['stderr_ratio']:.2f} | {int((runs['stderr'] == 0).sum())} | {m['trusted_share']:.0%} | "
            f"{calibration_verdict(m)} | {runs['seconds']:.0f} |",
            flush=True,
        )


def latin_budget(num_players: int) -> tuple[int, int]:
    """(permutations, evaluations) of about 50 Latin permutations: whole blocks of n, in one batch."""
    blocks = max(1, round(50 / num_players))
    permutations = blocks * num_players
    return permutations, permutations * (num_players + 1) + 2 * (2 * num_players + 2)


def mse_table(names: list[str], keys: int, shapiq_python: str | None) -> None:
    print(f"\n## Mean squared error at equal evaluations ({keys} keys; mean over players)\n")
    shapiq_header = " shapiq KernelSHAP |" if shapiq_python or _shapiq_here() else ""
    print(
        f"| game | noise | evaluations (Latin / regression / default) | Latin | plain | regression | Latin / "
        f"regression | default | Latin / default |{shapiq_header}"
    )
    print("|---|---|---|---|---|---|---|---|---|" + ("---|" if shapiq_header else ""))
    for name in names:
        game = GAMES[name]()
        exact, scale, n = game.semivalue("shapley"), largest_marginal(game), game.num_players
        permutations, budget = latin_budget(n)
        regression_batch = 2 * ((budget // 12 - 2) // 2)
        for level in NOISE_LEVELS:
            utility = noisy(game, level * scale)
            stop = MaxEvaluations(budget)
            latin = run(game, utility, PermutationSampler(latin=True), permutations, stop, keys)
            plain = run(game, utility, PermutationSampler(), permutations, stop, keys)
            within = MaxEvaluations(12 * (regression_batch + 2))  # 12 batches, no more evaluations than Latin's
            regression = run(game, utility, RegressionSampler(), regression_batch, within, keys)
            default_batch = default_regression_batch(n) + 2  # the probes, then whole batches within the budget
            default = run(
                game,
                utility,
                None,
                None,
                MaxEvaluations(PROBES + (budget - PROBES) // default_batch * default_batch),
                keys,
            )
            mse = {
                label: float(np.mean((r["estimates"] - exact) ** 2))
                for label, r in (("latin", latin), ("plain", plain), ("regression", regression), ("default", default))
            }
            cell = ""
            if shapiq_header:
                shapiq_mse = shapiq_errors(game, level * scale, budget, keys, shapiq_python)
                cell = f" {shapiq_mse:.3g} |" if shapiq_mse is not None else " — |"
            print(
                f"| {name} | {level:.0%} | {budget} / {regression['evaluations']:.0f} / {default['evaluations']:.0f} | "
                f"{mse['latin']:.3g} | {mse['plain']:.3g} | {mse['regression']:.3g} | "
                f"{mse['latin'] / mse['regression']:.2f} | {mse['default']:.3g} | {mse['latin'] / mse['default']:.2f} "
                f"({default['sampler']}) |{cell}",
                flush=True,
            )


def stop_rule_table(names: list[str], keys: int, threshold: float, cap: int) -> None:
    print(f"\n## StandardError({threshold:g} max |phi|) | MaxEvaluations({cap}) ({keys} keys)\n")
    print("| game | noise | converged pairs | within 2t of them | within 2t, all | capped runs | mean evaluations |")
    print("|---|---|---|---|---|---|---|")
    for name, game, exact, scale, level in cells(names, NOISE_LEVELS[1:]):
        target = threshold * np.abs(exact).max()
        stop = StandardError(target) | MaxEvaluations(cap)
        runs = run(game, noisy(game, level * scale), RegressionSampler(), 4 * game.num_players, stop, keys)
        m = coverage_metrics(exact, runs["estimates"], runs["converged"], target)
        print(
            f"| {name} | {level:.0%} | {m['converged_share']:.1%} | {m['coverage']:.1%} | "
            f"{m['coverage_all']:.1%} | {m['capped_runs']} | {runs['evaluations']:.0f} |",
            flush=True,
        )


def cost_table(batches: int, repeats: int = 3) -> None:
    """The estimator's own time (drawing, the sums, the state) at n = 100: the run less the utility's time, the best
    of `repeats` runs after one that compiles."""
    print(f"\n## The estimator's own cost at n = 100 (airport game, utility timed apart, best of {repeats})\n")
    print("| batch size | evaluations | run s | utility s | estimator s | share of a 1 ms-per-evaluation run |")
    print("|---|---|---|---|---|---|")
    game = GAMES["airport100"]()
    utility = TimedUtility(game)
    for batch_size in (200, 400, 1000):
        options = {"sampler": RegressionSampler(), "batch_size": batch_size}
        stop = MaxEvaluations(batches * (batch_size + 2))
        semivalue(utility, 100, jax.random.key(99), stop=stop, **options)
        timings = []
        for key in range(repeats):
            utility.seconds = 0.0
            started = time.perf_counter()
            result = semivalue(utility, 100, jax.random.key(key), stop=stop, **options)
            timings.append((time.perf_counter() - started - utility.seconds, time.perf_counter() - started))
        own, total = min(timings)
        evaluations = result.diagnostics["evaluations"]
        share = own / (own + evaluations * 1e-3)
        print(
            f"| {batch_size} | {evaluations} | {total:.2f} | {total - own:.2f} | {own:.2f} | {share:.1%} |",
            flush=True,
        )


class TimedUtility:
    """A game's utility that adds up the seconds spent in it."""

    def __init__(self, game) -> None:
        self.game, self.seconds = game, 0.0

    def __call__(self, key, masks):
        started = time.perf_counter()
        values = self.game.utility(key, masks)
        self.seconds += time.perf_counter() - started
        return values


def _shapiq_here() -> bool:
    try:
        import shapiq  # noqa: F401
    except ImportError:
        return False
    return True


SHAPIQ_SCRIPT = """
import json, sys, warnings
import numpy as np
warnings.simplefilter("ignore")
from shapiq.approximator import KernelSHAP
spec = json.loads(sys.stdin.read())
n = spec["n"]
membership = np.zeros((len(spec["terms"]), n), bool)
for row, term in enumerate(spec["terms"]):
    membership[row, term] = True
coefficients = np.array(spec["coefficients"])
errors = []
for key in range(spec["keys"]):
    rng = np.random.default_rng(10_000 + key)
    def game(coalitions):
        coalitions = np.asarray(coalitions, bool)
        present = coalitions.astype(float) @ membership.T.astype(float)
        values = (present == membership.sum(axis=1)).astype(float) @ coefficients
        return values + spec["sd"] * rng.standard_normal(len(values))
    approximator = KernelSHAP(n=n, random_state=key)
    estimate = approximator.approximate(budget=spec["budget"], game=game)
    values = np.array([estimate[(i,)] for i in range(n)])
    errors.append(values - np.array(spec["exact"]))
print(json.dumps(float(np.mean(np.array(errors) ** 2))))
"""


def shapiq_errors(game, sd: float, budget: int, keys: int, python: str | None) -> float | None:
    """shapiq's KernelSHAP's MSE on a unanimity game at `budget` evaluations over `keys` seeds, run in `python`
    (another interpreter with shapiq) or here; None where it cannot run (e.g. the airport game, not passed)."""
    if not isinstance(game, UnanimitySum):
        return None
    spec = {
        "n": game.num_players,
        "terms": [list(term) for term in game.coalitions],
        "coefficients": list(game.coefficients),
        "exact": game.semivalue("shapley").tolist(),
        "sd": sd,
        "budget": budget,
        "keys": keys,
    }
    command = [python or sys.executable, "-c", SHAPIQ_SCRIPT]
    done = subprocess.run(command, input=json.dumps(spec), capture_output=True, text=True, check=False)
    if done.returncode:
        print(f"shapiq failed: {done.stderr.strip().splitlines()[-1:]}", file=sys.stderr)
        return None
    return float(json.loads(done.stdout))


TABLES = ("calibration", "mse", "stop", "cost")


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--keys", type=int, default=20)
    parser.add_argument("--quick", action="store_true", help="only the 12- and 50-player unanimity games")
    parser.add_argument("--shapiq-python", default=None, help="a Python interpreter with shapiq installed")
    parser.add_argument("--threshold", type=float, default=0.02, help="StandardError threshold, times max |phi|")
    parser.add_argument("--tables", nargs="+", default=list(TABLES), choices=list(TABLES), help="which tables")
    parser.add_argument(
        "--games", nargs="+", default=None, choices=list(GAMES), help="the calibration and stopping tables' games"
    )
    args = parser.parse_args(argv)
    print(f"# bench_regression: {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, JAX {jax.__version__}")
    games = args.games or (["unanimity50"] if args.quick else ["unanimity50", "unanimity100", "airport100"])
    tables = {
        "calibration": lambda: calibration_table(games, args.keys, 16),
        "mse": lambda: mse_table(["unanimity50", "unanimity12"], args.keys, args.shapiq_python),
        "stop": lambda: stop_rule_table(args.games or ["unanimity50"], args.keys, args.threshold, cap=200_000),
        "cost": lambda: cost_table(8),
    }
    for table in args.tables:
        tables[table]()


if __name__ == "__main__":
    main()
