"""Coalition surprises by importance sampling from the Laplace fit (`surprise='importance'`) against today's Gibbs
chains (`surprise='mcmc'`), side by side in one run: per coalition, both estimates with their standard errors over
repeats, z, the importance route's Pareto k-hat and which route valued it; each route's seconds (a first call that
compiles, then the timed call on other keys) and their ratio.

    python benchmarks/bench_importance.py --setting syn                    # Syn's 7 coalitions, its epsilons
    python benchmarks/bench_importance.py --setting syn --epsilon 1e7      # negligible noise: also the closed form
    python benchmarks/bench_importance.py --setting scale --parties 12 --coalitions 16
                                                                           # Syn parties of 100 points at epsilon
                                                                           # 0.5 (bench_reference.py's setting, n
                                                                           # parties), coalitions of each size

`--end-to-end` (Syn) runs `bv.valuate` with each route instead (exact Shapley over the 7 coalitions, --repeats
repeats, compilation included, the importance route first) and prints the Shapley values, their largest standard
error and each route's seconds.

`--setting scale` values up to `--coalitions` coalitions of each size k in --sizes (default 1, n/2, n) and prints the
milliseconds per coalition of each route (2 repeats, the sampled game's budget) and their ratio.
"""

from __future__ import annotations

import argparse
import itertools
import os
import sys
import time
import warnings
from pathlib import Path

import jax
import numpy as np

import bayesval as bv
from bayesval.datasets.synthetic import make_syn
from bayesval.games.shapley import coalition_masks
from bayesval.inference.data import NoiseAwareData
from bayesval.parties import release_all
from bayesval.parties.surprise import CoalitionSurprise, per_repeat

sys.path.insert(0, str(Path(__file__).parent))
from bench_rao_blackwell import closed_forms  # noqa: E402


def syn_releases(epsilon: float | None):
    """Syn's parties (100 / 200 / 400 points) at its epsilons (0.2, 0.1, 0.2; the demo's) or all at `epsilon`."""
    syn = make_syn(seed=0)
    epsilons = (0.2, 0.1, 0.2) if epsilon is None else (epsilon,) * 3
    parties = [
        bv.Party(X, y, epsilon=e, rdp_order=2.0, bounds=syn.bounds, name=f"party {i + 1}", noise_seed=900 + i)
        for i, ((X, y), e) in enumerate(zip(syn.parties, epsilons))
    ]
    return parties, release_all(bv.models.LinearRegression(), parties)


def scale_releases(num_parties: int):
    """Syn parties of 100 points at epsilon 0.5 (seed 3, noise seeds 7100 + i: bench_reference.py's setting)."""
    syn = make_syn(seed=3, sizes=(100,) * num_parties)
    parties = [
        bv.Party(X, y, epsilon=0.5, bounds=syn.bounds, name=f"party {i + 1}", noise_seed=7100 + i)
        for i, (X, y) in enumerate(syn.parties)
    ]
    return parties, release_all(bv.models.LinearRegression(), parties)


def timed_surprise(route: str, data, masks, config, key: int):
    """(CoalitionSurprise after valuing `masks`, seconds of that call)."""
    game = CoalitionSurprise(
        bv.models.LinearRegression(), data, config, 4, jax.random.key(key), len(masks), surprise=route
    )
    start = time.perf_counter()
    game(masks)
    return game, time.perf_counter() - start


def side_by_side(data, masks, warm, config, closed=None) -> None:
    """Both routes on `masks` after a compiling call on `warm`, each coalition's values and the time ratio."""
    results = {}
    for route in ("importance", "mcmc"):
        _, first = timed_surprise(route, data, warm, config, key=100)
        game, seconds = timed_surprise(route, data, masks, config, key=0)
        results[route] = (game, seconds, first)
        print(f"{route}: first call (compiles) {first:.1f} s, timed call {seconds:.1f} s", flush=True)
    fast, slow = results["importance"][0], results["mcmc"][0]
    routes = dict(zip(map(tuple, fast.diagnostics["coalitions"]), fast.diagnostics["route"]))
    k_hats = dict(zip(map(tuple, fast.diagnostics["coalitions"]), fast.diagnostics["k_hat"]))
    z_scores = []
    print(
        "coalition              importance (± s.e.)   Gibbs (± s.e.)      z      k-hat  route"
        + ("   closed" * bool(closed))
    )
    for index, mask in enumerate(masks):
        code = int(np.sum(mask * 2 ** np.arange(len(mask))))
        ours, ours_se = per_repeat(fast.values[code][:, None])
        gibbs, gibbs_se = per_repeat(slow.values[code][:, None])
        z = (ours[0] - gibbs[0]) / np.hypot(ours_se[0], gibbs_se[0])
        z_scores.append(z)
        members = tuple(int(i) + 1 for i in np.flatnonzero(mask))
        line = (
            f"{str(members):22s} {ours[0]:7.4f} ± {ours_se[0]:.4f}    {gibbs[0]:7.4f} ± {gibbs_se[0]:.4f}  "
            f"{z:+6.2f}  {k_hats[tuple(mask.astype(int))]:5.2f}  {routes[tuple(mask.astype(int))]}"
        )
        if closed is not None:
            line += f"   {closed[index]:.4f} ({100 * (ours[0] / closed[index] - 1):+.2f} %)"
        print(line)
    ratio = results["mcmc"][1] / results["importance"][1]
    print(f"RMS z {np.sqrt(np.mean(np.square(z_scores))):.2f}, max |z| {np.max(np.abs(z_scores)):.2f}")
    print(f"Gibbs / importance time, timed calls: {ratio:.2f}  (load average {os.getloadavg()[0]:.1f})")


def end_to_end(releases, config) -> None:
    """`bv.valuate` of the releases by each route, compilation included: values, largest stderr, seconds."""
    seconds = {}
    for route in ("importance", "mcmc"):
        start = time.perf_counter()
        result = bv.valuate(bv.models.LinearRegression(), releases, key=0, config=config, surprise=route)
        seconds[route] = time.perf_counter() - start
        values = ", ".join(f"{value:.4f} ± {error:.4f}" for value, error in zip(result.values, result.stderr))
        print(f"{route}: {seconds[route]:.1f} s, phi {values}, max stderr {result.stderr.max():.4f}", flush=True)
    print(f"mcmc / importance time: {seconds['mcmc'] / seconds['importance']:.2f} (load {os.getloadavg()[0]:.1f})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--setting", choices=("syn", "scale"), default="syn")
    parser.add_argument("--epsilon", type=float, default=None, help="Syn: every party's epsilon (default: Syn's)")
    parser.add_argument("--parties", type=int, default=12, help="scale: the number of parties")
    parser.add_argument("--sizes", type=int, nargs="*", default=None, help="scale: coalition sizes")
    parser.add_argument("--coalitions", type=int, default=8, help="scale: coalitions of each size")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--end-to-end", action="store_true", help="Syn: bv.valuate with each route")
    args = parser.parse_args()
    warnings.simplefilter("ignore", UserWarning)
    config = bv.SamplerConfig.preset("fast", "gibbs").with_(num_repeats=args.repeats, progress_bar=False, reruns=0)
    print(f"jax {jax.__version__}, {jax.default_backend()}, load average {os.getloadavg()}, {time.ctime()}")
    if args.setting == "syn" and args.end_to_end:
        end_to_end(syn_releases(args.epsilon)[1], config)
        return
    if args.setting == "syn":
        parties, releases = syn_releases(args.epsilon)
        data = NoiseAwareData.from_releases(releases)
        masks = coalition_masks(3)
        model = bv.models.LinearRegression()
        closed = closed_forms(model, parties, masks) if args.epsilon is not None and args.epsilon >= 1e5 else None
        side_by_side(data, masks, masks[[0, 6]], config, closed)
        return
    n = args.parties
    _, releases = scale_releases(n)
    data = NoiseAwareData.from_releases(releases)
    for size in args.sizes or sorted({1, n // 2, n}):
        combos = list(itertools.islice(itertools.combinations(range(n), size), 2 * args.coalitions))
        masks = np.zeros((len(combos), n), bool)
        for row, members in enumerate(combos):
            masks[row, list(members)] = True
        timed, warm = masks[: args.coalitions], masks[args.coalitions :] if len(masks) > args.coalitions else masks
        print(f"--- {n} parties, coalitions of {size}: {len(timed)} timed")
        side_by_side(data, timed, warm[:2], config)


if __name__ == "__main__":
    main()
