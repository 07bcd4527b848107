"""The incentive report: which of Sim et al. (2023, Sec. 4 and App. D.2)'s incentives P1-P6 and fairness axioms F1-F4
the estimated values and rewards of a valuation satisfy. Values are estimates, so "equal" means within z combined
standard errors and "greater" means by more than that; a premise that the noise cannot settle is not asserted."""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np

from bayesval.results.result import ValuationResult
from bayesval.validation import check_positive


@dataclass(frozen=True)
class Check:
    """One incentive: its name, whether it holds (None: not applicable / not checkable here) and the evidence."""

    name: str
    holds: bool | None
    detail: str


@dataclass(frozen=True)
class IncentiveReport:
    """The checks of `incentive_report`, in the paper's order; `report["P4"]` is one `Check`, `all_hold` whether
    every applicable one holds."""

    checks: list[Check]

    @property
    def all_hold(self) -> bool:
        """Every applicable check holds."""
        return all(check.holds is not False for check in self.checks)

    def __getitem__(self, name: str) -> Check:
        for check in self.checks:
            if check.name.split(" ")[0] == name:
                return check
        raise KeyError(f"no check {name!r}; the checks are {[c.name.split(' ')[0] for c in self.checks]}")

    def __repr__(self) -> str:
        mark = {True: "holds", False: "FAILS", None: "n/a  "}
        return "IncentiveReport\n" + "\n".join(f"  {mark[c.holds]}  {c.name}: {c.detail}" for c in self.checks)


class _Game:
    """Coalition values by bitmask, with standard errors, from a result that valued every coalition."""

    def __init__(self, result) -> None:
        masks = np.asarray(result.coalition_masks, bool)
        self.n = masks.shape[1]
        codes = (masks * (1 << np.arange(self.n))).sum(axis=1)
        self.value = {0: 0.0} | dict(zip(codes.tolist(), np.asarray(result.coalition_values, float).tolist()))
        self.stderr = {0: 0.0} | dict(zip(codes.tolist(), np.asarray(result.coalition_stderr, float).tolist()))
        self.complete = len(self.value) == 2**self.n

    def others(self, *players: int):
        """Bitmasks of every coalition without `players`."""
        rest = [j for j in range(self.n) if j not in players]
        for size in range(len(rest) + 1):
            for members in itertools.combinations(rest, size):
                yield sum(1 << j for j in members)

    def difference(self, a: int, b: int, other: _Game | None = None) -> tuple[float, float]:
        """v(a) - v'(b) (v' = other, default this game) and its standard error."""
        other = self if other is None else other
        return self.value[a] - other.value[b], float(np.hypot(self.stderr[a], other.stderr[b]))


def incentive_report(result, baseline=None, z: float = 2.0) -> IncentiveReport:
    """Check P1-P6 and F1-F4 on a valuation with rewards (`valuate(..., rewards=...)`). F4 (strict monotonicity)
    compares two games: pass `baseline`, the same parties' valuation before one party's data improved. `z` (> 0) is
    how many combined standard errors apart two estimates must be to count as different."""
    _check_rewarded("result", result)
    if baseline is not None:
        _check_rewarded("baseline", baseline)
        if baseline.names != result.names:
            raise ValueError(
                f"baseline must value the same parties as result, in the same order: {baseline.names} != {result.names}"
            )
    z = check_positive("z", z)
    rewards = result.rewards
    names, targets, n = rewards.names, rewards.targets, len(rewards.names)
    checks = []
    worst = rewards.effective_epsilon - rewards.epsilon[None, :]
    checks.append(
        Check(
            "P1 DP-feasibility",
            bool(np.all(worst <= 1e-9 * rewards.epsilon)),
            "every party keeps at least its own guarantee inside every reward (largest increase "
            f"{max(worst.max(), 0.0):.2g})",
        )
    )
    efficient = np.flatnonzero(np.isclose(rewards.values, rewards.grand_value, rtol=0, atol=0))
    checks.append(
        Check(
            "P2 efficiency",
            efficient.size > 0,
            f"{[names[i] for i in efficient]} receive p(theta | o_N), r = v_N = {rewards.grand_value:.4f}",
        )
    )
    game = _Game(result)
    if not game.complete:
        checks.append(Check("P3 fairness (F1-F3)", None, "not every coalition was valued (permutation sampling)"))
    else:
        checks += _fairness(game, targets, _target_stderr(result, game), names, z)
    if baseline is not None and game.complete:
        checks.append(_monotonicity(game, _Game(baseline), rewards, baseline.rewards, names, z))
    else:
        checks.append(Check("F4 strict monotonicity", None, "compares two games: pass baseline=an earlier valuation"))
    own_se = np.array([game.stderr.get(1 << i, 0.0) for i in range(n)])
    target_se = targets / rewards.grand_value * game.stderr.get(2**n - 1, 0.0)  # r*_i scales with v_N
    short = targets - rewards.singleton_values < -z * np.hypot(own_se, target_se)
    checks.append(
        Check(
            "P4 individual rationality",
            not short.any(),
            f"r*_i >= v_i for all but {[names[i] for i in np.flatnonzero(short)]} (rho = {rewards.rho:g}, bound "
            f"{rewards.rationality_bound:.3g})",
        )
    )
    similarity = ", ".join(f"{name} {value:.3f}" for name, value in zip(names, rewards.similarity))
    checks.append(Check("P5 similarity", None, f"r'_i = -KL(p(theta | o_N) || q_i): {similarity}"))
    checks.append(Check("P6 group welfare", None, f"sum of r_i = {rewards.values.sum():.4f}"))
    return IncentiveReport(checks)


def _check_rewarded(name: str, result) -> None:
    """`result` (the argument `name`) is a valuation with rewards and a value for each coalition."""
    if not isinstance(result, ValuationResult):
        raise TypeError(
            f"{name} must be a bayesval.ValuationResult with rewards (valuate(..., rewards=...)), got "
            f"{type(result).__name__}"
        )
    if result.rewards is None:
        raise ValueError(
            f"the incentive report needs rewards: {name} has none (valuate(..., rewards='tempering' or 'noise'))"
        )
    if result.coalition_masks is None or result.coalition_values is None or result.coalition_stderr is None:
        raise ValueError(f"{name} has no coalition values and standard errors; the incentive report needs them")


def _target_stderr(result, game: _Game) -> np.ndarray:
    """Standard errors of r*_i = v_N (phi_i / phi*)^rho by the delta method, from those of v_N and the phi."""
    rewards = result.rewards
    top = int(np.argmax(rewards.shapley))
    relative_phi = np.divide(
        result.stderr, rewards.shapley, out=np.zeros_like(result.stderr), where=rewards.shapley > 0
    )
    relative = np.hypot(game.stderr[2**game.n - 1] / rewards.grand_value, rewards.rho * relative_phi)
    relative = np.hypot(relative, rewards.rho * relative_phi[top])
    return rewards.targets * relative


def _fairness(game: _Game, targets, target_stderr, names, z: float) -> list[Check]:
    """F1 uselessness, F2 symmetry and F3 strict desirability on the targets, from every coalition's value; targets
    count as equal within z combined standard errors."""
    useless, unequal, misordered = [], [], []
    for i in range(game.n):
        gains = [game.difference(c | 1 << i, c) for c in game.others(i)]
        if all(abs(d) <= z * se for d, se in gains) and targets[i] > 0:
            useless.append(names[i])
    for i, j in itertools.permutations(range(game.n), 2):
        gaps = [game.difference(c | 1 << i, c | 1 << j) for c in game.others(i, j)]
        apart = abs(targets[i] - targets[j]) > z * np.hypot(target_stderr[i], target_stderr[j]) + 1e-9 * targets[i]
        if i < j and all(abs(d) <= z * se for d, se in gaps) and apart:
            unequal.append((names[i], names[j]))
        dominates = all(d >= -z * se for d, se in gaps) and any(d > z * se for d, se in gaps)
        if dominates and not targets[i] > targets[j]:
            misordered.append((names[i], names[j]))
    return [
        Check("F1 uselessness", not useless, f"parties adding nothing to any coalition get 0; violated by {useless}"),
        Check("F2 symmetry", not unequal, f"interchangeable parties get equal targets; violated by {unequal}"),
        Check("F3 strict desirability", not misordered, f"a dominating party gets more; violated by {misordered}"),
    ]


def _monotonicity(game: _Game, before: _Game, rewards, earlier, names, z: float) -> Check:
    """F4: a party whose coalitions all gained (some strictly), with every other coalition unchanged and v_N above its
    earlier reward, gets a strictly larger target."""
    improved, violated = [], []
    for i in range(game.n):
        with_i = [game.difference(c | 1 << i, c | 1 << i, before) for c in game.others(i)]
        without_i = [game.difference(c, c, before) for c in game.others(i) if c]
        if not (all(d >= -z * se for d, se in with_i) and any(d > z * se for d, se in with_i)):
            continue
        if not all(abs(d) <= z * se for d, se in without_i) or not rewards.grand_value > earlier.values[i]:
            continue
        improved.append(names[i])
        if not rewards.targets[i] > earlier.targets[i]:
            violated.append(names[i])
    if not improved:
        return Check("F4 strict monotonicity", None, "no party's coalitions improved clearly between the two games")
    return Check("F4 strict monotonicity", not violated, f"improved {improved}; target not raised for {violated}")
