"""Fresh valuations, each in a fresh process (no JAX compilation cache), alternating between two paths, side by
side in one run: by default with their programs compiled ahead in a background thread (today's path) against
compiled when first called (`bayesval.compilation.AHEAD = False`, the path before); with `--against REV`, this
working tree against the package as it was at commit REV (checked out in a temporary git worktree, removed after).

    python benchmarks/bench_compile.py [--rounds 3] [--cases syn diab demo]
    python benchmarks/bench_compile.py --against 4cab1fd --cases demo diab
    python benchmarks/bench_compile.py --against cb0b10d --cases trace --rounds 4
    python benchmarks/bench_compile.py --cache --cases syn demo --rounds 4
    python benchmarks/bench_compile.py --against 087ced0 --cases fit-trace importance --rounds 3
    python benchmarks/bench_compile.py --against 4fee8cb --cases make-syn --rounds 3
    python benchmarks/bench_compile.py --against 55a8578 --cases fit-compile importance --rounds 3

With `--cache`, a run whose programs come from the persistent compilation cache the command line keeps
(`bayesval.compilation.use_persistent_cache`, in a temporary $BAYESVAL_CACHE_DIR filled by one untimed run first)
against a run that compiles them, both compiled ahead.

syn: Syn's default setting (3 parties, epsilon = 0.2 / 0.1 / 0.2, fixed noise seeds), `LinearRegression` (Gibbs) at
the fast preset. demo: the same valuation with the demo's rewards (tempering, rho = 0.2), `bayesval demo`'s work
with fixed noise seeds. short: Syn's setting at a short budget (`SHORT`: 2 chains, 100 warm-up and 400 kept sweeps,
2 repeats; 14 rows x 2 chains x 500 sweeps x 3 party slots), a smoke test's or a tutorial's. diab: Pima in 3 parties
at epsilon = 0.5, `LogisticRegression` (NUTS) at the fast preset (reads pima_indians_diabetes.csv from
$BAYESVAL_DATA). trace: no valuation, only the time to trace and lower the Gibbs sweep program of Syn's fast-preset
valuation (7 coalitions x 3 repeats, 4 chains; not compiled), the part of a first call that JAX's compilation cache
does not save. fit-trace: the same for the importance route's fit program (the grand coalition's joint mode,
`bayesval.inference.importance`). fit-compile: that program traced, lowered and compiled ('phi': the mode's
theta). importance: Syn's valuation at the fast preset by the importance route
(`surprise='importance'`), its fit and row programs compiled. make-syn: no valuation, only `make_syn` for the
settings other than the stored default that the tests draw (`MAKE_SYN_SETTINGS`), in one process; 'phi' lists a
digest of each setting's data.
Prints each run's wall time (of `bv.valuate`, compilation included) and CPU time (every thread of the
process) and phi, then per case the median wall and CPU time of each path and their ratios. Compiled ahead or when
called, the values must agree to the last bit: the programs are the same. Against a commit they agree as far as the
changes between the two allow (the script says whether they are identical).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from contextlib import contextmanager
from pathlib import Path

REPOSITORY = Path(__file__).resolve().parent.parent
SHORT = dict(num_chains=2, num_warmup=100, num_samples=400, thinning=1, num_repeats=2)


def child(case: str, mode: str) -> None:
    """One valuation of `case`, its programs compiled ahead ('ahead'), when called ('called') or ahead and kept in
    the persistent compilation cache ('cached', `use_persistent_cache`); prints its seconds and phi as JSON."""
    import bayesval as bv
    from bayesval import compilation

    compilation.AHEAD = mode != "called"
    if mode == "cached":
        compilation.use_persistent_cache()
    sys.path.insert(0, __file__.rsplit("/", 1)[0])
    import bench_valuation

    if case == "trace":
        return print(json.dumps({"seconds": sweep_trace_seconds(bench_valuation.syn_parties()), "phi": []}))
    if case == "fit-trace":
        return print(json.dumps({"seconds": fit_trace_seconds(bench_valuation.syn_parties()), "phi": []}))
    if case == "fit-compile":
        return print(json.dumps(fit_compile_seconds(bench_valuation.syn_parties())))
    if case == "make-syn":
        return print(json.dumps(make_syn_seconds()))
    if case == "diab":
        model, parties = bench_valuation.diab_parties()
    else:
        model, parties = bv.models.LinearRegression(), bench_valuation.syn_parties()
    options = {"demo": {"rewards": "tempering"}, "importance": {"surprise": "importance"}}.get(case, {})
    config = bv.SamplerConfig(**SHORT) if case == "short" else "fast"
    start, cpu = time.perf_counter(), time.process_time()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        result = bv.valuate(model, parties, key=0, config=config, progress_bar=False, **options)
    seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
    print(json.dumps({"seconds": seconds, "cpu_seconds": cpu, "phi": result.values.tolist()}))


def sweep_trace_seconds(parties) -> float:
    """Seconds to trace and lower the Gibbs sweep program of Syn's fast-preset valuation, without compiling it."""
    import jax
    import numpy as np

    import bayesval as bv
    from bayesval.games.masks import coalition_masks
    from bayesval.inference.data import NoiseAwareData
    from bayesval.parties import release_all

    model, config = bv.models.LinearRegression(), bv.SamplerConfig.preset("fast")
    data = NoiseAwareData.from_releases(release_all(model, parties))
    masks = np.repeat(coalition_masks(len(parties)), config.num_repeats, axis=0)
    _, sweep_program = model.posterior_programs(jax.random.key(0), data, masks, config)
    start = time.perf_counter()
    sweep_program.function.trace(*sweep_program.args, **sweep_program.kwargs).lower()
    return time.perf_counter() - start


def _fit_arguments(parties) -> tuple:
    """The importance route's fit program (`bayesval.inference.importance._mode`) and its arguments for the grand
    coalition of `parties`, from the prior's mode, not profiled."""
    import numpy as np

    import bayesval as bv
    from bayesval.inference import importance
    from bayesval.inference.data import NoiseAwareData
    from bayesval.inference.laplace import prior_start
    from bayesval.parties import release_all

    model = bv.models.LinearRegression()
    data = NoiseAwareData.from_releases(release_all(model, parties))
    num_features = parties[0].X.shape[1]
    priors, statistic = model.priors(num_features), model.statistic(num_features)
    arguments = (data, np.ones(len(parties), bool), priors.model, priors.data, statistic, prior_start(priors.model))
    return importance._mode, arguments + (False,)


def fit_trace_seconds(parties) -> float:
    """Seconds to trace and lower the importance route's fit program (a coalition's joint mode) for the grand
    coalition of `parties`, without compiling it."""
    program, arguments = _fit_arguments(parties)
    start = time.perf_counter()
    program.trace(*arguments).lower()
    return time.perf_counter() - start


def fit_compile_seconds(parties) -> dict:
    """Seconds to trace, lower and compile the same fit program; 'phi' holds the mode's theta, so that the two paths'
    fits can be compared."""
    program, arguments = _fit_arguments(parties)
    start, cpu = time.perf_counter(), time.process_time()
    compiled = program.trace(*arguments).lower().compile()
    seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
    dynamic = arguments[:4] + arguments[5:]  # the compiled program takes all but the static statistic
    return {"seconds": seconds, "cpu_seconds": cpu, "phi": compiled(*dynamic).theta.tolist()}


# The settings other than the stored default that the tests draw (`make_syn(seed=0, sizes=...)`), in the suite's
# order of first use.
MAKE_SYN_SETTINGS = [(0, (100,) * 3), (0, (100,) * 12), (0, (100,) * 24), (0, (100, 100, 200, 200)), (0, (40,) * 6)]


def make_syn_seconds() -> dict:
    """Seconds to generate every setting of `MAKE_SYN_SETTINGS` in one process, compilation included; 'phi' holds
    a digest of each setting's arrays, so that the two paths' draws can be compared to the last bit."""
    import hashlib

    import numpy as np

    from bayesval.datasets.synthetic import make_syn

    start, cpu = time.perf_counter(), time.process_time()
    digests = []
    for seed, sizes in MAKE_SYN_SETTINGS:
        syn = make_syn(seed=seed, sizes=sizes)
        arrays = [syn.weights, np.float64(syn.noise_var), *(array for pair in syn.parties for array in pair), *syn.test]
        digests.append(hashlib.sha256(b"".join(np.ascontiguousarray(a).tobytes() for a in arrays)).hexdigest()[:12])
    return {"seconds": time.perf_counter() - start, "cpu_seconds": time.process_time() - cpu, "phi": digests}


@contextmanager
def checkout(revision: str):
    """The repository at `revision` in a temporary git worktree, removed afterwards."""
    with tempfile.TemporaryDirectory() as scratch:
        tree = Path(scratch) / "tree"
        subprocess.run(
            ["git", "-C", str(REPOSITORY), "worktree", "add", "-q", "--detach", str(tree), revision], check=True
        )
        try:
            yield tree
        finally:
            subprocess.run(["git", "-C", str(REPOSITORY), "worktree", "remove", "--force", str(tree)], check=True)


def package_environment(package_root: Path | None) -> dict[str, str]:
    """This process's environment, where `package_root` is given with `bayesval` imported from there (a `checkout`)
    instead of this tree."""
    environment = dict(os.environ)
    if package_root is not None:
        environment["PYTHONPATH"] = os.pathsep.join(filter(None, [str(package_root), environment.get("PYTHONPATH")]))
    return environment


def run_json(command: list[str], package_root: Path | None) -> dict:
    """`command` in a fresh process, its last line of output read as JSON; with `package_root`, `bayesval` is
    imported from there (a `checkout`) instead of this tree."""
    result = subprocess.run(command, check=True, capture_output=True, text=True, env=package_environment(package_root))
    return json.loads(result.stdout.strip().splitlines()[-1])


def side_by_side(command: list[str], against: str | None) -> dict[str, dict]:
    """`command`'s JSON (`run_json`) from this tree and, where `against` names a commit, from the package at it
    (`checkout`), each in a fresh process: keyed 'this tree' and the commit."""
    runs = {"this tree": run_json(command, None)}
    if against:
        with checkout(against) as tree:
            runs[against] = run_json(command, tree)
    return runs


def parsed_or_child(parser: argparse.ArgumentParser, child, option: str) -> argparse.Namespace | None:
    """The arguments of a benchmark whose measurement runs in fresh processes (`package_runs`): `parser` with
    --against REV and the hidden --child N added. In such a process (--child N) it prints `child(N, <--option>)` as
    JSON and returns None."""
    parser.add_argument("--against", metavar="REV", help="the commit whose package to compare with")
    parser.add_argument("--child", type=int, metavar="N", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.child, getattr(args, option))))
        return None
    return args


def package_runs(script: str, num_parties: int, option: str, value, against: str | None) -> dict[str, dict]:
    """`script --child num_parties --option value` (`parsed_or_child`) in this tree and at `against`
    (`side_by_side`)."""
    command = [sys.executable, script, "--child", str(num_parties), f"--{option}", str(value)]
    return side_by_side(command, against)


def run_child(case: str, mode: str, package_root: Path | None) -> dict:
    """One fresh process valuing `case` (`child`); with `package_root`, `bayesval` is imported from there."""
    return run_json([sys.executable, __file__, "--child", case, mode], package_root)


def compare(cases: list[str], rounds: int, paths: dict[str, tuple[str, Path | None]]) -> None:
    """Alternate the two `paths` (label: (the child's mode, package root or None for this tree)) over `rounds`;
    a 'cached' path's cache is filled by one untimed run of each case first."""
    for case in cases:
        for mode, root in paths.values():
            if mode == "cached":
                run_child(case, mode, root)
        seconds: dict[str, list[float]] = {label: [] for label in paths}
        cpu: dict[str, list[float]] = {label: [] for label in paths}
        values: dict[str, set] = {label: set() for label in paths}
        for round_ in range(rounds):
            for label, (mode, root) in paths.items():
                output = run_child(case, mode, root)
                seconds[label].append(output["seconds"])
                cpu[label].append(output.get("cpu_seconds", float("nan")))
                values[label].add(tuple(output["phi"]))
                print(
                    f"{case} round {round_ + 1} {label:11s} {output['seconds']:6.1f} s ({cpu[label][-1]:.1f} s CPU)  "
                    f"phi {output['phi']}",
                    flush=True,
                )
        (first, new), (second, old) = ((label, statistics.median(times)) for label, times in seconds.items())
        new_cpu, old_cpu = (statistics.median(times) for times in cpu.values())
        identical = len(set().union(*values.values())) == 1
        print(
            f"{case}: median {new:.1f} s {first}, {old:.1f} s {second}, ratio {old / new:.2f}x; CPU {new_cpu:.1f} s "
            f"against {old_cpu:.1f} s, ratio {old_cpu / new_cpu:.2f}x; values identical in every run: {identical}",
            flush=True,
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument(
        "--cases",
        nargs="+",
        choices=["syn", "diab", "demo", "trace", "short", "fit-trace", "fit-compile", "importance", "make-syn"],
        default=["syn", "diab"],
    )
    parser.add_argument("--against", metavar="REV", help="compare this working tree with the package at commit REV")
    parser.add_argument("--cache", action="store_true", help="programs from the persistent cache against compiled")
    parser.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        return child(*args.child)
    if args.cache:
        os.environ.pop("JAX_COMPILATION_CACHE_DIR", None)
        with tempfile.TemporaryDirectory() as cache:
            os.environ["BAYESVAL_CACHE_DIR"] = cache
            return compare(args.cases, args.rounds, {"cached": ("cached", None), "compiled": ("ahead", None)})
    if args.against is None:
        return compare(args.cases, args.rounds, {"ahead": ("ahead", None), "when called": ("called", None)})
    with checkout(args.against) as tree:
        compare(args.cases, args.rounds, {"today": ("ahead", None), args.against: ("ahead", tree)})


if __name__ == "__main__":
    main()
