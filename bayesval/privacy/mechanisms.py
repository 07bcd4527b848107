"""The one mechanism every release goes through (docs/architecture.md, "The privacy boundary").

A `Mechanism` is calibrated once by the accountant (noise scale and dp-accounting event for a
sensitivity and a guarantee) and then releases: `perturb(value, ...)` for an array, `run(program,
inputs, ...)` for a JAX program that draws float noise inside, and `run_on_grid(program, inputs, ...)` for a JAX
program that adds integer noise drawn exactly beforehand (the gradient trajectories, the
KNN family's counts and values, one row per validation point). Each takes the privacy key from a `NoiseSource`
(never a sampling key), hands it to the computation, and returns the output with its `Release` record, recorded in
the ledger if one is given. `add_noise` draws the floating-point noise; programs call it with the key `run` gives
them.

Three kinds of Gaussian noise:
- `Mechanism.discrete_gaussian`: floating-point safe, for every release that leaves the process (release files,
  the CLI, `Party.release` by default). The statistic is rounded to a power-of-two grid and exact discrete Gaussian
  noise is added in integers (Canonne, Kamath & Steinke 2020; `bayesval.privacy.discrete`); the event is the
  zCDP bound rho = Delta_grid^2 / (2 sigma^2) (CKS 2020, Thm. 14), a dp-accounting `ZCDpEvent`.
- `Mechanism.gaussian_on_grid`: floating-point safe with the float Gaussian's calibration (PLD accountant,
  compositions, Poisson subsampling): the statistic rounded to a power-of-two grid, plus round(X) for X Gaussian,
  drawn exactly (`bayesval.privacy.rounded_gaussian`), post-processing of the Gaussian mechanism on the rounded
  statistic, so its `GaussianDpEvent` holds whole. The DP-gradient semivalues and the KNN family release through it.
- `Mechanism.gaussian`: float noise (jax.random.normal scaled and added), fast and jit-able, for in-process
  experiments only: its low-order bits can reveal the exact input (docs/privacy.md shows the attack). Its
  releases are labelled `floating-point` in the ledger and refused by release files without the experiment flag.
And two kinds of Laplace noise, likewise: `Mechanism.laplace_on_grid` (floating-point safe: the value rounded to a
power-of-two grid, then c + round(X) for X ~ Laplace drawn exactly in integers, post-processing of the Laplace
mechanism on the rounded value, so its dp-accounting `LaplaceDpEvent` holds whole) and `Mechanism.laplace` (float).
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from fractions import Fraction
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

import bayesval.privacy.dp_library as dp
from bayesval.privacy.accounting import (
    DPGuarantee,
    check_composition,
    gaussian_event,
    gaussian_multiplier_for,
    laplace_event,
    zcdp_multiplier_for,
)
from bayesval.privacy.discrete import (
    LARGEST_EXACT_COUNT,
    ExactSampler,
    check_grid,
    default_grid,
    grid_sensitivity,
    sigma_squared_for,
    sigma_squared_from,
)
from bayesval.privacy.ledger import ADJACENCIES, ON_GRID, PrivacyLedger, Release, entry_noise_std
from bayesval.privacy.noise import NoiseSource, fingerprint
from bayesval.privacy.rounded_gaussian import MAX_SCALE, RandomWords, RoundedGaussianSampler
from bayesval.validation import check_int, check_positive


def add_noise(key: jax.Array, value: jax.Array, scale: jax.Array, noise: str = "gaussian") -> jax.Array:
    """value + noise of the given scale (Gaussian std or Laplace b), one independent draw per entry.

    One standard draw scaled by `scale`, so the same key at different scales gives nested noise (the
    fixed-seed epsilon sweep of Sim et al. 2023, Sec. 6, with an explicitly reused seed).
    """
    value = jnp.asarray(value)
    dtype = value.dtype if jnp.issubdtype(value.dtype, jnp.floating) else jnp.float64
    draw = jax.random.normal if noise == "gaussian" else jax.random.laplace
    return value + scale * draw(key, value.shape, dtype=dtype)


@dataclass(frozen=True)
class Mechanism:
    """Additive Gaussian, discrete Gaussian or Laplace noise calibrated for `guarantee` at l2 (Gaussian) / l1
    (Laplace) `sensitivity` under `adjacency`, with `event` the dp-accounting event of one whole release.

    For the discrete Gaussian, `grid` is the power-of-two grid step the output lies on, `dimension` the number of
    entries the rounding was accounted for, and `noise_scale` the parameter sigma of N_Z(0, sigma^2) in the
    statistic's units (grid * sigma_grid); likewise for the Gaussian rounded to a grid, whose `integer_statistic`
    says the statistic needed no rounding."""

    noise: str
    sensitivity: float
    noise_scale: float
    guarantee: DPGuarantee
    event: dp.DpEvent
    adjacency: str = "replace-one"
    grid: float | None = None
    dimension: int | None = None
    integer_statistic: bool = False

    @classmethod
    def discrete_gaussian(
        cls, guarantee: DPGuarantee, sensitivity: float, dimension: int, *, grid: float | None = None
    ) -> Mechanism:
        """The floating-point-safe Gaussian mechanism for one release of `dimension` entries: round to `grid`
        (default: the largest power of two whose rounding adds at most 0.1 % to the sensitivity), add exact
        N_Z(0, sigma^2) noise in grid units, with sigma calibrated by zCDP (CKS 2020, Thm. 14) for `guarantee`."""
        if not isinstance(guarantee, DPGuarantee):
            raise TypeError(
                f"guarantee must be a bayesval DPGuarantee(epsilon, delta), got {guarantee!r} "
                f"({type(guarantee).__name__})"
            )
        sensitivity = check_positive("sensitivity", sensitivity)
        dimension = check_int("dimension", dimension, minimum=1)
        grid = default_grid(sensitivity, dimension) if grid is None else check_grid(grid, sensitivity, dimension)
        multiplier = zcdp_multiplier_for(guarantee)
        sigma_squared = sigma_squared_for(multiplier, sensitivity, grid, dimension)
        rho = grid_sensitivity(sensitivity, grid, dimension) ** 2 / (2 * float(sigma_squared))
        noise_scale = grid * math.sqrt(float(sigma_squared))
        event = dp.ZCDpEvent(rho)
        return cls("discrete_gaussian", sensitivity, noise_scale, guarantee, event, "replace-one", grid, dimension)

    @classmethod
    def gaussian(
        cls,
        guarantee: DPGuarantee,
        sensitivity: float,
        *,
        num_compositions: int = 1,
        sampling_probability: float = 1.0,
        adjacency: str = "replace-one",
    ) -> Mechanism:
        """The Gaussian mechanism meeting `guarantee` over `num_compositions` releases, each optionally on a
        Poisson subsample (rate `sampling_probability`, add-or-remove adjacency)."""
        sensitivity, multiplier = _gaussian_calibration(
            guarantee, sensitivity, num_compositions, sampling_probability, adjacency
        )
        event = gaussian_event(multiplier, num_compositions, sampling_probability)
        return cls("gaussian", sensitivity, multiplier * sensitivity, guarantee, event, adjacency)

    @classmethod
    def gaussian_on_grid(
        cls,
        guarantee: DPGuarantee,
        sensitivity: float,
        dimension: int,
        *,
        num_compositions: int = 1,
        sampling_probability: float = 1.0,
        adjacency: str = "replace-one",
        grid: float | None = None,
        integer_statistic: bool = False,
    ) -> Mechanism:
        """The floating-point-safe Gaussian mechanism, calibrated as `gaussian` is (PLD accountant, compositions,
        Poisson subsampling), for releases of `dimension` entries of l2 `sensitivity`: each entry rounded to `grid`
        (default: the largest power of two whose rounding adds at most 0.1 % to the sensitivity), then the integer
        c + round(X), X ~ N(0, s^2) drawn exactly (`bayesval.privacy.rounded_gaussian`), times the grid. In grid
        units the rounded entries have l2 sensitivity Delta_g = sensitivity / grid + sqrt(dimension); s is the
        smallest whole number of steps with s / Delta_g at least the multiplier the guarantee needs; and
        c + round(X) = round(c + X) is post-processing of the Gaussian mechanism on c, so each release is the
        `GaussianDpEvent` of multiplier s / Delta_g, subsampled and composed as for `gaussian`.

        integer_statistic: the statistic is whole numbers (counts), so it lies on every power-of-two grid up to 1
        and nothing is rounded: Delta_g = sensitivity / grid, and the default grid is at most 1."""
        sensitivity, multiplier = _gaussian_calibration(
            guarantee, sensitivity, num_compositions, sampling_probability, adjacency
        )
        dimension = check_int("dimension", dimension, minimum=1)
        if integer_statistic:
            grid = min(1.0, default_grid(sensitivity, dimension)) if grid is None else check_grid(grid, math.inf, 1)
            if grid > 1:
                raise ValueError(f"whole numbers lie on power-of-two grids up to 1, got grid={grid!r}")
            calibrated = sensitivity / grid
        else:
            grid = default_grid(sensitivity, dimension) if grid is None else check_grid(grid, sensitivity, dimension)
            calibrated = grid_sensitivity(sensitivity, grid, dimension)
        steps = math.ceil(multiplier * calibrated)
        if not steps < MAX_SCALE:  # also where sensitivity / grid overflows a double
            raise ValueError(
                f"Gaussian noise of {multiplier * calibrated:.3g} steps of the grid {grid!r} is too wide to draw "
                "exactly (2^31 steps at most): choose a coarser grid (grid=) or a larger epsilon"
            )
        event = gaussian_event(steps / calibrated, num_compositions, sampling_probability)
        mechanism = cls("gaussian_on_grid", sensitivity, steps * grid, guarantee, event, adjacency, grid, dimension)
        return replace(mechanism, integer_statistic=bool(integer_statistic))

    @classmethod
    def laplace(
        cls, epsilon: float, sensitivity: float, *, num_compositions: int = 1, adjacency: str = "replace-one"
    ) -> Mechanism:
        """The Laplace mechanism, pure epsilon-DP over `num_compositions` releases of l1 `sensitivity`
        (basic composition: b = num_compositions * sensitivity / epsilon)."""
        guarantee = DPGuarantee(epsilon, delta=0.0)
        sensitivity = check_positive("sensitivity", sensitivity)
        num_compositions, _ = check_composition(num_compositions, 1.0)
        if adjacency not in ADJACENCIES:
            raise ValueError(f"adjacency must be one of {ADJACENCIES}, got {adjacency!r}")
        multiplier = num_compositions / guarantee.epsilon
        event = laplace_event(multiplier, num_compositions)
        return cls("laplace", sensitivity, multiplier * sensitivity, guarantee, event, adjacency)

    @classmethod
    def laplace_on_grid(
        cls,
        epsilon: float,
        sensitivity: float,
        dimension: int,
        *,
        num_compositions: int = 1,
        adjacency: str = "replace-one",
        grid: float | None = None,
    ) -> Mechanism:
        """The floating-point-safe Laplace mechanism, pure epsilon-DP over `num_compositions` releases, each of
        dimension / num_compositions entries of l1 `sensitivity`: each entry rounded to `grid` (default: the largest
        power of two whose rounding adds at most 0.1 % to a release's sensitivity), then the integer c + round(X),
        X ~ Laplace(0, t) drawn exactly (`ExactSampler.rounded_laplace`), times the grid. In grid units a release's
        rounded entries have l1 sensitivity k = sensitivity / grid + entries, t is the smallest integer with
        num_compositions k / t <= epsilon, and c + round(X) is post-processing of the Laplace mechanism on c (round
        commutes with an integer shift), so each release is the `LaplaceDpEvent` of multiplier t / k."""
        guarantee = DPGuarantee(epsilon, delta=0.0)
        sensitivity = check_positive("sensitivity", sensitivity)
        dimension = check_int("dimension", dimension, minimum=1)
        num_compositions, _ = check_composition(num_compositions, 1.0)
        if adjacency not in ADJACENCIES:
            raise ValueError(f"adjacency must be one of {ADJACENCIES}, got {adjacency!r}")
        if dimension % num_compositions:
            raise ValueError(
                f"dimension={dimension} entries do not split into num_compositions={num_compositions} equal releases"
            )
        entries = dimension // num_compositions
        grid = (
            default_grid(sensitivity, entries, l1=True)
            if grid is None
            else check_grid(grid, sensitivity, entries, l1=True)
        )
        calibrated = sensitivity / grid + entries  # in grid units
        scale = num_compositions * calibrated / guarantee.epsilon  # t in grid units, before rounding up
        if not scale < LARGEST_EXACT_COUNT:  # also where it overflows a double
            raise ValueError(_laplace_steps_error(scale, grid))
        steps = math.ceil(scale)
        event = laplace_event(steps / calibrated, num_compositions)
        return cls("laplace_on_grid", sensitivity, steps * grid, guarantee, event, adjacency, grid, dimension)

    def at_sensitivity(self, sensitivity: float) -> Mechanism:
        """This float mechanism's calibration at another l2 sensitivity: the noise scales with it, the event (a
        function of the noise multiplier) is unchanged. The discrete Gaussian's grid depends on the sensitivity:
        calibrate it with `discrete_gaussian` instead."""
        if self.grid is not None:
            raise ValueError(
                f"the grid of {self.noise} noise depends on its sensitivity: calibrate the mechanism again"
            )
        sensitivity = check_positive("sensitivity", sensitivity)
        return replace(self, sensitivity=sensitivity, noise_scale=self.noise_scale / self.sensitivity * sensitivity)

    @property
    def sigma_squared_grid(self) -> Fraction:
        """sigma^2 of the discrete Gaussian in grid units, the exact rational the sampler uses."""
        if self.grid is None:
            raise ValueError(f"a {self.noise} mechanism has no grid")
        return sigma_squared_from(self.noise_scale, self.grid)

    def perturb(
        self, value, *, noise: NoiseSource, owner: str, what: str, ledger: PrivacyLedger | None = None
    ) -> tuple[np.ndarray, Release]:
        """Release `value + noise` (a float64 array) with its record."""
        value = np.asarray(value, dtype=np.float64)
        if self.grid is not None:
            return self._perturb_on_grid(value, noise=noise, owner=owner, what=what, ledger=ledger)

        def program(key, exact):
            return add_noise(key, exact, self.noise_scale, self.noise)

        output, release = self.run(
            program, (value,), noise=noise, owner=owner, what=what, dimension=value.size, ledger=ledger
        )
        return np.asarray(output), release

    def run(
        self,
        program: Callable[..., Any],
        inputs: Sequence[Any],
        *,
        noise: NoiseSource,
        owner: str,
        what: str,
        dimension: int,
        ledger: PrivacyLedger | None = None,
        identity: Sequence[Any] = (),
    ) -> tuple[Any, Release]:
        """Release `program(privacy_key, *inputs)`, a computation that adds this mechanism's noise (via
        `add_noise` with `self.noise_scale`) to what it publishes. The key comes from `noise`, claimed by
        the fingerprint of (owner, what, this mechanism, inputs, identity): `identity` holds what else makes the
        program's release differ (its settings and sampling key), so one seed is not reused for another release."""
        if self.grid is not None:
            raise ValueError(f"{self.noise} noise releases an array through perturb(), not a JAX program")
        key = self._claim_key(noise, owner, what, (*inputs, *identity))
        output = program(key, *inputs)
        return output, self._record(owner, what, dimension, ledger)

    def run_on_grid(
        self,
        program: Callable[..., Any],
        inputs: Sequence[Any],
        *,
        noise_shape: tuple[int, ...],
        noise: NoiseSource,
        owner: str,
        what: str,
        ledger: PrivacyLedger | None = None,
        identity: Sequence[Any] = (),
    ) -> tuple[Any, Release]:
        """Release `program(privacy_key, counts, *inputs)` for a Gaussian rounded to a grid: `counts` (int64,
        `noise_shape`) holds round(X) per entry in grid steps, drawn exactly here, and the program adds it in
        integers to its statistic in grid steps before anything reads the sum (the gradient trajectories of
        `bayesval.estimators.GradientSemivalues`, the KNN family's counts and values). The key is claimed as in
        `run`; the program may draw its secret subsamples from it."""
        if self.noise != "gaussian_on_grid":
            raise ValueError(f"{self.noise} noise does not release through run_on_grid()")
        key = self._claim_key(noise, owner, what, (*inputs, *identity))
        counts = self._rounded_gaussian(noise, key).sample(self.grid_steps, math.prod(noise_shape))
        output = program(key, counts.reshape(noise_shape), *inputs)
        return output, self._record(owner, what, self.dimension, ledger)

    @property
    def noise_std(self) -> float:
        """Standard deviation of the noise of each released entry (`bayesval.privacy.ledger.entry_noise_std`)."""
        return entry_noise_std(self.noise, self.noise_scale, self.grid, self.integer_statistic)

    @property
    def grid_steps(self) -> int:
        """The noise scale in whole grid steps (noise on a grid)."""
        if self.grid is None:
            raise ValueError(f"a {self.noise} mechanism has no grid")
        return round(self.noise_scale / self.grid)  # exact: a whole number times a power of two

    @staticmethod
    def _exact_seed(noise: NoiseSource, key: jax.Array) -> bytes | None:
        """Seeded (an experiment): a reproducible stream from the claimed key; else None, the OS's cryptographic
        source."""
        return np.asarray(jax.random.key_data(key)).tobytes() if noise.is_seeded else None

    def _rounded_gaussian(self, noise: NoiseSource, key: jax.Array) -> RoundedGaussianSampler:
        return RoundedGaussianSampler(RandomWords(self._exact_seed(noise, key)))

    def _claim_key(self, noise: NoiseSource, owner: str, what: str, inputs: Sequence[Any]) -> jax.Array:
        if not isinstance(noise, NoiseSource):
            raise TypeError(f"privacy noise must come from a bayesval NoiseSource, got {type(noise).__name__}")
        identity = (owner, what, self.noise, self.noise_scale, self.sensitivity, repr(self.event), self.grid)
        return noise.key(fingerprint(*identity, *inputs))

    def _record(self, owner: str, what: str, dimension: int, ledger: PrivacyLedger | None) -> Release:
        release = Release(
            owner=owner,
            what=what,
            noise=self.noise,
            sensitivity=self.sensitivity,
            noise_scale=self.noise_scale,
            dimension=int(dimension),
            guarantee=self.guarantee,
            event=self.event,
            adjacency=self.adjacency,
            grid=self.grid,
            integer_statistic=self.integer_statistic,
        )
        if ledger is not None:
            ledger.record(release)
        return release

    def _perturb_on_grid(
        self, value: np.ndarray, *, noise: NoiseSource, owner: str, what: str, ledger: PrivacyLedger | None
    ) -> tuple[np.ndarray, Release]:
        """g (round(value / g) + Z), Z exact integer noise per entry (the discrete Gaussian, or round(X) for X
        Laplace): every output is an exact double."""
        if value.size != self.dimension:
            raise ValueError(
                f"{owner}: this {ON_GRID[self.noise]} mechanism was calibrated for {self.dimension} entries (its grid "
                f"rounding is accounted per entry), got {value.size}"
            )
        if not np.all(np.isfinite(value)):
            raise ValueError(f"{owner}: the {what} to release holds non-finite values")
        key = self._claim_key(noise, owner, what, (value,))
        seed = self._exact_seed(noise, key)
        counts = [round(v) for v in (value.ravel() / self.grid).tolist()]  # exact: the grid is a power of two
        if self.noise == "gaussian_on_grid":
            draws = self._rounded_gaussian(noise, key).sample(self.grid_steps, len(counts)).tolist()
        else:
            sampler = ExactSampler(None if seed is None else random.Random(seed))
            if self.noise == "discrete_gaussian":
                sigma_squared = self.sigma_squared_grid
                draws = [sampler.discrete_gaussian(sigma_squared) for _ in counts]
            else:
                draws = [sampler.rounded_laplace(self.grid_steps) for _ in counts]
        noisy = [c + z for c, z in zip(counts, draws)]
        if max(abs(c) for c in noisy) >= LARGEST_EXACT_COUNT:
            raise ValueError(
                f"{owner}: the {what} is too large for the grid {self.grid:g}: its multiples of the grid exceed 2^53 "
                "and would not be exact doubles (the statistic's scale is far beyond its sensitivity's)"
            )
        output = (np.asarray(noisy, dtype=np.float64) * self.grid).reshape(value.shape)
        return output, self._record(owner, what, value.size, ledger)


def _gaussian_calibration(
    guarantee: DPGuarantee, sensitivity: float, num_compositions: int, sampling_probability: float, adjacency: str
) -> tuple[float, float]:
    """(sensitivity, noise multiplier) of a Gaussian mechanism for `guarantee` over `num_compositions` releases on
    Poisson subsamples of rate `sampling_probability`, its arguments checked."""
    if not isinstance(guarantee, DPGuarantee):
        raise TypeError(
            f"guarantee must be a bayesval DPGuarantee(epsilon, delta), got {guarantee!r} ({type(guarantee).__name__})"
        )
    sensitivity = check_positive("sensitivity", sensitivity)
    num_compositions, sampling_probability = check_composition(num_compositions, sampling_probability)
    if adjacency not in ADJACENCIES:
        raise ValueError(f"adjacency must be one of {ADJACENCIES}, got {adjacency!r}")
    if sampling_probability < 1 and adjacency != "add-or-remove-one":
        raise ValueError("Poisson subsampling amplifies privacy under add-or-remove-one adjacency only")
    return sensitivity, gaussian_multiplier_for(guarantee, num_compositions, sampling_probability)


def _laplace_steps_error(steps: float, grid: float) -> str:
    return (
        f"Laplace noise of {steps:.3g} steps of the grid {grid!r} is too wide to draw as exact doubles (2^53 at most): "
        "choose a coarser grid (grid=) or a larger epsilon"
    )


__all__ = ["Mechanism", "add_noise"]
