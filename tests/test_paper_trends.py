"""Sim et al. (2023) patterns on Syn: the privacy-valuation trade-off (V3, Fig. 2a / Fig. 8) and
Table 1 (surprise grows with input coverage; perturbed below exact). Small sampler budgets."""

import warnings

import jax
import numpy as np
import pytest

import bayesval as bv
from bayesval.divergence import knn_kl, nig_kl
from bayesval.inference.conjugate import nig_draws
from bayesval.inference.data import NoiseAwareData
from bayesval.parties import release_all
from bayesval.parties.surprise import CoalitionSurprise

MODEL = bv.models.LinearRegression()
BUDGET = bv.SamplerConfig(num_chains=4, num_warmup=200, num_samples=600, thinning=1, num_repeats=3, progress_bar=False)


@pytest.fixture(scope="module")
def epsilon_sweep(syn):
    """v_2 and phi_2 over epsilon_2, with one fixed standard-normal noise draw per party (nested noise)."""
    sweep = {}
    for epsilon_2 in (0.004, 0.1, 0.5, 12.5):  # a subset of Fig. 2b's sweep, to keep CI under 20 minutes
        parties = [
            bv.Party(  # the paper's fixed-seed sweep: nested noise across epsilon_2 (seed reuse allowed)
                X, y, epsilon=eps, bounds=syn.bounds, name=f"party {i + 1}", noise_seed=100 + i, allow_seed_reuse=True
            )
            for i, ((X, y), eps) in enumerate(zip(syn.parties, (0.2, epsilon_2, 0.2)))
        ]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)  # small test budget: R-hat is reported, not asserted
            sweep[epsilon_2] = bv.valuate(MODEL, parties, key=1, config=BUDGET)
    return sweep


def test_value_of_party_2_rises_with_its_epsilon(epsilon_sweep):
    v_2 = [r.coalition_value(["party 2"]) for r in epsilon_sweep.values()]
    phi_2 = [r.values[1] for r in epsilon_sweep.values()]
    assert np.all(np.diff(v_2) > 0), v_2
    assert np.all(np.diff(phi_2) > 0), phi_2
    # party 2 moves from least to most valuable although c_1 < c_2 < c_3 (Fig. 8)
    first, last = epsilon_sweep[0.004], epsilon_sweep[12.5]
    assert np.argmin(first.values) == 1 and np.argmax(last.values) == 1


def test_shapley_values_are_efficient(epsilon_sweep):
    for result in epsilon_sweep.values():
        assert result.values.sum() == pytest.approx(result.coalition_value(["party 1", "party 2", "party 3"]))


def test_table_1_surprise_grows_with_coverage_and_perturbed_is_below_exact(syn):
    exact, perturbed = [], []
    for percentile in (25, 50, 75, 100):
        data = []
        for X, y in syn.parties:
            keep = X[:, 0] <= np.percentile(np.concatenate([p[0][:, 0] for p in syn.parties]), percentile)
            data.append((X[keep], y[keep]))
        parties = [
            bv.Party(
                X, y, epsilon=1.0, bounds=syn.bounds, name=f"party {i + 1}", noise_seed=200 + i, allow_seed_reuse=True
            )
            for i, (X, y) in enumerate(data)
        ]
        posterior = MODEL.exact_posterior(sum(p.exact_statistic() for p in parties), sum(len(p.X) for p in parties), 2)
        prior = MODEL.priors(2).model
        exact.append(nig_kl(posterior, prior))
        estimate = knn_kl(
            np.asarray(nig_draws(jax.random.key(percentile), posterior, 8000)),
            np.asarray(nig_draws(jax.random.key(percentile + 1), prior, 8000)),
        )
        assert estimate == pytest.approx(exact[-1], rel=0.05)
        mediator = NoiseAwareData.from_releases(release_all(MODEL, parties))
        surprise = CoalitionSurprise(MODEL, mediator, BUDGET, 4, jax.random.key(5), 1)(np.ones((1, 3), bool)).mean(
            axis=0
        )
        perturbed.append(float(surprise[0]))
    assert np.all(np.diff(exact) > 0), exact
    assert np.all(np.diff(perturbed) > 0), perturbed
    assert np.all(np.array(perturbed) < np.array(exact)), (perturbed, exact)
