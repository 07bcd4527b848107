"""How the importance route's proposal settles, round by round (issue 61): for each of the six coalitions of
`bench_reference.py`, the proposal starts at the Laplace fits (`importance._laplace_proposal`) and is moved
`--rounds` times to the moments of a round of 512 weighted draws (`importance._weighted`, `importance._moments`,
the route's own functions, one round at a time). Printed per round, medians over `--keys` keys: the round's effective
draws (Pareto-smoothed weights) and k-hat, the weighted mean of the variance of each theta's estimated log
likelihood (`likelihood_noise`), and how far the move after the round took the proposal: the Gaussian KL divergence
of the moved theta proposal from the one before, beside what refitting a Gaussian's T + T(T + 1) / 2 moments to ESS
independent draws moves it by chance (about that count over 2 ESS), and the sum over the members of the KL of each
moved data-model conditional from the one before at the moved centre.

A stop rule for the moves ("move until the proposal stops changing") would read the moves against that floor.

    python benchmarks/bench_adaptation.py                  # 7 rounds, 6 keys
    python benchmarks/bench_adaptation.py --rounds 5 --keys 12

Six Syn parties of 100 points at epsilon 0.5 (seed 3, noise seeds 7100 + i), packed as a 6-party valuation packs
them; each member's data model drawn `inner_draw_count(width)` times a theta, as on a first attempt.
"""

from __future__ import annotations

import argparse
import sys
import warnings
from functools import partial
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

ROUND_DRAWS = 512


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=7, help="moves of the proposal")
    parser.add_argument("--keys", type=int, default=6, help="keys a coalition (from 900)")
    args = parser.parse_args()

    import bayesval as bv
    from bayesval.divergence import gaussian_kl
    from bayesval.inference import importance
    from bayesval.inference.data import NoiseAwareData
    from bayesval.inference.laplace import coalition_terms
    from bayesval.inference.psis import pareto_smoothed
    from bayesval.models.linear_regression import _num_features
    from bayesval.parties import release_all
    from bayesval.parties.plan import member_width

    sys.path.insert(0, str(Path(__file__).parent))
    from bench_reference import COALITIONS, reference_parties

    @partial(jax.jit, static_argnames=("statistic",))
    def start(data, modes, prior, data_prior, statistic):
        return importance._laplace_proposal(coalition_terms(data, prior, data_prior, statistic), modes)

    @partial(jax.jit, static_argnames=("statistic", "inner_draws"))
    def one_round(key, data, mask, prior, data_prior, statistic, proposal, inner_draws):
        terms = coalition_terms(data, prior, data_prior, statistic)
        weighted = importance._weighted(key, terms, mask, proposal, ROUND_DRAWS, inner_draws)
        moved = importance._moments(weighted, proposal, mask)
        smoothed, k_hat = pareto_smoothed(weighted.log_weights)
        normalised = jax.nn.softmax(smoothed)
        noise = normalised @ importance.likelihood_noise(weighted.log_inner)
        return moved, jnp.stack([1.0 / jnp.sum(normalised**2), k_hat, noise])

    def moves(before, after, mask) -> tuple[float, float]:
        """(theta's Gaussian KL from `before` to `after`, the members' data-model conditionals' summed over the
        members, each at `after`'s centre), on the host."""
        before, after = jax.tree.map(np.asarray, (before.component(0), after.component(0)))
        theta = gaussian_kl(after.centre, after.chol @ after.chol.T, before.centre, before.chol @ before.chol.T)
        omega = sum(
            gaussian_kl(
                after.omega_centre[i],
                after.omega_chol[i] @ after.omega_chol[i].T,
                before.omega_centre[i] + before.slope[i] @ (after.centre - before.centre),
                before.omega_chol[i] @ before.omega_chol[i].T,
            )
            for i in np.flatnonzero(mask)
        )
        return theta, omega

    warnings.simplefilter("ignore")
    model = bv.models.LinearRegression()
    data = NoiseAwareData.from_releases(release_all(model, reference_parties()))
    statistic = model.statistic(_num_features(data))
    priors = model.priors(statistic.num_features)
    theta_dim = statistic.num_features + 2
    moments = theta_dim + theta_dim * (theta_dim + 1) // 2
    print(f"{args.keys} keys from 900, rounds of {ROUND_DRAWS} weighted draws; medians over the keys")
    print("| coalition | round | ESS | k-hat | var log L-hat | theta move | by chance | data models' move |")
    print("|---|---|---|---|---|---|---|---|")
    for members in COALITIONS:
        packed, mask = data.members(np.isin(np.arange(6), members), member_width(len(members), 6))
        modes = importance.joint_modes(packed, mask, priors.model, priors.data, statistic)
        modes = jax.tree.map(lambda *parts: jnp.stack(parts), *modes)
        inner_draws = importance.inner_draw_count(mask.shape[0])
        trajectories = []
        for key in range(args.keys):
            proposal = start(packed, modes, priors.model, priors.data, statistic)
            rows = []
            for round_key in jax.random.split(jax.random.key(900 + key), args.rounds):
                moved, row = one_round(
                    round_key, packed, mask, priors.model, priors.data, statistic, proposal, inner_draws
                )
                rows.append([*np.asarray(row), *moves(proposal, moved, mask)])
                proposal = moved
            trajectories.append(rows)
        medians = np.median(np.array(trajectories), axis=0)
        label = "{" + ", ".join(str(i + 1) for i in members) + "}"
        for index, (ess, k_hat, noise, theta_move, omega_move) in enumerate(medians):
            floor = moments / (2 * ess)
            print(
                f"| {label if index == 0 else ''} | {index + 1} | {ess:.0f} | {k_hat:.2f} | {noise:.3f} | "
                f"{theta_move:.3f} | {floor:.3f} | {omega_move:.3f} |"
            )


if __name__ == "__main__":
    main()
