"""`NumPyroModel`: the `PartyModel` contract (`bayesval.models.protocol`) for any NumPyro model function, with
batched NUTS for the coalition posteriors (`bayesval.inference.nuts`) and `numpyro.infer.Predictive` for the prior
draws. `LinearRegression` keeps the same contract with its Gibbs kernel.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence
from functools import cached_property, lru_cache, partial

import jax
import jax.numpy as jnp
import numpy as np
from jax.tree_util import Partial
from numpyro import handlers
from numpyro.distributions import MaskedDistribution, Unit
from numpyro.distributions.transforms import biject_to
from numpyro.infer import Predictive

from bayesval.inference.config import SamplerConfig
from bayesval.inference.data import CoalitionDraws, NoiseAwareData
from bayesval.inference.nuts import NUTSSettings, sample_coalition_posteriors_nuts
from bayesval.validation import check_bool, check_int, check_non_negative, check_probability, user_stacklevel

# Unconstrained coordinates from which warm_start=None starts chains warm: the three Pima hospitals' 45 (8 features)
# were valued 1.88x faster warm at the NUTS fast preset's warm budget, Diab's 15 (4 features) 1.4-1.6x slower, its
# fixed cost (compiling and running the fits) outweighing the sweeps saved (docs/benchmarks.md)
WARM_START_FROM = 30


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
    target_accept_prob, max_tree_depth, min_bfmi: the NUTS kernel's settings (`NUTSSettings`), the model's own as
    in NumPyro's `NUTS(...)` (`kernel_settings`); a `SamplerConfig` that still passes target_accept_prob or min_bfmi
    (deprecated) overrides them in its runs (`SamplerConfig.overriding`).
    warm_start: start each coalition's chains from a Laplace fit of its posterior, with a dense mass matrix, warm-up
    adapting the step size only (`bayesval.inference.nuts`); False (the default): from prior draws, adapting a
    diagonal mass matrix; None: warm where the posterior has at least `WARM_START_FROM` unconstrained coordinates
    (`kernel_settings(data)` decides, from the releases' shapes). It pays on posteriors of many coordinates with
    the shorter budget the config gives warm chains (`SamplerConfig.for_start`; docs/benchmarks.md, "A warm start
    for NUTS" and "The three hospitals in a minute and a half").
    """

    sampler = "nuts"

    def __init__(
        self,
        model_fn: Callable,
        parameters: Sequence[str],
        statistic=None,
        name: str = "NumPyro model (NUTS)",
        max_tree_depth: int = 10,
        target_accept_prob: float = 0.8,
        min_bfmi: float = 0.3,
        warm_start: bool | None = False,
    ) -> None:
        if not isinstance(name, str):
            raise TypeError(f"NumPyroModel: name must be a string, got {name!r} ({type(name).__name__})")
        if not callable(model_fn):
            raise TypeError(
                f"{name}: model_fn must be a NumPyro model function model_fn(data, mask), got "
                f"{model_fn!r} ({type(model_fn).__name__})"
            )
        self.model_fn, self.name = model_fn, name
        self.parameters = _check_parameters(name, parameters)
        self.max_tree_depth = check_int(f"{name}: max_tree_depth", max_tree_depth, minimum=1)
        self.target_accept_prob = check_probability(f"{name}: target_accept_prob", target_accept_prob)
        self.min_bfmi = check_non_negative(f"{name}: min_bfmi", min_bfmi)
        if warm_start is not None:
            warm_start = check_bool(f"{name}: warm_start (or None)", warm_start)
        self.warm_start = warm_start
        self._coordinates: dict[tuple, int] = {}
        if statistic is not None and not callable(statistic) and not hasattr(statistic, "compute"):
            raise TypeError(
                f"{name}: statistic must be None, an object with size, compute(X, y) and sensitivity(bounds), "
                f"or a function of the number of features returning one; got {statistic!r} "
                f"({type(statistic).__name__})"
            )
        self._statistic = statistic

    def model(self, data: NoiseAwareData, mask: jnp.ndarray) -> None:
        self.model_fn(data, mask)

    @property
    def kernel(self) -> NUTSSettings:
        """The model's NUTS kernel settings."""
        return NUTSSettings(self.target_accept_prob, self.max_tree_depth, self.min_bfmi, self.warm_start)

    def kernel_settings(self, data: NoiseAwareData | None = None) -> NUTSSettings:
        """The model's NUTS kernel settings, whatever the releases `data`: the one signature of a party model's
        `kernel_settings` (`bayesval.models.protocol`). A run under a config that still passes a kernel field
        (deprecated) uses them with that field over them (`SamplerConfig.overriding`). kernel_settings(config), the
        earlier signature, gives those for one release, with a DeprecationWarning."""
        if not isinstance(data, SamplerConfig):
            if self.warm_start is None and data is not None:
                return self.kernel._replace(warm_start=self.unconstrained_coordinates(data) >= WARM_START_FROM)
            return self.kernel
        warnings.warn(
            f"{type(self).__name__}.kernel_settings(config) is deprecated: kernel settings are the model's, "
            "kernel_settings(data), the one signature of every party model (docs/user_models.md); "
            "config.overriding(model.kernel_settings(data)) gives what a run under the config uses",
            DeprecationWarning,
            stacklevel=user_stacklevel(),
        )
        return data.overriding(self.kernel)

    def unconstrained_coordinates(self, data: NoiseAwareData) -> int:
        """The number of coordinates NUTS moves for the releases `data` (every latent site mapped to the real
        line), from one abstract trace of the model (`jax.eval_shape`), once per shape of the releases."""
        if data.row_axis is not None:  # one set of releases per sampler row: they share their shapes
            data = jax.tree.map(lambda leaf: leaf[0], data)
        shapes = tuple(np.shape(leaf) for leaf in data)
        if shapes not in self._coordinates:
            sizes = []

            def latent(data):
                trace = handlers.trace(handlers.seed(self.model, 0)).get_trace(data, jnp.zeros(shapes[1], bool))
                for site in trace.values():
                    if site["type"] == "sample" and not site["is_observed"]:
                        transform = biject_to(site["fn"].support)
                        sizes.append(int(np.prod(transform.inverse_shape(jnp.shape(site["value"])))))
                return 0

            jax.eval_shape(latent, data)
            self._coordinates[shapes] = sum(sizes)
        return self._coordinates[shapes]

    def statistic(self, num_features: int):
        if self._statistic is None:
            raise TypeError(f"{self.name} declares no party-side statistic: pass released PerturbedStatistic objects")
        factory = isinstance(self._statistic, type) or not hasattr(self._statistic, "compute")
        return self._statistic(num_features) if factory else self._statistic

    def check(self, data: NoiseAwareData) -> None:
        """Refuse a model `valuate()` would value wrongly or fail on deep inside JAX, before any sampling.

        Traces the model once with the empty coalition and a fixed key (abstractly, by `jax.eval_shape`:
        no compilation, no sampling, as the samplers trace it) and checks that
          * it runs at all (any exception becomes a ValueError naming the model and the original error);
          * every name in `parameters` is a latent sample site;
          * no `numpyro.factor` and no observed site is left active by the all-False mask: prior draws
            are made by forward-sampling the model with the empty coalition, which ignores factors and
            observations, so such a model would be valued against the wrong prior.
        """
        num_parties = int(np.shape(data.counts)[0])
        try:
            trace = _trace_empty_coalition(self.model, data, num_parties, abstract=True)
            try:
                activity = {name: _active(site) for name, site in trace.items() if site["type"] == "sample"}
            except (jax.errors.TracerArrayConversionError, jax.errors.ConcretizationTypeError):
                # a mask the model computed from traced values: run it for real to read the mask
                trace = _trace_empty_coalition(self.model, data, num_parties, abstract=False)
                activity = {name: _active(site) for name, site in trace.items() if site["type"] == "sample"}
        except Exception as error:
            raise ValueError(
                f"{self.name}: the model function raised {type(error).__name__} when run once with the empty "
                f"coalition on the released statistics (data.perturbed of shape {tuple(np.shape(data.perturbed))}, "
                f"{num_parties} parties): {error}"
            ) from error
        sample_sites = {site_name: site for site_name, site in trace.items() if site["type"] == "sample"}
        latent = [
            site_name
            for site_name, site in sample_sites.items()
            if not site["is_observed"] and not _is_factor(site["fn"])
        ]
        for parameter in self.parameters:
            site = sample_sites.get(parameter)
            if site is None or parameter not in latent:
                what = (
                    "is not a sample site"
                    if site is None
                    else ("is a numpyro.factor" if _is_factor(site["fn"]) else "is an observed site")
                )
                raise ValueError(
                    f"{self.name}: parameter {parameter!r} {what} of the model; parameters must name latent "
                    f"sample sites, the model's are {latent}"
                )
        for site_name, site in sample_sites.items():
            if not (site["is_observed"] and activity[site_name]):
                continue
            if _is_factor(site["fn"]):
                raise ValueError(
                    f"{self.name}: numpyro.factor site {site_name!r} is active with the empty coalition. Prior "
                    "draws are made by forward-sampling the model with the empty coalition, which ignores "
                    "factors, so the model would be valued against the wrong prior. Restrict a prior with a "
                    "truncated or otherwise proper distribution instead (dist.TruncatedNormal, or a custom "
                    "Distribution like bv.models.logistic_regression.NormTruncatedNormal); a likelihood factor "
                    "belongs in numpyro.plate('parties', n) under numpyro.handlers.mask(mask=mask)"
                )
            raise ValueError(
                f"{self.name}: observed site {site_name!r} is not masked out for the empty coalition, so its "
                "data would enter every coalition's posterior (and prior draws, made by forward-sampling the "
                "model, would ignore it). Put the likelihood in numpyro.plate('parties', n) under "
                "numpyro.handlers.mask(mask=mask)"
            )

    def prior_draws(self, key: jax.Array, data: NoiseAwareData, num_draws: int) -> jax.Array:
        """i.i.d. draws of theta from the prior, (num_draws, d): the model run with the empty coalition, compiled
        (the likelihood's moments, computed but unused, are pruned by the compiler); a JAX function of the key."""
        return _prior_sampler(self.model, tuple(self.parameters), int(num_draws))(key, data)

    def prior_log_density(self, data: NoiseAwareData) -> Partial | None:
        """theta (d,) -> log p(theta), the sum of the parameter sites' prior log densities, when that is theta's
        marginal prior: when the parameter sites' distributions depend on no other latent site (checked by
        evaluating them under two different draws of the rest, in one compiled program). None otherwise; then
        `valuate` compares posterior draws with prior draws (the two-sample KL estimator). A `Partial` with the
        data as its traced argument, so one compiled program serves every release of the same shape."""
        probe = jnp.asarray(self.prior_draws(jax.random.key(1), data, 4))
        under = [np.asarray(values) for values in self._density_under_two_draws(data, probe)]
        if not (np.all(np.isfinite(under[0])) and np.allclose(under[0], under[1], rtol=1e-12, atol=0)):
            return None
        return Partial(self._parameter_log_density, data)

    @cached_property
    def _density_under_two_draws(self) -> Callable:
        """(data, thetas) -> the parameter sites' log densities at thetas under two draws of the other sites, one
        compiled program per model (the check `prior_log_density` makes on every valuation)."""

        def under(data, thetas):
            return [jax.vmap(partial(self._parameter_log_density, data, seed=seed))(thetas) for seed in (2, 3)]

        return jax.jit(under)

    def _parameter_log_density(self, data: NoiseAwareData, theta: jnp.ndarray, seed: int = 0) -> jnp.ndarray:
        """The parameter sites' prior log densities at theta, the other latent sites drawn with `seed`."""
        empty = jnp.zeros(data.counts.shape[0], bool)
        example = handlers.trace(handlers.seed(self.model, seed)).get_trace(data, empty)
        shapes = [np.shape(example[site]["value"]) for site in self.parameters]
        parts = jnp.split(theta, np.cumsum([int(np.prod(shape)) for shape in shapes])[:-1])
        values = {site: part.reshape(shape) for site, part, shape in zip(self.parameters, parts, shapes)}
        model = handlers.seed(handlers.substitute(self.model, data=values), seed)
        trace = handlers.trace(model).get_trace(data, empty)
        return sum(jnp.sum(trace[site]["fn"].log_prob(trace[site]["value"])) for site in self.parameters)

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
            **config.overriding(self.kernel_settings(data))._asdict(),
            **config.chain_settings,
        )


@lru_cache(maxsize=64)
def _prior_sampler(model: Callable, parameters: tuple[str, ...], num_draws: int) -> Callable:
    """(key, data) -> (num_draws, d) prior draws of the `parameters` sites, one compiled program per model and
    draw count."""

    def draw(key, data):
        empty = jnp.zeros(data.counts.shape[0], bool)
        samples = Predictive(model, num_samples=num_draws, return_sites=list(parameters))(key, data, empty)
        missing = set(parameters) - set(samples)
        if missing:
            raise ValueError(f"parameters {sorted(missing)} are not sample sites of the model")
        return jnp.concatenate([samples[site].reshape(num_draws, -1) for site in parameters], axis=1)

    return jax.jit(draw)


def _check_parameters(name: str, parameters) -> tuple[str, ...]:
    """A non-empty sequence of distinct, non-empty site names, as a tuple (its order lays out theta)."""
    if isinstance(parameters, (str, bytes)):
        raise TypeError(
            f"{name}: parameters must be a list of sample-site names such as [{parameters!r}], not the bare "
            f"string {parameters!r} (it would be read as the names {list(parameters)[:4]}...)"
        )
    if isinstance(parameters, (set, frozenset, dict)) or not hasattr(parameters, "__iter__"):
        raise TypeError(
            f"{name}: parameters must be a list or tuple of sample-site names (its order lays out theta), "
            f"got {parameters!r} ({type(parameters).__name__})"
        )
    names = tuple(parameters)
    if not names:
        raise ValueError(f"{name}: parameters must name at least one sample site of the model")
    for site in names:
        if not isinstance(site, str):
            raise TypeError(f"{name}: parameters must be site names (strings), got {site!r} ({type(site).__name__})")
        if not site:
            raise ValueError(f"{name}: parameters has an empty site name: {list(names)}")
    repeated = sorted({site for site in names if names.count(site) > 1})
    if repeated:
        raise ValueError(f"{name}: parameters name {repeated} more than once: {list(names)}")
    return tuple(str(site) for site in names)


def _trace_empty_coalition(model: Callable, data: NoiseAwareData, num_parties: int, abstract: bool) -> dict:
    """The trace of `model(data, all-False mask)` under a fixed key; with abstract=True traced by
    `jax.eval_shape` (site values are tracers; the mask stays a concrete numpy array)."""
    empty = np.zeros(num_parties, bool)
    traced = handlers.trace(handlers.seed(model, rng_seed=0))
    if not abstract:
        return traced.get_trace(data, jnp.asarray(empty))
    box: dict = {}

    def run(data):
        box["trace"] = traced.get_trace(data, empty)

    jax.eval_shape(run, data)
    return box["trace"]


def _unwrap(fn) -> tuple:
    """A site's distribution without its wrappers (masked, expanded, independent), and whether any part
    of it is left unmasked (numpyro.handlers.mask wraps the distribution in a MaskedDistribution)."""
    unmasked = True
    while True:
        if isinstance(fn, MaskedDistribution):
            unmasked = unmasked and bool(np.any(np.asarray(fn._mask)))
        if not hasattr(fn, "base_dist"):
            return fn, unmasked
        fn = fn.base_dist


def _is_factor(fn) -> bool:
    """Whether a sample site is a `numpyro.factor` (a Unit distribution, possibly wrapped)."""
    return isinstance(_unwrap(fn)[0], Unit)


def _active(site: dict) -> bool:
    """Whether a site contributes to the log density: not masked out entirely, and not scaled by 0."""
    mask, scale = site.get("mask"), site.get("scale")
    if not _unwrap(site["fn"])[1] or (mask is not None and not np.any(np.asarray(mask))):
        return False
    return scale is None or bool(np.any(np.asarray(scale) != 0))
