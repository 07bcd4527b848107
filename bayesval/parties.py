"""Party side of the privacy boundary (Sim et al. 2023, Sec. 2): clip to declared bounds, compute
the exact sufficient statistic, perturb it with the Gaussian mechanism, release (o_i, c_i, sigma_i)."""

from __future__ import annotations

import secrets
from dataclasses import dataclass, field

import jax
import numpy as np

from bayesval.privacy import DPGuarantee, Release, gaussian_mechanism
from bayesval.statistics import Bounds, LinearRegressionStatistic
from bayesval.validation import check_finite_array


@dataclass(frozen=True)
class PerturbedStatistic:
    """What crosses the privacy boundary: o_i = s_i + z_i, the count c_i, the noise std and its release record."""

    owner: str
    perturbed: np.ndarray
    count: int
    noise_std: float
    release: Release


def clip_records(X: np.ndarray, y: np.ndarray, bounds: Bounds) -> tuple[np.ndarray, np.ndarray, int]:
    """Scale rows with ||x|| > x_norm onto the ball and clip |y| to y_abs (when declared); also return how
    many rows changed."""
    norms = np.linalg.norm(X, axis=1)
    over_x = norms > bounds.x_norm
    X = np.where(over_x[:, None], X * (bounds.x_norm / np.maximum(norms, 1e-300))[:, None], X)
    if bounds.y_abs is None:
        return X, y, int(np.sum(over_x))
    over_y = np.abs(y) > bounds.y_abs
    return X, np.clip(y, -bounds.y_abs, bounds.y_abs), int(np.sum(over_x | over_y))


@dataclass
class Party:
    """A data owner: raw (X, y) that never leave it, its privacy level and the declared bounds.

    epsilon (with rdp_order, default 2 as in Sim et al.) asks for (rdp_order, epsilon)-Renyi DP;
    with delta set it asks for (epsilon, delta)-DP instead. Privacy noise comes from the party's own
    key stream: `noise_seed` (fresh OS entropy when None), never from the mediator's sampling key.
    """

    X: np.ndarray
    y: np.ndarray
    epsilon: float
    bounds: Bounds
    name: str | None = None
    delta: float | None = None
    rdp_order: float = 2.0
    noise_seed: int | None = None
    guarantee: DPGuarantee = field(init=False)

    def __post_init__(self) -> None:
        label = self.name or "party"
        self.X = check_finite_array(f"{label}: X", self.X, ndim=2)
        self.y = check_finite_array(f"{label}: y", self.y, ndim=1)
        if len(self.X) == 0:
            raise ValueError(f"{label} has no data: X has 0 rows")
        if len(self.X) != len(self.y):
            raise ValueError(f"{label}: X has {len(self.X)} rows but y has {len(self.y)} entries")
        if not isinstance(self.bounds, Bounds):
            raise TypeError(f"{label}: bounds must be bayesval.Bounds(x_norm=..., y_abs=...), got {self.bounds!r}")
        try:
            self.guarantee = DPGuarantee(self.epsilon, self.delta, self.rdp_order)
        except ValueError as error:
            raise ValueError(f"{label}: {error}") from None

    @property
    def num_features(self) -> int:
        return self.X.shape[1]

    def release(self, statistic=None) -> PerturbedStatistic:
        """Clip, compute the exact statistic s_i and release o_i = s_i + N(0, sigma_i^2 I).

        statistic: anything with compute(X, y) and sensitivity(bounds); linear regression's by default.
        """
        statistic = statistic or LinearRegressionStatistic(self.num_features)
        X, y, clipped = clip_records(self.X, self.y, self.bounds)
        try:
            exact, sensitivity = statistic.compute(X, y), statistic.sensitivity(self.bounds)
        except ValueError as error:
            raise ValueError(f"{self.name or 'party'}: {error}") from None
        seed = self.noise_seed if self.noise_seed is not None else secrets.randbits(63)
        perturbed, release = gaussian_mechanism(
            jax.random.key(seed),
            exact,
            sensitivity,
            self.guarantee,
            owner=self.name or "party",
            what="sufficient statistic",
            clipped_rows=clipped,
        )
        return PerturbedStatistic(self.name or "party", perturbed, len(X), release.noise_std, release)

    def exact_statistic(self, statistic=None) -> np.ndarray:
        """s_i of the clipped data, for experiments that compare against the non-private setting."""
        statistic = statistic or LinearRegressionStatistic(self.num_features)
        return statistic.compute(*clip_records(self.X, self.y, self.bounds)[:2])
