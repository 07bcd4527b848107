"""The Syn setting of Sim et al. (2023, Sec. 6 and App. H.1): one NIG draw of (w, sigma^2) and
per-party inputs from an NIW data model, shared with the model's prior.

The default setting (`make_syn()` with seed 0 and the default sizes), which `bayesval demo`, the examples and the
tests use, ships with the package as `syn_default.npz`: generating it compiles the programs of its random draws
(seconds of a demo on 2 cores), and a stored copy reads in milliseconds. `tests/test_synthetic.py` checks that the file
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


# `make_syn`'s random draws run as three compiled programs, not one: the true parameters (`_truth`), a party's data
# model (`_data_model`) and a party's rows (`_rows`, one program per number of rows). The NIG and NIW draws' rejection
# loops are most of the compiling (about 6 s on 2 cores), and in one program of the whole setting they compiled again
# for every tuple of sizes (12 to 50 s for 1 to 24 parties); now they compile once, and a new size compiles only its
# rows' normal draws. The keys are those the one program split, so the settings draw the same numbers to the last
# bit (checked at 2 features up to 32 parties; at 3 features and 16 or more parties the NIW draw as a batch of one
# rounds some rows differently in the last bit: docs/benchmarks.md, "make_syn compiled once for any sizes").


def _generate(key, sizes, num_features, num_test):
    """The random draws of `make_syn`: (weights, noise_var, [(X, y) per party], [(X, y) of the test set per
    party])."""
    weights, noise_var, key_omega, key_train, key_test = _truth(key, num_features)
    count = len(sizes)
    models = [_data_model(k, num_features) for k in jax.random.split(key_omega, count)]
    train_keys, test_keys = jax.random.split(key_train, count), jax.random.split(key_test, count)
    parties = [_rows(k, *model, weights, noise_var, size) for k, model, size in zip(train_keys, models, sizes)]
    tests = [_rows(k, *model, weights, noise_var, num_test // count) for k, model in zip(test_keys, models)]
    return weights, noise_var, parties, tests


@partial(jax.jit, static_argnames=("num_features",))
def _truth(key, num_features):
    """The true (w, sigma^2) ~ NIG prior, and the keys of the parties' data models, rows and test rows."""
    key_theta, key_parties, key_test = jax.random.split(key, 3)
    weights, noise_var = sample_nig(key_theta, syn_model_prior(num_features))
    key_omega, key_train = jax.random.split(key_parties)
    return weights, noise_var, key_omega, key_train, key_test


@partial(jax.jit, static_argnames=("num_features",))
def _data_model(key, num_features):
    """One party's (mu_i, Sigma_i) ~ NIW prior, drawn as a batch of one (the draws of a batch of every party)."""
    means, covs = jax.vmap(sample_niw, (0, None))(key[None], syn_data_prior(num_features))
    return means[0], covs[0]


@partial(jax.jit, static_argnames=("size",))
def _rows(key, mean, cov, weights, noise_var, size):
    """`size` rows x ~ N(mu_i, Sigma_i), y = w^T [x; 1] + N(0, sigma^2)."""
    key_x, key_y = jax.random.split(key)
    X = jax.random.multivariate_normal(key_x, mean, cov, (size,))
    return X, X @ weights[:-1] + weights[-1] + jnp.sqrt(noise_var) * jax.random.normal(key_y, (size,))
