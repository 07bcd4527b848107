"""Synthetic generators and loaders for the shared data files.

`load_california` is imported on first use (PEP 562): CaliH's public feature network needs optax and pandas, which
a command that never loads CaliH (or that fails on its arguments) should not pay for.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from bayesval.datasets.california import load_california


def __getattr__(name: str) -> Any:
    if name == "load_california":
        from bayesval.datasets.california import load_california

        return load_california
    raise AttributeError(f"module 'bayesval.datasets' has no attribute {name!r}")


__all__ = ["load_california"]
