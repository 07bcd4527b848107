"""Coalitions with two posterior modes, drawn by importance sampling about their highest mode alone (the route
before 2026-12-02) and about both (`bayesval.inference.importance.joint_modes`), side by side in one run.

The 24 Syn parties of `bench_scale.py` (100 points each, epsilon 0.5, noise seeds 100 + i). The coalitions: the
three that a 24-party valuation sent to the chains (k-hat above the threshold after the reruns; the chains then
left two of them unconverged), and three more whose second mode a scan of that valuation's coalitions found. For
each: the modes' theta, their Laplace masses' shares, and per route over `--keys` keys of the first attempt: the
largest k-hat, the least effective draws, the share of the resampled draws nearer the second mode, and the k-NN
surprise (mean +- s.e. over the keys).

    python benchmarks/bench_two_modes.py --keys 4
"""

import argparse
import sys
import time
import warnings
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

import bayesval as bv
from bayesval.inference import importance
from bayesval.inference.data import NoiseAwareData
from bayesval.parties.importance import IMPORTANCE_WINDOW, _kl
from bayesval.parties.plan import member_width

sys.path.insert(0, str(Path(__file__).parent))
from bench_scale import releases_of  # noqa: E402

NUM_PARTIES, NUM_DRAWS = 24, 2048
COALITIONS = (
    (6, 9, 12, 14, 23),  # to the chains (k-hat 1.74 after its rerun), which reached R-hat 1.024
    (2, 7, 8, 14, 19, 21),  # to the chains (k-hat 0.80)
    (7, 10, 13, 14, 15, 22, 23),  # to the chains (k-hat 1.23), which reached R-hat 1.052 and 64 effective draws
    (2, 4, 12, 14),  # code 20500: a second mode 1.07 nats above the first, trusted about the first alone
    (2, 4, 6, 12, 14),  # code 20564
    (2, 4, 6, 12, 14, 23),  # code 8409172
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--keys", type=int, default=4, help="keys a coalition and route (first attempts)")
    args = parser.parse_args()
    warnings.simplefilter("ignore", UserWarning)
    model = bv.models.LinearRegression()
    data = NoiseAwareData.from_releases(releases_of(NUM_PARTIES))
    priors, statistic = model.priors(2), model.statistic(2)
    log_density = model.prior_log_density(data)
    window = min(IMPORTANCE_WINDOW, NUM_DRAWS // 4)
    print(
        "coalition                     route      modes' theta (w1)  Laplace share  max k-hat  min ESS  "
        "second-mode share  KL (nats)        s"
    )
    for members in COALITIONS:
        mask = np.isin(np.arange(NUM_PARTIES), members)
        width = member_width(len(members), NUM_PARTIES)
        packed, packed_mask = data.members(mask, width)
        found = importance.joint_modes(packed, packed_mask, priors.model, priors.data, statistic)
        masses = np.array([float(importance.log_mass(mode)) for mode in found])
        shares = np.exp(masses - masses.max()) / np.exp(masses - masses.max()).sum()
        thetas = np.array([np.asarray(mode.theta) for mode in found])
        inner_draws = importance.inner_draw_count(width)
        keys = jax.random.split(jax.random.key(11), args.keys)
        for route, modes in (("one mode", found[:1]), ("both modes", found)):
            start = time.perf_counter()
            stacked = jax.tree.map(lambda *parts: jnp.stack(parts), *modes)
            rows = [
                importance._row_draws(
                    key, packed, packed_mask, priors.model, priors.data, statistic, stacked, NUM_DRAWS, inner_draws
                )
                for key in keys
            ]
            draws = np.stack([np.asarray(row[0]) for row in rows])
            k_hat, ess = np.array([float(row[1]) for row in rows]), np.array([float(row[2]) for row in rows])
            kl = np.asarray(_kl(jnp.asarray(draws)[:, None], 4, log_density, window))
            if len(thetas) > 1:  # a draw is nearer the second mode where its w1 is (the modes' w1 differ in sign)
                second = np.abs(draws[..., 0] - thetas[1, 0]) < np.abs(draws[..., 0] - thetas[0, 0])
                second_share = f"{second.mean():.2f} ({second.mean(axis=1).min():.2f}-{second.mean(axis=1).max():.2f})"
            else:
                second_share = "-"
            label = "{" + ", ".join(map(str, members)) + "}"
            print(
                f"{label:29s} {route:10s} {np.array2string(thetas[:, 0], precision=2):18s} "
                f"{np.array2string(shares, precision=2):14s} {k_hat.max():9.2f} {ess.min():8.0f}  {second_share:18s} "
                f"{kl.mean():.3f} +- {kl.std(ddof=1) / np.sqrt(len(kl)):.3f}   {time.perf_counter() - start:5.1f}",
                flush=True,
            )


if __name__ == "__main__":
    main()
