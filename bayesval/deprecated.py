"""Old import paths, kept for one release after the package moved into its wings (docs/architecture.md, "Old
import paths"): importing an old module, or reading a moved name from its old package, warns with a `DeprecationWarning`
and gives the object at its new home. Everything here resolves by name, so that no layer imports upward."""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys
import warnings
from types import ModuleType

MOVED_MODULES = {
    "bayesval.boundary": "bayesval.parties.boundary",
    "bayesval.config": "bayesval.inference.config",
    "bayesval.plotting": "bayesval.results.plotting",
    "bayesval.rewards": "bayesval.parties.rewards",
    "bayesval.rewards.allocation": "bayesval.parties.rewards.allocation",
    "bayesval.rewards.control": "bayesval.parties.rewards.control",
    "bayesval.rewards.metrics": "bayesval.parties.rewards.metrics",
    "bayesval.rewards.report": "bayesval.parties.rewards.report",
    "bayesval.rewards.sampling": "bayesval.parties.rewards.sampling",
    "bayesval.rewards.targets": "bayesval.parties.rewards.targets",
    "bayesval.games.surprise": "bayesval.parties.surprise",
    "bayesval.games.state": "bayesval.results.state",
    "bayesval.games.variance": "bayesval.results.variance",
    "bayesval.estimators.knn_values": "bayesval.estimators.knn.values",
    "bayesval.estimators.distances": "bayesval.estimators.knn.distances",
    "bayesval.estimators.batching": "bayesval.batching",
    "bayesval.estimators.utilities": "bayesval.estimators.layered.utilities",
    "bayesval.estimators.gradient_models": "bayesval.estimators.gradients.models",
    "bayesval.estimators.release": "bayesval.privacy.release",
    "bayesval.estimators.evaluation": "bayesval.experiments.detection",
    "bayesval.estimators.removal": "bayesval.experiments.removal",
    "bayesval.estimators.gradient_experiments": "bayesval.experiments.gradients",
}

# Packages that exported names before the move which now live in another package: every public name of the new
# home (its `__all__`) that the old package no longer has is read from the new home, with a warning.
MOVED_NAMES = {"bayesval.estimators": "bayesval.experiments"}


def _warn(old: str, new: str, stacklevel: int) -> None:
    warnings.warn(
        f"{old} has moved to {new}; the old path is kept for one release", DeprecationWarning, stacklevel=stacklevel + 1
    )


def moved_name(package: str, name: str):
    """The object a package's module `__getattr__` gives for a name that moved out of it, with a warning."""
    home = MOVED_NAMES.get(package)
    if home is None or name not in importlib.import_module(home).__all__:
        raise AttributeError(f"module {package!r} has no attribute {name!r}")
    _warn(f"{package}.{name}", f"{home}.{name}", stacklevel=3)  # the line that read the name
    return getattr(importlib.import_module(home), name)


class _MovedModules(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds an old module path and loads it as the module at its new home (the same object, not a copy)."""

    def find_spec(self, fullname, path=None, target=None):
        if fullname not in MOVED_MODULES:
            return None
        return importlib.util.spec_from_loader(fullname, self)

    def create_module(self, spec) -> ModuleType:
        _warn(spec.name, MOVED_MODULES[spec.name], stacklevel=2)
        module = importlib.import_module(MOVED_MODULES[spec.name])
        spec.loader_state = module.__spec__  # the import system is about to overwrite it with the old path's ModuleSpec
        return module

    def exec_module(self, module: ModuleType) -> None:
        """The module at its new home is already executed; the import system gave it the old path's ModuleSpec, so give
        it back its own."""
        module.__spec__ = module.__spec__.loader_state


def install() -> None:
    """Let the old module paths import (once per process)."""
    if not any(isinstance(finder, _MovedModules) for finder in sys.meta_path):
        sys.meta_path.insert(0, _MovedModules())
