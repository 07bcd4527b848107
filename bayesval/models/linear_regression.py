"""Noise-aware Bayesian linear regression (Sim et al. 2023, Sec. 2 and App. A.3, Fig. 4).

Generative process for the parties of a coalition C (plate over parties):
    sigma^2 ~ InvGamma(a0, b0),  w | sigma^2 ~ N(mu0, sigma^2 Lambda0^-1)            theta
    (mu_i, Sigma_i) ~ NIW(m0, kappa0, Psi0, nu0)       (one shared draw if shared)   omega
    s_i | theta, omega_i ~ N(c_i mu_t, c_i Sigma_t)    (CLT over the c_i records)
    o_i | s_i ~ N(s_i, sigma_z,i^2 I)                  (the Gaussian DP mechanism)
`noise_aware_linear_regression` writes it in NumPyro; `LinearRegression` bundles the priors with
the samplers bayesval uses for it: the batched Gibbs sampler (Algorithm 1) for coalition
posteriors, i.i.d. prior draws, and the closed-form NIG posteriors of the exact-statistics and
noise-naive baselines.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
import numpyro
import numpyro.distributions as dist
from jax.tree_util import Partial

from bayesval.compilation import Program
from bayesval.games.control import Surrogate, SurrogateValues
from bayesval.games.masks import coalition_masks, mask_codes
from bayesval.inference.clt import linear_regression_record_moments, pair_product_moments
from bayesval.inference.config import SamplerConfig
from bayesval.inference.conjugate import NIG, NIW, nig_draws, nig_log_density, nig_update
from bayesval.inference.data import CoalitionDraws, NoiseAwareData
from bayesval.inference.gibbs import BLRPriors, GibbsRun, GibbsSettings, plan_coalition_posteriors
from bayesval.inference.importance import ImportanceDraws, importance_draws, importance_programs
from bayesval.inference.laplace import CONVERGED, SurpriseTable
from bayesval.inference.party_product import PARTY_PRODUCT, PartyMessages, party_messages, product_surprises
from bayesval.statistics import LinearRegressionStatistic
from bayesval.validation import check_bool, check_count, user_stacklevel


# Each default prior is one compiled program (0.1 s on a first call; built op by op, its arrays compiled a dozen
# one-operation programs, 0.5 s of a first valuation), and a program that builds it (`make_syn`'s) inlines the same
# operations, so its values are unchanged to the bit.
@partial(jax.jit, static_argnums=0)
def syn_model_prior(num_features: int = 2) -> NIG:
    """Sim et al.'s Syn prior: sigma^2 ~ InvGamma(5, 0.1), w | sigma^2 ~ N(0, sigma^2 / 0.025 I) (slope and bias)."""
    dim = num_features + 1
    return NIG(jnp.zeros(dim), 0.025 * jnp.eye(dim), jnp.asarray(5.0), jnp.asarray(0.1))


@partial(jax.jit, static_argnums=0)
def syn_data_prior(num_features: int = 2) -> NIW:
    """Sim et al.'s Syn data model: Sigma ~ InvWishart(I, 50), mu | Sigma ~ N(0, Sigma)."""
    return NIW(jnp.zeros(num_features), jnp.asarray(1.0), jnp.eye(num_features), jnp.asarray(50.0))


def noise_aware_linear_regression(
    perturbed: jnp.ndarray,
    counts: jnp.ndarray,
    noise_std: jnp.ndarray,
    mask: jnp.ndarray,
    *,
    statistic: LinearRegressionStatistic,
    prior: NIG,
    data_prior: NIW,
    shared_data_model: bool = False,
    latent_statistics: bool = False,
) -> None:
    """The noise-aware BLR model over the perturbed statistics `perturbed` (n, P) of the parties in `mask`.

    With latent_statistics=False the exact statistics are integrated out, o_i ~ N(c_i mu_t,
    c_i Sigma_t + sigma_z,i^2 I), which is the form gradient-based samplers (NUTS) need.
    """
    num_parties = perturbed.shape[0]
    noise_var = numpyro.sample("noise_var", dist.InverseGamma(prior.shape, prior.scale))
    weights = numpyro.sample(
        "weights", dist.MultivariateNormal(prior.mean, precision_matrix=prior.precision / noise_var)
    )
    plate_size = 1 if shared_data_model else num_parties
    with numpyro.plate("data_models", plate_size):
        x_cov = numpyro.sample("x_cov", dist.InverseWishart(data_prior.dof, data_prior.scale))
        x_mean = numpyro.sample(
            "x_mean", dist.MultivariateNormal(data_prior.mean, x_cov / data_prior.kappa[..., None, None])
        )
    x_mean = jnp.broadcast_to(x_mean, (num_parties,) + x_mean.shape[1:])
    x_cov = jnp.broadcast_to(x_cov, (num_parties,) + x_cov.shape[1:])
    rows, cols = statistic.pairs

    def statistic_moments(mean, cov):
        return pair_product_moments(*linear_regression_record_moments(weights, noise_var, mean, cov), rows, cols)

    t_mean, t_cov = jax.vmap(statistic_moments)(x_mean, x_cov)
    clt_mean, clt_cov = counts[:, None] * t_mean, counts[:, None, None] * t_cov
    dp_cov = (noise_std**2)[:, None, None] * jnp.eye(t_mean.shape[-1])
    with numpyro.plate("parties", num_parties), numpyro.handlers.mask(mask=mask):
        if latent_statistics:
            exact = numpyro.sample("statistics", dist.MultivariateNormal(clt_mean, clt_cov + 1e-9 * dp_cov))
            numpyro.sample("perturbed", dist.MultivariateNormal(exact, dp_cov), obs=perturbed)
        else:
            numpyro.sample("perturbed", dist.MultivariateNormal(clt_mean, clt_cov + dp_cov), obs=perturbed)


@dataclass(frozen=True)
class LinearRegression:
    """Bayesian linear regression with a bias, valued from DP-perturbed sufficient statistics.

    prior: NIG over theta = (w, sigma^2), w = (slope..., bias); data_prior: NIW over each party's
    input distribution (one shared draw if shared_data_model). None gives Sim et al.'s Syn
    hyperparameters for the number of features in the data. Each Gibbs sweep opens with
    collapsed_moves independence moves of theta and of each data model with the statistics integrated
    out, proposing from Student t conditionals of a Gaussian fitted to the chains' warm-up draws; the theta kept
    is then Algorithm 1's conjugate draw given statistics imputed from the releases (exact at negligible
    noise), while the moves set the mixing where noise dominates. interweaving_moves random-walk moves
    in the ancillary parameterisation may follow (the earlier default, 4, with collapsed_moves=0);
    both 0 = Algorithm 1 as printed (docs/architecture.md, docs/benchmarks.md).
    """

    prior: NIG | None = None
    data_prior: NIW | None = None
    shared_data_model: bool = False
    interweaving_moves: int = 0
    collapsed_moves: int = 8

    name = "noise-aware Bayesian linear regression (Gibbs)"
    sampler = "gibbs"
    # each Gibbs chain carries every party's latent statistic and data model, so a coalition's chains are given its
    # members only (`NoiseAwareData.members`): the priors do not depend on the number of parties
    packs_members = True

    def __post_init__(self) -> None:
        for field, kind, example in (("prior", NIG, "syn_model_prior(w)"), ("data_prior", NIW, "syn_data_prior(w)")):
            value = getattr(self, field)
            if value is not None and not isinstance(value, kind):
                raise TypeError(
                    f"LinearRegression.{field} must be a {kind.__name__} (e.g. bv.models.{example}) or None, "
                    f"got {type(value).__name__}"
                )
        object.__setattr__(
            self, "shared_data_model", check_bool("LinearRegression.shared_data_model", self.shared_data_model)
        )
        for field in ("interweaving_moves", "collapsed_moves"):
            object.__setattr__(self, field, check_count(f"LinearRegression.{field}", getattr(self, field), minimum=0))

    def check(self, data: NoiseAwareData) -> None:
        """Refuse released statistics this model cannot value, before any sampling: the statistic length must
        be that of a linear-regression statistic, and user priors must have its number of features
        (NIG over w = (slope..., bias): num_features + 1; NIW over x: num_features)."""
        num_features = _num_features(data)
        expected = {
            "prior": (self.prior, {"mean": (num_features + 1,), "precision": (num_features + 1,) * 2}),
            "data_prior": (self.data_prior, {"mean": (num_features,), "scale": (num_features,) * 2}),
        }
        for field, (prior, shapes) in expected.items():
            if prior is None:
                continue
            for part, shape in shapes.items():
                actual = tuple(np.shape(getattr(prior, part)))
                if actual != shape:
                    raise ValueError(
                        f"LinearRegression.{field}.{part} has shape {actual}, but the released statistics are of "
                        f"{num_features} features, which needs shape {shape}"
                    )

    def statistic(self, num_features: int) -> LinearRegressionStatistic:
        return LinearRegressionStatistic(num_features)

    def priors(self, num_features: int) -> BLRPriors:
        return BLRPriors(
            self.prior if self.prior is not None else syn_model_prior(num_features),
            self.data_prior if self.data_prior is not None else syn_data_prior(num_features),
        )

    @staticmethod
    def parameter_names(num_features: int) -> list[str]:
        return [f"w{j + 1}" for j in range(num_features)] + ["bias", "noise_var"]

    def prior_draws(self, key: jax.Array, data: NoiseAwareData, num_draws: int) -> jax.Array:
        """i.i.d. draws of theta = (w, sigma^2) from the NIG prior: (num_draws, D + 1), a JAX function of the key."""
        return nig_draws(key, self.priors(_num_features(data)).model, num_draws)

    def prior_log_density(self, data: NoiseAwareData) -> Partial:
        """theta = (w, sigma^2) (D + 1,) -> log NIG(theta | prior), the prior density the KL estimator uses (a
        `Partial`: the prior is its traced argument, so one compiled program serves every prior)."""
        return Partial(_nig_theta_log_density, self.priors(_num_features(data)).model)

    def kernel_settings(self, data: NoiseAwareData) -> GibbsSettings:
        """The Gibbs kernel's settings this model owns for the releases `data` (its statistic's layout, shared data
        model, moves): the static part of the kernel, as NumPyro's kernels own theirs while `SamplerConfig` holds
        the run budget. The one signature of a party model's `kernel_settings` (`bayesval.models.protocol`);
        kernel_settings(num_features), the earlier one, works for one release with a DeprecationWarning."""
        if isinstance(data, NoiseAwareData):
            num_features = _num_features(data)
        else:
            num_features = check_count("LinearRegression.kernel_settings: num_features", data, minimum=1)
            warnings.warn(
                "LinearRegression.kernel_settings(num_features) is deprecated: pass the releases, "
                "kernel_settings(data), the one signature of every party model (docs/user_models.md)",
                DeprecationWarning,
                stacklevel=user_stacklevel(),
            )
        return GibbsSettings(
            self.statistic(num_features), self.shared_data_model, self.interweaving_moves, self.collapsed_moves
        )

    def conjugate_prior(self, data: NoiseAwareData) -> NIG:
        """The NIG prior over theta to which each Gibbs sweep's conditional p(theta | s_C) is conjugate: what the
        Rao-Blackwellised KL (`kl='rao-blackwell'`) scores the sampler's conditionals against."""
        return self.priors(_num_features(data)).model

    def surrogate_surprises(self, data: NoiseAwareData) -> SurpriseTable | None:
        """The party product (`surrogate_game`) of every coalition of the releases in code order, with the
        coalitions whose Newton steps did not converge (kept as they are): the deterministic surrogate of the
        surprise that a sampled party valuation of up to 12 parties uses as a control variate by default, its Shapley
        values exact (`control_variate`; docs/games.md, "Control variates"). On the 337 coalitions a 12-party
        valuation sampled, the marginals of the surprise minus it spread no wider (median standard deviation 0.118
        nats, largest 0.147) than those of the surprise minus the coalitions' own Laplace fits (0.134, 0.176), and its
        4,095 coalitions cost 24 s with compilation (1.4 s again) against 2.6 minutes of fits (docs/benchmarks.md,
        "The party product as the 12-party control"). None with a shared data model, which the parties' fits do not
        model."""
        surrogate = self.surrogate_game(data)
        if surrogate is None:
            return None
        masks = coalition_masks(len(data.counts), include_empty=True)
        table = surrogate(masks)
        values = np.where(np.isfinite(table.values), table.values, 0.0)  # a fixed value where the steps failed
        return SurpriseTable(values, mask_codes(masks[~table.usable]), PARTY_PRODUCT)

    def surrogate_game(self, data: NoiseAwareData) -> Surrogate | None:
        """The surprise of given coalitions under the prior and their members' likelihoods, each a quadratic in theta
        about its party's own mode (`bayesval.inference.party_product`), `surrogate(masks (B, n)) -> SurrogateValues`
        (B,) with a flag per coalition whose Newton steps converged: the control variate of a sampled party valuation
        beyond the parties whose every coalition is fitted (docs/games.md, "Multi-fidelity control variates"). It
        needs no fit of a coalition, and it is the closer control there: on the 716 coalitions a 24-party valuation
        sampled, the marginals of the surprise minus it spread half as far (median standard deviation 0.107 nats
        against 0.212) and with lighter tails (median kurtosis 4.8 against 12.3) as those of the surprise minus the
        coalitions' Laplace fits, 0.6 to 3.4 nats off on 14 of them (a worse mode, or a poor Gaussian at the mode)
        (docs/benchmarks.md, "A control without fits beyond 12 parties"). A deterministic function of the releases
        and the coalition; None with a shared data model, which the parties' fits do not model."""
        if self.shared_data_model:
            return None
        num_features = _num_features(data)
        priors = self.priors(num_features)
        messages = party_messages(data, priors.model, priors.data, self.statistic(num_features))
        return partial(_product_surrogate, messages, priors.model)

    @property
    def importance_draws(self) -> Callable | None:
        """`draws_by_importance`, the party path's route without chains (docs/importance.md); None with a shared data
        model, which the Laplace fit does not model: a valuation then keeps the chains, with the note that says so."""
        return None if self.shared_data_model else self.draws_by_importance

    def draws_by_importance(
        self, keys: jax.Array, data: NoiseAwareData, masks: np.ndarray, num_draws: int, attempt: int = 0
    ) -> ImportanceDraws:
        """`num_draws` resampled draws of each row's coalition posterior by importance sampling from its Laplace fit
        (`bayesval.inference.importance`; keys (B,), releases per row, masks (B, n)), with each row's Pareto k-hat,
        effective sample size and whether its fit converged; a rerun (`attempt` >= 1) estimates each member's
        likelihood from more draws of its data model. Per-party data models only (`importance_draws`)."""
        num_features = _num_features(data)
        priors = self.priors(num_features)
        statistic = self.statistic(num_features)
        return importance_draws(keys, data, masks, priors.model, priors.data, statistic, num_draws, attempt)

    @property
    def importance_programs(self) -> Callable | None:
        """`programs_by_importance`, the programs `importance_draws` calls; None where it is None."""
        return None if self.shared_data_model else self.programs_by_importance

    def programs_by_importance(
        self, keys: jax.Array, data: NoiseAwareData, masks: np.ndarray, num_draws: int, attempt: int = 0
    ) -> list[Program]:
        """The compiled programs `draws_by_importance` with these arguments calls for its rows (they share one width:
        the first row's shapes), as `bayesval.compilation.Program`s, so that a caller can compile them while other
        rows are drawn (`bayesval.inference.importance.importance_programs`)."""
        num_features = _num_features(data)
        priors = self.priors(num_features)
        first = NoiseAwareData(*(np.asarray(part)[0] for part in data))
        return importance_programs(
            keys[0], first, np.asarray(masks, bool)[0], priors.model, priors.data, self.statistic(num_features),
            num_draws, attempt,
        )  # fmt: skip

    def posterior_draws(
        self, key: jax.Array, data: NoiseAwareData, masks: np.ndarray, config: SamplerConfig, conditionals: bool = False
    ) -> CoalitionDraws:
        """Draws of p(theta | o_C) for every coalition mask, by Gibbs: (K, chains, kept, D + 1), every chain kept;
        with `conditionals`, also each draw's NIG conditional p(theta | s_C) (`CoalitionDraws.conditionals`)."""
        return self._gibbs_run(key, data, masks, config, conditionals).sample()

    def posterior_programs(
        self, key: jax.Array, data: NoiseAwareData, masks: np.ndarray, config: SamplerConfig, conditionals: bool = False
    ) -> list[Program]:
        """The compiled programs `posterior_draws` of these arguments calls, for compiling them before the call
        (`bayesval.compilation.compile_for_later`)."""
        return self._gibbs_run(key, data, masks, config, conditionals).programs()

    def _gibbs_run(self, key, data: NoiseAwareData, masks, config: SamplerConfig, conditionals: bool) -> GibbsRun:
        priors, settings = self.priors(_num_features(data)), self.kernel_settings(data)
        return plan_coalition_posteriors(
            key, data, masks, priors, settings, **config.chain_settings, conditionals=conditionals
        )

    def exact_posterior(self, statistics: np.ndarray, count: float, num_features: int) -> NIG:
        """Conjugate NIG posterior given summed exact statistics (the non-private baseline), or
        given summed perturbed statistics plugged in as if exact (the noise-naive baseline,
        Sim et al. 2023, App. A.3; the matrix is projected to PSD first)."""
        statistic = self.statistic(num_features)
        matrix = statistic.to_matrix(jnp.asarray(statistics), jnp.asarray(count, jnp.float64))
        return nig_update(self.priors(num_features).model, matrix, jnp.asarray(count, jnp.float64))

    def model(self, data: NoiseAwareData, mask: jnp.ndarray, latent_statistics: bool = False) -> None:
        """The NumPyro model of one coalition, for NUTS or any NumPyro inference."""
        num_features = _num_features(data)
        priors = self.priors(num_features)
        noise_aware_linear_regression(
            data.perturbed,
            data.counts,
            data.noise_std,
            mask,
            statistic=self.statistic(num_features),
            prior=priors.model,
            data_prior=priors.data,
            shared_data_model=self.shared_data_model,
            latent_statistics=latent_statistics,
        )


def _nig_theta_log_density(prior: NIG, theta: jnp.ndarray) -> jnp.ndarray:
    return nig_log_density(prior, theta[:-1], theta[-1])


def _num_features(data: NoiseAwareData) -> int:
    """w >= 1 from the statistic length P = (w+2)(w+3)/2 - 1."""
    size = int(np.shape(data.perturbed)[-1])
    num_features = max(int(round((-5 + np.sqrt(25 - 4 * (6 - 2 * (size + 1)))) / 2)), 1)
    if LinearRegressionStatistic(num_features).size != size:
        valid = ", ".join(str(LinearRegressionStatistic(w).size) for w in range(1, 5))
        raise ValueError(
            f"a statistic of length {size} is not a linear-regression statistic: those have length "
            f"(w + 2)(w + 3)/2 - 1 for w >= 1 features ({valid}, ...)"
        )
    return num_features


def _product_surrogate(messages: PartyMessages, prior: NIG, masks) -> SurrogateValues:
    """The surprise of each coalition of `masks` (B, n) under the prior and its members' quadratic likelihoods, 0 for
    the empty one, and whether its Newton steps converged."""
    masks = np.asarray(masks, bool)
    fit = product_surprises(messages, prior, jnp.asarray(masks))
    values, gradient = np.asarray(fit.surprise, np.float64), np.asarray(fit.gradient)
    empty = ~masks.any(axis=1)
    return SurrogateValues(np.where(empty, 0.0, values), empty | ((gradient <= CONVERGED) & np.isfinite(values)))
