"""bayesval: private, Bayesian data valuation on NumPyro and JAX.

bayesval turns on JAX's 64-bit mode at import: perturbed sufficient statistics are sums of
fourth powers whose small eigenvalues float32 loses (docs/architecture.md).
"""

import jax

jax.config.update("jax_enable_x64", True)

from bayesval import deprecated, estimators, experiments, games, models  # noqa: E402
from bayesval.inference.config import SamplerConfig  # noqa: E402
from bayesval.inference.data import NoiseAwareData  # noqa: E402
from bayesval.parties import Party, PerturbedStatistic, rewards  # noqa: E402
from bayesval.parties.signing import Keyring, generate_keys  # noqa: E402
from bayesval.privacy import DPGuarantee, PrivacyLedger  # noqa: E402
from bayesval.results import ValuationResult  # noqa: E402
from bayesval.results.plotting import plot_privacy_tradeoff  # noqa: E402
from bayesval.statistics import Bounds  # noqa: E402
from bayesval.valuate import valuate  # noqa: E402

deprecated.install()

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
]
