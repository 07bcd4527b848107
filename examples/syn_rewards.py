"""Sim et al. (2023) Figs. 2a, 2f, 3a and 3d on Syn: model rewards across party 2's privacy level.

For each epsilon_2 (parties 1 and 3 at 0.2, the paper's fixed-seed sweep), the parties are valued once, then
rewarded `--reward-repeats` times by likelihood tempering and by noise addition (new sampler keys and noise
realisations; the coalition values are reused, not sampled again). It prints:

* Fig. 2a: v_2, v_N, phi_2, the target r*_2 and the tempered reward r_2. r_2 should rise with epsilon_2 and equal
  v_N once party 2 has the largest Shapley value.
* Figs. 2f and 3d: at the same targets, tempering's similarity to the grand posterior and its held-out MNLP against
  noise addition's, averaged over the rewarded parties below the top one and over the repeats.
* Fig. 3a: MNLP of the grand coalition, of party 2 alone and of party 2's reward. As epsilon_2 falls, the reward's
  MNLP should rise less steeply than that of party 2's data alone (individual rationality in utility).

    python examples/syn_rewards.py                          # the fast preset
    python examples/syn_rewards.py --epsilons 0.1 12.5 --num-chains 2 --num-warmup 50 --num-samples 100 \
        --reward-repeats 1                                   # smoke
"""

from __future__ import annotations

import argparse
import warnings

import numpy as np

import bayesval as bv
from bayesval.datasets.synthetic import make_syn

EPSILONS_2 = (0.004, 0.02, 0.1, 0.5, 2.5, 12.5)


def sweep(epsilons, config, reward_repeats: int, rho: float, seed: int = 0) -> list[dict]:
    """One row per epsilon_2: the valuation, its tempered rewards and the averages over the reward repeats."""
    model = bv.models.LinearRegression()
    syn = make_syn(seed=seed)
    X_test, y_test = syn.test
    rows = []
    for epsilon_2 in epsilons:
        parties = [
            bv.Party(
                X,
                y,
                epsilon=eps,
                bounds=syn.bounds,
                name=f"party {i + 1}",
                noise_seed=100 + i,
                allow_seed_reuse=True,
                mechanism="gaussian",
            )  # the paper's fixed-seed sweep: nested noise across epsilon_2 (float noise scales one draw; the discrete
            # sampler's draws at two scales are not nested), an experiment, not a private release
            for i, ((X, y), eps) in enumerate(zip(syn.parties, (0.2, epsilon_2, 0.2)))
        ]
        result = bv.valuate(model, parties, key=1, config=config, rewards="tempering", rho=rho)
        by_mechanism = {"tempering": [], "noise": []}
        for repeat in range(reward_repeats):
            for name, mechanism in (
                ("tempering", bv.rewards.Tempering()),
                ("noise", bv.rewards.NoiseAddition(noise_seed=1000 * repeat + 7, allow_seed_reuse=True)),
            ):
                again = bv.valuate(
                    model, parties, key=10 + repeat, config=config, resume_from=result, rewards=mechanism, rho=rho
                )
                by_mechanism[name].append(again.rewards)
        below_top = np.flatnonzero(result.values < result.values.max())
        row = {"epsilon_2": epsilon_2, "result": result}
        for name, rewards in by_mechanism.items():
            row[f"similarity {name}"] = np.mean([r.similarity[below_top].mean() for r in rewards])
            row[f"mnlp {name}"] = np.mean([r.mnlp(X_test, y_test)["reward"][below_top].mean() for r in rewards])
        mnlp = result.rewards.mnlp(X_test, y_test)
        row |= {"mnlp grand": mnlp["grand"], "mnlp own 2": mnlp["own"][1], "mnlp reward 2": mnlp["reward"][1]}
        rows.append(row)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--epsilons", type=float, nargs="+", default=EPSILONS_2, help="party 2's epsilons")
    parser.add_argument("--reward-repeats", type=int, default=5)
    parser.add_argument("--rho", type=float, default=0.2)
    parser.add_argument("--plot", help="write Fig. 2a to this PNG")
    bv.SamplerConfig.add_arguments(parser)
    args = parser.parse_args()
    config = bv.SamplerConfig.from_arguments(args, progress_bar=False)
    warnings.simplefilter("ignore", UserWarning)
    rows = sweep(args.epsilons, config, args.reward_repeats, args.rho)

    print("Fig. 2a: epsilon_2   v_2      v_N      phi_2    r*_2     r_2 (tempering)  kappa_2  calls")
    for row in rows:
        result = row["result"]
        own = result.coalitions_dataframe().loc["{party 2}"].value
        rewards = result.rewards
        print(
            f"{row['epsilon_2']:17g}   {own:6.3f}   {rewards.grand_value:6.3f}   {result.values[1]:6.3f}   "
            f"{rewards.targets[1]:6.3f}   {rewards.values[1]:6.3f} ± {rewards.stderr[1]:.3f}   "
            f"{rewards.parameters[1]:7.4f}  {rewards.calls[1]}"
        )
    print("\nFigs. 2f / 3d (parties below the top, mean over repeats): similarity r' and reward MNLP")
    print("epsilon_2   r' tempering   r' noise   MNLP_r tempering   MNLP_r noise")
    for row in rows:
        print(
            f"{row['epsilon_2']:9g}   {row['similarity tempering']:12.3f}   {row['similarity noise']:8.3f}   "
            f"{row['mnlp tempering']:16.3f}   {row['mnlp noise']:12.3f}"
        )
    print("\nFig. 3a: epsilon_2   MNLP_N   MNLP_2 (alone)   MNLP_r (party 2's reward)")
    for row in rows:
        mnlp = (row["mnlp grand"], row["mnlp own 2"], row["mnlp reward 2"])
        print(f"{row['epsilon_2']:17g}   {mnlp[0]:6.3f}   {mnlp[1]:14.3f}   {mnlp[2]:8.3f}")
    low, high = min(rows, key=lambda r: r["epsilon_2"]), max(rows, key=lambda r: r["epsilon_2"])
    rise_own, rise_reward = (low[name] - high[name] for name in ("mnlp own 2", "mnlp reward 2"))
    print(
        f"from epsilon_2 = {high['epsilon_2']:g} down to {low['epsilon_2']:g}: MNLP of party 2 alone rises by "
        f"{rise_own:.3f}, of its reward by {rise_reward:.3f}"
    )
    if args.plot:
        bv.plot_privacy_tradeoff([row["result"] for row in rows], "party 2", args.plot)
        print(f"Fig. 2a written to {args.plot}")


if __name__ == "__main__":
    main()
