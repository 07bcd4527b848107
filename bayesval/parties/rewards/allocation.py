"""Model rewards for every party (Sim et al. 2023, Algorithm 2, lines 15-31): rho-Shapley targets from the
valuation, then posterior samples q_i per party whose surprise r_i meets its target, by tempering or noise addition;
with the similarity r'_i = -KL(p(theta | o_N) || q_i) and MNLP on held-out data (Sec. 5.4)."""

from __future__ import annotations

import time
import warnings
from dataclasses import dataclass

import numpy as np

from bayesval.divergence import kl_between
from bayesval.parties.rewards.control import PARAMETER_SYMBOLS, RewardMechanism
from bayesval.parties.rewards.metrics import mnlp_classification, mnlp_regression
from bayesval.parties.rewards.sampling import Evaluation, RewardSampler
from bayesval.parties.rewards.targets import nonnegative_shapley, rationality_bound, rho_shapley_targets
from bayesval.progress import seconds_since
from bayesval.results.serialisation import OldJsonMethods, register
from bayesval.validation import user_stacklevel

MNLP_TASKS = {"regression": mnlp_regression, "classification": mnlp_classification}


@register("bayesval.rewards")
@dataclass
class Rewards(OldJsonMethods):
    """Each party's model reward: q_i as posterior samples, with its value r_i against the target r*_i.

    mechanism, rho      'tempering' or 'noise addition', and the rho of the targets
    shapley             the Shapley values the targets use (negative ones repaired, `repair_weight` > 0)
    targets, values     r*_i and the reward values r_i (with `stderr`); the top party's r_i is v_N (P2)
    parameters          kappa_i (tempering) or tau_i (noise addition) of each reward
    calls, reached      sampler calls each party's search spent, and whether |r_i - r*_i| met the tolerance
    similarity          r'_i = -KL(p(theta | o_N) || q_i) (P5: higher is closer to the grand coalition)
    epsilon             each party's own epsilon (its release's guarantee)
    effective_epsilon   (n, n): party k's epsilon inside party i's reward (P1: never above its own)
    rationality_bound   the largest rho with r*_i >= v_i for all i (P4)
    draws               (n, m, d) the reward samples; grand_draws (m, d) of p(theta | o_N); own_draws (n, m, d)
                        of each party's own p(theta | o_i)
    """

    mechanism: str
    rho: float
    names: list[str]
    shapley: np.ndarray
    repair_weight: float
    singleton_values: np.ndarray
    grand_value: float
    targets: np.ndarray
    values: np.ndarray
    stderr: np.ndarray
    parameters: np.ndarray
    calls: np.ndarray
    reached: np.ndarray
    similarity: np.ndarray
    epsilon: np.ndarray
    effective_epsilon: np.ndarray
    rationality_bound: float
    seconds: float
    draws: np.ndarray | None = None
    grand_draws: np.ndarray | None = None
    own_draws: np.ndarray | None = None

    ARRAYS = ("shapley", "singleton_values", "targets", "values", "stderr", "parameters", "calls", "reached")
    ARRAYS += ("similarity", "epsilon", "effective_epsilon", "draws", "grand_draws", "own_draws")
    version = 1  # of its record (`to_record`); the kind is set by `register`

    def mnlp(self, X, y, task: str = "regression") -> dict:
        """MNLP on a held-out, non-private test set (Sim et al. 2023, App. H.2) of the grand coalition ('grand'),
        each party alone ('own', (n,)) and each reward ('reward', (n,)). task: 'regression' (draws laid out
        (w..., bias, noise variance)) or 'classification' (draws (w..., bias))."""
        if not isinstance(task, str) or task not in MNLP_TASKS:
            raise ValueError(f"task must be one of {sorted(MNLP_TASKS)}, got {task!r}")
        if self.draws is None:
            raise ValueError("these rewards were loaded without their draws; MNLP needs the reward samples")
        metric = MNLP_TASKS[task]
        return {
            "grand": metric(self.grand_draws, X, y),
            "own": np.array([metric(draws, X, y) for draws in self.own_draws]),
            "reward": np.array([metric(draws, X, y) for draws in self.draws]),
        }

    def to_dataframe(self):
        """One row per party: Shapley value, target, reward value, parameter, calls, similarity (pandas)."""
        import pandas as pd

        return pd.DataFrame(
            {
                "shapley": self.shapley,
                "own value": self.singleton_values,
                "target": self.targets,
                "reward": self.values,
                "stderr": self.stderr,
                PARAMETER_SYMBOLS.get(self.mechanism, "parameter"): self.parameters,
                "calls": self.calls,
                "reached": self.reached,
                "similarity": self.similarity,
            },
            index=self.names,
        )

    def __repr__(self) -> str:
        symbol = PARAMETER_SYMBOLS.get(self.mechanism, "parameter")
        rows = [
            f"  {name:>12}: r* = {target:.4f}  r = {value:.4f} ± {se:.4f}  {symbol} = {parameter:.4g}  "
            f"calls = {calls}{'' if reached else '  (tolerance not met)'}"
            for name, target, value, se, parameter, calls, reached in zip(
                self.names, self.targets, self.values, self.stderr, self.parameters, self.calls, self.reached
            )
        ]
        return f"Rewards({self.mechanism}, rho = {self.rho:g}, v_N = {self.grand_value:.4f})\n" + "\n".join(rows)

    def to_record(self) -> tuple[dict, dict[str, np.ndarray]]:
        """The rewards as a record of `bayesval.results.serialisation` (kind "bayesval.rewards", version 1): meta the
        scalars and names, arrays `ARRAYS` (the draws only when kept), so a saved `ValuationResult` holds them."""
        meta = {"mechanism": self.mechanism, "rho": self.rho, "names": list(self.names)} | {
            "repair_weight": self.repair_weight,
            "grand_value": self.grand_value,
            "rationality_bound": self.rationality_bound,
            "seconds": self.seconds,
        }
        return meta, {name: getattr(self, name) for name in self.ARRAYS if getattr(self, name) is not None}

    @classmethod
    def from_record(cls, meta: dict, arrays: dict[str, np.ndarray], *, version: int = 1) -> Rewards:
        """The rewards `to_record` wrote."""
        return cls(**meta, **arrays)


def allocate(
    sampler: RewardSampler,
    mechanism: RewardMechanism,
    rho: float,
    *,
    names: list[str],
    releases,
    shapley,
    singleton_values,
    grand: tuple[float, float],
) -> Rewards:
    """Rewards for every party from the valuation's Shapley values, own values v_i and grand value (v_N, se).

    The top party gets the grand coalition's posterior (efficiency, P2), a party whose target is 0 the prior, and
    every other party the reward `mechanism.solve` finds for its target, all searches in lockstep. Nothing here
    depends on which `RewardMechanism` it is: the mechanism says which parameter gives the grand posterior and which
    the prior, and what privacy each party keeps in each reward."""
    started = time.perf_counter()
    shapley, weight = nonnegative_shapley(shapley, singleton_values, names)
    targets = rho_shapley_targets(shapley, grand[0], rho)
    bound = _checked_rationality(shapley, singleton_values, grand[0], rho)
    grand_draws, own_draws = _grand_and_own_draws(sampler, len(names))
    grand_trial = Evaluation(mechanism.grand_parameter, grand[0], grand[1], grand_draws)
    accepted, calls, reached = _accepted_trials(sampler, mechanism, targets, shapley, grand_trial, releases)
    draws = [trial.draws for trial in accepted]
    if not reached.all():
        warnings.warn(
            f"the rewards of {[names[i] for i in np.flatnonzero(~reached)]} did not reach their targets within "
            f"{mechanism.max_calls} sampler calls; raise max_calls or the sampler budget",
            stacklevel=user_stacklevel(),
        )
    parameters = np.array([trial.parameter for trial in accepted], np.float64)
    return Rewards(
        mechanism=mechanism.name,
        rho=float(rho),
        names=list(names),
        shapley=shapley,
        repair_weight=weight,
        singleton_values=np.asarray(singleton_values, np.float64),
        grand_value=float(grand[0]),
        targets=targets,
        values=np.array([trial.value for trial in accepted], np.float64),
        stderr=np.array([trial.stderr for trial in accepted], np.float64),
        parameters=parameters,
        calls=calls,
        reached=reached,
        similarity=np.array([_similarity(sampler, grand_draws, reward) for reward in draws]),
        epsilon=np.array([released.release.guarantee.epsilon for released in releases]),
        effective_epsilon=mechanism.effective_epsilons(releases, parameters),
        rationality_bound=bound,
        seconds=seconds_since(started),
        draws=_first_draws(draws),
        grand_draws=grand_draws,
        own_draws=_first_draws(own_draws),
    )


def _checked_rationality(shapley, singleton_values, grand_value: float, rho: float) -> float:
    """The individual-rationality bound on rho (Sim et al. 2023, Sec. 4, P4), with a warning where rho exceeds it."""
    bound = rationality_bound(shapley, singleton_values, grand_value)
    if rho > bound:
        warnings.warn(
            f"rho = {rho:g} exceeds the individual-rationality bound {bound:.3g}: some party's target is below the "
            "value of its own data alone (Sim et al. 2023, Sec. 4, P4); a smaller rho rewards more equally",
            stacklevel=user_stacklevel(),
        )
    return bound


def _grand_and_own_draws(sampler: RewardSampler, n: int) -> tuple[np.ndarray, list[np.ndarray]]:
    """Draws of p(theta | o_N) and of each party's own p(theta | o_i): those the valuation kept when it sampled
    them (the very chains its v_N and v_i come from), else one sampler call where they fit (a resumed valuation)."""
    masks = np.vstack([np.ones((1, n), bool), np.eye(n, dtype=bool)])
    kept = sampler.sampled_draws(masks)
    if kept is None:
        stage = "rewards: draws of the grand coalition's posterior and of each party's own"
        kept = [e.draws for e in sampler.evaluate([sampler.data] * (n + 1), [1.0] * (n + 1), masks, stage=stage)]
    grand_draws, *own_draws = kept
    return grand_draws, own_draws


def _accepted_trials(sampler, mechanism: RewardMechanism, targets, shapley, grand: Evaluation, releases):
    """Each party's reward as an accepted trial, with the sampler calls its search took and whether it reached its
    target: the grand coalition's posterior for the top party (P2, valued by the valuation's v_N), the prior for a
    target of 0, and for every other party what `mechanism.solve` found."""
    n = len(targets)
    top = np.isclose(shapley, shapley.max(), rtol=0, atol=0)
    nothing = targets <= 0
    searched = [i for i in range(n) if not (top[i] or nothing[i])]
    searches = dict(zip(searched, mechanism.solve(sampler, targets[searched], grand, releases, searched)))
    prior = None if not nothing.any() else sampler.prior(grand.draws.shape[0])
    prior = Evaluation(mechanism.prior_parameter, 0.0, 0.0, prior)
    accepted, calls, reached = [], np.zeros(n, int), np.ones(n, bool)
    for i in range(n):
        if i in searches:
            calls[i], reached[i] = searches[i].calls, searches[i].reached
        accepted.append(grand if top[i] else prior if nothing[i] else searches[i].accepted)
    return accepted, calls, reached


def _similarity(sampler: RewardSampler, grand_draws: np.ndarray, reward_draws: np.ndarray) -> float:
    """r'_i = -KL(p(theta | o_N) || q_i) (Sim et al. 2023, Sec. 5.4), 0 for the grand posterior itself."""
    if reward_draws is grand_draws:
        return 0.0
    return -kl_between(grand_draws, reward_draws, sampler.k, sampler.chain_length)


def _first_draws(per_party: list[np.ndarray]) -> np.ndarray:
    """(n, m, d): each party's first m draws, m the fewest any party has. Posteriors keep whole chains, so where
    NUTS dropped a chain for low BFMI some party has fewer draws, and every party keeps as many whole chains."""
    m = min(len(draws) for draws in per_party)
    return np.stack([draws[:m] for draws in per_party])
