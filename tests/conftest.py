import os

import numpy as np
import pytest

import bayesval as bv
from bayesval.datasets.synthetic import make_syn

os.environ.setdefault("BAYESVAL_DATA", os.path.join(os.path.dirname(__file__), "..", "..", "shared", "data"))


@pytest.fixture(scope="session")
def syn():
    return make_syn(seed=0)


@pytest.fixture()
def syn_parties(syn):
    def build(epsilons=(0.2, 0.1, 0.2), seeds=(11, 12, 13), data=None):
        data = data or syn.parties
        return [
            bv.Party(X, y, epsilon=eps, bounds=syn.bounds, name=f"party {i + 1}", noise_seed=seed)
            for i, ((X, y), eps, seed) in enumerate(zip(data, epsilons, seeds))
        ]

    return build


@pytest.fixture(autouse=True)
def isolated_noise_seeds(monkeypatch):
    """Each test is its own experiment: noise seeds claimed in one test do not bind another."""
    import bayesval.privacy.noise

    monkeypatch.setattr(bayesval.privacy.noise, "_CLAIMED", {})


@pytest.fixture()
def rng():
    """A fresh generator per test, so no test's numbers depend on which tests ran before it."""
    return np.random.default_rng(20261122)
