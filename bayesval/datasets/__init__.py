"""Synthetic generators and loaders for the shared data files."""

from bayesval.datasets.california import load_california

__all__ = ["load_california"]
