"""The data of Watson et al.'s experiments (2023, Sec. 4 and App. E): UCI Adult, Pima Indians Diabetes and
the synthetic set of Ghorbani & Zou (2019), each split into the points to value, a value set scoring the coalitions
and a held-out test set for the removal curves, min-max scaled to [0, 1] (App. E) and rows scaled to L2 norm <= 1,
so that kappa = 1 (the paper leaves kappa open; docs/layered.md, "Experiments"). Files are read from the shared data
folder (`bayesval.datasets.paths.data_file`); nothing is downloaded.
"""

from __future__ import annotations

from pathlib import Path
from typing import NamedTuple

import numpy as np

from bayesval.datasets.paths import data_file
from bayesval.datasets.pima import read_pima
from bayesval.validation import row_norms

ADULT_FILE = "adult.csv.gz"
ADULT_DROPPED = ("education", "native_country", "fnlwgt")  # duplicates education_num; 90 % one value; a weight
WATSON_DATASETS = ("adult", "pima", "synthetic")


class ValuationSplit(NamedTuple):
    """Points to value (train), the value set inside the utility (value), the removal curves' test set (test)."""

    train: tuple[np.ndarray, np.ndarray]
    value: tuple[np.ndarray, np.ndarray]
    test: tuple[np.ndarray, np.ndarray]


def read_adult(data_dir: str | Path | None = None) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """UCI Adult (32,561 rows): numeric columns and one-hot categorical ones (a '?' is a category of its own), minus
    ADULT_DROPPED; labels 1 for income > 50K. Returns (X float64, y int64, feature names)."""
    import pandas as pd

    frame = pd.read_csv(data_file(ADULT_FILE, data_dir))
    if "income" not in frame.columns:
        raise ValueError(f"{ADULT_FILE}: expected a column 'income', got {list(frame.columns)}")
    labels = frame.pop("income").astype(str).str.strip()
    features = pd.get_dummies(frame.drop(columns=list(ADULT_DROPPED)), dtype=np.float64)
    return features.to_numpy(np.float64), (labels == ">50K").to_numpy(np.int64), [str(c) for c in features.columns]


def make_ghorbani_synthetic(
    seed: int = 0, num_points: int = 5100, dim: int = 50, important: int = 5, num_train: int = 100
) -> tuple[np.ndarray, np.ndarray]:
    """Ghorbani & Zou's synthetic set (DataShapley `label_generator`, difficulty 1): x ~ N(0, I_dim), a random
    direction on `important` coordinates, y ~ Bernoulli(sigmoid(t s)) of the standardised score s, the temperature t
    from 1 multiplied by 1.1 until logistic regression on the first `num_train` points scores > 0.7 on the rest."""
    from sklearn.linear_model import LogisticRegression

    rng = np.random.default_rng(seed)
    x = rng.normal(size=(num_points, dim))
    direction = np.zeros(dim)
    direction[rng.choice(dim, important, replace=False)] = rng.normal(size=important)
    score = x @ direction
    score = (score - score.mean()) / score.std()
    uniform = rng.random(num_points)
    temperature = 1.0
    for _ in range(100):
        y = (uniform < 1 / (1 + np.exp(-temperature * score))).astype(np.int64)
        model = LogisticRegression().fit(x[:num_train], y[:num_train])
        if model.score(x[num_train:], y[num_train:]) > 0.7:
            break
        temperature *= 1.1
    return x, y


def watson_split(
    name: str,
    *,
    seed: int = 0,
    num_train: int = 100,
    num_value: int = 1000,
    num_test: int = 4000,
    data_dir: str | Path | None = None,
) -> ValuationSplit:
    """Disjoint random train / value / test rows of `name` ('adult', 'pima' or 'synthetic') (docs/layered.md,
    "Experiments"):
    features min-max scaled over all rows, then rows scaled to norm <= 1 by the largest row norm. The value and
    test sets shrink to what the data set holds (Pima: 768 rows)."""
    if name not in WATSON_DATASETS:
        raise ValueError(f"name must be one of {WATSON_DATASETS}, got {name!r}")
    if name == "adult":
        x, y, _ = read_adult(data_dir)
    elif name == "pima":
        x, y, _ = read_pima(data_dir)
    else:
        x, y = make_ghorbani_synthetic(seed, num_points=num_train + num_value + num_test, num_train=num_train)
    span = x.max(axis=0) - x.min(axis=0)
    x = (x - x.min(axis=0)) / np.where(span > 0, span, 1.0)
    x = x / row_norms(x).max()
    order = np.random.default_rng(seed).permutation(len(x)) if name != "synthetic" else np.arange(len(x))
    held_out = len(x) - num_train
    num_value = min(num_value, held_out // 2)
    num_test = min(num_test, held_out - num_value)
    bounds = np.cumsum([num_train, num_value, num_test])
    parts = np.split(order[: bounds[-1]], bounds[:-1])
    return ValuationSplit(*((x[rows], y[rows]) for rows in parts))


__all__ = ["ADULT_FILE", "ValuationSplit", "WATSON_DATASETS", "make_ghorbani_synthetic", "read_adult", "watson_split"]
