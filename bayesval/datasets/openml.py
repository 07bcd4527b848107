"""Loader for the OpenML binary-classification sets used by the TKNN-Shapley experiments.

The files live in the shared data folder (``openml/<name>.npz`` with arrays ``X`` and ``y``); see
`bayesval.datasets.paths.data_file` for how the folder is found. Nothing is downloaded.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from bayesval.datasets.paths import data_file

OPENML_DATASETS = ("2dplanes", "phoneme", "pol", "click", "fraud")


def load_openml(name: str, data_dir: str | Path | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Features (float64, rows x features) and 0/1 labels (int64) of the shared OpenML set `name`."""
    if name not in OPENML_DATASETS:
        raise ValueError(f"name must be one of {OPENML_DATASETS}, got {name!r}")
    with np.load(data_file(f"openml/{name}.npz", data_dir), allow_pickle=False) as data:
        return np.asarray(data["X"], dtype=np.float64), np.asarray(data["y"], dtype=np.int64)


__all__ = ["OPENML_DATASETS", "load_openml"]
