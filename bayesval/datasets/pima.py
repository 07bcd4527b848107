"""The Diab setting of Sim et al. (2023, Sec. 6 and App. H.1): Pima Indians Diabetes, preprocessed
with training statistics and split across three parties.

The file ``pima_indians_diabetes.csv`` (768 rows: 8 raw features and ``target``, 1 = diabetes) lives in
the shared data folder; see `bayesval.datasets.paths.data_file` for how it is found. Nothing is
downloaded and nothing is copied into the repository.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

import numpy as np

from bayesval.datasets.paths import data_file
from bayesval.statistics import Bounds

PIMA_FILE = "pima_indians_diabetes.csv"
PIMA_SPLIT_SEED = 27
PIMA_VALIDATION_SIZE = 154


class PimaPreprocessing(NamedTuple):
    """Preprocessing fitted on the training rows: median/IQR scaling, PCA, standardisation, clipping.

    `apply(raw)` maps raw feature rows (n, 8) to the clipped principal-component features (n, k).
    """

    median: np.ndarray  # (8,)   per-feature median of the raw training rows
    iqr: np.ndarray  # (8,)      per-feature interquartile range (q75 - q25; 1 where it is 0)
    pca_mean: np.ndarray  # (8,) mean of the scaled training rows
    components: np.ndarray  # (k, 8) principal axes, largest variance first
    pc_mean: np.ndarray  # (k,)  mean of the projected training rows (0 up to rounding)
    pc_std: np.ndarray  # (k,)   standard deviation (ddof=0) of the projected training rows
    clip: float

    def standardise(self, raw: np.ndarray) -> np.ndarray:
        """Steps (i)-(iii) without the clipping: robust scaling, projection, standardisation."""
        scaled = (np.asarray(raw, dtype=np.float64) - self.median) / self.iqr
        projected = (scaled - self.pca_mean) @ self.components.T
        return (projected - self.pc_mean) / self.pc_std

    def apply(self, raw: np.ndarray) -> np.ndarray:
        """All four steps: the features the parties hold, each within [-clip, clip]."""
        return np.clip(self.standardise(raw), -self.clip, self.clip)


@dataclass(frozen=True)
class PimaDataset:
    """Party datasets, the pooled training rows, the validation (MNLP test) set and declared bounds.

    Labels are float +1 (diabetes) / -1 (no diabetes). `clipped_fraction` is the fraction of training
    feature entries that step (iv) clipped at +-clip; `clipped_rows` the number of training rows with at
    least one clipped entry (the DP guarantee depends on the bound, so the clipping is recorded).
    """

    parties: list[tuple[np.ndarray, np.ndarray]]
    train: tuple[np.ndarray, np.ndarray]
    validation: tuple[np.ndarray, np.ndarray]
    bounds: Bounds
    feature_names: tuple[str, ...]
    raw_feature_names: tuple[str, ...]
    preprocessing: PimaPreprocessing
    party_indices: list[np.ndarray]
    clipped_fraction: float
    clipped_rows: int


def read_pima(data_dir: str | Path | None = None) -> tuple[np.ndarray, np.ndarray, tuple[str, ...]]:
    """Raw features (768, 8) float64, 0/1 labels (768,) int64 and the raw feature names, in file order."""
    path = data_file(PIMA_FILE, data_dir)
    with open(path, encoding="utf-8") as handle:
        header = handle.readline().strip().split(",")
    if len(header) != 9 or header[-1] != "target":
        raise ValueError(f"{path}: expected 8 feature columns and a last column 'target', got header {header}")
    table = np.loadtxt(path, delimiter=",", skiprows=1, dtype=np.float64, ndmin=2)
    labels = table[:, -1]
    if not np.all(np.isin(labels, (0.0, 1.0))):
        raise ValueError(f"{path}: column 'target' must hold 0/1, got values {np.unique(labels)}")
    return table[:, :-1], labels.astype(np.int64), tuple(header[:-1])


def train_validation_split(num_rows: int, validation_size: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Row indices (train, validation) of a random split, identical to scikit-learn's
    ``train_test_split(..., test_size=validation_size, random_state=seed)``: one permutation from the
    legacy ``numpy.random.RandomState(seed)``; its first `validation_size` entries are the validation rows,
    the rest (in permutation order) the training rows."""
    permutation = np.random.RandomState(seed).permutation(num_rows)
    return permutation[validation_size:], permutation[:validation_size]


def party_sizes(num_rows: int, fractions: tuple[float, ...]) -> list[int]:
    """Party sizes from fractions summing to 1: boundaries at round(num_rows * cumulative fraction), so the
    sizes sum to num_rows exactly (614 rows at 20/30/50 % give 123/184/307)."""
    fractions_arr = np.asarray(fractions, dtype=np.float64)
    if fractions_arr.ndim != 1 or fractions_arr.size < 2 or np.any(~np.isfinite(fractions_arr)):
        raise ValueError(f"fractions must be at least 2 finite numbers, got {fractions!r}")
    if np.any(fractions_arr <= 0) or abs(fractions_arr.sum() - 1.0) > 1e-9:
        raise ValueError(f"fractions must be > 0 and sum to 1, got {fractions!r} (sum {fractions_arr.sum():g})")
    boundaries = np.rint(num_rows * np.cumsum(fractions_arr)).astype(int)
    boundaries[-1] = num_rows
    sizes = np.diff(boundaries, prepend=0)
    if np.any(sizes <= 0):
        raise ValueError(f"fractions {fractions!r} leave a party of {num_rows} rows empty: sizes {sizes.tolist()}")
    return sizes.tolist()


def robust_scaling(raw_train: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Step (i): per-feature median and interquartile range (linear-interpolated 25th/75th percentiles;
    a zero range becomes 1), as scikit-learn's ``RobustScaler(quantile_range=(25, 75))``."""
    median = np.median(raw_train, axis=0)
    q25, q75 = np.percentile(raw_train, [25.0, 75.0], axis=0)
    iqr = q75 - q25
    return median, np.where(iqr == 0.0, 1.0, iqr)


def principal_axes(scaled_train: np.ndarray, num_components: int) -> tuple[np.ndarray, np.ndarray]:
    """Step (ii): centring mean and the top `num_components` principal axes (rows), from an SVD of the
    centred training rows. Sign convention: each axis's entry of largest magnitude is positive."""
    mean = scaled_train.mean(axis=0)
    _, _, vt = np.linalg.svd(scaled_train - mean, full_matrices=False)
    axes = vt[:num_components]
    signs = np.sign(axes[np.arange(num_components), np.argmax(np.abs(axes), axis=1)])
    return mean, axes * signs[:, None]


def fit_preprocessing(raw_train: np.ndarray, num_components: int = 4, clip: float = 2.2) -> PimaPreprocessing:
    """Fit steps (i)-(iv) of Sim et al. (2023, App. H.1, Diab) on the raw training rows only:
    (i) median/IQR scaling, (ii) PCA to `num_components`, (iii) standardise (zero mean, unit variance,
    ddof=0), (iv) clip each feature at +-`clip`."""
    raw_train = np.asarray(raw_train, dtype=np.float64)
    if raw_train.ndim != 2 or not np.all(np.isfinite(raw_train)):
        raise ValueError(f"raw_train must be a finite 2-D array, got shape {raw_train.shape}")
    if not (isinstance(num_components, int | np.integer) and 1 <= num_components <= raw_train.shape[1]):
        raise ValueError(f"num_components must be an integer in [1, {raw_train.shape[1]}], got {num_components!r}")
    if not (isinstance(clip, int | float) and np.isfinite(clip) and clip > 0):
        raise ValueError(f"clip must be a finite number > 0, got {clip!r}")
    median, iqr = robust_scaling(raw_train)
    scaled = (raw_train - median) / iqr
    pca_mean, components = principal_axes(scaled, num_components)
    projected = (scaled - pca_mean) @ components.T
    pc_mean, pc_std = projected.mean(axis=0), projected.std(axis=0)
    return PimaPreprocessing(median, iqr, pca_mean, components, pc_mean, pc_std, float(clip))


def load_pima(
    data_dir: str | Path | None = None,
    *,
    seed: int = 0,
    fractions: tuple[float, ...] = (0.2, 0.3, 0.5),
    num_components: int = 4,
    clip: float = 2.2,
    split_seed: int = PIMA_SPLIT_SEED,
) -> PimaDataset:
    """The Diab setting of Sim et al. (2023, Sec. 6, App. H.1): Pima Indians Diabetes for 3 parties.

    80/20 split: ``train_validation_split(768, 154, split_seed)``, i.e. exactly scikit-learn's
    ``train_test_split(test_size=0.2, random_state=27)``, reimplemented with numpy's legacy
    ``RandomState(27).permutation``. It reproduces the paper's counts: 614 training rows with 219
    positives (35.67 %, "35.6 %") and 154 validation rows with 49 positives (31.82 %), so guessing the
    training base rate scores a validation cross-entropy (MNLP) of 0.6288 (paper: 0.629). The file order
    (first 614 / last 154) does not: it gives 213 / 55 positives. Seed 27 is the smallest seed of
    ``train_test_split`` with these counts (29, 34, 48 also have them); the paper does not name its seed.

    Preprocessing is fitted on the 614 training rows only (`fit_preprocessing`) and applied to both
    splits. The training rows are then split at random (``numpy.random.default_rng(seed)``) into parties
    with the given `fractions`; sizes follow `party_sizes` (123 / 184 / 307 for 20/30/50 %).

    Labels are float +1 (diabetes) / -1 (otherwise), the paper's convention. Declared bounds:
    ||x||_2 <= clip * sqrt(num_components) (every feature is within +-clip) and |y| <= 1.
    """
    raw, labels, raw_names = read_pima(data_dir)
    train_rows, validation_rows = train_validation_split(len(raw), PIMA_VALIDATION_SIZE, split_seed)
    preprocessing = fit_preprocessing(raw[train_rows], num_components, clip)
    signed = 2.0 * labels.astype(np.float64) - 1.0

    standardised = preprocessing.standardise(raw[train_rows])
    clipped = np.abs(standardised) > clip
    X_train, y_train = preprocessing.apply(raw[train_rows]), signed[train_rows]
    X_validation, y_validation = preprocessing.apply(raw[validation_rows]), signed[validation_rows]

    sizes = party_sizes(len(X_train), tuple(fractions))
    order = np.random.default_rng(seed).permutation(len(X_train))
    party_indices = np.split(order, np.cumsum(sizes)[:-1])
    parties = [(X_train[rows], y_train[rows]) for rows in party_indices]

    return PimaDataset(
        parties=parties,
        train=(X_train, y_train),
        validation=(X_validation, y_validation),
        bounds=Bounds(x_norm=float(clip) * float(np.sqrt(num_components)), y_abs=1.0),
        feature_names=tuple(f"PC{k + 1}" for k in range(num_components)),
        raw_feature_names=raw_names,
        preprocessing=preprocessing,
        party_indices=party_indices,
        clipped_fraction=float(clipped.mean()),
        clipped_rows=int(clipped.any(axis=1).sum()),
    )


__all__ = [
    "PIMA_FILE",
    "PimaDataset",
    "PimaPreprocessing",
    "fit_preprocessing",
    "load_pima",
    "party_sizes",
    "read_pima",
    "train_validation_split",
]
