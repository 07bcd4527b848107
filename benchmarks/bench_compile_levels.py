"""What XLA's backend optimisation level costs and saves for the importance route's programs run many times: the row
program (`bayesval.inference.importance._row_draws`) and a coalition's fit (`_mode`), each compiled at XLA's default
level and at level 1 (as the Gibbs sweep program compiles), in fresh processes alternating, with the seconds XLA
spent compiling each and the median time of a row (its coalition's fits and its draws) and of the fits alone after it.

    python benchmarks/bench_compile_levels.py --parties 3 12 --rounds 2

Syn parties of 100 points (Syn's default three parties at 3) at epsilon 0.5, 12 random coalitions holding the first
party, 2,048 draws a row as the route draws. No compilation cache (`BAYESVAL_CACHE_DIR=off`).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

LEVELS = {"default": {}, "level 1": {"xla_backend_optimization_level": 1}}
ROWS = 12
DRAWS = 2048


def child(num_parties: int, options: dict) -> dict:
    """Compile and time the row and fit programs at `options` in this process."""
    import jax
    import jax.monitoring
    import numpy as np

    import bayesval as bv
    from bayesval.datasets.synthetic import make_syn
    from bayesval.inference import importance
    from bayesval.inference.data import NoiseAwareData
    from bayesval.parties import release_all

    for program in (importance._row_draws, importance._mode):
        program._options.clear()
        program._options.update(options)
    compiled: dict[str, float] = {}

    def record(event: str, seconds: float, fun_name: str = "", **_) -> None:
        if event == "/jax/core/compile/backend_compile_duration":
            compiled[fun_name] = compiled.get(fun_name, 0.0) + seconds

    jax.monitoring.register_event_duration_secs_listener(record)
    syn = make_syn(seed=0) if num_parties == 3 else make_syn(seed=0, sizes=(100,) * num_parties)
    parties = [
        bv.Party(X, y, epsilon=0.5, bounds=syn.bounds, name=f"party {i + 1}", noise_seed=900 + i)
        for i, (X, y) in enumerate(syn.parties)
    ]
    model = bv.models.LinearRegression()
    data = NoiseAwareData.from_releases(release_all(model, parties))
    priors, statistic = model.priors(2), model.statistic(2)
    masks = np.random.default_rng(0).random((ROWS + 1, num_parties)) < 0.7
    masks[:, 0] = True
    keys = jax.random.split(jax.random.key(0), ROWS + 1)
    row_data = NoiseAwareData(*(np.asarray(part)[None] for part in data))
    model.draws_by_importance(keys[:1], row_data, masks[:1], DRAWS)  # the first row: compiles both programs
    fits, rows = [], []
    for row in range(1, ROWS + 1):
        start = time.perf_counter()
        importance.joint_modes(data, masks[row], priors.model, priors.data, statistic)
        fits.append(time.perf_counter() - start)
        start = time.perf_counter()
        model.draws_by_importance(keys[row : row + 1], row_data, masks[row : row + 1], DRAWS)
        rows.append(time.perf_counter() - start)
    return {
        "row compile": compiled.get("jit(_row_draws)", 0.0),
        "fit compile": compiled.get("jit(_mode)", 0.0),
        "row ms": 1000 * statistics.median(rows),
        "fits ms": 1000 * statistics.median(fits),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--parties", type=int, nargs="+", default=[3, 12])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(int(args.child[0]), LEVELS[args.child[1]])))
        return
    environment = dict(os.environ, BAYESVAL_CACHE_DIR="off")
    for num_parties in args.parties:
        runs: dict[str, list[dict]] = {label: [] for label in LEVELS}
        for _ in range(args.rounds):
            for label in LEVELS:
                command = [sys.executable, __file__, "--child", str(num_parties), label]
                output = subprocess.run(command, check=True, capture_output=True, text=True, env=environment).stdout
                runs[label].append(json.loads(output.strip().splitlines()[-1]))
        print(f"\n{num_parties} parties, {args.rounds} fresh processes each, {ROWS} rows of {DRAWS} draws after one:")
        print("| | row program compile (s) | fit program compile (s) | a row, fits and draws (ms) | the fits (ms) |")
        print("|---|---|---|---|---|")
        for label, outputs in runs.items():
            cells = [", ".join(f"{run[name]:.1f}" if "compile" in name else f"{run[name]:.0f}" for run in outputs)
                     for name in ("row compile", "fit compile", "row ms", "fits ms")]  # fmt: skip
            print(f"| {label} | " + " | ".join(cells) + " |")
        medians = {label: {name: statistics.median(run[name] for run in outputs) for name in outputs[0]}
                   for label, outputs in runs.items()}  # fmt: skip
        for name in ("row compile", "fit compile", "row ms", "fits ms"):
            print(f"{name}: default / level 1 = {medians['default'][name] / medians['level 1'][name]:.2f}x")


if __name__ == "__main__":
    main()
