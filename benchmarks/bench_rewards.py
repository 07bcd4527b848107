"""The full Syn reward computation (Sim et al. 2023, Algorithm 2): valuation, rho-Shapley targets and likelihood
tempering for every party, timed end to end, with the share spent in the kappa search and its sampler calls.

Side by side, the same rewards searched party by party with one trial per sampler call (the loop of Algorithm 2,
lines 20-31, as printed) against our lockstep search (every unfinished party's trials in one batched call), on the
same valuation and the same compiled program.

    python benchmarks/bench_rewards.py                 # the fast preset
    python benchmarks/bench_rewards.py --preset paper
"""

from __future__ import annotations

import argparse
import time
import warnings

import jax

import bayesval as bv
from bayesval.datasets.synthetic import make_syn
from bayesval.parties.rewards.allocation import allocate
from bayesval.parties.rewards.sampling import RewardSampler


class OneTrialPerCall(RewardSampler):
    """The printed loop: a sampler call per trial (no batching of trials across parties or within a bracket)."""

    def __init__(self, surprise, key) -> None:
        super().__init__(surprise, key)
        self.slots = 1

    def evaluate(self, inputs, parameters, masks=None, *, stage="rewards"):
        found = []
        for j in range(len(inputs)):
            found += super().evaluate(
                inputs[j : j + 1], parameters[j : j + 1], None if masks is None else masks[j : j + 1], stage=stage
            )
        return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    bv.SamplerConfig.add_arguments(parser)
    args = parser.parse_args()
    config = bv.SamplerConfig.from_arguments(args, progress_bar=False)
    warnings.simplefilter("ignore", UserWarning)
    syn = make_syn(seed=0)
    parties = [
        bv.Party(X, y, epsilon=eps, bounds=syn.bounds, name=f"party {i + 1}", noise_seed=300 + i)
        for i, ((X, y), eps) in enumerate(zip(syn.parties, (0.2, 0.1, 0.2)))
    ]
    model = bv.models.LinearRegression()
    started = time.perf_counter()
    result = bv.valuate(model, parties, key=0, config=config, rewards="tempering")
    total = time.perf_counter() - started
    rewards = result.rewards
    print(f"Syn, {config}")
    print(
        f"valuation + rewards: {total:.1f} s, of which the rewards (grand/own draws, kappa search, similarity) "
        f"{rewards.seconds:.1f} s ({100 * rewards.seconds / total:.0f} %)"
    )
    print(rewards)

    from bayesval.inference.data import NoiseAwareData
    from bayesval.parties import release_all
    from bayesval.parties.surprise import CoalitionSurprise

    data = NoiseAwareData.from_releases(release_all(model, parties))
    surprise = CoalitionSurprise(model, data, config, 4, jax.random.key(0), max_coalitions=7)
    surprise(result.coalition_masks)  # the valuation's coalitions, so both searches start from the same state
    grand = (rewards.grand_value, float(result.coalition_stderr[-1]))
    timings = {}
    for name, sampler_class in (
        ("lockstep, batched trials (ours)", RewardSampler),
        ("one trial per call", OneTrialPerCall),
    ):
        sampler = sampler_class(surprise, jax.random.key(2))
        started = time.perf_counter()
        searched = allocate(
            sampler,
            bv.rewards.Tempering(),
            0.2,
            names=result.names,
            releases=release_all(model, parties),
            shapley=result.values,
            singleton_values=rewards.singleton_values,
            grand=grand,
        )
        timings[name] = time.perf_counter() - started
        print(f"{name:32s} {timings[name]:7.1f} s  {sampler.calls:3d} sampler calls  calls per party {searched.calls}")
    ours, printed = timings.values()
    print(f"ratio (one trial per call / ours): {printed / ours:.2f}x")


if __name__ == "__main__":
    main()
