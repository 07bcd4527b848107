"""Argument checks that turn bad input into clear errors (DESIGN.md Sec. 6)."""

from __future__ import annotations

import math

import numpy as np


def check_positive(name: str, value: float) -> float:
    """`value` must be a finite number > 0."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise TypeError(f"{name} must be a number, got {value!r}") from None
    if not (math.isfinite(number) and number > 0):
        raise ValueError(f"{name} must be a finite number > 0, got {value!r}")
    return number


def check_probability(name: str, value: float) -> float:
    """`value` must lie in the open interval (0, 1)."""
    number = float(value)
    if not 0 < number < 1:
        raise ValueError(f"{name} must lie in (0, 1), got {value!r}")
    return number


def check_finite_array(name: str, array, ndim: int) -> np.ndarray:
    """`array` as float64 of the given rank, with every entry finite."""
    array = np.asarray(array, dtype=np.float64)
    if array.ndim != ndim:
        raise ValueError(f"{name} must be a {ndim}-D array, got shape {array.shape}")
    bad = ~np.isfinite(array)
    if bad.any():
        where = np.argwhere(bad)[0].tolist()
        raise ValueError(
            f"{name} has {int(bad.sum())} non-finite entries (first at index {where}); "
            "remove or impute them before valuation"
        )
    return array
