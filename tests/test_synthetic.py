"""The Syn setting (Sim et al. 2023, Sec. 6): the stored default setting is what the generator draws, and other
settings are drawn."""

from __future__ import annotations

import numpy as np

from bayesval.datasets.synthetic import DEFAULT_SETTING, draw_setting, make_syn


def test_the_stored_default_setting_is_what_the_generator_draws():
    stored = make_syn()
    weights, noise_var, parties, tests = draw_setting(**DEFAULT_SETTING)
    np.testing.assert_allclose(stored.weights, weights, rtol=1e-12, atol=0)
    np.testing.assert_allclose(stored.noise_var, noise_var, rtol=1e-12, atol=0)
    assert [len(X) for X, _ in stored.parties] == list(DEFAULT_SETTING["sizes"])
    for (X, y), (X_drawn, y_drawn) in zip(stored.parties, parties):
        np.testing.assert_allclose(X, X_drawn, rtol=1e-12, atol=1e-15)
        np.testing.assert_allclose(y, y_drawn, rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(stored.test[0], np.concatenate([X for X, _ in tests]), rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(stored.test[1], np.concatenate([y for _, y in tests]), rtol=1e-12, atol=1e-15)


def test_other_settings_are_drawn_and_the_default_is_read_whatever_the_sizes_type():
    assert np.array_equal(make_syn(sizes=[100, 200, 400]).weights, make_syn().weights)
    other = make_syn(seed=1, sizes=(50, 60), num_test=10)
    assert [len(X) for X, _ in other.parties] == [50, 60]
    assert len(other.test[0]) == 10  # num_test // 2 per party
    assert not np.array_equal(other.weights, make_syn().weights)
    # the same seed with other sizes shares the true parameters: they are drawn before the party data
    assert np.array_equal(make_syn(seed=0, sizes=(100, 200)).weights, make_syn().weights)
