"""Five valuations whose values and standard errors are pinned before the package redesign, through the public API
only (`import bayesval as bv`), so that they keep running after modules move.

Each function returns a dict of numpy arrays. The party valuations value the releases saved in `tests/data/pinned/`
(written once by `tests/make_pinned.py`), not fresh releases: a party's default noise comes from OS entropy, so only
a saved release is reproducible. The data-point estimators value synthetic data drawn here from fixed numpy seeds,
and their privacy noise comes from fixed `noise_seed`s.

1. `party_valuation`: the Syn setting of `bayesval demo` (Sim et al. 2023, Sec. 6: parties of 100 / 200 / 400 points
   at epsilon = (0.2, 0.1, 0.2), lambda = 2), Bayesian surprise and exact Shapley values at a tiny sampler budget.
2. `knn_valuation`: KNN-Shapley (Wang et al. 2023, Thm 7; Jia et al. 2019, Thm 8), TKNN-Shapley (Thm 13),
   DP-TKNN-Shapley (Sec. 5) and the naive DP-KNN-Shapley baseline (App. B.4).
3. `layered_valuation`: Layered Shapley and DP Layered Shapley (Watson et al. 2023, Algorithms 1 and 2).
4. `gradient_valuation`: semivalues from (DP) gradient trajectories (Zhou et al. 2024, Algorithm 1).
5. `rewards_valuation`: the valuation of 1 with model rewards by likelihood tempering (Sim et al. 2023, Sec. 5.2), as
   the demo asks and with a search that runs, and by noise addition (Sec. 5.1).
"""

from __future__ import annotations

import json
import platform
import warnings
from importlib import metadata
from pathlib import Path

import numpy as np

import bayesval as bv

PINNED = Path(__file__).parent / "data" / "pinned"
PARTY_NAMES = ("party 1", "party 2", "party 3")
# the release files of the demo's three parties, written once by tests/make_pinned.py
RELEASE_FILES = tuple(PINNED / f"{name.replace(' ', '_')}.release.json" for name in PARTY_NAMES)
# the `bayesval demo` sampler budget shrunk as tests/test_cli_output.py shrinks it (2 chains, 30 + 60 sweeps, 2 repeats)
TINY = dict(num_chains=2, num_warmup=30, num_samples=60, thinning=1, num_repeats=2, progress_bar=False)
PARTY_KEY = 0  # `bayesval demo --seed 0`: the sampler key


def tiny_config() -> bv.SamplerConfig:
    return bv.SamplerConfig(**TINY)


def load_releases() -> list[bv.PerturbedStatistic]:
    """The demo parties' saved releases."""
    return [bv.PerturbedStatistic.load(path) for path in RELEASE_FILES]


def party_result(rewards=None, rho: float | None = None) -> bv.ValuationResult:
    """The demo's valuation of the saved releases (LinearRegression, key 0), at the tiny budget, rewarded by
    `rewards` (as `bv.valuate` takes it) with targets of `rho`."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # tiny budget: convergence warnings, rewards off target
        return bv.valuate(
            bv.models.LinearRegression(),
            load_releases(),
            key=PARTY_KEY,
            config=tiny_config(),
            rewards=rewards,
            rho=rho,
        )


def party_arrays(result: bv.ValuationResult) -> dict[str, np.ndarray]:
    """Values, standard errors and every coalition's surprise estimate of a party valuation."""
    return {
        "values": np.asarray(result.values),
        "stderr": np.asarray(result.stderr),
        "coalition_masks": np.asarray(result.coalition_masks),
        "coalition_values": np.asarray(result.coalition_values),
        "coalition_stderr": np.asarray(result.coalition_stderr),
    }


REWARD_ARRAYS = ("shapley", "singleton_values", "targets", "values", "stderr", "parameters", "calls", "reached")
REWARD_ARRAYS += ("similarity", "epsilon", "effective_epsilon", "draws", "grand_draws", "own_draws")
REWARD_SCALARS = ("rho", "repair_weight", "grand_value", "rationality_bound")


def reward_arrays(rewards, prefix: str) -> dict[str, np.ndarray]:
    """The rewards' arrays, each key `{prefix}_{name}`: the repaired Shapley values, own values v_i, targets r*_i,
    reward values r_i with their stderr, kappa_i or tau_i, calls, reached, similarity, epsilons, the draws, and the
    scalars rho, repair weight, v_N and the rationality bound."""
    arrays = {f"{prefix}_{name}": np.asarray(getattr(rewards, name)) for name in REWARD_ARRAYS}
    arrays |= {f"{prefix}_{name}": np.asarray(getattr(rewards, name), np.float64) for name in REWARD_SCALARS}
    return arrays


def reward_settings() -> dict[str, tuple]:
    """(rewards, rho) per pinned reward run: the demo's ('tempering', rho 0.2 by default; at the tiny budget every
    target may lie within its tolerance of v_N, so no search runs), and two whose searches run: tempering and seeded
    noise addition with a tighter acceptance (z = 0.5) and wider targets."""
    return {
        "demo": ("tempering", None),
        "tempering": (bv.rewards.Tempering(z=0.5, max_calls=4), 0.5),
        "noise": (bv.rewards.NoiseAddition(z=0.5, max_calls=4, noise_seed=9401, allow_seed_reuse=True), 1.0),
    }


def party_valuation() -> dict[str, np.ndarray]:
    """1. The demo's party valuation, without rewards."""
    return party_arrays(party_result())


def rewards_valuation() -> dict[str, np.ndarray]:
    """5. The demo's party valuation with rewards: as `bayesval demo` asks (tempering, rho = 0.2), and with the
    searching settings of `reward_settings`; the valuation's own arrays once (the same key gives the same values)."""
    arrays = {}
    for name, (rewards, rho) in reward_settings().items():
        result = party_result(rewards, rho)
        if not arrays:
            arrays |= party_arrays(result)
        arrays |= reward_arrays(result.rewards, name)
    return arrays


def classification_data(seed: int, n: int, n_val: int, d: int = 3) -> tuple[np.ndarray, ...]:
    """(X, y, X_val, y_val): unit-norm rows, labels from a logistic law on the first feature, both classes among the
    first two training rows."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n + n_val, d))
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    y = (rng.random(n + n_val) < 1 / (1 + np.exp(-4 * x[:, 0]))).astype(np.int64)
    y[:2] = [0, 1]
    return x[:n], y[:n], x[n:], y[n:]


def _point_arrays(prefix: str, result: bv.ValuationResult) -> dict[str, np.ndarray]:
    arrays = {f"{prefix}_values": np.asarray(result.values), f"{prefix}_stderr": np.asarray(result.stderr)}
    if result.counts is not None:
        arrays[f"{prefix}_counts"] = np.asarray(result.counts)
    return arrays


def knn_results() -> dict[str, bv.ValuationResult]:
    """KNN-Shapley (soft and original), TKNN-Shapley, DP-TKNN-Shapley and DP-KNN-Shapley of 80 points against 40."""
    X, y, X_val, y_val = classification_data(101, 80, 40)
    estimators = {
        "knn": bv.estimators.KNNShapley(5),
        "knn_original": bv.estimators.KNNShapley(5, variant="original"),
        "tknn": bv.estimators.TKNNShapley(-0.5),
        "dp_tknn": bv.estimators.TKNNShapley(
            -0.5,
            epsilon=1.0,
            delta=1e-5,
            sampling_probability=0.5,
            classes=[0, 1],
            noise_seed=9101,
            allow_seed_reuse=True,
        ),
        "dp_knn": bv.estimators.DPKNNShapley(
            5, epsilon=1.0, delta=1e-5, classes=[0, 1], noise_seed=9102, allow_seed_reuse=True
        ),
    }
    return {name: bv.valuate(estimator, (X, y), validation=(X_val, y_val)) for name, estimator in estimators.items()}


def knn_valuation() -> dict[str, np.ndarray]:
    """2. The KNN family's values and standard errors (zero: closed forms given the released counts)."""
    arrays = {}
    for name, result in knn_results().items():
        arrays |= _point_arrays(name, result)
    return arrays


def layered_results() -> dict[str, bv.ValuationResult]:
    """Layered Shapley of 14 points (the default logistic-regression utility; layers 1-2 enumerated, the rest
    sampled), and DP Layered Shapley of the same points."""
    X, y, X_val, y_val = classification_data(202, 14, 60)
    estimators = {
        "layered": bv.estimators.LayeredShapley(alpha=0.2, beta=0.1, c=1.0, seed=7),
        "dp_layered": bv.estimators.LayeredShapley(
            alpha=0.2, beta=0.1, c=1.0, seed=7, epsilon=1.0, noise_seed=9201, allow_seed_reuse=True
        ),
    }
    return {name: bv.valuate(estimator, (X, y), validation=(X_val, y_val)) for name, estimator in estimators.items()}


def layered_valuation() -> dict[str, np.ndarray]:
    """3. Layered Shapley and DP Layered Shapley values and standard errors."""
    arrays = {}
    for name, result in layered_results().items():
        arrays |= _point_arrays(name, result)
    return arrays


def gradient_results() -> dict[str, bv.ValuationResult]:
    """Gradient Shapley values of 12 points from 8 permutations, without noise and at (1, 1e-5)-DP (X* noise)."""
    X, y, X_val, y_val = classification_data(303, 12, 40)
    estimators = {
        "gradient": bv.estimators.GradientSemivalues(num_permutations=8, learning_rate=0.05, key=5),
        "dp_gradient": bv.estimators.GradientSemivalues(
            num_permutations=8,
            learning_rate=0.05,
            key=5,
            epsilon=1.0,
            delta=1e-5,
            noise_seed=9301,
            allow_seed_reuse=True,
        ),
    }
    return {name: bv.valuate(estimator, (X, y), validation=(X_val, y_val)) for name, estimator in estimators.items()}


def gradient_valuation() -> dict[str, np.ndarray]:
    """4. Gradient semivalues and their standard errors (Monte Carlo over the permutations, plus under X* the
    covariance of the noise shared across permutations)."""
    arrays = {}
    for name, result in gradient_results().items():
        arrays |= _point_arrays(name, result)
    return arrays


VALUATIONS = {
    "party": party_valuation,
    "knn": knn_valuation,
    "layered": layered_valuation,
    "gradient": gradient_valuation,
    "rewards": rewards_valuation,
}


def expected(name: str) -> dict[str, np.ndarray]:
    """The arrays pinned for valuation `name` (tests/data/pinned/NAME.npz)."""
    with np.load(PINNED / f"{name}.npz", allow_pickle=False) as data:
        return {key: data[key] for key in data.files}


def environment() -> dict[str, str]:
    """What floating-point results can depend on besides the code: the versions of the numerical libraries (XLA's
    compiled code comes with jaxlib) and the machine."""
    packages = ("jax", "jaxlib", "numpy", "numpyro", "scipy", "scikit-learn")
    return {name: metadata.version(name) for name in packages} | {
        "python": platform.python_version(),
        "machine": platform.machine(),
        "cpu": cpu_model(),
    }


def cpu_model() -> str:
    """The processor's model name (XLA compiles for the host's vector instructions, so another CPU may round
    differently); '' where the system does not say."""
    cpuinfo = Path("/proc/cpuinfo")
    lines = cpuinfo.read_text().splitlines() if cpuinfo.exists() else []
    names = [line.split(":", 1)[1].strip() for line in lines if line.startswith("model name")]
    return names[0] if names else platform.processor()


def pinned_environment() -> dict[str, str]:
    """The environment the pinned arrays were computed in (tests/data/pinned/environment.json)."""
    return json.loads((PINNED / "environment.json").read_text())
