"""The discrete Gaussian on a grid: exact sampling, its variance, and the grid a release is rounded to; and the
rounded Laplace, round(X) for X ~ Laplace, sampled exactly for pure-DP values on a grid.

Floating-point Gaussian noise leaks: the set of doubles `s + sigma * n` can reach depends on s, so the low-order bits
of one output can tell neighbouring datasets apart (Mironov 2012, "On significance of the least significant bits for
differential privacy", for Laplace; the same inversion works on any float sampler, see docs/privacy.md). A release
that leaves the process is therefore an integer multiple of a fixed grid g (a power of two, so every output is an
exact double): o = g (round(s / g) + Z), with Z drawn from the discrete Gaussian N_Z(0, sigma^2),
P[Z = k] proportional to exp(-k^2 / (2 sigma^2)) on the integers (Canonne, Kamath & Steinke 2020, "The Discrete
Gaussian for Differential Privacy", Def. 1).

Sampling is exact: integer and rational arithmetic only (CKS 2020, Alg. 1 Bernoulli(exp(-gamma)), Alg. 2 the
discrete Laplace, Alg. 3 the discrete Gaussian by rejection from it), with uniform integers from a cryptographic
source (`secrets.SystemRandom`) or, for a seeded experiment, from a `random.Random` seeded by the release's key.
sigma^2 is a rational number (a `Fraction`), so no step rounds.

Privacy (CKS 2020, Thm. 14): on Z^d, adding N_Z(0, sigma^2)^d to an integer vector of l2 sensitivity Delta is
rho-zCDP with rho = Delta^2 / (2 sigma^2), the same Renyi curve (alpha, alpha rho) as the continuous Gaussian. Rounding
to the grid moves each entry by at most 1/2 grid step, so in grid units the rounded statistic has l2 sensitivity at
most Delta / g + sqrt(d); `grid_sensitivity` is that bound, and it is what the noise is calibrated to.
"""

from __future__ import annotations

import math
import numbers
import random
import secrets
from fractions import Fraction

import numpy as np

# The rounding to the grid may add at most this fraction to the sensitivity (sqrt(d) g <= Delta * this): a grid
# coarser than that is refused as too coarse for the statistic's scale.
MAX_ROUNDING_SHARE = 0.01
# The default grid makes the rounding add at most ROUNDING_SHARE_DEFAULT of the sensitivity.
ROUNDING_SHARE_DEFAULT = 1e-3
# Integers below 2^53 are exact doubles: a release whose grid count reaches this would round on output.
LARGEST_EXACT_COUNT = 2**53
# sigma^2 (in grid units) is rounded up to a multiple of 1 / SIGMA_SQUARED_DENOMINATOR below WHOLE_SIGMA_SQUARED and
# to an integer above it: a small rational keeps sampling fast, and sigma^2 is recovered exactly from the float sigma.
SIGMA_SQUARED_DENOMINATOR = 2**16
WHOLE_SIGMA_SQUARED = 2**20
MAX_SIGMA_STEPS = 2**26  # sigma in grid units below which sigma^2 is held exactly (sigma^2 < 2^52)


def _rounding_steps(dimension: int, l1: bool) -> float:
    """How far, in grid steps, rounding `dimension` entries can move them: sqrt(dimension) in l2, dimension in l1."""
    return dimension if l1 else math.sqrt(dimension)


def default_grid(sensitivity: float, dimension: int, *, l1: bool = False) -> float:
    """The largest power of two g whose rounding moves `dimension` entries (l2, or l1 with `l1`) by at most
    ROUNDING_SHARE_DEFAULT * sensitivity."""
    return 2.0 ** math.floor(math.log2(ROUNDING_SHARE_DEFAULT * sensitivity / _rounding_steps(dimension, l1)))


def check_grid(grid, sensitivity: float, dimension: int, *, l1: bool = False) -> float:
    """`grid` if it is a power of two fine enough for this sensitivity (l2, or l1 with `l1`), else a ValueError
    naming it."""
    if isinstance(grid, (bool, np.bool_)) or not isinstance(grid, numbers.Real) or not math.isfinite(grid) or grid <= 0:
        raise ValueError(f"grid must be a positive power of two (e.g. 2.0**-20), got {grid!r}")
    grid = float(grid)
    mantissa, _ = math.frexp(grid)
    if mantissa != 0.5:
        raise ValueError(f"grid must be a power of two, so that every multiple of it is an exact double; got {grid!r}")
    steps, norm = _rounding_steps(dimension, l1), "l1" if l1 else "l2"
    coarsest = MAX_ROUNDING_SHARE * sensitivity / steps
    if grid > coarsest:
        shift = f"{dimension}" if l1 else f"sqrt({dimension})"
        default = default_grid(sensitivity, dimension, l1=l1)
        raise ValueError(
            f"grid {grid:g} is too coarse for a statistic of {norm} sensitivity {sensitivity:.6g} in {dimension} "
            f"entries: rounding to it would add {shift} * grid = {steps * grid:.6g} to the sensitivity "
            f"(more than {MAX_ROUNDING_SHARE:.0%}); use a grid <= {coarsest:.6g}, e.g. {default:g} (the default)"
        )
    return grid


def grid_sensitivity(sensitivity: float, grid: float, dimension: int) -> float:
    """l2 sensitivity, in grid units, of the statistic rounded to the grid: sensitivity / grid + sqrt(dimension)."""
    return sensitivity / grid + math.sqrt(dimension)


def sigma_squared_for(multiplier: float, sensitivity: float, grid: float, dimension: int) -> Fraction:
    """sigma^2 in grid units for noise multiplier (sigma / Delta_grid) `multiplier`, rounded up to a multiple of
    2^-16 (or to an integer above 2^20)."""
    steps = multiplier * grid_sensitivity(sensitivity, grid, dimension)  # sigma in grid units
    if not steps < MAX_SIGMA_STEPS:  # also where sensitivity / grid overflows a double
        raise ValueError(_too_many_steps(steps * grid, grid))
    target = steps**2 * (1 + 1e-12)
    if target >= WHOLE_SIGMA_SQUARED:
        return Fraction(math.ceil(target))
    return Fraction(math.ceil(target * SIGMA_SQUARED_DENOMINATOR), SIGMA_SQUARED_DENOMINATOR)


def _too_many_steps(noise_scale: float, grid: float) -> str:
    return (
        f"noise scale {noise_scale!r} is {noise_scale / grid:.3g} steps of the grid {grid!r}, more than the 2^26 a "
        "discrete Gaussian is drawn exactly with: choose a coarser grid (grid=, --grid on the command line) or a "
        "larger epsilon"
    )


def sigma_squared_from(noise_scale: float, grid: float) -> Fraction:
    """The exact rational sigma^2 (grid units) of a discrete Gaussian whose sigma is `noise_scale` (statistic units),
    as `sigma_squared_for` rounds it; a ValueError if sigma^2 is not of that form."""
    approximate = (noise_scale / grid) ** 2
    unit = 1 if approximate >= WHOLE_SIGMA_SQUARED else SIGMA_SQUARED_DENOMINATOR
    if not math.isfinite(approximate) or approximate * unit >= 2**52:
        raise ValueError(_too_many_steps(noise_scale, grid))
    exact = Fraction(round(approximate * unit), unit)
    if exact <= 0 or not math.isclose(float(exact), approximate, rel_tol=1e-9):
        raise ValueError(
            f"noise scale {noise_scale!r} on grid {grid!r} is not a discrete Gaussian's sigma (sigma^2 in grid units "
            f"must be a multiple of 1/{SIGMA_SQUARED_DENOMINATOR}, or an integer above {WHOLE_SIGMA_SQUARED})"
        )
    return exact


# Above this sigma the discrete Gaussian's variance equals sigma^2 in float64: by Poisson summation its relative
# deficit is below 8 pi^2 sigma^2 exp(-2 pi^2 sigma^2), which is < 1e-300 here.
_VARIANCE_IS_SIGMA_SQUARED = 8.0


def discrete_gaussian_variance(sigma_squared: float) -> float:
    """Var[Z] for Z ~ N_Z(0, sigma^2): sum k^2 exp(-k^2 / 2 sigma^2) / sum exp(-k^2 / 2 sigma^2) (< sigma^2; CKS 2020,
    Prop. 19). Summed directly for small sigma; above `_VARIANCE_IS_SIGMA_SQUARED` it is sigma^2 to double precision."""
    sigma_squared = float(sigma_squared)
    if not sigma_squared > 0:
        raise ValueError(f"sigma^2 must be > 0, got {sigma_squared!r}")
    if sigma_squared >= _VARIANCE_IS_SIGMA_SQUARED**2:
        return sigma_squared
    k = range(1, math.ceil(40 * math.sqrt(sigma_squared)) + 2)
    weights = [math.exp(-j * j / (2 * sigma_squared)) for j in k]
    return 2 * sum(j * j * w for j, w in zip(k, weights)) / (1 + 2 * sum(weights))


def rounded_laplace_variance(scale: int) -> float:
    """Var round(X) for X ~ Laplace(0, scale): exp(1 / (2 scale)) q (1 + q) / (1 - q)^2 with q = exp(-1 / scale),
    from P[round(X) = +-m] = exp(1 / (2 scale)) (1 - q) q^m / 2 for m >= 1 (about 2 scale^2 + 1/12 for a large
    scale)."""
    q = math.exp(-1.0 / scale)
    return math.exp(0.5 / scale) * q * (1.0 + q) / (1.0 - q) ** 2


def rounded_laplace_pmf(values, scale: int) -> list[float]:
    """P[round(X) = v] for X ~ Laplace(0, scale), each integer v of `values`."""
    return [
        -math.expm1(-0.5 / scale)
        if v == 0
        else 0.5 * (math.exp(-(abs(v) - 0.5) / scale) - math.exp(-(abs(v) + 0.5) / scale))
        for v in values
    ]


def discrete_gaussian_pmf(values, sigma_squared: float) -> list[float]:
    """P[Z = k] for each k in `values`, Z ~ N_Z(0, sigma^2), normalised over |k| <= 40 sigma + 1 (the tail beyond
    holds less than exp(-800) of the mass)."""
    sigma_squared = float(sigma_squared)
    reach = math.ceil(40 * math.sqrt(sigma_squared)) + 1
    total = 1 + 2 * sum(math.exp(-j * j / (2 * sigma_squared)) for j in range(1, reach + 1))
    return [math.exp(-k * k / (2 * sigma_squared)) / total for k in values]


class ExactSampler:
    """Exact samplers of CKS 2020 (Alg. 1-3) over a source of uniform integers.

    rng: a `random.Random` (seeded experiments) or None for `secrets.SystemRandom()` (the operating system's
    cryptographic source). Only rng.randrange is used.
    """

    def __init__(self, rng: random.Random | None = None) -> None:
        self._rng = secrets.SystemRandom() if rng is None else rng

    def _uniform_below(self, n: int) -> int:
        return self._rng.randrange(n)

    def bernoulli(self, p: Fraction) -> bool:
        """True with probability p (a rational in [0, 1])."""
        return self._uniform_below(p.denominator) < p.numerator

    def bernoulli_exp(self, gamma: Fraction) -> bool:
        """True with probability exp(-gamma), gamma >= 0 rational (CKS 2020, Alg. 1)."""
        whole = math.floor(gamma)
        for _ in range(whole):
            if not self._bernoulli_exp_at_most_one(Fraction(1)):
                return False
        return self._bernoulli_exp_at_most_one(gamma - whole)

    def _bernoulli_exp_at_most_one(self, gamma: Fraction) -> bool:
        # K = the first k with Bernoulli(gamma / k) = 0; exp(-gamma) = P[K odd] by the series of exp(-gamma).
        k = 1
        while self.bernoulli(gamma / k):
            k += 1
        return k % 2 == 1

    def _geometric(self, scale: int) -> int:
        """G >= 0 with P[G = g] proportional to exp(-g / scale), scale a positive integer (the magnitude step of
        CKS 2020, Alg. 2: G = U + scale V, U uniform below scale kept with probability exp(-U / scale), V the
        successes of Bernoulli(exp(-1)) before its first failure)."""
        while True:
            u = self._uniform_below(scale)
            if self.bernoulli_exp(Fraction(u, scale)):
                break
        v = 0
        while self.bernoulli_exp(Fraction(1)):
            v += 1
        return u + scale * v

    def discrete_laplace(self, scale: int) -> int:
        """Y with P[Y = y] proportional to exp(-|y| / scale), scale a positive integer (CKS 2020, Alg. 2 with s = 1)."""
        while True:
            magnitude = self._geometric(scale)
            negative = self._uniform_below(2) == 1
            if negative and magnitude == 0:
                continue
            return -magnitude if negative else magnitude

    def rounded_laplace(self, scale: int) -> int:
        """round(X) for X ~ Laplace(0, scale) on the reals, scale a positive integer, drawn exactly: 0 with
        probability 1 - exp(-1 / (2 scale)) (X within half a step of 0), else a fair sign times 1 + G, G geometric
        with ratio exp(-1 / scale): P[|round(X)| = m] = exp(-(m - 1/2) / scale) - exp(-(m + 1/2) / scale) for m >= 1.
        Added to an integer c, c + round(X) = round(c + X) is post-processing of the Laplace mechanism on c, so it
        keeps that mechanism's whole privacy profile (`bayesval.privacy.Mechanism.laplace_on_grid`)."""
        if not self.bernoulli_exp(Fraction(1, 2 * scale)):
            return 0
        magnitude = 1 + self._geometric(scale)
        return -magnitude if self._uniform_below(2) == 1 else magnitude

    def discrete_gaussian(self, sigma_squared: Fraction) -> int:
        """Z ~ N_Z(0, sigma^2), sigma^2 > 0 rational, by rejection from the discrete Laplace of scale
        t = floor(sigma) + 1 (CKS 2020, Alg. 3)."""
        t = math.isqrt(sigma_squared.numerator // sigma_squared.denominator) + 1
        while True:
            y = self.discrete_laplace(t)
            excess = abs(y) - sigma_squared / t
            if self.bernoulli_exp(excess * excess / (2 * sigma_squared)):
                return y


__all__ = [
    "ExactSampler",
    "check_grid",
    "default_grid",
    "discrete_gaussian_pmf",
    "discrete_gaussian_variance",
    "grid_sensitivity",
    "rounded_laplace_pmf",
    "rounded_laplace_variance",
    "sigma_squared_for",
    "sigma_squared_from",
]
