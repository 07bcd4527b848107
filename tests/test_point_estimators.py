"""The one base of the data-point estimators (bayesval/estimators/base.py): every family on it, one fit/value
contract and its checks, `key` as the sampling randomness everywhere (with `seed=` deprecated), and the game layer's
stratified sampler in its fixed mode, which Layered Shapley draws its layers from."""

from math import comb

import jax
import numpy as np
import pytest

import bayesval as bv
from bayesval.estimators import (
    DPKNNShapley,
    GradientSemivalues,
    KNNShapley,
    LayeredShapley,
    MonteCarloShapley,
    TKNNShapley,
)
from bayesval.estimators.base import PointEstimator
from bayesval.estimators.layered.estimators import layer_counts
from bayesval.games.samplers import StratifiedSampler


def _data(n=8, d=3, n_val=40, seed=0):
    rng = np.random.default_rng(seed)
    x, w = rng.normal(size=(n + n_val, d)), rng.normal(size=d)
    y = (x @ w + 0.3 * rng.normal(size=n + n_val) > 0).astype(int)
    return x[:n], y[:n], x[n:], y[n:]


ESTIMATORS = {
    "knn": lambda: KNNShapley(3),
    "tknn": lambda: TKNNShapley(),
    "dp_tknn": lambda: TKNNShapley(epsilon=1.0, delta=1e-5, classes=[0, 1], noise_seed=1, allow_seed_reuse=True),
    "dp_knn": lambda: DPKNNShapley(3, epsilon=1.0, delta=1e-5, classes=[0, 1], noise_seed=2, allow_seed_reuse=True),
    "layered": lambda: LayeredShapley(0.3, 0.3),
    "dp_layered": lambda: LayeredShapley(0.3, 0.3, epsilon=1.0, noise_seed=3, allow_seed_reuse=True),
    "monte_carlo": lambda: MonteCarloShapley(num_permutations=4),
    "gradients": lambda: GradientSemivalues(num_permutations=3),
}


@pytest.mark.parametrize("name", ESTIMATORS)
def test_every_estimator_shares_the_contract(name):
    estimator = ESTIMATORS[name]()
    assert isinstance(estimator, PointEstimator)
    x, y, x_val, y_val = _data()
    with pytest.raises(RuntimeError, match=r"fit\(X, y\) before \.value"):
        estimator.value(x_val, y_val)
    estimator.fit(x, y)
    with pytest.raises(ValueError, match="X_val has 2 features but X had 3"):
        estimator.value(x_val[:, :2], y_val)
    with pytest.raises(ValueError, match="X_val has no rows"):
        estimator.value(x_val[:0], y_val[:0])
    result = estimator.value(x_val, y_val)
    assert result.names == [str(i) for i in range(len(x))]
    assert result.values.shape == result.stderr.shape == (len(x),)
    private = name.startswith("dp")
    assert len(result.privacy) == len(estimator.ledger_) == int(private)
    estimator.value(x_val, y_val)
    assert len(estimator.ledger_) == 2 * int(private)  # every release recorded ...
    estimator.fit(x, y)
    assert len(estimator.ledger_) == 0  # ... about the data fitted


@pytest.mark.parametrize("estimator", [LayeredShapley, MonteCarloShapley])
def test_seed_is_a_deprecated_name_of_key(estimator):
    x, y, x_val, y_val = _data()
    options = {"num_permutations": 4} if estimator is MonteCarloShapley else {"alpha": 0.3, "beta": 0.3}
    with pytest.warns(DeprecationWarning, match="seed= of .* is deprecated"):
        old = estimator(seed=5, **options)
    new = estimator(key=5, **options)
    typed = estimator(key=jax.random.key(5), **options)
    results = [e.fit(x, y).value(x_val, y_val) for e in (old, new, typed)]
    for result in results[1:]:
        np.testing.assert_array_equal(result.values, results[0].values)
        np.testing.assert_array_equal(result.stderr, results[0].stderr)
    with pytest.raises(TypeError, match="both key= and seed="), pytest.warns(DeprecationWarning):
        estimator(key=1, seed=2, **options)


def test_gradient_semivalues_take_an_int_or_a_jax_key():
    x, y, x_val, y_val = _data()
    by_int = GradientSemivalues(num_permutations=3, key=7).fit(x, y).value(x_val, y_val)
    by_key = GradientSemivalues(num_permutations=3, key=jax.random.key(7)).fit(x, y).value(x_val, y_val)
    np.testing.assert_array_equal(by_int.values, by_key.values)
    with pytest.raises(TypeError, match="key"):
        GradientSemivalues(key=1.5)


def test_fixed_stratified_draws_follow_the_counts():
    n = 9
    counts = np.zeros((n, n), np.int64)
    counts[:, 1] = comb(n - 1, 1)  # enumerated: every coalition once
    counts[:, 3] = 5  # sampled without replacement
    counts[2, 6] = 1
    masks, owners, sizes = StratifiedSampler.fixed_draws(jax.random.key(0), counts)
    assert not masks[np.arange(len(owners)), owners].any()  # never the index itself
    np.testing.assert_array_equal(masks.sum(axis=1), sizes)
    np.testing.assert_array_equal(np.bincount(owners * n + sizes, minlength=n * n).reshape(n, n), counts)
    for player in range(n):
        drawn = masks[(owners == player) & (sizes == 3)]
        assert len(np.unique(drawn, axis=0)) == 5  # distinct
    again = StratifiedSampler.fixed_draws(jax.random.key(0), counts)
    np.testing.assert_array_equal(again[0], masks)


def test_fixed_stratified_draws_of_large_layers_are_uniform_coalitions():
    n = 24  # binom(23, k) > 20 000 for k = 6 .. 17: independent draws
    counts = np.zeros((n, n), np.int64)
    counts[:, 8] = 400
    masks, owners, sizes = StratifiedSampler.fixed_draws(jax.random.key(1), counts)
    assert not masks[np.arange(len(owners)), owners].any()
    assert (masks.sum(axis=1) == 8).all()
    inclusion = masks[owners == 0].mean(axis=0)[1:]  # each other player is in with probability 8 / 23
    assert np.abs(inclusion - 8 / 23).max() < 0.1


def test_layered_shapley_draws_its_layers_from_the_stratified_sampler():
    """layered_shapley's coalitions are those of StratifiedSampler.fixed_draws for its key's second split."""
    x, y, x_val, y_val = _data(n=6)
    utility = bv.estimators.LogisticRegressionUtility(x, y, x_val, y_val, norm_bound=1.0)
    seen = []

    def recording(key, masks):
        seen.append(np.asarray(masks))
        return utility(key, masks)

    key = jax.random.key(4)
    bv.estimators.layered.layered_shapley(recording, 6, key, alpha=0.3, beta=0.3)
    counts_key, coalition_key, _ = jax.random.split(key, 3)
    counts = layer_counts(counts_key, 6, 0.3, 0.3, 0.5)
    without, owners, _ = StratifiedSampler.fixed_draws(coalition_key, counts)
    with_point = without.copy()
    with_point[np.arange(len(owners)), owners] = True
    valued = {mask.tobytes() for masks in seen for mask in masks}
    assert {mask.tobytes() for mask in np.concatenate([with_point, without])} <= valued
