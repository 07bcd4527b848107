"""The party path of `valuate` (bayesval.parties.valuation): its settings, the typed resume state
(`CoalitionEstimates`) saved, loaded and converted from results saved before it, and the names that moved out of
the front door."""

from __future__ import annotations

import argparse
import dataclasses
import json
import warnings

import numpy as np
import pytest

import bayesval as bv
from bayesval.datasets.synthetic import make_syn
from bayesval.parties import valuation
from bayesval.parties.surprise import CoalitionRun, CoalitionSurprise, FiledCoalitions
from bayesval.results.state import PER_COALITION, CoalitionDiagnostics, CoalitionEstimates

TINY = bv.SamplerConfig(num_chains=2, num_warmup=10, num_samples=20, thinning=1, num_repeats=2, progress_bar=False)
# Algorithm 1 as printed, the smallest program: the quickest to compile (interweaving_moves=0 alone was that while
# interweaving moves were the default; since collapsed moves are, it is the default sampler, see
# tests/test_coalition_batches.py)
MODEL = bv.models.LinearRegression(interweaving_moves=0, collapsed_moves=0)


@pytest.fixture(scope="module")
def releases():
    syn = make_syn(seed=0, sizes=(60, 60, 60))
    parties = [
        bv.Party(X, y, epsilon=0.5, bounds=syn.bounds, name=f"p{i}", noise_seed=200 + i)
        for i, (X, y) in enumerate(syn.parties)
    ]
    return [party.release() for party in parties]


@pytest.fixture(scope="module")
def valued(releases):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # convergence at the tiny budget
        return bv.valuate(MODEL, releases, key=3, config=TINY)


def test_settings_default_every_argument_once():
    settings = valuation.party_settings(MODEL, config=TINY)
    assert (settings.k, settings.kl, settings.exact_up_to, settings.tolerance) == (4, "auto", 10, 0.05)
    assert settings.stop is None and settings.mechanism is None and settings.rho == 0.2 and not settings.keep_draws
    assert repr(settings.stopping_rule(5)) == repr(
        bv.games.StandardError(0.05, min_count=64) | bv.games.MaxEvaluations(10_000 * 6)
    )
    assert valuation.party_settings(MODEL, config="fast", progress_bar=False).config.progress_bar is False
    with pytest.raises(ValueError, match="k=40 neighbours need more than k posterior draws"):
        valuation.party_settings(MODEL, config=TINY, k=40)


def test_a_sampled_game_takes_the_configs_sampled_repeats_and_an_enumerated_one_its_repeats():
    """Beyond exact_up_to the Shapley values are sampled, and each coalition gets `sampled_repeats` (the Gibbs
    presets': 2); up to it, `num_repeats`. A config without `sampled_repeats` (built by hand, a NUTS preset, or one
    whose num_repeats was set) keeps its repeats everywhere, and so does a valuation that also rewards."""
    for preset, repeats in (("fast", 3), ("paper", 6)):
        settings = valuation.party_settings(MODEL, config=preset, exact_up_to=4)
        assert settings.enumerates(4) and not settings.enumerates(5)
        assert settings.for_parties(4).config.num_repeats == repeats
        assert settings.for_parties(5).config == settings.config.with_(num_repeats=2, sampled_repeats=2)
        rewarded = valuation.party_settings(MODEL, config=preset, exact_up_to=4, rewards="tempering")
        assert rewarded.for_parties(5).config.num_repeats == repeats
    assert bv.SamplerConfig.preset("fast", "nuts").for_sampled_game().num_repeats == 3
    assert bv.SamplerConfig.preset("fast").with_(num_repeats=5).for_sampled_game().num_repeats == 5
    own = valuation.party_settings(MODEL, config=TINY.with_(num_repeats=4), exact_up_to=2)
    assert own.for_parties(3).config.num_repeats == 4
    assert own.for_parties(3) == own.for_parties(2) == own
    assert TINY.with_(num_repeats=4, sampled_repeats=3).for_sampled_game().num_repeats == 3
    with pytest.raises(ValueError, match=r"SamplerConfig.sampled_repeats must be an integer >= 2, got 1"):
        TINY.with_(sampled_repeats=1)


def test_a_sampled_game_takes_the_configs_sampled_chains_and_an_enumerated_one_its_chains():
    """With `sampled_chains` a sampled game's coalitions run that many chains a repeat (2: its 2 repeats give R-hat
    4 chains) and an enumerated game's num_chains; the presets leave it None, and a config whose num_chains was set
    (the CLI's --num-chains) without it keeps its chains everywhere."""
    two = bv.SamplerConfig.preset("fast").with_(sampled_chains=2)
    assert (two.for_sampled_game().num_chains, two.for_sampled_game().num_repeats) == (2, 2)
    sampled = valuation.party_settings(MODEL, config=two, exact_up_to=4)
    assert sampled.for_parties(4).config.num_chains == 4 and sampled.for_parties(5).config.num_chains == 2
    presets = [bv.SamplerConfig.preset(name, sampler) for name in ("fast", "paper") for sampler in ("gibbs", "nuts")]
    for config in presets + [two.with_(num_chains=6)]:
        assert config.sampled_chains is None and config.for_sampled_game().num_chains == config.num_chains
    assert two.with_(num_chains=6, sampled_chains=3).for_sampled_game().num_chains == 3
    with pytest.raises(ValueError, match=r"SamplerConfig.sampled_chains must be an integer >= 1, got 0"):
        TINY.with_(sampled_chains=0)
    parser = argparse.ArgumentParser()
    bv.SamplerConfig.add_arguments(parser)
    assert bv.SamplerConfig.from_arguments(parser.parse_args(["--sampled-chains", "3"])).sampled_chains == 3
    assert bv.SamplerConfig.from_arguments(parser.parse_args(["--num-chains", "3"])).sampled_chains is None


def test_the_budget_flags_set_sampled_repeats_and_num_repeats_alone_sets_every_games():
    parser = argparse.ArgumentParser()
    bv.SamplerConfig.add_arguments(parser)
    assert bv.SamplerConfig.from_arguments(parser.parse_args([])).sampled_repeats == 2
    assert bv.SamplerConfig.from_arguments(parser.parse_args(["--sampled-repeats", "4"])).sampled_repeats == 4
    repeats = bv.SamplerConfig.from_arguments(parser.parse_args(["--num-repeats", "5"]))
    assert (repeats.num_repeats, repeats.sampled_repeats) == (5, None)
    both = bv.SamplerConfig.from_arguments(parser.parse_args(["--num-repeats", "5", "--sampled-repeats", "3"]))
    assert (both.num_repeats, both.sampled_repeats) == (5, 3)


def test_sampled_repeats_leave_an_enumerated_game_as_it_was_so_its_results_resume(valued, releases, monkeypatch):
    """The game's fingerprint counts the repeats it ran, not `sampled_repeats`: a result of three parties valued
    exactly resumes under a config that names sampled repeats, with nothing sampled again."""

    def no_sampling(*args, **kwargs):
        raise AssertionError("a resumed game sampled a coalition again")

    monkeypatch.setattr(CoalitionSurprise, "_sample", no_sampling)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        resumed = bv.valuate(MODEL, releases, key=3, config=TINY.with_(sampled_repeats=3), resume_from=valued)
    np.testing.assert_array_equal(resumed.values, valued.values)
    assert resumed.diagnostics["sampler"]["num_repeats"] == 2


def test_the_result_carries_its_coalition_estimates_as_a_typed_state_not_in_its_diagnostics(valued, tmp_path):
    state = valued.coalition_estimates
    assert isinstance(state, CoalitionEstimates) and sorted(state.estimates) == list(range(1, 8))
    assert "game" not in valued.diagnostics and "coalition_estimates" not in valued.diagnostics
    np.testing.assert_array_equal(np.mean([state.estimates[c] for c in range(1, 8)], axis=1), valued.coalition_values)
    again = bv.ValuationResult.load(valued.save(tmp_path / "result.npz"))
    loaded = again.coalition_estimates
    assert again.diagnostics["sampler"] == valued.diagnostics["sampler"]
    assert again.diagnostics["sampler"]["sampled_repeats"] is None
    assert loaded.game == state.game and list(loaded.estimates) == list(state.estimates)
    for code, estimates in state.estimates.items():
        np.testing.assert_array_equal(loaded.estimates[code], estimates)


def _as_saved_before_the_typed_state(path):
    """Rewrite a result file as results were saved before `CoalitionEstimates`: the game and the estimates (keyed
    by the bitmask as a string) inside the diagnostics."""
    with np.load(path) as data:
        arrays = {name: data[name] for name in data.files}
    archive = json.loads(str(arrays.pop("_meta")))
    meta = archive["meta"]  # the result's record inside the archive's envelope
    codes, values = arrays.pop("coalition_estimates_codes"), arrays.pop("coalition_estimates_values")
    for name in PER_COALITION:  # the coalitions' diagnostics were in the result's diagnostics only
        del arrays[f"coalition_estimates_{name}"]
    meta["diagnostics"]["game"] = meta.pop("coalition_estimates")["meta"]["game"]
    meta["diagnostics"]["coalition_estimates"] = {str(c): row.tolist() for c, row in zip(codes.tolist(), values)}
    with path.open("wb") as handle:
        np.savez(handle, _meta=np.array(json.dumps(archive)), **arrays)
    return path


def test_a_result_saved_before_the_typed_state_loads_converted_and_resumes_without_sampling(
    valued, releases, tmp_path, monkeypatch
):
    old = bv.ValuationResult.load(_as_saved_before_the_typed_state(valued.save(tmp_path / "old.npz")))
    assert old.coalition_estimates.game == valued.coalition_estimates.game
    assert "game" not in old.diagnostics and "coalition_estimates" not in old.diagnostics
    for code, estimates in valued.coalition_estimates.estimates.items():
        np.testing.assert_array_equal(old.coalition_estimates.estimates[code], estimates)

    def no_sampling(*args, **kwargs):
        raise AssertionError("a coalition was sampled again")

    monkeypatch.setattr(CoalitionSurprise, "_sample", no_sampling)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        resumed = bv.valuate(MODEL, releases, key=3, config=TINY, resume_from=old)
    np.testing.assert_array_equal(resumed.values, valued.values)
    np.testing.assert_array_equal(resumed.stderr, valued.stderr)
    assert resumed.diagnostics == valued.diagnostics


def _as_saved_at_version_1(path):
    """Rewrite a result file as results were saved at version 1 of `CoalitionEstimates`: the coalitions'
    diagnostics in the result's diagnostics only."""
    with np.load(path) as data:
        arrays = {name: data[name] for name in data.files}
    archive = json.loads(str(arrays.pop("_meta")))
    envelope = archive["meta"]["coalition_estimates"]
    envelope["version"] = 1
    del envelope["meta"]["converged"]
    for name in PER_COALITION:
        del arrays[f"coalition_estimates_{name}"]
    with path.open("wb") as handle:
        np.savez(handle, _meta=np.array(json.dumps(archive)), **arrays)
    return path


def test_a_resume_reads_the_typed_record_alone_and_a_version_1_record_loads_migrated(
    valued, releases, tmp_path, monkeypatch
):
    """The coalitions' diagnostics travel in `CoalitionEstimates` (version 2): a result stripped of every key a
    resume once read from its `diagnostics` still resumes, to the same values and diagnostics; a file written at
    version 1 loads with them read from its diagnostics."""
    typed = valued.coalition_estimates.diagnostics
    assert typed == CoalitionDiagnostics(*(valued.diagnostics[name] for name in CoalitionDiagnostics._fields))
    assert len(typed.coalitions) == 7 and typed.coalitions[0] in ([1, 0, 0], [0, 1, 0], [0, 0, 1])
    old = bv.ValuationResult.load(_as_saved_at_version_1(valued.save(tmp_path / "v1.npz")))
    assert old.coalition_estimates.diagnostics == typed
    stripped = dataclasses.replace(
        valued, diagnostics={k: v for k, v in valued.diagnostics.items() if k not in CoalitionDiagnostics._fields}
    )

    def no_sampling(*args, **kwargs):
        raise AssertionError("a coalition was sampled again")

    monkeypatch.setattr(CoalitionSurprise, "_sample", no_sampling)
    for earlier in (stripped, old):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            resumed = bv.valuate(MODEL, releases, key=3, config=TINY, resume_from=earlier)
        np.testing.assert_array_equal(resumed.values, valued.values)
        assert resumed.diagnostics == valued.diagnostics
    untyped = dataclasses.replace(
        stripped, coalition_estimates=dataclasses.replace(valued.coalition_estimates, diagnostics=None)
    )
    with pytest.raises(ValueError, match="resume_from's coalition estimates carry no coalition diagnostics"):
        bv.valuate(MODEL, releases, key=3, config=TINY, resume_from=untyped)


def test_resume_from_needs_coalition_estimates_of_the_same_game(valued, releases):
    without = bv.ValuationResult(valued.method, valued.values, valued.stderr, valued.names)
    with pytest.raises(TypeError, match="resume_from must be the ValuationResult of an earlier party valuation"):
        bv.valuate(MODEL, releases, config=TINY, resume_from=without)
    differs = r"different game: its model, .* differ from this valuation's: num_samples 20 in resume_from, 24 in this"
    with pytest.raises(ValueError, match=differs) as refused, warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        bv.valuate(MODEL, releases, config=TINY.with_(num_samples=24), resume_from=valued)
    assert "resumes a result" not in str(refused.value)
    # a game of other repeats alone (here an enumerated one): named, with the config that resumes it
    repeats = r"num_repeats 2 in resume_from, 3 in this valuation \(config=\.\.\.with_\(num_repeats=2\) resumes"
    with pytest.raises(ValueError, match=repeats), warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        bv.valuate(MODEL, releases, config=TINY.with_(num_repeats=3, sampled_repeats=2), resume_from=valued)


def test_coalition_estimates_round_trip_as_a_record():
    state = CoalitionEstimates("abc", {3: np.array([0.5, 0.25]), 1: np.array([1.0, 2.0])})
    meta, arrays = state.to_record()
    np.testing.assert_array_equal(arrays["codes"], [1, 3])
    again = CoalitionEstimates.from_record(meta, arrays)
    assert again.game == "abc" and list(again.estimates) == [1, 3]
    np.testing.assert_array_equal(again.estimates[3], [0.5, 0.25])
    assert CoalitionEstimates.from_diagnostics({"converged": True}) == (None, {"converged": True})
    assert "converged" not in meta and again.diagnostics is None  # built without diagnostics: none written
    sampled = CoalitionDiagnostics([[1, 0], [1, 1]], [1.002, 1.5], [812.5, 40.0], [0, 1], [0, 3], [0, 1], False)
    meta, arrays = dataclasses.replace(state, diagnostics=sampled).to_record()
    assert arrays["coalitions"].shape == (2, 2) and arrays["r_hat"].dtype == np.float64
    assert CoalitionEstimates.from_record(meta, arrays).diagnostics == sampled
    assert CoalitionEstimates.from_record(meta, arrays, version=1).diagnostics is None  # version 1 kept none


def test_check_parties_and_release_all_moved_to_parties_and_the_old_path_warns():
    assert bv.parties.release_all is valuation.release_all and bv.parties.check_parties is valuation.check_parties
    with pytest.warns(DeprecationWarning, match="bayesval.valuate.release_all has moved to bayesval.parties"):
        from bayesval.valuate import release_all
    assert release_all is valuation.release_all


def test_release_warnings_point_at_the_callers_line():
    """The party path runs several calls deep; its warnings still name the line that called valuate."""
    rng = np.random.default_rng(0)
    parties = [
        bv.Party(rng.uniform(-0.5, 0.5, (8, 2)), rng.uniform(-1, 1, 8), 1.0, bv.Bounds(1.0, 1.0), name=name)
        for name in ("q", "r")
    ]
    parties[0].release()
    with pytest.warns(UserWarning, match=r"reusing the earlier releases of \['q'\]") as caught:
        with pytest.raises(AssertionError, match="stop here"):
            _valuate_until_sampling(parties)
    assert all(record.filename == __file__ for record in caught if "reusing" in str(record.message))


def _valuate_until_sampling(parties):
    original = valuation.CoalitionSurprise

    def stop(*args, **kwargs):
        raise AssertionError("stop here")

    valuation.CoalitionSurprise = stop
    try:
        return bv.valuate(MODEL, parties, config=TINY)
    finally:
        valuation.CoalitionSurprise = original


def test_a_nuts_models_game_fingerprint_is_the_one_results_saved_before_the_redesign_carry():
    """The kernel settings moved from SamplerConfig to the NUTS models; the fingerprint reads them where the config
    held them, so a result saved before the move still resumes. The hash was computed by the code before the
    redesign (commit 2d1214a, `bayesval.valuate._game_fingerprint`) for this model, data and config; the model's
    target acceptance is given as it was then (0.8, the default before 2026-11-25). The statistics are rounded to 9
    decimals: computed in XLA, their last bits depend on the CPU, and the hash on every bit."""
    from bayesval.inference.data import NoiseAwareData
    from bayesval.parties.surprise import SurpriseGame, game_fingerprint

    rng = np.random.default_rng(0)
    model = bv.models.LogisticRegression(target_accept_prob=0.8)
    X = rng.normal(size=(60, 3))
    X /= np.linalg.norm(X, axis=1, keepdims=True).max()
    y = (rng.random(60) < 0.5).astype(float)
    statistic = model.statistic(3)
    perturbed = [
        np.round(np.asarray(statistic.compute(X[20 * i : 20 * (i + 1)], y[20 * i : 20 * (i + 1)])) + 0.1 * i, 9)
        for i in range(3)
    ]
    data = NoiseAwareData(np.stack(perturbed), np.array([20.0, 20, 20]), np.array([1.0, 1, 1]))
    config = bv.SamplerConfig(num_chains=2, num_warmup=10, num_samples=20, thinning=1, num_repeats=2)
    game = SurpriseGame(model, data, config, 4, "prior-density")
    # hashed with the memory limit then, as every result saved before 2026-12-02 was (`game_fingerprint`)
    fingerprint = game_fingerprint(game, saved_memory_limit_mb=config.memory_limit_mb)
    assert fingerprint == "afeae7766a64df29563fd699ceb84240d020a413b6363af415a087b05a21302a"
    tighter = bv.models.LogisticRegression(target_accept_prob=0.9)
    assert game_fingerprint(SurpriseGame(tighter, data, config, 4, "prior-density"), 2048.0) != fingerprint
    # today's leaves the limit out: another limit is the same game, and the saved fingerprint is not today's
    lower = SurpriseGame(model, data, config.with_(memory_limit_mb=64.0), 4, "prior-density")
    assert game_fingerprint(lower) == game_fingerprint(game) != fingerprint
    assert game_fingerprint(lower, saved_memory_limit_mb=64.0) != fingerprint


def _two_models_fingerprints(first, second, width: int = 9) -> tuple[str, str]:
    from bayesval.inference.data import NoiseAwareData
    from bayesval.parties.surprise import SurpriseGame, game_fingerprint

    data = NoiseAwareData(np.ones((3, width)), np.full(3, 10.0), np.ones(3))
    return tuple(game_fingerprint(SurpriseGame(m, data, TINY, 4, "prior-density")) for m in (first, second))


def test_models_built_from_other_priors_or_functions_are_other_games():
    """The fingerprint reads what a model was built from, not only its simple settings: a LinearRegression of
    another prior, a NumPyroModel of another function or closure, or of other parameters, is another game (a
    result of one must not resume as the other); the same function, given twice, is the same game."""
    import jax.numpy as jnp
    import numpyro
    import numpyro.distributions as dist

    prior = bv.models.syn_model_prior(2)
    wider = prior._replace(scale=prior.scale * 50)
    first, second = _two_models_fingerprints(bv.models.LinearRegression(prior=prior), bv.models.LinearRegression())
    assert first != second
    assert (
        len(
            set(
                _two_models_fingerprints(
                    bv.models.LinearRegression(prior=wider), bv.models.LinearRegression(prior=prior)
                )
            )
        )
        == 2
    )
    same = _two_models_fingerprints(bv.models.LinearRegression(prior=prior), bv.models.LinearRegression(prior=prior))
    assert same[0] == same[1]

    def model_of(scale):
        def model(data, mask):
            mean = numpyro.sample("mean", dist.Normal(0.0, scale))
            numpyro.factor("obs", jnp.sum(mask * dist.Normal(mean, data.noise_std).log_prob(data.perturbed[:, 0])))

        return model

    def other(data, mask):
        mean = numpyro.sample("mean", dist.Normal(0.0, 1.0))
        numpyro.factor("obs", jnp.sum(mask * dist.Cauchy(mean, data.noise_std).log_prob(data.perturbed[:, 0])))

    def nuts(fn, parameters=("mean",)):
        return bv.models.NumPyroModel(fn, list(parameters))

    assert len(set(_two_models_fingerprints(nuts(model_of(1.0)), nuts(model_of(100.0)), 1))) == 2  # the closure
    assert len(set(_two_models_fingerprints(nuts(model_of(1.0)), nuts(other), 1))) == 2  # the code
    assert len(set(_two_models_fingerprints(nuts(other), nuts(other, ("mean", "scale")), 1))) == 2
    assert len(set(_two_models_fingerprints(nuts(model_of(1.0)), nuts(model_of(1.0)), 1))) == 1
    from bayesval.parties.surprise import model_content

    class Holder:  # its repr names a memory address, which differs between processes and instances
        pass

    given = [nuts(other) for _ in range(2)]
    for model in given:
        model.helper = Holder()
    assert model_content(given[0], vars(given[0])) == model_content(given[1], vars(given[1]))


def test_a_sampled_game_is_valued_against_the_models_surrogate_where_it_has_one(releases):
    """`surrogate_control`: the party product of every coalition for LinearRegression (per-party data models)
    by default and with control_variate=True (never with False), up to MAX_CONTROL_PARTIES parties; beyond, the
    surrogate of given coalitions with its Shapley values estimated (`estimated_control`). Where the model has no
    surrogate (or none beyond 12 parties), or the run resumes one sampled without: without a word by default, with a
    warning that says why where it was asked for. A user model's unusable surrogate is named."""
    from types import SimpleNamespace

    from bayesval.inference.data import NoiseAwareData
    from bayesval.models.protocol import Capabilities, capabilities

    def surrogates_of(model) -> valuation.Surrogates:  # what the policy gets of a CoalitionSurprise
        return valuation.model_surrogates(SimpleNamespace(model=model, data=data, capabilities=capabilities(model)))

    data = NoiseAwareData.from_releases(releases)
    game = surrogates_of(MODEL)
    on, off = (
        valuation.party_settings(MODEL, control_variate=True),
        valuation.party_settings(MODEL, control_variate=False),
    )
    default = valuation.party_settings(MODEL)
    assert default.control_variate is None  # wherever it can be had
    for settings in (on, default):
        control = valuation.surrogate_control(game, settings, 3, None)
        assert control.name == "the party product" and control.num_players == 3
        np.testing.assert_array_equal(control.table, MODEL.surrogate_surprises(data).values)
    assert valuation.surrogate_control(game, off, 3, None) is None
    shared = surrogates_of(bv.models.LinearRegression(shared_data_model=True))
    logistic = surrogates_of(bv.models.LogisticRegression())
    beyond = valuation.MAX_CONTROL_PARTIES + 1
    for chosen, n, resumed, reason in (
        (logistic, beyond, None, "13 parties are more than 12 and LogisticRegression has no surrogate_game"),
        (
            shared,
            beyond,
            None,
            "13 parties are more than 12 and LinearRegression gives no surrogate of coalitions here",
        ),
        (shared, 3, None, "LinearRegression gives no surrogate here"),
        (logistic, 3, None, "LogisticRegression has no surrogate_surprises"),
        (game, 3, SimpleNamespace(control_table=None), "resume_from was sampled without one"),
    ):
        with pytest.warns(UserWarning, match=f"sampled without a control variate: {reason}"):
            assert valuation.surrogate_control(chosen, on, n, resumed) is None
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # by default, no word
            assert valuation.surrogate_control(chosen, default, n, resumed) is None
    saved = SimpleNamespace(control_table=np.arange(8.0))
    np.testing.assert_array_equal(valuation.surrogate_control(game, on, 3, saved).table, np.arange(8.0))

    class Broken:
        def surrogate_surprises(self, data):
            return SimpleNamespace(values=np.zeros(7))

    with pytest.raises(ValueError, match=r"Broken.surrogate_surprises\(data\) gave no usable surrogate: .*2\^n values"):
        broken = Capabilities(None, None, None, False, None, None, Broken().surrogate_surprises, None)
        model = SimpleNamespace(model=Broken(), data=data, capabilities=broken)
        valuation.surrogate_control(valuation.model_surrogates(model), on, 3, None)


def test_the_coalitions_error_is_estimated_from_their_estimates_unless_the_kl_correlates_them():
    """`independent_estimates`: each coalition's repeats come from its own chains, so their errors are independent
    with the prior-density and Rao-Blackwellised KL; the two-sample KL scores every coalition of a repeat against one
    prior sample, so there the per-repeat spread stays. A resumed run goes on as it was sampled."""
    from types import SimpleNamespace

    for estimator, independent in (("prior-density", True), ("rao-blackwell", True), ("two-sample", False)):
        assert valuation.independent_estimates(SimpleNamespace(kl_estimator=estimator), None) is independent
    game = SimpleNamespace(kl_estimator="prior-density")
    assert valuation.independent_estimates(game, SimpleNamespace(noise=None)) is False  # saved before the record
    assert valuation.independent_estimates(game, SimpleNamespace(noise=object())) is True


def _replayed_game(n: int, noise: float, seed: int, repeats: int = 3):
    """A diminishing-returns game of n players, v(C) = sqrt(sum of its members' weights), replayed with noise."""
    weights = np.linspace(0.5, 2.0, n)
    from bayesval.parties.replay import ReplayedGame

    return ReplayedGame(n, lambda masks: np.sqrt(masks @ weights), noise, num_repeats=repeats, seed=seed), weights


def test_an_enumerated_game_given_a_tolerance_adds_repeats_until_its_errors_meet_it_and_are_calibrated():
    """An enumerated game given a tolerance adds repeats of every coalition until every standard error meets it from
    at least 10 degrees of freedom (11 repeats): over 60 keys of a replayed 5-player game (each estimate its
    coalition's value plus N(0, 0.1^2)), every run within the tolerance, RMS z against the exact Shapley values of
    the noiseless game in [0.75, 1.25] over the 300 z-scores, none above 4.5; without a tolerance it keeps its 3
    repeats."""
    from bayesval.games.shapley import coalition_masks, exact_shapley_per_repeat

    n, tolerance, names = 5, 0.02, [f"p{i}" for i in range(5)]
    game, weights = _replayed_game(n, 0.1, seed=0)
    masks = coalition_masks(n, include_empty=True)
    exact = exact_shapley_per_repeat(np.sqrt(masks @ weights)[None])[0]
    kept = valuation.shapley_values(game, names, valuation.party_settings(MODEL).for_parties(n), None, None)
    assert len(game.values[1]) == 3 and kept.stderr.max() > tolerance  # 3 repeats do not meet it
    z, repeats = [], []
    for seed in range(60):
        game, _ = _replayed_game(n, 0.1, seed=seed)
        settings = valuation.party_settings(MODEL, tolerance=tolerance).for_parties(n)
        result = valuation.shapley_values(game, names, settings, None, None)
        assert result.method == "exact Shapley" and np.all(result.stderr <= tolerance)
        assert {len(values) for values in game.values.values()} == {len(game.values[0])}
        repeats.append(len(game.values[0]))
        z.append((result.values - exact) / result.stderr)
    z = np.array(z)
    assert min(repeats) >= 11 and all(r % 3 == 0 for r in repeats)
    assert 0.75 <= np.sqrt(np.mean(z**2)) <= 1.25 and np.abs(z).max() < 4.5


def test_added_repeats_keep_the_estimates_before_them_and_a_capped_run_warns():
    """A replayed game's added repeats leave its first estimates as they were and give a coalition valued later as
    many; a tolerance that MAX_EXACT_REPEATS cannot meet stops there with a warning naming the standard error."""
    game, _ = _replayed_game(4, 0.1, seed=7)
    first = game(np.eye(4, dtype=bool)).copy()
    game.add_repeats(6)
    assert np.array_equal(game(np.eye(4, dtype=bool))[:3], first) and len(game.values[1]) == 9
    assert game(np.ones((1, 4), bool)).shape == (9, 1)
    settings = valuation.party_settings(MODEL, tolerance=1e-4).for_parties(4)
    game, _ = _replayed_game(4, 0.1, seed=8)
    with pytest.warns(UserWarning, match=r"standard errors are 0\.0\d+ at most after 96 repeats"):
        result = valuation.shapley_values(game, [f"p{i}" for i in range(4)], settings, None, None)
    assert len(game.values[0]) == valuation.MAX_EXACT_REPEATS and np.all(result.stderr > 1e-4)


def test_added_repeats_leave_the_pooled_draws_of_the_first_repeats_and_file_after_a_resume():
    """Repeats added to a coalition whose draws the rewards pool keep its pooled draws those of its first repeats
    (a reward's own draws come from as many); after a resume, which restores no draws, they file without them (the
    rewards then sample the grand and own posteriors again) rather than fail."""

    def run(repeats: int, offset: float) -> CoalitionRun:
        draws = offset + np.arange(repeats * 2 * 3 * 2, dtype=float).reshape(repeats, 2, 3, 2)
        return CoalitionRun(np.full(repeats, offset), 1.0, 500.0, 0, 0, draws, np.ones((repeats, 2), bool), 0)

    filed = FiledCoalitions(2, keep_draws=False, pooled=[1], routed=False)
    filed.file(1, run(2, 0.0), num_parties=1)
    first = filed.pooled_draws[1].copy()
    filed.file_more(1, run(4, 100.0))
    assert np.array_equal(filed.pooled_draws[1], first) and first.shape == (2 * 2 * 3, 2)
    assert np.array_equal(filed.values[1], [0.0, 0.0, 100.0, 100.0, 100.0, 100.0])
    resumed = FiledCoalitions(2, keep_draws=False, pooled=[1], routed=False)
    resumed.restore(filed.estimates("game"))
    resumed.file_more(1, run(2, 200.0))
    assert len(resumed.values[1]) == 8 and resumed.pooled_draws == {}


def test_a_valuation_given_a_tolerance_adds_repeats_by_the_chains_from_the_rows_own_keys(valued, releases):
    """valuate(tolerance=...) of an enumerated game: the first repeats are the valuation's without it (each row's key
    is its coalition's and repeat's), the added ones new draws; the diagnostics keep one entry a coalition; the
    result resumes without sampling; surprise='importance' with it is refused before any sampling."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # convergence at the tiny budget
        result = bv.valuate(MODEL, releases, key=3, config=TINY, tolerance=1.0)
    estimates, before = result.coalition_estimates.estimates, valued.coalition_estimates.estimates
    repeats = len(estimates[7])
    assert repeats >= 11 and repeats % 2 == 0 and result.diagnostics["repeats"] == repeats
    for code, values in before.items():
        assert np.array_equal(estimates[code][:2], values) and len(estimates[code]) == repeats
        assert len(np.unique(estimates[code])) == repeats
    assert len(result.diagnostics["coalitions"]) == 7 and np.all(result.stderr <= 1.0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        again = bv.valuate(MODEL, releases, key=3, config=TINY, tolerance=1.0, resume_from=result)
    assert np.array_equal(again.values, result.values) and np.array_equal(again.stderr, result.stderr)
    with pytest.raises(ValueError, match="tolerance on an enumerated game .* surprise='importance'"):
        bv.valuate(MODEL, releases, config=TINY, tolerance=0.01, surprise="importance")


def test_k_is_checked_against_the_fewest_draws_a_repeat_may_keep(releases):
    """A sampled game's repeats keep `sampled_chains` chains and a warm start `warm_samples` draws a chain: k must
    stay below those too, refused before anything is sampled, naming the draws that run."""
    with pytest.raises(ValueError, match="k=15 neighbours need more than k posterior draws per repeat; .* gives 10$"):
        valuation.party_settings(MODEL, config=TINY.with_(warm_samples=5), k=15)
    sampled = TINY.with_(sampled_chains=1)
    assert valuation.party_settings(MODEL, config=sampled, k=25).k == 25
    with pytest.raises(ValueError, match=r"gives 20 where its 3 parties' game is sampled \(sampled_chains\)"):
        bv.valuate(MODEL, releases, key=3, config=sampled, k=25, exact_up_to=2)
