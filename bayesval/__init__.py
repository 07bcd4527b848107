"""bayesval: private, Bayesian data valuation on NumPyro and JAX.

bayesval turns on JAX's 64-bit mode at import: perturbed sufficient statistics are sums of
fourth powers whose small eigenvalues float32 loses (docs/architecture.md).

The public names below load on first use (PEP 562), so that `import bayesval` costs JAX and no more, and a
command of the `bayesval` CLI that fails on its arguments fails before the samplers, NumPyro and the privacy
libraries are imported (docs/architecture.md, "Importing on first use"). A result file that holds a record of a
wing not yet imported loads it when the file is read (`results.serialisation.set_kind_loader`).
"""

import importlib
from typing import TYPE_CHECKING

import jax

jax.config.update("jax_enable_x64", True)

from bayesval import deprecated  # noqa: E402
from bayesval.results import serialisation  # noqa: E402

# eager, and light (the party path loads on its first call): a later import of the module `bayesval.valuate` would
# rebind the package's name to the module, which a name loaded on first use could not win back
from bayesval.valuate import valuate  # noqa: E402, F401

if TYPE_CHECKING:  # what the names below are, for type checkers and the API pages (read, never run)
    from bayesval import estimators, experiments, games, models
    from bayesval.inference.config import SamplerConfig
    from bayesval.inference.data import NoiseAwareData
    from bayesval.parties import Party, PerturbedStatistic, rewards
    from bayesval.parties.signing import Keyring, generate_keys
    from bayesval.privacy import DPGuarantee, PrivacyLedger
    from bayesval.results import ValuationResult
    from bayesval.results.plotting import plot_privacy_tradeoff
    from bayesval.statistics import Bounds

# Each public name and the module it is read from; subpackages are their own module.
_PUBLIC = {
    "Bounds": "bayesval.statistics",
    "DPGuarantee": "bayesval.privacy",
    "Keyring": "bayesval.parties.signing",
    "NoiseAwareData": "bayesval.inference.data",
    "Party": "bayesval.parties",
    "PerturbedStatistic": "bayesval.parties",
    "PrivacyLedger": "bayesval.privacy",
    "SamplerConfig": "bayesval.inference.config",
    "ValuationResult": "bayesval.results",
    "estimators": "bayesval.estimators",
    "experiments": "bayesval.experiments",
    "games": "bayesval.games",
    "generate_keys": "bayesval.parties.signing",
    "models": "bayesval.models",
    "plot_privacy_tradeoff": "bayesval.results.plotting",
    "rewards": "bayesval.parties.rewards",
}

# The modules that register record kinds (`results.serialisation.register`) beyond the results layer's own.
_RECORD_MODULES = ("bayesval.privacy.ledger", "bayesval.parties.rewards.allocation")

__all__ = [
    "Bounds",
    "DPGuarantee",
    "Keyring",
    "NoiseAwareData",
    "Party",
    "PerturbedStatistic",
    "PrivacyLedger",
    "SamplerConfig",
    "ValuationResult",
    "estimators",
    "experiments",
    "games",
    "generate_keys",
    "models",
    "plot_privacy_tradeoff",
    "rewards",
    "valuate",
]  # every name of _PUBLIC, and valuate


def __getattr__(name: str):
    home = _PUBLIC.get(name)
    if home is None:
        raise AttributeError(f"module 'bayesval' has no attribute {name!r}")
    module = importlib.import_module(home)
    value = module if home.endswith(f".{name}") else getattr(module, name)
    globals()[name] = value  # read once: later reads are plain attribute lookups
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_PUBLIC))


def _load_record_modules() -> None:
    for module in _RECORD_MODULES:
        importlib.import_module(module)


serialisation.set_kind_loader(_load_record_modules)
deprecated.install()
