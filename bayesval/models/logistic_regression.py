"""Noise-aware Bayesian logistic regression over DP-perturbed PASS-GLM statistics (Sim et al. 2023, App. H.1;
Kulkarni et al. 2021).

Generative process for the parties of a coalition C:
    theta ~ N(0, I_D) restricted to ||theta||^2 <= max_sq_norm                  theta = (w, bias)
    iota ~ N(1, I) truncated to [0, 2],  L_Omega ~ LKJCholesky(w, 2)            shared data model
    x ~ N(0, Sigma),  Sigma = diag(iota) Omega diag(iota);  y | x ~ logistic(theta^T [x; 1])
    o_i | theta, Sigma ~ N(c_i mu_t, c_i Sigma_t + sigma_z,i^2 I)            CLT marginal of s_i + z_i
with mu_t, Sigma_t the moments of the per-record statistic t = (y x~, x~ x~^T entries)
(`bayesval.inference.clt.logistic_statistic_moments`, Gauss-Hermite in theta^T x~, exact otherwise).

The prior on theta: Sim et al. write "an independent standard Gaussian prior for theta, rescaled so
that ||theta||^2 has a truncated chi-square prior with 4 degrees of freedom", capped at 2.5
||theta*||^2. For the 5-dimensional theta we read this as N(0, I_5) conditioned on ||theta||^2 <=
cap: it keeps the stated independent standard Gaussian shape everywhere below the cap (its
||theta||^2 is chi-square with 5 degrees of freedom; "4" counts the weights without the bias), and
it is a proper distribution that prior draws and NUTS share exactly.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import numpyro
import numpyro.distributions as dist
from jax.scipy.special import gammainc
from jax.tree_util import Partial
from numpyro.distributions import constraints
from numpyro.distributions.transforms import Transform, biject_to

from bayesval.inference.clt import gauss_hermite, logistic_statistic_moments
from bayesval.inference.data import NoiseAwareData
from bayesval.inference.gaussian import CovarianceGaussian
from bayesval.models.numpyro_model import NumPyroModel
from bayesval.statistics import LogisticRegressionStatistic
from bayesval.validation import check_positive


class _Ball(constraints.Constraint):
    """The closed Euclidean ball ||x||_2 <= radius, for vectors."""

    event_dim = 1

    def __init__(self, radius: float) -> None:
        self.radius = radius

    def __call__(self, x):
        return jnp.sum(x**2, -1) <= self.radius**2

    def feasible_like(self, prototype):
        return jnp.zeros_like(prototype)

    def tree_flatten(self):
        return (self.radius,), (("radius",), {})


class BallTransform(Transform):
    """R^D -> open ball of radius R, z -> R tanh(||z|| / R) z / ||z||: near the identity at the origin, so
    NUTS explores the truncated prior in unconstrained space without hitting its edge."""

    domain = constraints.real_vector

    def __init__(self, radius: float) -> None:
        self.radius = radius

    @property
    def codomain(self):
        return _Ball(self.radius)

    def _radial(self, z):
        rho = jnp.sqrt(jnp.sum(z**2, -1, keepdims=True) + 1e-30)
        return rho, jnp.tanh(rho / self.radius)

    def __call__(self, z):
        rho, tanh = self._radial(z)
        return z * (self.radius * tanh / rho)

    def _inverse(self, x):
        r = jnp.sqrt(jnp.sum(x**2, -1, keepdims=True) + 1e-30)
        return x * (self.radius * jnp.arctanh(jnp.clip(r / self.radius, 0.0, 1 - 1e-15)) / r)

    def log_abs_det_jacobian(self, z, x, intermediates=None):
        """log g'(rho) + (D - 1) log(g(rho) / rho) for the radial map g(rho) = R tanh(rho / R)."""
        rho, tanh = self._radial(z)
        dim = z.shape[-1]
        return (jnp.log1p(-(tanh**2)) + (dim - 1) * jnp.log(self.radius * tanh / rho))[..., 0]

    def tree_flatten(self):
        return (self.radius,), (("radius",), {})


@biject_to.register(_Ball)
def _ball_bijection(constraint: _Ball) -> BallTransform:
    return BallTransform(constraint.radius)


class NormTruncatedNormal(dist.Distribution):
    """N(0, I_dim) conditioned on ||theta||^2 <= max_sq_norm; sampled exactly by rejection."""

    reparametrized_params = []

    def __init__(self, dim: int, max_sq_norm: float, *, validate_args=None) -> None:
        self.dim, self.max_sq_norm = dim, max_sq_norm
        self._log_mass = jnp.log(gammainc(dim / 2, max_sq_norm / 2))  # log P(chi2_dim <= cap)
        super().__init__(batch_shape=(), event_shape=(dim,), validate_args=validate_args)

    @constraints.dependent_property(is_discrete=False, event_dim=1)
    def support(self):
        return _Ball(float(np.sqrt(self.max_sq_norm)))

    def sample(self, key, sample_shape=()):
        shape = sample_shape + self.event_shape

        def redraw(state):
            key, draws, accepted = state
            key, subkey = jax.random.split(key)
            fresh = jax.random.normal(subkey, shape)
            take = ~accepted & (jnp.sum(fresh**2, -1) <= self.max_sq_norm)
            return key, jnp.where(take[..., None], fresh, draws), accepted | take

        init = (key, jnp.zeros(shape), jnp.zeros(sample_shape, bool))
        return jax.lax.while_loop(lambda state: ~jnp.all(state[2]), redraw, init)[1]

    def log_prob(self, value):
        sq_norm = jnp.sum(value**2, -1)
        normal = -0.5 * sq_norm - 0.5 * self.dim * jnp.log(2 * jnp.pi) - self._log_mass
        return jnp.where(sq_norm <= self.max_sq_norm, normal, -jnp.inf)


def theta_prior(dim: int, max_sq_norm: float | None) -> dist.Distribution:
    """theta's prior: N(0, I_dim), conditioned on ||theta||^2 <= max_sq_norm unless that is None."""
    if max_sq_norm is None:
        return dist.Normal(0.0, 1.0).expand([dim]).to_event(1)
    return NormTruncatedNormal(dim, max_sq_norm)


def _theta_log_prior(max_sq_norm: float | None, theta: jnp.ndarray) -> jnp.ndarray:
    return theta_prior(theta.shape[-1], max_sq_norm).log_prob(theta)


def noise_aware_logistic_regression(
    data: NoiseAwareData,
    mask: jnp.ndarray,
    *,
    statistic: LogisticRegressionStatistic,
    max_sq_norm: float | None = None,
    lkj_concentration: float = 2.0,
    quadrature: tuple[np.ndarray, np.ndarray] = gauss_hermite(),
    gaussian: type = CovarianceGaussian,
) -> None:
    """The noise-aware logistic model of all parties, with the likelihood of the members of `mask` only.
    `gaussian(loc, covariance_matrix)`: the likelihood's Gaussian; NumPyro's `MultivariateNormal` has the same
    density, differentiated through its Cholesky factor (slower, docs/benchmarks.md)."""
    num_features, dim = statistic.num_features, statistic.dim
    theta = numpyro.sample("theta", theta_prior(dim, max_sq_norm))
    scale_prior = dist.TruncatedNormal(1.0, 1.0, low=0.0, high=2.0).expand([num_features]).to_event(1)
    scales = numpyro.sample("iota", scale_prior)
    corr_cholesky = numpyro.sample("L_omega", dist.LKJCholesky(num_features, lkj_concentration))
    x_cov_cholesky = scales[:, None] * corr_cholesky
    rows, cols = statistic.pairs
    t_mean, t_cov = logistic_statistic_moments(
        theta, jnp.zeros(num_features), x_cov_cholesky @ x_cov_cholesky.T, rows, cols, quadrature
    )
    counts, noise_var = data.counts[:, None, None], (data.noise_std**2)[:, None, None]
    cov = counts * t_cov + noise_var * jnp.eye(statistic.size)
    with numpyro.plate("parties", data.counts.shape[0]), numpyro.handlers.mask(mask=mask):
        numpyro.sample("perturbed", gaussian(data.counts[:, None] * t_mean, cov), obs=data.perturbed)


class LogisticRegression(NumPyroModel):
    """Bayesian logistic regression with a bias, valued from DP-perturbed degree-2 PASS-GLM statistics by NUTS.

    max_sq_norm: the cap on ||theta||^2 (Sim et al. use 2.5 ||theta*||^2 with theta* the non-private
    estimate; None = no cap). Draws of theta are laid out (w_1..w_w, bias).
    max_tree_depth: NUTS trees of at most 2^depth - 1 leapfrog steps. Chains run in lockstep under `vmap`, so
    each iteration costs the deepest tree of the batch; one chain here averages 9-13 steps, but the deepest of
    84 reached 31-63. At 3 (7 steps) Diab's valuation mixes as well per second and runs 3.5x faster
    (docs/architecture.md, "Batched NUTS waits for its deepest tree").
    target_accept_prob: the step-size adaptation's target (Hoffman & Gelman 2014, Sec. 3.2). With the tree capped,
    a trajectory's length is its step size times at most 7 steps, so a larger step travels further for the same
    gradients: at 0.65 Diab's coalition posteriors get ~1.4x the bulk ESS per draw of 0.8 (0.55 gains nothing
    more; docs/benchmarks.md, "Diab toward 30 s"). Sim et al.'s runs use 0.86 (App. H.1), which the 'paper' preset
    still forwards for one release.
    min_bfmi: the E-BFMI below which a chain is dropped (`NumPyroModel`; 0.3 as Sim et al.).
    warm_start: chains start from a Laplace fit of each coalition posterior with a dense mass matrix (`NumPyroModel`).
    None (the default): from 7 features on, where the posterior has at least 30 unconstrained coordinates
    (`bayesval.models.numpyro_model.WARM_START_FROM`: w + 1 coefficients, w scales and w (w - 1) / 2 of the LKJ
    factor), and then with the config's warm budget (`SamplerConfig.for_start`; the fast preset: 100 warm-up +
    325 draws). So the three Pima hospitals of docs/own_data.md (8 features, 45 coordinates) converge at CLI
    defaults in 84-99 s on 2 idle cores (by release), against 157 s from prior starts; with 4 features (Diab, 15
    coordinates) a warm start cost more than it saved (docs/benchmarks.md, "A warm start for NUTS" and "The three
    hospitals in a minute and a half"). True or False: always or never.
    """

    def __init__(
        self,
        max_sq_norm: float | None = None,
        lkj_concentration: float = 2.0,
        max_tree_depth: int = 3,
        target_accept_prob: float = 0.65,
        min_bfmi: float = 0.3,
        warm_start: bool | None = None,
    ):
        if max_sq_norm is not None:
            try:
                max_sq_norm = check_positive("LogisticRegression.max_sq_norm", max_sq_norm)
            except (TypeError, ValueError) as error:
                raise type(error)(f"{error} (or None for no cap on ||theta||^2)") from None
        self.max_sq_norm = max_sq_norm
        self.lkj_concentration = check_positive("LogisticRegression.lkj_concentration", lkj_concentration)
        super().__init__(
            self._model_fn,
            parameters=("theta",),
            statistic=LogisticRegressionStatistic,
            name="noise-aware Bayesian logistic regression (NUTS)",
            max_tree_depth=max_tree_depth,
            target_accept_prob=target_accept_prob,
            min_bfmi=min_bfmi,
            warm_start=warm_start,
        )

    def _settings(self) -> tuple:
        return type(self), self.max_sq_norm, self.lkj_concentration, *self.kernel

    def __eq__(self, other) -> bool:
        """Equal settings, equal model: instances share compiled NUTS programs (cached per model)."""
        return isinstance(other, LogisticRegression) and self._settings() == other._settings()

    def __hash__(self) -> int:
        return hash(self._settings())

    def _model_fn(self, data: NoiseAwareData, mask: jnp.ndarray) -> None:
        noise_aware_logistic_regression(
            data,
            mask,
            statistic=num_features_statistic(data),
            max_sq_norm=self.max_sq_norm,
            lkj_concentration=self.lkj_concentration,
        )

    def prior_log_density(self, data: NoiseAwareData) -> Partial:
        """theta (D,) -> log p(theta), read off `theta_prior`: no other site enters theta's prior, so the generic
        probe of `NumPyroModel.prior_log_density` (prior draws, the model traced under two draws of the other
        sites, compiled) is not needed, nor a trace of the whole model in the KL program. A `Partial` with the cap
        as its traced argument, so one compiled program serves every cap."""
        return Partial(_theta_log_prior, self.max_sq_norm)

    @staticmethod
    def parameter_names(num_features: int) -> list[str]:
        return [f"w{j + 1}" for j in range(num_features)] + ["bias"]

    @staticmethod
    def pass_glm_posterior(
        statistic: np.ndarray, count: float, num_features: int, radius: float = 4.0
    ) -> tuple[np.ndarray, np.ndarray]:
        """Mean and covariance of the PASS-GLM posterior given an exact statistic, its count and a N(0, I)
        prior (Huggins et al. 2017): the degree-2 Chebyshev log-likelihood is quadratic in theta, so the
        posterior is Gaussian with precision I - 2 b2 sum x~ x~^T and mean precision^-1 b1 sum y x~."""
        layout = LogisticRegressionStatistic(num_features)
        _, b1, b2 = layout.chebyshev_coefficients(radius)
        rows, cols = layout.pairs
        second = np.zeros((layout.dim, layout.dim))
        second[rows, cols] = statistic[layout.dim :]
        second[num_features, num_features] = count
        second = second + np.triu(second, 1).T
        cov = np.linalg.inv(np.eye(layout.dim) - 2 * b2 * second)
        return cov @ (b1 * np.asarray(statistic[: layout.dim])), cov


def non_private_cap(X: np.ndarray, y: np.ndarray, factor: float = 2.5, iterations: int = 50) -> float:
    """Sim et al.'s cap on ||theta||^2: factor * ||theta*||^2 with theta* the maximum-likelihood logistic fit
    of the pooled non-private data (Newton's method). The paper spends no privacy on it; a deployment
    would fix the cap from public knowledge instead."""
    x_tilde = np.column_stack([X, np.ones(len(X))])
    signs = LogisticRegressionStatistic.signed_labels(np.asarray(y))
    theta = np.zeros(x_tilde.shape[1])
    for _ in range(iterations):
        margin = signs * (x_tilde @ theta)
        gradient = x_tilde.T @ (signs / (1 + np.exp(margin)))
        curvature = (x_tilde * (np.exp(-np.logaddexp(0, margin) - np.logaddexp(0, -margin)))[:, None]).T @ x_tilde
        theta = theta + np.linalg.solve(curvature, gradient)
    return float(factor * theta @ theta)


def num_features_statistic(data: NoiseAwareData) -> LogisticRegressionStatistic:
    """The statistic layout from its length P = D + D (D + 1) / 2 - 1, D = w + 1."""
    size = data.perturbed.shape[-1]
    dim = int(round((-3 + np.sqrt(9 + 8 * (size + 1))) / 2))
    layout = LogisticRegressionStatistic(max(dim - 1, 1))
    if layout.size != size:
        valid = ", ".join(str(LogisticRegressionStatistic(w).size) for w in range(1, 5))
        raise ValueError(
            f"a statistic of length {size} is not a logistic-regression PASS-GLM statistic: those have length "
            f"D + D (D + 1) / 2 - 1 with D = w + 1 for w >= 1 features ({valid}, ...)"
        )
    return layout
