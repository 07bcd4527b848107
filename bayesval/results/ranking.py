"""How well low values single out flagged points: the AUROC of detection (Wang, Yang & Jia 2023, Sec. 6.2), used by the
detection experiments and by the figure of a result."""

from __future__ import annotations

import numpy as np


def detection_auroc(values, corrupted) -> float:
    """AUROC of detecting the corrupted points by low value: sklearn's roc_auc_score(corrupted, -values), the
    probability that a corrupted point has the lower value, ties counting 1/2. scikit-learn is imported here, not
    with the package: it is 0.7 s of every `import bayesval` otherwise."""
    from sklearn.metrics import roc_auc_score

    corrupted = np.asarray(corrupted, dtype=bool)
    n_bad = int(corrupted.sum())
    if n_bad in (0, corrupted.size):
        raise ValueError("corrupted must mark some points but not all")
    return float(roc_auc_score(corrupted, -np.asarray(values, dtype=np.float64)))
