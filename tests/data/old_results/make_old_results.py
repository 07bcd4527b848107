"""Writes the result files in this folder with the writer of commit 2d1214a (before results had one serialisation
protocol): run from a checkout of that commit, with its root and its tests/ folder on PYTHONPATH,

    python tests/data/old_results/make_old_results.py tests/data/old_results

tests/test_result_files.py rebuilds the same results with the current code and checks that these files load to
them bit for bit (and that the sampled one resumes)."""

import sys
from pathlib import Path

import numpy as np
from game_examples import random_table, table_utility

import bayesval as bv
from bayesval.games.samplers import PermutationSampler
from bayesval.games.semivalues import semivalue
from bayesval.games.stopping import MaxEvaluations
from bayesval.privacy.accounting import gaussian_event, gaussian_multiplier_for
from bayesval.privacy.ledger import Release

try:
    from bayesval.parties.rewards.allocation import Rewards  # since the package redesign
except ImportError:
    from bayesval.rewards.allocation import Rewards  # at commit 2d1214a

NAMES = ["ann", "bob", "cy"]


def sampled():
    """A sampled Shapley run with its resume state: 5 players, 3 estimates per coalition, 40 batches of 8."""
    utility = table_utility(random_table(7, 5), noise=0.05)
    return semivalue(
        utility, 5, 3, sampler=PermutationSampler(), stop=MaxEvaluations(960), batch_size=8, names=list("abcde")
    )


def ledger():
    """Two Gaussian releases with fixed ids."""
    releases = []
    for i, (owner, epsilon) in enumerate(zip(NAMES[:2], (0.5, 2.0))):
        guarantee = bv.DPGuarantee(epsilon, 1e-5)
        multiplier = gaussian_multiplier_for(guarantee)
        releases.append(
            Release(
                owner,
                "statistic",
                "gaussian",
                2.0,
                2.0 * multiplier,
                4,
                guarantee,
                gaussian_event(multiplier),
                release_id=f"{i:032x}",
            )
        )
    return bv.PrivacyLedger(releases)


def rewards():
    rng = np.random.default_rng(11)
    n, m, d = 3, 5, 2
    return Rewards(
        mechanism="tempering",
        rho=0.5,
        names=NAMES,
        shapley=rng.normal(size=n),
        repair_weight=0.0,
        singleton_values=rng.normal(size=n),
        grand_value=1.5,
        targets=rng.normal(size=n),
        values=rng.normal(size=n),
        stderr=rng.random(n),
        parameters=rng.random(n),
        calls=np.array([3, 4, 0]),
        reached=np.array([True, True, False]),
        similarity=-rng.random(n),
        epsilon=np.array([0.5, 2.0, np.inf]),
        effective_epsilon=rng.random((n, n)),
        rationality_bound=0.25,
        seconds=1.25,
        draws=rng.normal(size=(n, m, d)),
        grand_draws=rng.normal(size=(m, d)),
        own_draws=rng.normal(size=(n, m, d)),
    )


def parties():
    """A party valuation by hand: coalitions, counts, privacy, rewards and nested diagnostics."""
    rng = np.random.default_rng(5)
    masks = np.array([[1, 0, 0], [0, 1, 0], [1, 1, 0], [1, 1, 1]], bool)
    return bv.ValuationResult(
        "shapley",
        rng.normal(size=3),
        rng.random(3),
        NAMES,
        coalition_masks=masks,
        coalition_values=rng.normal(size=4),
        coalition_stderr=rng.random(4),
        privacy=ledger(),
        diagnostics={"r_hat": [1.01, 1.02, 1.0, 1.03], "settings": {"num_chains": 2, "seed": None}, "flag": True},
        counts=np.array([4, 5, 6]),
        converged=np.array([True, False, True]),
        draws=rng.normal(size=(4, 2, 2, 3, 2)),
        parameter_names=["w", "b"],
        rewards=rewards(),
    )


if __name__ == "__main__":
    out = Path(sys.argv[1])
    sampled().save(out / "sampled_2d1214a.npz")
    parties().save(out / "parties_2d1214a.npz")
