"""The protocol every model `valuate()` accepts, and its NUTS implementation for any NumPyro model.

`valuate()` needs four things from a model: `statistic(num_features)` (what a raw `Party` computes
and releases; any object with `size`, `compute(X, y)` and `sensitivity(bounds)`), `prior_draws(key,
data, num_draws)` (i.i.d. draws of theta, the KL reference), `posterior_draws(key, data, masks,
config)` (draws of p(theta | o_C) for a batch of coalition masks, as `CoalitionDraws`), and `sampler`
('gibbs' or 'nuts', which picks the presets). `LinearRegression` implements them with its Gibbs
kernel; `NumPyroModel` implements them for any NumPyro model function with batched NUTS and
`numpyro.infer.Predictive`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import jax
import jax.numpy as jnp
import numpy as np
from numpyro.infer import Predictive

from bayesval.inference.gibbs import NoiseAwareData
from bayesval.inference.nuts import CoalitionDraws, sample_coalition_posteriors_nuts
from bayesval.presets import SamplerConfig


class NumPyroModel:
    """A noise-aware NumPyro model, valued by NUTS over all coalitions at once.

    model_fn(data, mask) is a NumPyro model of what the mediator holds about all n parties:
      data.perturbed (n, P): the released o_i = s_i + z_i;  data.counts (n,): c_i;
      data.noise_std (n,): the std of the DP noise z_i;  mask (n,) bool: the coalition C.
    Only members may enter the likelihood: put it in `numpyro.plate("parties", n)` under
    `numpyro.handlers.mask(mask=mask)`. With an all-False mask the model is its prior, which is how
    prior draws are made, so every parameter site needs a distribution that can be sampled (no
    `numpyro.factor` truncations). Likelihood tempering by kappa (Sim et al. 2023, App. E.3)
    arrives folded into the data, as (kappa c_i, kappa o_i, kappa sigma_z,i): `data.tempered(kappa)`.
    parameters: the sites that make up theta, the quantity valued (other sites are nuisance).
    statistic: the party-side statistic (an object, or a function of the number of features
    returning one); None if parties arrive already released as `PerturbedStatistic`s.
    """

    sampler = "nuts"

    def __init__(
        self,
        model_fn: Callable,
        parameters: Sequence[str],
        statistic=None,
        name: str = "NumPyro model (NUTS)",
        max_tree_depth: int = 10,
    ) -> None:
        if not parameters:
            raise ValueError("parameters must name at least one sample site of the model")
        self.model_fn, self.parameters, self.name = model_fn, tuple(parameters), name
        self.max_tree_depth = max_tree_depth
        self._statistic = statistic

    def model(self, data: NoiseAwareData, mask: jnp.ndarray) -> None:
        self.model_fn(data, mask)

    def statistic(self, num_features: int):
        if self._statistic is None:
            raise TypeError(f"{self.name} declares no party-side statistic: pass released PerturbedStatistic objects")
        factory = isinstance(self._statistic, type) or not hasattr(self._statistic, "compute")
        return self._statistic(num_features) if factory else self._statistic

    def prior_draws(self, key: jax.Array, data: NoiseAwareData, num_draws: int) -> np.ndarray:
        """i.i.d. draws of theta from the prior, (num_draws, d): the model run with the empty coalition."""
        empty = jnp.zeros(data.counts.shape[0], bool)
        samples = Predictive(self.model, num_samples=num_draws, return_sites=list(self.parameters))(key, data, empty)
        missing = set(self.parameters) - set(samples)
        if missing:
            raise ValueError(f"{self.name}: parameters {sorted(missing)} are not sample sites of the model")
        return np.concatenate([np.asarray(samples[s]).reshape(num_draws, -1) for s in self.parameters], axis=1)

    def posterior_draws(
        self, key: jax.Array, data: NoiseAwareData, masks: np.ndarray, config: SamplerConfig
    ) -> CoalitionDraws:
        """Draws of theta from p(theta | o_C) for every coalition mask: batched NUTS."""
        return sample_coalition_posteriors_nuts(
            key,
            self.model,
            data,
            masks,
            self.parameters,
            target_accept_prob=config.target_accept_prob,
            max_tree_depth=self.max_tree_depth,
            min_bfmi=config.min_bfmi,
            **config.chain_settings,
        )
