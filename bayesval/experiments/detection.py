"""Corrupted-data detection with data values: corruption, AUROC and the TKNN-Shapley paper's protocol.

Wang et al. 2023, Sec. 6.2 and App. E.1, E.3.1: class-balanced 2,000 training and
200 validation points, 10 % of the training points corrupted (labels flipped, or Gaussian noise
on the features), values computed, and the corrupted points detected by low value (AUROC of
-value). Splits follow the official code: balance by oversampling, validation rows first, then a
class-balanced training sample from the rest, z-scored with training statistics.
"""

from __future__ import annotations

import jax
import numpy as np

from bayesval.results.ranking import detection_auroc
from bayesval.validation import check_probability

TASKS = ("mislabel", "noisy")
NOISE_SCALES = ("column_norm", "mean_abs")


def _corrupted_rows(key: jax.Array, n: int, fraction: float) -> np.ndarray:
    """round(fraction * n) distinct rows, as a boolean mask."""
    check_probability("fraction", fraction)
    rows = np.asarray(jax.random.choice(key, n, (round(fraction * n),), replace=False))
    mask = np.zeros(n, dtype=bool)
    mask[rows] = True
    return mask


def flip_labels(key: jax.Array, y, fraction: float = 0.1) -> tuple[np.ndarray, np.ndarray]:
    """Give `fraction` of the points another class, chosen uniformly (App. E.3.1).

    Returns the new labels and the boolean mask of corrupted points.
    """
    y = np.asarray(y)
    classes, codes = np.unique(y, return_inverse=True)
    if classes.size < 2:
        raise ValueError("y has a single class; flipping labels needs at least 2")
    rows_key, class_key = jax.random.split(key)
    corrupted = _corrupted_rows(rows_key, y.size, fraction)
    shift = np.asarray(jax.random.randint(class_key, (int(corrupted.sum()),), 1, classes.size))
    flipped = codes.copy()
    flipped[corrupted] = (codes[corrupted] + shift) % classes.size
    return classes[flipped], corrupted


def add_feature_noise(
    key: jax.Array, X, fraction: float = 0.1, scale: str = "column_norm"
) -> tuple[np.ndarray, np.ndarray]:
    """Add N(0, s_j^2) to every feature j of `fraction` of the rows; (features, corrupted mask).

    s_j is the column's L2 norm for scale='column_norm' (the official code, used for the paper's
    tables) or its mean absolute value for scale='mean_abs' (the paper's text, App. E.3.1); the two differ by about
    sqrt(N) (docs/knn.md, "Where we depart from the paper").
    """
    if scale not in NOISE_SCALES:
        raise ValueError(f"scale must be one of {NOISE_SCALES}, got {scale!r}")
    X = np.asarray(X, dtype=np.float64)
    rows_key, noise_key = jax.random.split(key)
    corrupted = _corrupted_rows(rows_key, X.shape[0], fraction)
    std = np.linalg.norm(X, axis=0) if scale == "column_norm" else np.abs(X).mean(axis=0)
    noise = np.asarray(jax.random.normal(noise_key, (int(corrupted.sum()), X.shape[1]))) * std
    noisy = X.copy()
    noisy[corrupted] += noise
    return noisy, corrupted


def balanced_split(
    key: jax.Array, X, y, n_train: int = 2000, n_val: int = 200
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Class-balanced (X_train, y_train, X_val, y_val) as in the official TKNN-Shapley code.

    Every class is topped up with rows drawn with replacement to the size of the largest, the rows are
    shuffled, the first `n_val` become the validation set and `n_train` training rows are drawn
    without replacement from the rest, equally from each class.
    """
    X, y = np.asarray(X), np.asarray(y)
    classes = np.unique(y)
    over_key, perm_key, train_key = jax.random.split(key, 3)
    largest = max(int((y == c).sum()) for c in classes)
    rows = []
    for k, c in zip(jax.random.split(over_key, classes.size), classes, strict=True):
        members = np.flatnonzero(y == c)
        extra = np.asarray(jax.random.choice(k, members, (largest - members.size,), replace=True))
        rows.extend([members, extra])
    rows = np.concatenate(rows)
    rows = rows[np.asarray(jax.random.permutation(perm_key, rows.size))]
    val_rows, pool = rows[:n_val], rows[n_val:]
    per_class = np.full(classes.size, n_train // classes.size)
    per_class[: n_train % classes.size] += 1
    train_rows = []
    for k, c, count in zip(jax.random.split(train_key, classes.size), classes, per_class, strict=True):
        candidates = pool[y[pool] == c]
        if candidates.size < count:
            raise ValueError(f"class {c!r} has {candidates.size} rows left, fewer than the {count} asked for")
        train_rows.append(np.asarray(jax.random.choice(k, candidates, (int(count),), replace=False)))
    train_rows = np.concatenate(train_rows)
    shuffle = jax.random.permutation(jax.random.fold_in(train_key, 1), train_rows.size)
    train_rows = train_rows[np.asarray(shuffle)]
    return X[train_rows], y[train_rows], X[val_rows], y[val_rows]


def standardise(X_train, X_val) -> tuple[np.ndarray, np.ndarray]:
    """z-score both sets with the training mean and std (constant columns are only centred)."""
    mean, std = X_train.mean(axis=0), X_train.std(axis=0)
    std = np.where(std > 0, std, 1.0)
    return (X_train - mean) / std, (X_val - mean) / std


def detection_aurocs(
    estimator,
    X,
    y,
    *,
    key: jax.Array,
    task: str = "mislabel",
    n_runs: int = 5,
    n_train: int = 2000,
    n_val: int = 200,
    fraction: float = 0.1,
) -> np.ndarray:
    """AUROC of each of `n_runs` runs of the paper's protocol with `estimator` (fit / value).

    Each run draws its own split and corruption from `key`; a private estimator makes one release per
    run from its own noise source, so the spread covers data and DP randomness (the official code fixes
    the split, so its spread covers DP randomness only; docs/knn.md, "Corruption, AUROC and the paper's protocol").
    """
    if task not in TASKS:
        raise ValueError(f"task must be one of {TASKS}, got {task!r}")
    aurocs = []
    for run in range(n_runs):
        split_key, corrupt_key = jax.random.split(jax.random.fold_in(key, run))
        X_train, y_train, X_val, y_val = balanced_split(split_key, X, y, n_train, n_val)
        if task == "mislabel":
            y_train, corrupted = flip_labels(corrupt_key, y_train, fraction)
        else:
            X_train, corrupted = add_feature_noise(corrupt_key, X_train, fraction)
        X_train, X_val = standardise(X_train, X_val)
        result = estimator.fit(X_train, y_train).value(X_val, y_val)
        aurocs.append(detection_auroc(result.values, corrupted))
    return np.asarray(aurocs)
