"""The Gibbs kernel's types, NamedTuples in the manner of BlackJAX's `base.py` (a state, the step's fixed inputs,
its static settings), so that `init` and `step` are pure functions of pytrees that `vmap`, `scan` and `jit` take
as they are."""

from __future__ import annotations

from typing import NamedTuple

import jax.numpy as jnp

from bayesval.inference.conjugate import NIG, NIW
from bayesval.inference.data import NoiseAwareData
from bayesval.inference.gibbs.adaptation import RunningMoments
from bayesval.statistics import LinearRegressionStatistic


class GibbsState(NamedTuple):
    """One chain's position, theta = (w, sigma^2) and every party's data model omega_i = (mu_i, Sigma_i), with
    the moments its collapsed moves propose from (`proposal`, frozen between warm-up windows) and those of the
    warm-up window under way (`window`). The latent statistics s_i are not kept: each sweep redraws them first."""

    weights: jnp.ndarray  # (D,) slope then bias
    noise_var: jnp.ndarray  # ()
    x_mean: jnp.ndarray  # (n, w)
    x_cov: jnp.ndarray  # (n, w, w)
    proposal: RunningMoments  # of joint_coordinates: the fit the collapsed moves propose from
    window: RunningMoments  # of joint_coordinates: the draws of the current warm-up window

    @property
    def theta(self) -> jnp.ndarray:
        """(..., D + 1): w then sigma^2, for one chain or a batch of them."""
        return jnp.concatenate([self.weights, self.noise_var[..., None]], axis=-1)


class BLRPriors(NamedTuple):
    """The conjugate priors of Sim et al.'s (2023, App. A.3) noise-aware linear regression: NIG over theta and
    NIW over each party's input distribution."""

    model: NIG
    data: NIW


class GibbsInputs(NamedTuple):
    """What one chain's sweeps condition on, all traced: the released statistics (`NoiseAwareData`), the
    coalition mask (n,) and the priors. Batched over (coalition, chain) by the driver."""

    data: NoiseAwareData
    mask: jnp.ndarray
    priors: BLRPriors


class GibbsSettings(NamedTuple):
    """The kernel's static settings (hashable: one compiled program per value), owned by the model
    (`bayesval.models.LinearRegression`): the statistic's layout, whether the parties share one data model, and
    how many interweaving (Yu & Meng 2011) and collapsed (van Dyk & Park 2008) moves each sweep makes;
    `interweaving_moves=0, collapsed_moves=0` is Sim et al.'s (2023) Algorithm 1 as printed."""

    statistic: LinearRegressionStatistic
    shared_data_model: bool = False
    interweaving_moves: int = 0
    collapsed_moves: int = 8

    def blocks(self, num_parties: int) -> int:
        """The data-model blocks the collapsed moves adapt to: 1 if shared, else one per party."""
        return 1 if self.shared_data_model else num_parties
