"""The types the samplers share: what the mediator holds per party (`NoiseAwareData`, the input of every
sampler) and what a sampler returns for a batch of coalitions (`CoalitionDraws`). No sampler imports here, so
models, samplers and the game layer depend on this module and not on each other."""

from __future__ import annotations

from typing import NamedTuple, Protocol, runtime_checkable

import jax.numpy as jnp
import numpy as np


@runtime_checkable
class ReleasedStatistic(Protocol):
    """What a sampler needs of one party's release (`bayesval.PerturbedStatistic` keeps it): the perturbed
    statistic o_i = s_i + z_i, the record count c_i and the DP noise's standard deviation sigma_z,i."""

    perturbed: np.ndarray
    count: float
    noise_std: float


class NoiseAwareData(NamedTuple):
    """What the mediator holds of n parties, the input of every model's `posterior_draws` and `prior_draws`:
    each party's perturbed statistic (n, P), count (n,) and noise std (n,). Built from the releases with
    `NoiseAwareData.from_releases([party.release() for party in parties])`; `valuate` does this itself."""

    perturbed: jnp.ndarray
    counts: jnp.ndarray
    noise_std: jnp.ndarray

    @classmethod
    def from_releases(cls, releases) -> NoiseAwareData:
        """Stack released statistics (`PerturbedStatistic`s, or anything with .perturbed, .count, .noise_std), one
        row per party, in order."""
        if isinstance(releases, (str, bytes)) or not hasattr(releases, "__len__") or len(releases) == 0:
            raise ValueError(f"releases must be a non-empty list of released statistics, got {releases!r:.80}")
        for index, release in enumerate(releases):
            if not isinstance(release, ReleasedStatistic):
                raise TypeError(
                    f"releases[{index}] is not a released statistic (got {type(release).__name__}; expected a "
                    "bayesval.PerturbedStatistic, e.g. party.release(model.statistic(d)))"
                )
        shapes = {np.shape(release.perturbed) for release in releases}
        if len(shapes) > 1:
            raise ValueError(
                f"the releases are statistics of different shapes {sorted(shapes)}: release every party for the "
                "same model and number of features"
            )
        return cls(
            jnp.asarray(np.stack([r.perturbed for r in releases])),
            jnp.asarray([float(r.count) for r in releases]),
            jnp.asarray([r.noise_std for r in releases]),
        )

    @property
    def row_axis(self) -> int | None:
        """0 when each row of a sampler batch has its own releases (perturbed (B, n, P), as the reward mechanisms'
        modified inputs), None when every row shares them (perturbed (n, P)): the samplers' vmap axis for data."""
        return 0 if np.ndim(self.perturbed) == 3 else None

    @classmethod
    def per_row(cls, rows: list[NoiseAwareData]) -> NoiseAwareData:
        """One set of releases per sampler row, stacked (B, n, P) / (B, n) on the host and sent to the device once
        (stacking B device arrays would compile a program of B operands: a minute for 9,009 rows on a GPU)."""
        return cls(*(jnp.asarray(np.stack([np.asarray(part) for part in parts])) for parts in zip(*rows)))

    def members(self, mask: np.ndarray, width: int) -> tuple[NoiseAwareData, np.ndarray]:
        """The releases of the coalition `mask` (n,) packed into `width` slots, and the packed mask (width,): the
        members first, in order, then as many non-members as fill the width, masked out. A coalition's posterior
        p(theta | o_C) depends on its members' releases alone, so a sampler given the packed releases samples the
        same posterior while carrying `width` parties' latent variables instead of n. `width` n returns the releases
        and mask unchanged."""
        mask = np.asarray(mask, bool)
        num_parties = mask.shape[0]
        if width == num_parties:
            return self, mask
        members = np.flatnonzero(mask)
        if not len(members) <= width <= num_parties:
            raise ValueError(
                f"a coalition of {len(members)} of {num_parties} parties cannot be packed into {width} slots"
            )
        order = np.concatenate([members, np.flatnonzero(~mask)])[:width]
        return NoiseAwareData(*(np.asarray(part)[order] for part in self)), np.arange(width) < len(members)

    def tempered(self, kappa: float) -> NoiseAwareData:
        """Inputs of the kappa-tempered posterior: kappa c, kappa o, kappa Z (Sim et al. 2023, App. E.3)."""
        return NoiseAwareData(kappa * self.perturbed, kappa * self.counts, kappa * self.noise_std)


class CoalitionDraws(NamedTuple):
    """Posterior draws of a batch of coalitions: draws (B, chains, kept, d), kept_chains (B, chains) bool
    (False = dropped by the BFMI rule), per-chain sampler statistics (B, chains) in `info` and, where the sampler
    was asked for them (Gibbs), the conjugate conditional each draw's sweep drew from (`conditionals`: an NIG
    with leading axes (B, chains, kept); None otherwise)."""

    draws: np.ndarray
    kept_chains: np.ndarray
    info: dict
    conditionals: object = None

    @classmethod
    def all_kept(cls, draws: np.ndarray) -> CoalitionDraws:
        return cls(draws, np.ones(draws.shape[:2], bool), {})
