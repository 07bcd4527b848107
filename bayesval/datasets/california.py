"""The CaliH setting of Sim et al. (2023, Sec. 6 and App. H.1): California Housing with transfer learning.

A network fitted on 60 % "public" block groups turns the 8 standard features into 6 learnt features; the
parties run Bayesian linear regression on those (only the last layer is re-learnt, privately). The file
``california_housing.csv.gz`` (20,640 block groups, raw form) lives in the shared data folder; see
`bayesval.datasets.paths.data_file`. Nothing is downloaded, cached or copied into the repository.
"""

from __future__ import annotations

import gzip
import io
import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pandas as pd

from bayesval.datasets.paths import data_file
from bayesval.datasets.pima import party_sizes, robust_scaling, train_validation_split
from bayesval.inference.conjugate import NIG, NIW
from bayesval.statistics import Bounds
from bayesval.validation import check_count, check_int, check_positive, check_probability

CALIFORNIA_FILE = "california_housing.csv.gz"
FEATURE_NAMES = ("MedInc", "HouseAge", "AveRooms", "AveBedrms", "Population", "AveOccup", "Latitude", "Longitude")
RAW_COLUMNS = (
    "longitude",
    "latitude",
    "housing_median_age",
    "total_rooms",
    "total_bedrooms",
    "population",
    "households",
    "median_income",
    "median_house_value",
)
TARGET_CAP = 5.00001  # median_house_value is top-coded at 500,001 dollars: y = value / 1e5 lies in (0, 5.00001]
HIDDEN = (48, 24, 6)


def read_california(data_dir: str | Path | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The 8 standard features (20640, 8) in `FEATURE_NAMES` order, the target median_house_value / 1e5
    (20640,) and the bedroom share total_bedrooms / total_rooms (20640,), NaN in the 207 rows whose
    total_bedrooms is blank (their AveBedrms is NaN too).

    MedInc = median_income, HouseAge = housing_median_age, AveRooms = total_rooms / households,
    AveBedrms = total_bedrooms / households, Population = population, AveOccup = population / households,
    Latitude, Longitude (Pace & Barry 1997, as scikit-learn's ``fetch_california_housing``). The shared copy's
    text is wrapped in a Python bytes literal (``b'...'``); the wrapper is removed.
    """
    path = data_file(CALIFORNIA_FILE, data_dir)
    with gzip.open(path, "rt", encoding="utf-8") as handle:
        text = handle.read()
    if text.startswith("b'") and text.rstrip().endswith("'"):  # the shared copy is wrapped as a bytes literal
        text = text[2:].rstrip()[:-1]
    table = pd.read_csv(io.StringIO(text))
    missing = [column for column in RAW_COLUMNS if column not in table.columns]
    if missing:
        raise ValueError(f"{path}: missing columns {missing}; expected {list(RAW_COLUMNS)}")
    raw = {column: table[column].to_numpy(np.float64) for column in RAW_COLUMNS}
    households = raw["households"]
    features = np.column_stack(
        [
            raw["median_income"],
            raw["housing_median_age"],
            raw["total_rooms"] / households,
            raw["total_bedrooms"] / households,
            raw["population"],
            raw["population"] / households,
            raw["latitude"],
            raw["longitude"],
        ]
    )
    unexpected = ~np.isfinite(np.delete(features, 3, axis=1))
    if unexpected.any() or np.any(households <= 0):
        raise ValueError(f"{path}: {int(unexpected.any(axis=1).sum())} rows have blank or non-finite features")
    return features, raw["median_house_value"] / 1e5, raw["total_bedrooms"] / raw["total_rooms"]


class MLPFeatures(NamedTuple):
    """The public network's feature map: robust scaling, then the hidden layers [48, 24, 6] with ReLU, then
    standardisation of the 6 last-hidden outputs with their public mean and standard deviation.

    `apply(features)` maps the 8 standard features (n, 8) to the BLR inputs (n, 6); `predict` gives the network's
    own regression output (n,).
    """

    median: np.ndarray  # (8,) robust-scaling centre, of the public rows
    iqr: np.ndarray  # (8,) robust-scaling spread, of the public rows
    params: tuple  # ((W, b), ...) of the three hidden layers and the output layer
    mean: np.ndarray  # (6,) public mean of the last hidden layer
    std: np.ndarray  # (6,) public standard deviation (ddof=0) of the last hidden layer; 1 where it is 0

    def scaled(self, features: np.ndarray) -> jnp.ndarray:
        """The network's input: features (n, 8) less the public median, over the public IQR."""
        return jnp.asarray((np.asarray(features, np.float64) - self.median) / self.iqr)

    def hidden(self, features: np.ndarray) -> np.ndarray:
        """The last hidden layer's outputs (n, 6), before standardisation."""
        return np.asarray(_forward(self.params, self.scaled(features))[0][-1])

    def apply(self, features: np.ndarray) -> np.ndarray:
        """The BLR inputs (n, 6): the last hidden layer standardised with public statistics."""
        return (self.hidden(features) - self.mean) / self.std

    def predict(self, features: np.ndarray) -> np.ndarray:
        """The network's own prediction of y (n,)."""
        return np.asarray(_forward(self.params, self.scaled(features))[1])


def _forward(params, x):
    """Every hidden layer's output and the network's prediction (n,)."""
    activations = []
    for weight, bias in params[:-1]:
        x = jax.nn.relu(x @ weight + bias)
        activations.append(x)
    weight, bias = params[-1]
    return activations, (x @ weight + bias)[:, 0]


def _loss(params, x, y, penalty):
    """MSE, plus penalty * mean-over-rows squared norm of every hidden layer's output (Keras's l2 activity
    regulariser) and penalty * squared norm of the output layer's weight and bias."""
    activations, prediction = _forward(params, x)
    weight, bias = params[-1]
    activity = sum(jnp.mean(jnp.sum(a**2, axis=1)) for a in activations)
    return jnp.mean((prediction - y) ** 2) + penalty * (activity + jnp.sum(weight**2) + jnp.sum(bias**2))


def _init(key, sizes):
    """He-uniform weights (suited to ReLU), zero biases."""
    params = []
    for key_layer, fan_in, fan_out in zip(jax.random.split(key, len(sizes) - 1), sizes[:-1], sizes[1:]):
        limit = math.sqrt(6.0 / fan_in)
        weight = jax.random.uniform(key_layer, (fan_in, fan_out), minval=-limit, maxval=limit)
        params.append((weight, jnp.zeros(fan_out)))
    return tuple(params)


@partial(jax.jit, static_argnames=("epochs", "batch_size", "learning_rate", "penalty"))
def _train(key, x, y, *, epochs, batch_size, learning_rate, penalty):
    """Minibatch Adam over `epochs` reshuffled passes (the last partial batch of each pass is dropped); returns the
    parameters and the full-data training loss after each epoch (epochs + 1,), the first before training."""
    key_init, key_shuffle = jax.random.split(key)
    params = _init(key_init, (x.shape[1], *HIDDEN, 1))
    optimiser = optax.adam(learning_rate)
    num_batches = x.shape[0] // batch_size
    grad = jax.grad(_loss)

    def step(carry, rows):
        params, state = carry
        updates, state = optimiser.update(grad(params, x[rows], y[rows], penalty), state, params)
        return (optax.apply_updates(params, updates), state), None

    def epoch(carry, key):
        order = jax.random.permutation(key, x.shape[0])[: num_batches * batch_size].reshape(num_batches, batch_size)
        carry, _ = jax.lax.scan(step, carry, order)
        return carry, _loss(carry[0], x, y, penalty)

    initial = _loss(params, x, y, penalty)
    (params, _), losses = jax.lax.scan(epoch, (params, optimiser.init(params)), jax.random.split(key_shuffle, epochs))
    return params, jnp.concatenate([initial[None], losses])


def fit_mlp_features(
    public_features: np.ndarray,
    public_target: np.ndarray,
    *,
    seed: int = 0,
    epochs: int = 60,
    batch_size: int = 128,
    learning_rate: float = 3e-3,
    penalty: float = 0.005,
) -> tuple[MLPFeatures, np.ndarray]:
    """Fit CaliH's feature map on the public rows only (Sim et al. 2023, App. H.1): median/IQR scaling, an MLP
    8 -> 48 -> 24 -> 6 -> 1 (ReLU) trained on the MSE with an l2 activity regulariser `penalty` on the hidden
    layers' outputs and l2 `penalty` on the output layer's weight and bias, by minibatch Adam in JAX from `seed`;
    the 6 last-hidden outputs are then standardised with their public mean and standard deviation.

    Returns the feature map and the training loss (regularised, all public rows) before and after each epoch.
    """
    public_features = np.asarray(public_features, np.float64)
    median, iqr = robust_scaling(public_features)
    params, losses = _train(
        jax.random.key(seed),
        jnp.asarray((public_features - median) / iqr),
        jnp.asarray(public_target, jnp.float64),
        epochs=epochs,
        batch_size=batch_size,
        learning_rate=learning_rate,
        penalty=penalty,
    )
    params = jax.tree.map(np.asarray, params)
    hidden = MLPFeatures(median, iqr, params, np.zeros(HIDDEN[-1]), np.ones(HIDDEN[-1])).hidden(public_features)
    std = hidden.std(axis=0)
    return MLPFeatures(median, iqr, params, hidden.mean(axis=0), np.where(std == 0.0, 1.0, std)), np.asarray(losses)


def calih_model_prior(X_public: np.ndarray, y_public: np.ndarray, n0: float = 10.0) -> NIG:
    """CaliH's model prior from the public rows (Sim et al. 2023, App. H.1, whose "x^T x" we read as the per-record
    second-moment matrix, so that the prior weighs as much as n0 records; docs/sim2023.md, "CaliH: transfer-learnt
    features"):
    sigma^2 ~ InvGamma(n0 / 2, n0 / 2 * sigma^2_MLE), w | sigma^2 ~ N(0, sigma^2 (n0 M)^-1), with M = x~^T x~ / n
    the per-record second-moment matrix of the bias-augmented public inputs x~ = [x; 1] and sigma^2_MLE the mean
    squared residual of least squares on them: the prior weighs as much as n0 public records."""
    x_tilde = np.column_stack([X_public, np.ones(len(X_public))])
    coefficients, *_ = np.linalg.lstsq(x_tilde, y_public, rcond=None)
    noise_var = float(np.mean((y_public - x_tilde @ coefficients) ** 2))
    second_moment = x_tilde.T @ x_tilde / len(x_tilde)
    return NIG(
        jnp.zeros(x_tilde.shape[1]),
        jnp.asarray(n0 * second_moment),
        jnp.asarray(n0 / 2.0),
        jnp.asarray(n0 / 2.0 * noise_var),
    )


def calih_data_prior(X_public: np.ndarray) -> NIW:
    """CaliH's shared data model, weakly dependent on the public rows (Sim et al. 2023, App. H.1 leave it open):
    Sigma ~ InvWishart(Psi0 = S, nu0 = w + 2), mu | Sigma ~ N(m0, Sigma), with m0 and S the public mean and
    covariance: E[Sigma] = S and E[mu] = m0, from the fewest degrees of freedom with a finite prior mean."""
    dof = X_public.shape[1] + 2.0
    return NIW(
        jnp.asarray(X_public.mean(axis=0)),
        jnp.asarray(1.0),
        jnp.asarray(np.cov(X_public, rowvar=False, bias=True) * (dof - X_public.shape[1] - 1.0)),
        jnp.asarray(dof),
    )


@dataclass(frozen=True)
class CaliforniaDataset:
    """Parties' datasets, pooled private training rows, validation (MNLP test) set, declared bounds, the public
    prior and the fitted feature map of the CaliH setting.

    `public` holds the public rows in BLR inputs (they build the priors and nothing else); `party_indices` index
    `train`; `public_rows` and `validation_rows` index the rows of `read_california` (less the blank ones with
    missing="drop"); `mlp_losses` is the network's training loss per epoch; `imputed_rows` how many blank
    total_bedrooms were imputed; `dropped_rows` the private training rows dropped for a feature with |z| > max_abs_z.
    `model()` and `make_parties()` build the `LinearRegression` and the `Party` objects of the setting.
    """

    parties: list[tuple[np.ndarray, np.ndarray]]
    train: tuple[np.ndarray, np.ndarray]
    validation: tuple[np.ndarray, np.ndarray]
    public: tuple[np.ndarray, np.ndarray]
    bounds: Bounds
    prior: NIG
    data_prior: NIW
    features: MLPFeatures
    party_indices: list[np.ndarray]
    public_rows: np.ndarray
    validation_rows: np.ndarray
    mlp_losses: np.ndarray
    imputed_rows: int
    dropped_rows: int
    feature_names: tuple[str, ...] = tuple(f"h{k + 1}" for k in range(HIDDEN[-1]))

    def model(self, **settings):
        """`bayesval.models.LinearRegression` with CaliH's prior and one shared data model; `settings` go to it
        (e.g. collapsed_moves=0 for Algorithm 1 as printed)."""
        from bayesval.models import LinearRegression

        return LinearRegression(prior=self.prior, data_prior=self.data_prior, shared_data_model=True, **settings)

    def make_parties(
        self, epsilons: Sequence[float] = (0.2, 0.1, 0.2), noise_seeds: Sequence[int] | None = None, **settings
    ) -> list:
        """One `bayesval.Party` per dataset, named 'party 1', ..., with these epsilons (Renyi order 2 by default:
        Sim et al.'s protocol, epsilon_1 = epsilon_3 = 0.2, epsilon_2 = 0.1) and this dataset's bounds; other
        `settings` (delta, rdp_order, allow_seed_reuse) go to every Party."""
        from bayesval.parties.party import Party

        if len(epsilons) != len(self.parties):
            raise ValueError(f"epsilons has {len(epsilons)} entries for {len(self.parties)} parties")
        seeds = [None] * len(self.parties) if noise_seeds is None else list(noise_seeds)
        if len(seeds) != len(self.parties):
            raise ValueError(f"noise_seeds has {len(seeds)} entries for {len(self.parties)} parties")
        return [
            Party(X, y, epsilon=eps, bounds=self.bounds, name=f"party {i + 1}", noise_seed=seed, **settings)
            for i, ((X, y), eps, seed) in enumerate(zip(self.parties, epsilons, seeds))
        ]


def load_california(
    data_dir: str | Path | None = None,
    *,
    seed: int = 0,
    fractions: tuple[float, ...] = (0.2, 0.3, 0.5),
    split_seed: int = 0,
    network_seed: int = 0,
    public_fraction: float = 0.6,
    validation_fraction: float = 0.2,
    max_abs_z: float = 4.0,
    missing: str = "impute",
    n0: float = 10.0,
    epochs: int = 60,
) -> CaliforniaDataset:
    """The CaliH setting of Sim et al. (2023, Sec. 6, App. H.1): California Housing for 3 parties, by transfer.

    1. The 8 standard features and y = median_house_value / 1e5 (`read_california`). The 207 blank
       total_bedrooms are imputed (missing='impute', the default) as total_rooms times the public median of
       total_bedrooms / total_rooms, so all 20,640 block groups of the paper's copy (which has no blanks) stay;
       missing='drop' drops those rows instead.
    2. A random `public_fraction` (60 %) of the rows is public (`split_seed`): median/IQR scaling and the MLP
       [48, 24, 6] are fitted on it (`fit_mlp_features`, `network_seed`, `epochs`), and its standardised 6 last-
       hidden outputs are the BLR inputs. The prior is built from the public rows (`calih_model_prior` with `n0`,
       `calih_data_prior`).
    3. The other 40 % goes through the same map and is split `1 - validation_fraction` / `validation_fraction`
       into private training and validation (the MNLP test set); training rows with any |feature| >
       `max_abs_z` are dropped (validation rows are kept), then the training rows are split at random (`seed`)
       into parties with the given `fractions` (`party_sizes`).

    Declared bounds: the drop rule makes every feature at most max_abs_z in size, so ||x||_2 <= max_abs_z *
    sqrt(6); y lies in (0, 5.00001] since the file top-codes house values at 500,001 dollars. Both follow from
    the rules, not from the private rows, so declaring them leaks nothing (at the defaults no row is clipped and
    Delta_2 = 222).

    Returns a `CaliforniaDataset`. Every argument is checked before the file is read.
    """
    for name, value in (("seed", seed), ("split_seed", split_seed), ("network_seed", network_seed)):
        check_int(name, value, minimum=0, maximum=2**32 - 1)
    max_abs_z = check_positive("max_abs_z", max_abs_z)
    n0 = check_positive("n0", n0)
    epochs = check_count("epochs", epochs, minimum=1)
    public_fraction = check_probability("public_fraction", public_fraction)
    validation_fraction = check_probability("validation_fraction", validation_fraction)
    if missing not in ("impute", "drop"):
        raise ValueError(f"missing must be 'impute' or 'drop', got {missing!r}")
    party_sizes(1000, tuple(fractions))  # checks the fractions before any work

    features, target, bedroom_share = read_california(data_dir)
    blank = np.isnan(features[:, 3])
    if missing == "drop":
        features, target, bedroom_share = features[~blank], target[~blank], bedroom_share[~blank]
    num_private = math.ceil(len(features) * (1.0 - public_fraction))  # as scikit-learn's test_size rounds
    public_rows, private_rows = train_validation_split(len(features), num_private, split_seed)
    if missing == "impute":
        share = np.nanmedian(bedroom_share[public_rows])
        features[blank, 3] = share * features[blank, 2]

    feature_map, losses = fit_mlp_features(features[public_rows], target[public_rows], seed=network_seed, epochs=epochs)
    X_public, y_public = feature_map.apply(features[public_rows]), target[public_rows]
    num_validation = math.ceil(num_private * validation_fraction)
    train_local, validation_local = train_validation_split(num_private, num_validation, split_seed)
    X_train, y_train = feature_map.apply(features[private_rows[train_local]]), target[private_rows[train_local]]
    inside = np.all(np.abs(X_train) <= max_abs_z, axis=1)
    X_train, y_train = X_train[inside], y_train[inside]
    validation_rows = private_rows[validation_local]

    sizes = party_sizes(len(X_train), tuple(fractions))
    order = np.random.default_rng(seed).permutation(len(X_train))
    party_indices = np.split(order, np.cumsum(sizes)[:-1])
    return CaliforniaDataset(
        parties=[(X_train[rows], y_train[rows]) for rows in party_indices],
        train=(X_train, y_train),
        validation=(feature_map.apply(features[validation_rows]), target[validation_rows]),
        public=(X_public, y_public),
        bounds=Bounds(x_norm=float(max_abs_z) * math.sqrt(HIDDEN[-1]), y_abs=TARGET_CAP),
        prior=calih_model_prior(X_public, y_public, n0),
        data_prior=calih_data_prior(X_public),
        features=feature_map,
        party_indices=party_indices,
        public_rows=public_rows,
        validation_rows=validation_rows,
        mlp_losses=losses,
        imputed_rows=int(blank.sum()) if missing == "impute" else 0,
        dropped_rows=int((~inside).sum()),
    )


__all__ = [
    "CALIFORNIA_FILE",
    "CaliforniaDataset",
    "MLPFeatures",
    "calih_data_prior",
    "calih_model_prior",
    "fit_mlp_features",
    "load_california",
    "read_california",
]
