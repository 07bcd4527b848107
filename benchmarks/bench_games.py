"""Permutation sampling: utility evaluations per second, bayesval's game layer vs pyDVL, same game, same run.

The game: weighted voting on n = 100 players (weights 1..10 drawn once, quota half the total weight), v(S) = 1 where
S's weight reaches the quota. bayesval evaluates it as a jitted JAX utility on batches of masks; pyDVL 0.10 as a
`pydvl.valuation.games.Game` (its toy-game utility) under `ShapleyValuation` with its `PermutationSampler`, one
process (joblib n_jobs=1), its own stopping rule `MaxTime`. Both count the coalitions their utility valued.

pyDVL 0.10 pins numpy < 2, so it lives in its own virtual environment, run here as a subprocess:

    python -m venv /tmp/pydvl-env
    /tmp/pydvl-env/bin/pip install pyDVL==0.10.0     # or the wheel: pyDVL-0.10.0-py3-none-any.whl

    python benchmarks/bench_games.py [--players 100] [--seconds 10] [--pydvl-python /tmp/pydvl-env/bin/python]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time

import numpy as np

PYDVL_HALF = """
import json, sys, time
import numpy as np
from joblib import parallel_config
from pydvl.valuation import MaxTime, PermutationSampler, ShapleyValuation
from pydvl.valuation.games import Game

weights, quota, seconds = np.array(json.loads(sys.argv[1])), float(sys.argv[2]), float(sys.argv[3])

class WeightedVoting(Game):
    def __init__(self):
        super().__init__(len(weights), score_range=(0, 1))
        self.calls = 0

    def _score(self, X):
        self.calls += 1
        return float(weights[X.ravel().astype(int)].sum() >= quota)

game = WeightedVoting()
valuation = ShapleyValuation(game.u, PermutationSampler(seed=0), is_done=MaxTime(seconds), progress=False)
with parallel_config(n_jobs=1):
    start = time.perf_counter()
    valuation.fit(game.data)
    elapsed = time.perf_counter() - start
print(json.dumps({"evaluations": game.calls, "seconds": elapsed}))
"""


def voting_game(num_players: int, seed: int = 0) -> tuple[np.ndarray, float]:
    weights = np.random.default_rng(seed).integers(1, 11, num_players).astype(np.float64)
    return weights, weights.sum() / 2


def bayesval_rate(weights: np.ndarray, quota: float, seconds: float, batch_size: int) -> dict:
    import jax
    import jax.numpy as jnp

    from bayesval.games.samplers import PermutationSampler
    from bayesval.games.semivalues import semivalue
    from bayesval.games.stopping import MaxEvaluations, MaxTime

    table = jnp.asarray(weights)
    utility = jax.jit(lambda key, masks: (masks @ table >= quota).astype(jnp.float64))
    n, sampler = len(weights), PermutationSampler()
    semivalue(utility, n, 0, sampler=sampler, batch_size=batch_size, stop=MaxEvaluations(1))  # compile
    start = time.perf_counter()
    result = semivalue(utility, n, 1, sampler=sampler, batch_size=batch_size, stop=MaxTime(seconds))
    elapsed = time.perf_counter() - start
    return {"evaluations": result.state.evaluations, "seconds": elapsed, "max_stderr": float(result.stderr.max())}


def pydvl_rate(weights: np.ndarray, quota: float, seconds: float, python: str) -> dict:
    command = [python, "-c", PYDVL_HALF, json.dumps(weights.tolist()), str(quota), str(seconds)]
    output = subprocess.run(command, capture_output=True, text=True, check=True).stdout
    return json.loads(output.strip().splitlines()[-1])


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--players", type=int, default=100)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--batch-size", type=int, default=256, help="bayesval permutations per batch")
    parser.add_argument("--pydvl-python", default="/tmp/pydvl-env/bin/python")
    args = parser.parse_args(argv)
    weights, quota = voting_game(args.players)
    ours = bayesval_rate(weights, quota, args.seconds, args.batch_size)
    theirs = pydvl_rate(weights, quota, args.seconds, args.pydvl_python)
    rate_ours, rate_theirs = (r["evaluations"] / r["seconds"] for r in (ours, theirs))
    print(f"weighted voting, n = {args.players}, permutation sampling, {args.seconds:g} s each")
    for name, run, rate in (("bayesval", ours, rate_ours), ("pyDVL", theirs, rate_theirs)):
        print(f"  {name:9s} {run['evaluations']:>12,} evaluations in {run['seconds']:.2f} s: {rate:>14,.0f} / s")
    print(f"  ratio     {rate_ours / rate_theirs:,.0f}x")


if __name__ == "__main__":
    sys.exit(main())
