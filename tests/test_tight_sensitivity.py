"""The built-in statistics' sensitivities, derived per block from the declared bounds (docs/sensitivity.md), against
brute force on grids of records and the neighbour search: never below either, and close to both."""

import itertools
import math

import numpy as np
import pytest

from bayesval.privacy.sensitivity import search_sensitivity
from bayesval.statistics import Bounds, LinearRegressionStatistic, LogisticRegressionStatistic

BOUNDS = [Bounds(1.0, 1.0), Bounds(1.0, 2.25), Bounds(4.0 * math.sqrt(6), 5.00001), Bounds(0.5, 3.0), Bounds(3.0, 0.5)]


def grid_records(d: int, x_norm: float, labels: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Every label with every x of a grid: for d = 2, 48 directions at 4 radii (the axes at x_norm included); for
    d >= 3 the cube grid of 7 points per axis inside the ball, and projected onto its sphere from outside."""
    if d == 1:
        xs = np.linspace(-x_norm, x_norm, 41)[:, None]
    elif d == 2:
        angles = 2 * math.pi * np.arange(48) / 48
        directions = np.column_stack([np.cos(angles), np.sin(angles)])
        xs = np.concatenate([np.zeros((1, 2))] + [radius * directions for radius in np.linspace(0.25, 1, 4) * x_norm])
    else:
        cube = np.asarray(list(itertools.product(np.linspace(-x_norm, x_norm, 7), repeat=d)))
        norms = np.linalg.norm(cube, axis=1, keepdims=True)
        xs = np.where(norms > x_norm, cube * x_norm / np.maximum(norms, 1e-300), cube)
    return np.repeat(xs, len(labels), axis=0), np.tile(labels, len(xs))


def brute_force(statistic, X: np.ndarray, y: np.ndarray) -> float:
    """max ||t(z) - t(z')|| over every pair of the records (for these additive statistics, the replace-one
    distance of any two datasets that differ in that record)."""
    T = np.stack([statistic.compute(X[i : i + 1], y[i : i + 1]) for i in range(len(y))])
    squared = np.einsum("ij,ij->i", T, T)
    gaps = squared[:, None] + squared[None, :] - 2 * T @ T.T
    return math.sqrt(max(float(gaps.max()), 0.0))


@pytest.mark.parametrize("d", [1, 2, 3])
@pytest.mark.parametrize("bounds", BOUNDS, ids=str)
def test_linear_sensitivity_is_at_least_brute_force_and_close_to_it(bounds, d):
    statistic = LinearRegressionStatistic(d)
    claimed = statistic.sensitivity(bounds)
    found = brute_force(statistic, *grid_records(d, bounds.x_norm, np.linspace(-bounds.y_abs, bounds.y_abs, 9)))
    assert found <= claimed * (1 + 1e-12)
    if d >= 2:  # one feature cannot make u orthogonal to v: the bound is safe there but looser
        assert found >= 0.985 * claimed  # measured 0.988 - 1.000 on these grids


@pytest.mark.parametrize("d", [1, 2, 3])
@pytest.mark.parametrize("x_norm", [0.5, 1.0, 3.0, 4.4, 9.8])
def test_logistic_sensitivity_is_at_least_brute_force_and_attained(x_norm, d):
    statistic = LogisticRegressionStatistic(d)
    claimed = statistic.sensitivity(Bounds(x_norm))
    found = brute_force(statistic, *grid_records(d, x_norm, np.array([-1.0, 1.0])))
    assert found <= claimed * (1 + 1e-12)
    if d >= 2:  # attained: labels that differ, x and x' on orthogonal axes at the bound
        assert found == pytest.approx(claimed, rel=1e-12)


@pytest.mark.parametrize("bounds", BOUNDS, ids=str)
def test_tight_sensitivities_pass_the_neighbour_search_with_little_to_spare(bounds):
    for statistic, checked in (
        (LinearRegressionStatistic(3), bounds),
        (LogisticRegressionStatistic(3), Bounds(bounds.x_norm)),
    ):
        claimed = statistic.sensitivity(checked)
        found = search_sensitivity(statistic, checked, 3)
        assert 0.96 * claimed <= found <= claimed * (1 + 1e-9)


def test_closed_forms_at_unit_bounds():
    """Bounds(1, 1): linear regression's worst pair is x = e1, y = 1 against x' = e2, y' = -1, at distance sqrt(10)
    (second moments 2, x 2, x y 2, y 4, y^2 0), 0.707 of the earlier 2 max ||t(z)|| = 2 sqrt(5). Logistic:
    sqrt(2 + 4 + 4) = sqrt(10) against 2 sqrt(4)."""
    assert LinearRegressionStatistic(2).sensitivity(Bounds(1.0, 1.0)) == pytest.approx(math.sqrt(10), rel=1e-11)
    assert LogisticRegressionStatistic(2).sensitivity(Bounds(1.0)) == pytest.approx(math.sqrt(10), rel=1e-15)
    assert math.sqrt(10) / (2 * math.sqrt(5)) == pytest.approx(0.7071, abs=1e-4)


def test_tiny_and_huge_bounds_keep_their_digits():
    # huge bounds: the terms of degree 4 dominate; with r = Y = s the bound is
    # s^2 sqrt(max_p (2 + p^2 + 1 + p^2 + (1 - p^2)^2)) = sqrt(5) s^2, at p = +-1
    assert LinearRegressionStatistic(2).sensitivity(Bounds(1e40, 1e40)) == pytest.approx(math.sqrt(5) * 1e80, rel=1e-9)
    tiny = LinearRegressionStatistic(2).sensitivity(Bounds(1e-30, 1e-30))
    assert tiny == pytest.approx(math.sqrt(8) * 1e-30, rel=1e-9)  # x block 2 r^2, bias-y block 4 Y^2, h 2 r^2
    assert LogisticRegressionStatistic(2).sensitivity(Bounds(1e-30)) == pytest.approx(2.0, rel=1e-12)
    with pytest.raises(ValueError, match="too large to calibrate noise for"):
        LinearRegressionStatistic(2).sensitivity(Bounds(1e200, 1e200))
