"""Sim et al. (2023, Sec. 5) model rewards on Syn, Diab or CaliH: value the three parties, reward each with a model
whose Bayesian surprise meets its rho-Shapley target, and print how close every reward came and how many sampler
calls its search took (a reward is reached at |r - r*| <= z standard errors; at most 10 calls per party).

    python examples/rewards_reached.py --dataset syn                     # the fast preset (~2 min on 2 cores)
    python examples/rewards_reached.py --dataset diab --mechanism noise  # NUTS, noise addition
    python examples/rewards_reached.py --dataset calih                   # 6 transfer-learnt features (~40 min)
    python examples/rewards_reached.py --dataset syn --num-chains 2 --num-warmup 50 --num-samples 100  # smoke

Diab and CaliH read their files from $BAYESVAL_DATA (default ../shared/data).
"""

from __future__ import annotations

import argparse
import time
import warnings

import numpy as np

import bayesval as bv


def setting(name: str):
    """(model, parties, sampler, held-out split, task) of Sim et al.'s experiment on `name`, at (0.2, 0.1, 0.2)."""
    epsilons = (0.2, 0.1, 0.2)
    if name == "syn":
        from bayesval.datasets.synthetic import make_syn

        syn = make_syn(seed=0)
        parties = [
            bv.Party(X, y, epsilon=eps, bounds=syn.bounds, name=f"party {i + 1}", noise_seed=100 + i)
            for i, ((X, y), eps) in enumerate(zip(syn.parties, epsilons))
        ]
        return bv.models.LinearRegression(), parties, "gibbs", syn.test, "regression"
    if name == "diab":
        from bayesval.datasets.pima import load_pima

        pima = load_pima()
        parties = [
            bv.Party(X, y, epsilon=eps, bounds=pima.bounds, name=f"hospital {i + 1}", noise_seed=200 + i)
            for i, ((X, y), eps) in enumerate(zip(pima.parties, epsilons))
        ]
        model = bv.models.LogisticRegression(max_sq_norm=bv.models.non_private_cap(*pima.train))
        return model, parties, "nuts", pima.validation, "classification"
    from bayesval.datasets import load_california

    calih = load_california()
    parties = calih.make_parties(epsilons, noise_seeds=(300, 301, 302))
    return calih.model(), parties, "gibbs", calih.validation, "regression"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dataset", default="syn", choices=["syn", "diab", "calih"])
    parser.add_argument("--mechanism", default="tempering", choices=["tempering", "noise"])
    parser.add_argument("--rho", type=float, default=0.2)
    parser.add_argument("--key", type=int, default=0, help="the sampling key")
    bv.SamplerConfig.add_arguments(parser)
    args = parser.parse_args()
    warnings.simplefilter("ignore", UserWarning)
    model, parties, sampler, held_out, task = setting(args.dataset)
    config = bv.SamplerConfig.from_arguments(args, sampler, progress_bar=False)
    mechanism = bv.rewards.Tempering() if args.mechanism == "tempering" else bv.rewards.NoiseAddition(noise_seed=7)
    start = time.perf_counter()
    result = bv.valuate(model, parties, key=args.key, config=config, rewards=mechanism, rho=args.rho)
    seconds = time.perf_counter() - start
    rewards = result.rewards
    print(f"{args.dataset}, {args.mechanism}, rho = {args.rho}, {config}; valuation and rewards in {seconds:.0f} s")
    table = rewards.to_dataframe()
    table["|r - r*| / se"] = np.abs(rewards.values - rewards.targets) / rewards.stderr
    print(table.round(4).to_string())
    mnlp = rewards.mnlp(*held_out, task=task)
    own, reward = (np.round(mnlp[part], 3) for part in ("own", "reward"))
    print(f"held-out MNLP: grand {mnlp['grand']:.3f}, each party alone {own}, each reward {reward}")
    print(
        f"every reward reached: {bool(rewards.reached.all())}; largest |r - r*| = "
        f"{np.max(np.abs(rewards.values - rewards.targets)):.3f}; most sampler calls per party: {rewards.calls.max()}"
    )


if __name__ == "__main__":
    main()
