"""The one mechanism every release goes through (DESIGN.md Sec. 7).

A `Mechanism` is calibrated once by the accountant (noise scale and dp-accounting event for a
sensitivity and a guarantee) and then releases: `perturb(value, ...)` for an array, `run(program,
inputs, ...)` for a JAX program that draws its noise inside (the KNN family's noisy counts, one per
validation point). Both take the privacy key from a `NoiseSource` (never a sampling key), hand it
to the computation, and return the output with its `Release` record, recorded in the ledger if one
is given. `add_noise` is the only function that draws privacy noise; programs call it with the key
`run` gives them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import dp_accounting
import jax
import jax.numpy as jnp
import numpy as np

from bayesval.privacy.accounting import (
    DPGuarantee,
    check_composition,
    gaussian_event,
    gaussian_multiplier_for,
    laplace_event,
)
from bayesval.privacy.ledger import ADJACENCIES, PrivacyLedger, Release
from bayesval.privacy.noise import NoiseSource, fingerprint
from bayesval.validation import check_positive


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
    """Additive Gaussian or Laplace noise calibrated for `guarantee` at l2 (Gaussian) / l1 (Laplace)
    `sensitivity` under `adjacency`, with `event` the dp-accounting event of one whole release."""

    noise: str
    sensitivity: float
    noise_scale: float
    guarantee: DPGuarantee
    event: dp_accounting.DpEvent
    adjacency: str = "replace-one"

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
        if not isinstance(guarantee, DPGuarantee):
            raise TypeError(
                f"guarantee must be a bayesval DPGuarantee(epsilon, delta), got {guarantee!r} "
                f"({type(guarantee).__name__})"
            )
        sensitivity = check_positive("sensitivity", sensitivity)
        num_compositions, sampling_probability = check_composition(num_compositions, sampling_probability)
        if adjacency not in ADJACENCIES:
            raise ValueError(f"adjacency must be one of {ADJACENCIES}, got {adjacency!r}")
        if sampling_probability < 1 and adjacency != "add-or-remove-one":
            raise ValueError("Poisson subsampling amplifies privacy under add-or-remove-one adjacency only")
        multiplier = gaussian_multiplier_for(guarantee, num_compositions, sampling_probability)
        event = gaussian_event(multiplier, num_compositions, sampling_probability)
        return cls("gaussian", sensitivity, multiplier * sensitivity, guarantee, event, adjacency)

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

    def perturb(
        self, value, *, noise: NoiseSource, owner: str, what: str, ledger: PrivacyLedger | None = None
    ) -> tuple[np.ndarray, Release]:
        """Release `value + noise` (a float64 array) with its record."""
        value = np.asarray(value, dtype=np.float64)

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
    ) -> tuple[Any, Release]:
        """Release `program(privacy_key, *inputs)`, a computation that adds this mechanism's noise (via
        `add_noise` with `self.noise_scale`) to what it publishes. The key comes from `noise`, claimed by
        the fingerprint of (owner, what, this mechanism, inputs)."""
        if not isinstance(noise, NoiseSource):
            raise TypeError(f"privacy noise must come from a bayesval NoiseSource, got {type(noise).__name__}")
        identity = (owner, what, self.noise, self.noise_scale, self.sensitivity, repr(self.event))
        key = noise.key(fingerprint(*identity, *inputs))
        output = program(key, *inputs)
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
        )
        if ledger is not None:
            ledger.record(release)
        return output, release


__all__ = ["Mechanism", "add_noise"]
