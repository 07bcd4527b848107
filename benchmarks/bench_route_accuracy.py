"""The importance route's surprise of the six coalitions of `bench_reference.py` against NumPyro's NUTS on the
CLT-marginal model (issue 61), the route as it is beside a variant of its proposal's adaptation, each in a fresh
process: for each coalition, the mean of the route's k-NN surprise over `--repeats` keys (its first attempt, 2,048
draws, packed as a 6-party valuation packs it), its standard error over the keys, z against NUTS and the median
effective draws; then RMS z and the largest |z| over the six.

* `route`: `bayesval` as it is.
* `rounds4`: the proposal moved 4 times to its weighted draws' moments before the last draws (`ADAPT_ROUNDS`, 2).
* `bessel`: each member's spread about its mean at one theta, read from its K inner draws there, scaled by
  K / (K - 1) (Bessel's correction) before the data models' proposal is moved to it.
* `rounds4-bessel`: both.

    python benchmarks/bench_route_accuracy.py                     # route and rounds4-bessel, 12 keys from 500
    python benchmarks/bench_route_accuracy.py --repeats 16 --key 700 --variants route rounds4 bessel rounds4-bessel

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
VARIANTS = ("route", "rounds4", "bessel", "rounds4-bessel")


def use_variant(variant: str) -> None:
    """Patch `bayesval.inference.importance` in this process to `variant` (the module docstring)."""
    import jax.numpy as jnp

    from bayesval.inference import importance

    if "rounds4" in variant:
        importance.ADAPT_ROUNDS = 4
    if "bessel" in variant:
        moved = importance._moved

        def corrected(proposal, thetas, omegas, theta_weights, inner_weights, mask):
            """The route's `_moved` of draws whose deviations from each theta's mean are sqrt(K / (K - 1)) times
            wider: its covariance of omega then carries the within-theta part K / (K - 1) times, the rest as it was."""
            num_inner = omegas.shape[1]
            means = jnp.einsum("skn,sknw->snw", inner_weights, omegas)[:, None]
            widened = means + np.sqrt(num_inner / (num_inner - 1)) * (omegas - means)
            return moved(proposal, thetas, widened, theta_weights, inner_weights, mask)

        importance._moved = corrected


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
    use_variant(variant)
    model = bv.models.LinearRegression()
    data = NoiseAwareData.from_releases(release_all(model, reference_parties()))
    log_density = model.prior_log_density(data)
    keys = jax.random.split(jax.random.key(key), repeats)
    result = {"kl": [], "ess": []}
    for members in COALITIONS:
        packed, mask = data.members(np.isin(np.arange(6), members), member_width(len(members), 6))
        drawn = model.importance_draws(
            keys, NoiseAwareData.per_row([packed] * repeats), np.repeat(mask[None], repeats, 0), NUM_DRAWS, 0
        )
        kl = _kl(drawn.draws[:, None], 4, log_density, min(IMPORTANCE_WINDOW, NUM_DRAWS // 4))
        result["kl"].append(np.asarray(kl).tolist())
        result["ess"].append(float(np.median(drawn.ess)))
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=12, help="keys a coalition")
    parser.add_argument("--key", type=int, default=500, help="the keys are split from this one")
    parser.add_argument("--variants", nargs="+", choices=VARIANTS, default=["route", "rounds4-bessel"])
    parser.add_argument("--child", choices=VARIANTS, help=argparse.SUPPRESS)
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
