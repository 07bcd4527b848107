"""Sufficient statistics a party releases, their layout and their l2 sensitivity (Sim et al. 2023, App. A.1).

Linear regression: s = (y^T y, X~^T y, X~^T X~) with the bias-augmented x~ = [x; 1]. We write one
record as z = [x; 1; y] in R^(w+2); its statistic is the upper triangle of z z^T without the
constant bias*bias entry (= 1 per record; the count c is public). Every entry of s is thus a pair
(a, b) of coordinates of z, which is what the Gibbs sampler's CLT moments and the mediator's
matrix assembly index by.

Logistic regression: the degree-2 PASS-GLM statistic (Huggins et al. 2017) with y in {-1, +1}:
t = (y x~, upper triangle of x~ x~^T without the constant entry), since y^2 = 1.

A statistic is anything with `size`, `compute(X, y)` and `sensitivity(bounds)`: `Party.release`
needs nothing else, so user-defined models bring their own.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property

import jax.numpy as jnp
import numpy as np

from bayesval.validation import check_positive


@dataclass(frozen=True)
class Bounds:
    """Declared data bounds every party clips to: ||x||_2 <= x_norm and |y| <= y_abs.

    y_abs=None declares no bound on y (class labels need none); statistics that need it say so.
    """

    x_norm: float
    y_abs: float | None = None

    def __post_init__(self) -> None:
        # stored as floats, so a numpy scalar or a python int bound behaves like any other
        object.__setattr__(self, "x_norm", check_positive("Bounds.x_norm", self.x_norm))
        if self.y_abs is not None:
            object.__setattr__(self, "y_abs", check_positive("Bounds.y_abs", self.y_abs))


def second_moment_pairs(dim: int, constant_index: int) -> tuple[np.ndarray, np.ndarray]:
    """Row and column of each entry of the upper triangle of a dim x dim z z^T, minus the constant entry."""
    rows, cols = np.triu_indices(dim)
    keep = ~((rows == constant_index) & (cols == constant_index))
    return rows[keep], cols[keep]


def _sum_of_products(z: np.ndarray, pairs: tuple[np.ndarray, np.ndarray]) -> np.ndarray:
    rows, cols = pairs
    return np.einsum("ni,ni->i", z[:, rows], z[:, cols])


def _linear_sensitivity_sq(r2: float, y2: float, one: float = 1.0) -> float:
    """max over p = y y' in [-Y^2, Y^2] of the bound on ||t(z) - t(z')||^2 of `LinearRegressionStatistic.sensitivity`
    (r2 = r^2, y2 = Y^2, `one` the constant 1, all in units of scale^2; see `_scaled_bounds`):

        2 r^4 + h(1 + p) + r^2 (2 + Y^2 + p^2 / Y^2) + (Y^2 + p^2 / Y^2 - 2 p) + (Y^2 - p^2 / Y^2)^2,

    h(k) = k^2 for |k| <= r^2 (the best c = -k), else 2 r^2 |k| - r^4 (c = -+r^2). Written in q = p / Y^2 in [-1, 1]
    (so that no coefficient overflows when one bound dwarfs the other), it is a quartic in q on each piece between
    the kinks at 1 + Y^2 q = +-r^2: its maximum is at an end of a piece or a real root of its derivative.
    """
    q = np.polynomial.Polynomial([0.0, 1.0])
    rest = (
        2 * r2 * r2 + r2 * (2 * one + y2 + y2 * q * q) + one * (y2 + y2 * q * q - 2 * y2 * q) + (y2 * (1 - q * q)) ** 2
    )
    k = one + y2 * q
    kinks = ((-one - r2) / y2, (-one + r2) / y2) if y2 > 0 else ()  # y2 = 0: Y underflowed next to a huge r
    ends = sorted({-1.0, 1.0, *(v for v in kinks if -1.0 < v < 1.0)})
    best = -math.inf
    for left, right in zip(ends[:-1], ends[1:]):
        middle = one + y2 * 0.5 * (left + right)
        h = k * k if abs(middle) <= r2 else 2 * r2 * (k if middle > 0 else -k) - r2 * r2
        piece = rest + h
        roots = piece.deriv().roots() if piece.degree() > 1 else []
        candidates = [left, right] + [x.real for x in roots if abs(x.imag) < 1e-12 and left <= x.real <= right]
        best = max(best, max(float(piece(x)) for x in candidates))
    return best * (1 + 1e-12)  # rounding of the polynomial arithmetic: never below the exact maximum


def pair_ranges(
    pairs: tuple[np.ndarray, np.ndarray], magnitudes: np.ndarray, on_ball: np.ndarray, x_norm: float
) -> tuple[np.ndarray, np.ndarray]:
    """Per statistic entry z_a z_b, the range [low, high] one record can give: z_a^2 in [0, m_a^2], and for a != b
    +-m_a m_b, except two coordinates of x on the ball ||x|| <= x_norm, whose product is within +-x_norm^2 / 2.

    magnitudes: the bound m_a on |z_a| per coordinate; on_ball: whether coordinate a is one of x's."""
    rows, cols = pairs
    with np.errstate(over="ignore"):
        product = magnitudes[rows] * magnitudes[cols]
        both_x = on_ball[rows] & on_ball[cols] & (rows != cols)
        high = np.where(both_x, 0.5 * x_norm * x_norm, product)
    low = np.where(rows == cols, 0.0, -high)
    return low, high


# Bounds up to this size are used as they are: their 4th powers stay far below the float64 maximum.
_UNSCALED_BOUND = 1e50


def _scaled_bounds(x_norm: float, y_abs: float | None = None) -> tuple[float, float, float, float]:
    """(scale, (x_norm / scale)^2, (y_abs / scale)^2, 1 / scale^2): the squared bounds in units of scale^2.

    The sensitivities are square roots of quartics in the bounds, so 1e300 overflows a python float
    (OverflowError) long before the result does. Written in units of scale = the largest bound the
    statistic uses, no intermediate exceeds a few units; scale = 1 for ordinary bounds, which keeps
    their arithmetic exactly as without scaling.
    """
    y_abs = 0.0 if y_abs is None else y_abs
    largest = max(x_norm, y_abs)
    scale = 1.0 if largest <= _UNSCALED_BOUND else largest
    return scale, (x_norm / scale) ** 2, (y_abs / scale) ** 2, 1.0 / (scale * scale)


def _finite_sensitivity(value: float, bounds: Bounds, statistic: str) -> float:
    """`value` if it is a finite float, else a ValueError naming the bounds: no noise can be calibrated."""
    if not math.isfinite(value):
        raise ValueError(
            f"{bounds} is too large to calibrate noise for: the l2 sensitivity of the {statistic} statistic "
            f"is not a finite float64 ({value}). Declare tighter bounds (rescale the data so that ||x|| and "
            "|y| are of order 1)"
        )
    return value


@dataclass(frozen=True)
class LinearRegressionStatistic:
    """Layout, computation and sensitivity of the BLR sufficient statistic for `num_features` inputs."""

    num_features: int

    @property
    def bias_index(self) -> int:
        return self.num_features

    @property
    def target_index(self) -> int:
        return self.num_features + 1

    @property
    def record_dim(self) -> int:
        """Length of z = [x; 1; y]."""
        return self.num_features + 2

    @cached_property
    def pairs(self) -> tuple[np.ndarray, np.ndarray]:
        """Row and column index into z z^T of each statistic entry (upper triangle, no bias*bias)."""
        return second_moment_pairs(self.record_dim, self.bias_index)

    @property
    def size(self) -> int:
        """(w + 2)(w + 3) / 2 - 1 entries, the length of `pairs`, in closed form: a release file's `num_features` is
        checked against its statistic's length before anything of that size is built."""
        return self.record_dim * (self.record_dim + 1) // 2 - 1

    def records(self, X: np.ndarray, y: np.ndarray) -> np.ndarray:
        """z = [x; 1; y] for every row: shape (c, w + 2)."""
        return np.column_stack([X, np.ones(len(X)), y])

    def compute(self, X: np.ndarray, y: np.ndarray) -> np.ndarray:
        """The exact statistic s = sum over records of vech(z z^T) without the constant entry."""
        return _sum_of_products(self.records(X, y), self.pairs)

    def sensitivity(self, bounds: Bounds) -> float:
        """l2 sensitivity under replace-one neighbours: max ||t(z) - t(z')||_2 over two records in the bounds,
        derived per block of the statistic (docs/sensitivity.md, "Linear regression").

        With u = x, v = x', c = u.v, the second-moment block gives at most ||u||^4 + ||v||^4 - c^2 (squared entries
        cannot change sign), the x and x y blocks ||u||^2 (1 + y^2) + ||v||^2 (1 + y'^2) - 2 c (1 + y y'), and the y
        and y^2 blocks (y - y')^2 + (y^2 - y'^2)^2. Maximising over c for ||u|| = ||v|| = r, then over the records'
        labels with p = y y' (one label at |y| = Y), leaves a quartic in p per piece, maximised exactly. The
        earlier bound 2 max ||t(z)|| (Sim et al. 2023 leave it open) is 1.1-1.4x this.
        """
        if bounds.y_abs is None:
            raise ValueError("linear regression needs a bound on y: Bounds(x_norm=..., y_abs=...)")
        scale, r2, y2, one = _scaled_bounds(bounds.x_norm, bounds.y_abs)
        return _finite_sensitivity(
            math.sqrt(_linear_sensitivity_sq(r2, y2, one)) * scale * scale, bounds, "linear-regression"
        )

    def entry_ranges(self, bounds: Bounds) -> tuple[np.ndarray, np.ndarray]:
        """Per entry, the range [low, high] of one record's contribution t(z) within `bounds` (a sum of c records
        lies in c times it)."""
        if bounds.y_abs is None:
            raise ValueError("linear regression needs a bound on y: Bounds(x_norm=..., y_abs=...)")
        magnitudes = np.array([bounds.x_norm] * self.num_features + [1.0, bounds.y_abs])
        on_ball = np.arange(self.record_dim) < self.num_features
        return pair_ranges(self.pairs, magnitudes, on_ball, bounds.x_norm)

    def to_matrix(self, statistic: jnp.ndarray, count: jnp.ndarray) -> jnp.ndarray:
        """The symmetric (w+2)x(w+2) matrix sum z z^T from a statistic vector and its count."""
        rows, cols = self.pairs
        upper = jnp.zeros((self.record_dim, self.record_dim), statistic.dtype)
        upper = upper.at[rows, cols].set(statistic).at[self.bias_index, self.bias_index].set(count)
        return upper + jnp.triu(upper, 1).T


@dataclass(frozen=True)
class LogisticRegressionStatistic:
    """Degree-2 PASS-GLM statistic of logistic regression with a bias (Huggins et al. 2017; Sim et al. 2023,
    App. A.1): per record t = (y x~, x~_a x~_b for a <= b except the constant bias*bias), y in {-1, +1}.

    The approximate log-likelihood is sum_l log sigmoid(y_l x~_l^T theta)
    ~= c b0 + b1 theta^T sum_l y_l x~_l + b2 theta^T (sum_l x~_l x~_l^T) theta (`chebyshev_coefficients`).
    """

    num_features: int

    @property
    def dim(self) -> int:
        """Length of x~ = [x; 1]; theta = (w, bias) has this length too."""
        return self.num_features + 1

    @cached_property
    def pairs(self) -> tuple[np.ndarray, np.ndarray]:
        """Row and column index into x~ x~^T of each second-order entry."""
        return second_moment_pairs(self.dim, self.num_features)

    @property
    def size(self) -> int:
        """dim first-order entries and dim (dim + 1) / 2 - 1 second-order ones (the length of `pairs`), in closed
        form, as `LinearRegressionStatistic.size`."""
        return self.dim + self.dim * (self.dim + 1) // 2 - 1

    @staticmethod
    def signed_labels(y: np.ndarray) -> np.ndarray:
        """Labels in {0, 1} or {-1, +1} as floats in {-1, +1}; anything else is an error."""
        values = set(np.unique(y).tolist())
        if not values <= {0.0, 1.0} and not values <= {-1.0, 1.0}:
            raise ValueError(f"logistic regression needs labels in {{0, 1}} or {{-1, +1}}, got {sorted(values)[:6]}")
        return np.where(y > 0, 1.0, -1.0)

    def compute(self, X: np.ndarray, y: np.ndarray) -> np.ndarray:
        """The exact statistic: (sum y x~, sum x~_a x~_b over the pairs)."""
        x_tilde = np.column_stack([X, np.ones(len(X))])
        return np.concatenate([self.signed_labels(y) @ x_tilde, _sum_of_products(x_tilde, self.pairs)])

    def sensitivity(self, bounds: Bounds) -> float:
        """l2 sensitivity under replace-one neighbours, max ||t(z) - t(z')||_2 with ||x||_2 <= x_norm = r and
        y in {-1, +1}, derived per block (docs/sensitivity.md, "Logistic regression"): the second-moment block gives
        at most ||u||^4 + ||v||^4 - c^2 (c = u.v), the x block ||u - v||^2, and the y x~ block ||u - v||^2 when the
        labels agree, ||u + v||^2 + 4 when they differ. The larger is labels that differ with u orthogonal to v:
        Delta^2 = 2 r^4 + 4 r^2 + 4, attained for two or more features. The earlier 2 max ||t(z)|| is 1.26-1.41x it.
        y_abs plays no part: y is +-1."""
        scale, r2, _, one = _scaled_bounds(bounds.x_norm)
        return _finite_sensitivity(
            math.sqrt(2.0 * r2 * r2 + 4.0 * r2 * one + 4.0 * one * one) * scale * scale, bounds, "logistic-regression"
        )

    def entry_ranges(self, bounds: Bounds) -> tuple[np.ndarray, np.ndarray]:
        """Per entry, the range [low, high] of one record's contribution t(z) within `bounds` (y = +-1)."""
        magnitudes = np.array([bounds.x_norm] * self.num_features + [1.0])
        on_ball = np.arange(self.dim) < self.num_features
        second_low, second_high = pair_ranges(self.pairs, magnitudes, on_ball, bounds.x_norm)
        return np.concatenate([-magnitudes, second_low]), np.concatenate([magnitudes, second_high])

    @staticmethod
    def chebyshev_coefficients(radius: float = 4.0) -> np.ndarray:
        """(b0, b1, b2): the degree-2 Chebyshev interpolant of log sigmoid(s) on [-radius, radius] in the
        power basis (PASS-GLM, Huggins et al. 2017, Sec. 3)."""
        from numpy.polynomial import chebyshev

        series = chebyshev.Chebyshev.interpolate(lambda s: -np.logaddexp(0.0, -s), 2, domain=[-radius, radius])
        return series.convert(kind=np.polynomial.Polynomial).coef
