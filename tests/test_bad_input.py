"""Bad input gets a clear error naming the party / argument, or a recorded clip (DESIGN.md Sec. 6)."""

import json

import numpy as np
import pytest

import bayesval as bv
from bayesval.inference.config import SamplerConfig
from bayesval.results.serialisation import jsonable

MODEL = bv.models.LinearRegression()


def test_non_finite_data_names_the_party(syn):
    X, y = syn.parties[0]
    X = X.copy()
    X[3, 1] = np.nan
    with pytest.raises(ValueError, match=r"alice: X has 1 non-finite entries \(first at index \[3, 1\]\)"):
        bv.Party(X, y, epsilon=0.2, bounds=syn.bounds, name="alice")
    with pytest.raises(ValueError, match="bob: y"):
        bv.Party(syn.parties[0][0], np.full(len(X), np.inf), epsilon=0.2, bounds=syn.bounds, name="bob")


def test_mismatched_feature_dimensions(syn):
    (X1, y1), (X2, y2) = syn.parties[:2]
    parties = [
        bv.Party(X1, y1, epsilon=0.2, bounds=syn.bounds, name="a"),
        bv.Party(np.column_stack([X2, X2[:, :1]]), y2, epsilon=0.2, bounds=syn.bounds, name="b"),
    ]
    with pytest.raises(ValueError, match=r"disagree on the number of features.*'a': 2, 'b': 3"):
        bv.valuate(MODEL, parties)


@pytest.mark.parametrize("epsilon", [0.0, -0.5])
def test_non_positive_epsilon(syn, epsilon):
    with pytest.raises(ValueError, match="carol: epsilon must be a finite number > 0"):
        bv.Party(*syn.parties[0], epsilon=epsilon, bounds=syn.bounds, name="carol")


def test_fewer_than_two_parties(syn_parties):
    with pytest.raises(ValueError, match="at least 2 parties, got 1"):
        bv.valuate(MODEL, syn_parties()[:1])


def test_empty_party(syn):
    with pytest.raises(ValueError, match="dave has no data"):
        bv.Party(np.zeros((0, 2)), np.zeros(0), epsilon=0.2, bounds=syn.bounds, name="dave")


def test_rows_and_labels_must_match(syn):
    X, y = syn.parties[0]
    with pytest.raises(ValueError, match=f"X has {len(X)} rows but y has {len(y) - 1}"):
        bv.Party(X, y[:-1], epsilon=0.2, bounds=syn.bounds, name="erin")


def test_bounds_are_required_and_valid(syn):
    with pytest.raises(TypeError, match="bounds must be bayesval.Bounds"):
        bv.Party(*syn.parties[0], epsilon=0.2, bounds=None, name="p")
    with pytest.raises(ValueError, match="x_norm must be a finite number > 0"):
        bv.Bounds(x_norm=-1.0, y_abs=1.0)


def test_data_beyond_bounds_is_clipped_and_counted_on_the_party_side_only(syn, tmp_path):
    X, y = syn.parties[0]
    X, y = X.copy(), y.copy()
    X[:5] *= 100.0  # 5 rows far outside ||x|| <= 1
    X[5] = 1e200  # a row whose squared norm overflows: still clipped onto the ball, not zeroed
    y[6:9] = 1e3  # 3 labels outside |y| <= y_abs
    party = bv.Party(X, y, epsilon=0.2, bounds=syn.bounds, name="frank", noise_seed=0)
    assert party.clipped_rows == 9
    with pytest.warns(UserWarning, match="frank: 9 of 100 rows lie outside the declared bounds"):
        released = party.release()
    from bayesval.parties.party import clip_records

    Xc, yc, count = clip_records(X, y, syn.bounds)
    assert count == 9
    np.testing.assert_allclose(np.linalg.norm(Xc[:6], axis=1), syn.bounds.x_norm, rtol=1e-12)
    np.testing.assert_allclose(Xc[5], syn.bounds.x_norm / np.sqrt(2))  # direction of (1e200, 1e200) kept
    assert np.abs(yc).max() <= syn.bounds.y_abs
    # the released statistic is of the clipped data: its noise is what the sensitivity promises
    assert np.abs(released.perturbed - party.exact_statistic()).max() < 8 * released.noise_std
    # the clipped-row count is not private, so it is nowhere in the release, its record or its file
    record = json.dumps(released.to_record())
    saved = released.save(tmp_path / "frank.json", experiment=True)  # seeded: saved as an experiment
    assert "clip" not in record and "clip" not in saved.read_text()


def test_clipping_warns_on_the_party_side_and_is_not_published(syn):
    (X, y), *others = syn.parties
    parties = [bv.Party(X * 100.0, y, epsilon=0.2, bounds=syn.bounds, name="a", noise_seed=1)] + [
        bv.Party(*data, epsilon=0.2, bounds=syn.bounds, name=name, noise_seed=seed)
        for data, name, seed in zip(others, "bc", (2, 3))
    ]
    config = SamplerConfig(num_chains=2, num_warmup=10, num_samples=40, thinning=2, num_repeats=2)
    with pytest.warns(UserWarning, match="a: 100 of 100 rows lie outside the declared bounds"):
        result = bv.valuate(MODEL, parties, config=config, progress_bar=False)
    assert "clip" not in json.dumps(result.privacy.to_records())
    assert "clip" not in json.dumps(jsonable(result.diagnostics))


def test_unknown_preset_and_bad_config():
    with pytest.raises(ValueError, match="unknown preset 'slow'"):
        SamplerConfig.preset("slow")
    with pytest.raises(ValueError, match="multiple of thinning"):
        SamplerConfig(num_samples=10, thinning=3)


def test_noise_aware_data_from_releases_refuses_what_is_not_a_set_of_releases(syn):
    for bad in ([], None, "party 1"):
        with pytest.raises(ValueError, match="non-empty list of released statistics"):
            bv.NoiseAwareData.from_releases(bad)
    X, y = syn.parties[0]
    release = bv.Party(X, y, epsilon=1.0, bounds=syn.bounds, name="a").release(
        bv.models.LinearRegression().statistic(2)
    )
    with pytest.raises(TypeError, match=r"releases\[1\] is not a released statistic \(got ndarray"):
        bv.NoiseAwareData.from_releases([release, np.zeros(9)])
    X, y = syn.parties[1]
    wider = bv.Party(np.c_[X, X[:, :1]], y, epsilon=1.0, bounds=syn.bounds, name="three features")
    with pytest.raises(ValueError, match="statistics of different shapes"):
        bv.NoiseAwareData.from_releases([release, wider.release(bv.models.LinearRegression().statistic(3))])
    stacked = bv.NoiseAwareData.from_releases([release, release])
    assert stacked.perturbed.shape == (2, 9) and list(stacked.counts) == [len(syn.parties[0][0])] * 2
