"""The importance route's surprise of the six coalitions of `bench_reference.py` against NumPyro's NUTS on the
CLT-marginal model (issue 61), the route as it is beside a variant of its proposal's adaptation, each in a fresh
process: for each coalition, the mean of the route's k-NN surprise over `--repeats` keys (its first attempt, 2,048
draws, packed as a 6-party valuation packs it), its standard error over the keys, z against NUTS and the median
effective draws; then RMS z and the largest |z| over the six.

* `route`: `bayesval` as it is.
* `rerun`: each row drawn again as the route's first rerun draws it (attempt 1: four times the inner draws, from its
  fits, on other keys than the first attempt's), after its first attempt; a variant's constants may follow after a
  comma (`rerun,ADAPT_ROUNDS=2`).
* a variant: constants of `bayesval.inference.importance` set, `NAME=value` separated by commas, for instance
  `ADAPT_ROUNDS=2` (two moves of the proposal: the route before 2026-12-04, with Bessel's correction) or
  `ADAPT_ROUNDS=4,ADAPT_SHARE=8` (four moves from rounds of half the draws).

    python benchmarks/bench_route_accuracy.py                     # route and ADAPT_ROUNDS=2, 12 keys from 500
    python benchmarks/bench_route_accuracy.py --repeats 16 --key 700 --variants route ADAPT_ROUNDS=3
    python benchmarks/bench_route_accuracy.py --variants rerun

Six Syn parties of 100 points at epsilon 0.5 (seed 3, noise seeds 7100 + i). The NUTS values and their standard
errors are `bench_reference.py`'s recorded ones (`NUTS_SURPRISE`).
"""

from __future__ import annotations

import argparse
import json
import sys
import warnings
from pathlib import Path

import numpy as np

NUM_DRAWS = 2048


def use_variant(variant: str) -> None:
    """Patch `bayesval.inference.importance` in this process to `variant` (the module docstring)."""
    from bayesval.inference import importance

    for setting in [] if variant == "route" else variant.split(","):
        name, value = setting.split("=")
        setattr(importance, name, type(getattr(importance, name))(value))


def child(variant: str, key: int, repeats: int) -> dict:
    """The route's k-NN surprise of each coalition over `repeats` keys from `key`, under `variant`:
    {"kl": [[...] a coalition], "ess": [...]}."""
    import jax

    import bayesval as bv
    from bayesval.inference.data import NoiseAwareData
    from bayesval.parties import release_all
    from bayesval.parties.importance import IMPORTANCE_WINDOW, _kl
    from bayesval.parties.plan import member_width

    sys.path.insert(0, str(Path(__file__).parent))
    from bench_reference import COALITIONS, reference_parties

    warnings.simplefilter("ignore")
    name, _, settings = variant.partition(",")
    rerun = name == "rerun"
    use_variant((settings or "route") if rerun else variant)
    model = bv.models.LinearRegression()
    data = NoiseAwareData.from_releases(release_all(model, reference_parties()))
    log_density = model.prior_log_density(data)
    keys = jax.random.split(jax.random.key(key), repeats)
    rerun_keys = jax.random.split(jax.random.fold_in(jax.random.key(key), 1), repeats)
    result = {"kl": [], "ess": []}
    for members in COALITIONS:
        packed, mask = data.members(np.isin(np.arange(6), members), member_width(len(members), 6))
        rows, masks = NoiseAwareData.per_row([packed] * repeats), np.repeat(mask[None], repeats, 0)
        drawn = model.importance_draws(keys, rows, masks, NUM_DRAWS, 0)
        if rerun:
            drawn = model.importance_draws(rerun_keys, rows, masks, NUM_DRAWS, 1)
        kl = _kl(drawn.draws[:, None], 4, log_density, min(IMPORTANCE_WINDOW, NUM_DRAWS // 4))
        result["kl"].append(np.asarray(kl).tolist())
        result["ess"].append(float(np.median(drawn.ess)))
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=12, help="keys a coalition")
    parser.add_argument("--key", type=int, default=500, help="the keys are split from this one")
    parser.add_argument("--variants", nargs="+", default=["route", "ADAPT_ROUNDS=2"])
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.child, args.key, args.repeats)))
        return
    sys.path.insert(0, str(Path(__file__).parent))
    from bench_compile import run_json
    from bench_reference import COALITIONS, NUTS_SURPRISE, NUTS_SURPRISE_STDERR

    command = [sys.executable, __file__, "--key", str(args.key), "--repeats", str(args.repeats), "--child"]
    runs = {variant: run_json(command + [variant], None) for variant in args.variants}
    print(f"{args.repeats} keys from {args.key}; z against NUTS (its own standard error included)")
    print("| coalition | NUTS | " + " | ".join(runs) + " |")
    print("|---|---|" + "---|" * len(runs))
    zs = {variant: [] for variant in runs}
    for index, (members, reference, stderr) in enumerate(zip(COALITIONS, NUTS_SURPRISE, NUTS_SURPRISE_STDERR)):
        cells = []
        for variant, run in runs.items():
            kl = np.array(run["kl"][index])
            mean, error = kl.mean(), kl.std(ddof=1) / np.sqrt(len(kl))
            z = (mean - reference) / np.hypot(error, stderr)
            zs[variant].append(z)
            cells.append(f"{mean:.3f} ± {error:.3f} (z {z:+.2f}, ESS {run['ess'][index]:.0f})")
        label = "{" + ", ".join(str(i + 1) for i in members) + "}"
        print(f"| {label} | {reference:.3f} ± {stderr:.3f} | " + " | ".join(cells) + " |")
    summary = [f"{np.sqrt(np.mean(np.square(z))):.2f}, {np.max(np.abs(z)):.2f}" for z in zs.values()]
    print("| RMS z, largest \\|z\\| | | " + " | ".join(summary) + " |")


if __name__ == "__main__":
    main()
