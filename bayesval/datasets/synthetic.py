"""The Syn setting of Sim et al. (2023, Sec. 6 and App. H.1): one NIG draw of (w, sigma^2) and
per-party inputs from an NIW data model, shared with the model's prior.

The default setting (`make_syn()` with seed 0 and the default sizes), which `bayesval demo`, the examples and the
tests use, ships with the package as `syn_default.npz`: generating it compiles a program of random draws (about 4 s
of a 60 s demo on 2 cores), and a stored copy reads in milliseconds. `tests/test_synthetic.py` checks that the file
holds what `_generate` draws today; `write_default` rewrites it.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

from bayesval.inference.conjugate import sample_nig, sample_niw
from bayesval.models.linear_regression import syn_data_prior, syn_model_prior
from bayesval.statistics import Bounds

DEFAULT_FILE = Path(__file__).with_name("syn_default.npz")
DEFAULT_SETTING = {"seed": 0, "sizes": (100, 200, 400), "num_features": 2, "num_test": 1000}


@dataclass(frozen=True)
class SynDataset:
    """Party datasets, a held-out test set, the true parameters and declared bounds."""

    parties: list[tuple[np.ndarray, np.ndarray]]
    test: tuple[np.ndarray, np.ndarray]
    weights: np.ndarray
    noise_var: float
    bounds: Bounds


def make_syn(
    seed: int = 0,
    sizes: tuple[int, ...] = (100, 200, 400),
    num_features: int = 2,
    num_test: int = 1000,
) -> SynDataset:
    """Generate the Syn setting: true (w, sigma^2) ~ NIG prior; party i's x ~ N(mu_i, Sigma_i) with
    (mu_i, Sigma_i) ~ NIW prior; y = w^T [x; 1] + N(0, sigma^2). The test set is drawn from the
    pooled party input distributions.

    The declared bounds follow from the generating law, not the data: ||x|| <= 1 (Sigma ~ I/47) and
    |y| <= |bias| + ||slope|| + 4 sigma.
    """
    setting = {"seed": seed, "sizes": tuple(sizes), "num_features": num_features, "num_test": num_test}
    weights, noise_var, parties, tests = _read_default() if setting == DEFAULT_SETTING else draw_setting(**setting)
    noise_std = float(np.sqrt(noise_var))
    test = (np.concatenate([t[0] for t in tests]), np.concatenate([t[1] for t in tests]))
    y_bound = abs(float(weights[-1])) + float(np.linalg.norm(weights[:-1])) + 4 * noise_std
    return SynDataset(parties, test, weights, float(noise_var), Bounds(x_norm=1.0, y_abs=y_bound))


def draw_setting(seed: int, sizes: tuple[int, ...], num_features: int, num_test: int):
    """(weights, noise_var, [(X, y) per party], [(X, y) of the test set per party]) as NumPy arrays."""
    return jax.tree.map(np.asarray, _generate(jax.random.key(seed), tuple(sizes), num_features, num_test))


def write_default(path: Path = DEFAULT_FILE) -> None:
    """Store the default setting's draws (run when `_generate` or the default setting changes)."""
    weights, noise_var, parties, tests = draw_setting(**DEFAULT_SETTING)
    arrays = {"weights": weights, "noise_var": noise_var}
    for name, pairs in (("party", parties), ("test", tests)):
        for i, (X, y) in enumerate(pairs):
            arrays[f"{name}_{i}_X"], arrays[f"{name}_{i}_y"] = X, y
    np.savez_compressed(path, **arrays)


def _read_default():
    with np.load(DEFAULT_FILE, allow_pickle=False) as stored:
        count = len(DEFAULT_SETTING["sizes"])
        pairs = [
            [(stored[f"{name}_{i}_X"], stored[f"{name}_{i}_y"]) for i in range(count)] for name in ("party", "test")
        ]
        return stored["weights"], stored["noise_var"], *pairs


@partial(jax.jit, static_argnames=("sizes", "num_features", "num_test"))
def _generate(key, sizes, num_features, num_test):
    """The random draws of `make_syn`, as one compiled program (run op by op, the samplers' loops compiled
    one at a time and took seconds)."""
    key_theta, key_parties, key_test = jax.random.split(key, 3)
    weights, noise_var = sample_nig(key_theta, syn_model_prior(num_features))

    def draw(key, data_model, size):
        key_x, key_y = jax.random.split(key)
        X = jax.random.multivariate_normal(key_x, *data_model, (size,))
        return X, X @ weights[:-1] + weights[-1] + jnp.sqrt(noise_var) * jax.random.normal(key_y, (size,))

    key_omega, key_train = jax.random.split(key_parties)
    means, covs = jax.vmap(sample_niw, (0, None))(jax.random.split(key_omega, len(sizes)), syn_data_prior(num_features))
    data_models = list(zip(means, covs))
    train_keys, test_keys = jax.random.split(key_train, len(sizes)), jax.random.split(key_test, len(sizes))
    parties = [draw(k, m, size) for k, m, size in zip(train_keys, data_models, sizes)]
    tests = [draw(k, m, num_test // len(sizes)) for k, m in zip(test_keys, data_models)]
    return weights, noise_var, parties, tests
