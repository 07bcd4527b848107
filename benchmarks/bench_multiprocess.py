"""One Syn valuation (6 parties, all 63 coalitions) in one process against the same valuation split over two
processes on this machine (`jax.distributed`, CPU collectives by gloo; docs/multihost.md), side by side.

    python benchmarks/bench_multiprocess.py [--parties 6] [--chains 4] [--warmup 100] [--samples 200] [--repeats 3]
    python benchmarks/bench_multiprocess.py --nuts   # NUTS: docs/user_models.md's valuation, values compared

Each run is a fresh set of processes; each process values the game twice, with keys 0 and 1: the first valuation's
time includes tracing and compiling the Gibbs program, the second is sampling alone. Runs:

* one process, free to use every core (XLA's own threads): what a user gets without doing anything;
* two processes, unpinned (the OS places their threads);
* with --runs 4 also two processes each pinned to its own core (`os.sched_setaffinity`) and one process pinned to
  one core: at 6 parties these hung in XLA's thread pool (docs/benchmarks.md), so they are not run by default.

Every process prints its times; the run's time is its slowest process. Both processes' values are checked equal
to each other, and to the one-process values to float64 round-off (the largest relative difference is printed).
With --nuts, the runs value the example of docs/user_models.md (NUTS, 7 coalitions x 4 repeats) once instead.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import socket
import subprocess
import sys
import tempfile
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def worker(args) -> None:
    """One process of a run: pin, join the run's processes (if several), value twice, write the times and values."""
    if args.core is not None:
        os.sched_setaffinity(0, {args.core})
    started = time.perf_counter()
    import jax

    if args.processes > 1:
        jax.config.update("jax_cpu_collectives_implementation", "gloo")
        jax.distributed.initialize(f"127.0.0.1:{args.port}", num_processes=args.processes, process_id=args.process)
    import warnings

    import bayesval as bv
    from bayesval.datasets.synthetic import make_syn

    if args.nuts:
        return _user_model_example(args.out)
    syn = make_syn(seed=0, sizes=(200,) * args.parties)
    releases = [
        bv.Party(X, y, epsilon=1.0, bounds=syn.bounds, name=f"p{i}", noise_seed=100 + i).release()
        for i, (X, y) in enumerate(syn.parties)
    ]
    config = bv.SamplerConfig(
        num_chains=args.chains,
        num_warmup=args.warmup,
        num_samples=args.samples,
        num_repeats=args.repeats,
        progress_bar=False,
    )
    times, values = [], []
    for key in (0, 1):
        start = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            result = bv.valuate(bv.models.LinearRegression(), releases, key=key, config=config)
        times.append(time.perf_counter() - start)
        values.append(result.coalition_values.tolist())
    report = {"first": times[0], "second": times[1], "total": time.perf_counter() - started, "values": values}
    with open(args.out, "w") as file:
        json.dump(report, file)


def _user_model_example(out: str) -> None:
    """The valuation of docs/user_models.md's example (NUTS), timed, its coalition values written to `out`."""
    with open(os.path.join(ROOT, "docs", "user_models.md")) as file:
        code = re.search(r"```python\n(.*?)```", file.read(), re.S).group(1).replace("print(result.to_dataframe())", "")
    start, namespace = time.perf_counter(), {}
    exec(compile(code, "docs/user_models.md", "exec"), namespace)
    values = namespace["result"].coalition_values.tolist()
    seconds = time.perf_counter() - start
    with open(out, "w") as file:
        json.dump({"first": seconds, "second": seconds, "total": seconds, "values": [values]}, file)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run(args, processes: int, cores: list[int | None]) -> dict:
    """Start `processes` workers (process i pinned to cores[i], None: unpinned) and wait for them all."""
    port, folder = _free_port(), tempfile.mkdtemp()
    outs = [os.path.join(folder, f"{i}.json") for i in range(processes)]
    env = dict(os.environ, JAX_PLATFORMS="cpu", PYTHONPATH=ROOT)
    env.pop("XLA_FLAGS", None)
    start = time.perf_counter()
    workers = [
        subprocess.Popen(
            [sys.executable, __file__, "--worker", "--processes", str(processes), "--process", str(i)]
            + ["--port", str(port), "--out", outs[i]]
            + ([] if cores[i] is None else ["--core", str(cores[i])])
            + [f"--{name}={getattr(args, name)}" for name in ("parties", "chains", "warmup", "samples", "repeats")]
            + (["--nuts"] if args.nuts else []),
            env=env,
            stderr=subprocess.DEVNULL,
        )
        for i in range(processes)
    ]
    if any(worker.wait() for worker in workers):
        raise RuntimeError("a worker failed")
    wall = time.perf_counter() - start
    reports = [json.load(open(out)) for out in outs]
    for report in reports[1:]:
        assert report["values"] == reports[0]["values"], "the processes disagree"
    return {
        "wall": wall,
        "first": max(r["first"] for r in reports),
        "second": max(r["second"] for r in reports),
        "values": np.array(reports[0]["values"]),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--parties", type=int, default=6)
    parser.add_argument("--chains", type=int, default=4)
    parser.add_argument("--warmup", type=int, default=100)
    parser.add_argument("--samples", type=int, default=200)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--runs", type=int, default=2, help="the first RUNS of the four runs (the docstring's order)")
    parser.add_argument("--nuts", action="store_true", help="value docs/user_models.md's NUTS example instead")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    for name, kind in (("processes", int), ("process", int), ("port", int), ("out", str), ("core", int)):
        parser.add_argument(f"--{name}", type=kind, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        return worker(args)
    if args.nuts:
        one, two = run(args, 1, [None]), run(args, 2, [None, None])
        same = np.array_equal(one["values"], two["values"])
        difference = np.max(np.abs(two["values"] - one["values"]) / np.abs(one["values"]))
        print(f"docs/user_models.md (NUTS): 1 process {one['wall']:.1f} s, 2 processes {two['wall']:.1f} s (wall)")
        print(f"coalition values equal bit for bit: {same}; largest relative difference {difference:.1e}")
        return
    rows = (2**args.parties - 1) * args.repeats
    print(
        f"Syn, {args.parties} parties, {2**args.parties - 1} coalitions x {args.repeats} repeats = {rows} rows, "
        f"{args.chains} chains of {args.warmup} + {args.samples} sweeps; {os.cpu_count()} CPU cores"
    )
    plans = {
        "1 process, all cores": (1, [None]),
        "2 processes, unpinned": (2, [None, None]),
        "2 processes, 1 core each": (2, [0, 1]),
        "1 process, 1 core": (1, [0]),
    }
    print(f"{'run':<26} {'wall (s)':>9} {'1st valuate':>12} {'2nd valuate':>12} {'speed-up':>9} {'rel diff':>9}")
    base = None
    for name, (processes, cores) in list(plans.items())[: args.runs]:
        result = run(args, processes, cores)
        base = base or result
        difference = np.max(np.abs(result["values"] - base["values"]) / np.abs(base["values"]))
        print(
            f"{name:<26} {result['wall']:9.1f} {result['first']:12.1f} {result['second']:12.1f} "
            f"{base['second'] / result['second']:8.2f}x {difference:9.1e}",
            flush=True,
        )


if __name__ == "__main__":
    main()
