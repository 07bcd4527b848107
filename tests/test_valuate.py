"""The front door end to end: values, standard errors, diagnostics, privacy, persistence."""

import re
import warnings

import numpy as np
import pytest

import bayesval as bv
from bayesval.games.shapley import coalition_masks
from bayesval.inference.data import NoiseAwareData
from bayesval.parties import release_all
from bayesval.parties.surprise import CoalitionSurprise

BUDGET = bv.SamplerConfig(num_chains=2, num_warmup=100, num_samples=400, thinning=1, num_repeats=2, progress_bar=False)
# four parties' sampled games: short chains that keep the chains (`bayesval.parties.importance.pays`), one budget for
# the tests below so that their 4-party sampler and surrogate programs are compiled once
SAMPLED_BUDGET = BUDGET.with_(num_samples=200, num_warmup=50)
# the model of the tests of resuming sampled games: Algorithm 1 as printed, the quickest sweep program to compile (how a
# game is sampled, resumed or refused does not depend on the kernel)
SAMPLED_MODEL = bv.models.LinearRegression(collapsed_moves=0)


@pytest.fixture(scope="module")
def result(syn):
    parties = [
        bv.Party(X, y, epsilon=eps, bounds=syn.bounds, name=name, noise_seed=seed)
        for (X, y), eps, name, seed in zip(syn.parties, (0.5, 0.5, 2.0), ("ann", "bob", "cy"), (1, 2, 3))
    ]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        return bv.valuate(bv.models.LinearRegression(), parties, key=4, config=BUDGET, keep_draws=True)


def test_result_carries_values_coalitions_diagnostics_and_privacy(result):
    assert result.names == ["ann", "bob", "cy"]
    np.testing.assert_array_equal(result.coalition_masks, coalition_masks(3))
    assert np.all(result.coalition_values > 0) and np.all(result.coalition_stderr > 0)
    assert result.values.sum() == pytest.approx(result.coalition_value(["ann", "bob", "cy"]))
    assert np.all(result.stderr > 0)
    assert len(result.diagnostics["r_hat"]) == 7 and len(result.diagnostics["ess"]) == 7
    spent = result.privacy_spent()
    assert list(spent) == ["ann", "bob", "cy"]
    # (2, eps)-RDP each; the discrete Gaussian's sigma^2 is rounded up to a rational, so a hair below (< 1e-6)
    rdp = [spent[n].rdp_epsilon for n in spent]
    assert rdp == pytest.approx([0.5, 0.5, 2.0], rel=1e-6) and all(np.array(rdp) <= [0.5, 0.5, 2.0])
    assert all(s.rdp_order == 2 and s.releases == 1 and s.delta == 1e-5 for s in spent.values())
    assert [r.owner for r in result.privacy.releases] == ["ann", "bob", "cy"]
    frame = result.to_dataframe()
    assert list(frame.index) == ["ann", "bob", "cy"] and list(frame.columns) == ["value", "stderr"]


def test_save_and_load_round_trip(result, tmp_path):
    loaded = bv.ValuationResult.load(result.save(tmp_path / "result.npz"))
    np.testing.assert_array_equal(loaded.values, result.values)
    np.testing.assert_array_equal(loaded.coalition_masks, result.coalition_masks)
    assert loaded.privacy.releases == result.privacy.releases
    assert loaded.diagnostics["r_hat"] == pytest.approx(result.diagnostics["r_hat"])


def test_inference_data_round_trips_through_arviz_with_the_reported_diagnostics(result, tmp_path):
    """`to_inference_data()` holds every coalition posterior; ArviZ's R-hat over each coalition's chains of every
    repeat, maximised over parameters, and its bulk ESS per (coalition, repeat, parameter), minimised per coalition,
    are the diagnostics valuate reported."""
    import arviz as az

    data = result.to_inference_data()
    theta = data.posterior["theta"]
    assert dict(theta.sizes) == {"chain": 2, "draw": 400, "coalition": 7, "repeat": 2, "parameter": 4}
    assert list(theta.coords["parameter"].values) == ["w1", "w2", "bias", "noise_var"]
    assert list(theta.coords["coalition"].values) == result.coalition_labels()
    summary = az.summary(data, kind="diagnostics", round_to="none")
    ess = summary["ess_bulk"].to_numpy().reshape(7, 2 * 4).min(axis=1)  # rows ordered coalition, repeat, parameter
    chains = np.moveaxis(theta.values, (0, 1), (2, 3))  # (coalition, repeat, chain, draw, parameter)
    pooled = chains.reshape(7, 2 * 2, 400, 4)  # every repeat's chains of one coalition together
    r_hat = [max(float(az.rhat(pooled[c, :, :, p])) for p in range(4)) for c in range(7)]
    reported = {
        tuple(mask): (r, e) for mask, r, e in zip(*(result.diagnostics[k] for k in ("coalitions", "r_hat", "ess")))
    }
    for mask, ours_r_hat, ours_ess in zip(result.coalition_masks.astype(int), r_hat, ess):
        assert ours_r_hat == pytest.approx(reported[tuple(mask)][0], rel=1e-6)
        assert ours_ess == pytest.approx(reported[tuple(mask)][1], rel=1e-5)
    loaded = bv.ValuationResult.load(result.save(tmp_path / "with_draws.npz"))
    np.testing.assert_array_equal(loaded.to_inference_data().posterior["theta"].values, theta.values)


def test_without_kept_draws_inference_data_is_refused_with_the_way_to_keep_them(result):
    from dataclasses import replace

    with pytest.raises(ValueError, match=r"keep_draws=True"):
        replace(result, draws=None).to_inference_data()


def test_mediator_can_value_released_statistics_without_raw_data(syn):
    parties = [
        bv.Party(X, y, epsilon=1.0, bounds=syn.bounds, name=f"p{i}", noise_seed=i)
        for i, (X, y) in enumerate(syn.parties)
    ]
    releases = [p.release() for p in parties]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        from_releases = bv.valuate(bv.models.LinearRegression(), releases, key=0, config=BUDGET)
        from_parties = bv.valuate(bv.models.LinearRegression(), parties, key=0, config=BUDGET)
    np.testing.assert_allclose(from_releases.values, from_parties.values)


def _split_syn(syn, count: int) -> list:
    """Syn's pooled records split into `count` parties at epsilon = 1 (noise seeds 0, 1, ...)."""
    X = np.concatenate([p[0] for p in syn.parties])
    y = np.concatenate([p[1] for p in syn.parties])
    return [
        bv.Party(X[c], y[c], epsilon=1.0, bounds=syn.bounds, name=f"p{i}", noise_seed=i)
        for i, c in enumerate(np.array_split(np.arange(len(X)), count))
    ]


def test_many_parties_use_permutation_sampling(syn):
    """With more parties than exact_up_to, values come from permutation sampling over on-demand coalitions (at this
    test's budget their posteriors keep the chains: `bayesval.parties.importance.pays`)."""
    parties = _split_syn(syn, 4)
    budget = SAMPLED_BUDGET
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        result = bv.valuate(
            bv.models.LinearRegression(), parties, config=budget, exact_up_to=3, tolerance=1e-9, control_variate=True
        )
        exact = bv.valuate(bv.models.LinearRegression(), parties, config=budget)
    assert "route" not in result.diagnostics
    # the tolerance is never met: sampling stops with the batch of 32 permutations that completes the 15
    # coalitions, and the values are then the exact Shapley values of those coalition estimates
    spent = re.fullmatch(r".*exact Shapley \(all coalitions sampled in (\d+) permutations\)", result.method)
    assert spent and int(spent[1]) <= 96, result.method
    np.testing.assert_allclose(result.values, exact.values, rtol=1e-10)
    assert result.values.sum() == pytest.approx(result.coalition_value([p.name for p in parties]))
    # asked to, the permutations sampled the difference from the Laplace surrogate of every coalition:
    # the sampled estimate, phi(u) plus that of the differences, agrees with the exact values of the same estimates
    data = NoiseAwareData.from_releases(release_all(bv.models.LinearRegression(), parties))
    assert np.array_equal(result.state.control_table, bv.models.LinearRegression().surrogate_surprises(data).values)
    sampled, variances, _ = result.state.estimate()
    assert np.all(np.abs(sampled - exact.values) < 4 * np.sqrt(variances))
    # each coalition's repeats come from its own chains and are cached: the state keeps every coalition's estimates
    # and takes the utility's error as the exact semivalue's (docs/games.md, "The utility's own error")
    assert result.state.noise.num_coalitions == 2**4
    assert result.state.estimate().dof.min() > 1  # not the per-repeat spread's single degree of freedom
    # every coalition was valued: the values are their exact Shapley values, whose error is the repeats' spread
    assert result.diagnostics["utility_error"] == "the spread of the Shapley values of each repeat alone"


def test_a_sampled_valuation_values_each_coalition_sampled_repeats_times_and_names_them_when_resumed(
    syn, monkeypatch, tmp_path
):
    """4 parties beyond exact_up_to=3: every coalition estimate rests on `sampled_repeats` repeats (2), not the
    config's num_repeats (3), and the setting is saved with the result. A result sampled with 3 repeats (as the
    Gibbs presets did before sampled repeats) is refused under the 2 with the setting that differs and the config
    that resumes it (num_repeats 3, which also sets sampled_repeats None), and that config takes its estimates over
    (its one batch held every coalition: nothing is sampled again)."""
    parties = _split_syn(syn, 4)
    three = SAMPLED_BUDGET.with_(num_repeats=3)
    options = dict(exact_up_to=3, key=0, stop=bv.games.MaxEvaluations(10), control_variate=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        sampled = bv.valuate(SAMPLED_MODEL, parties, config=three.with_(sampled_repeats=2), **options)
        before = bv.valuate(SAMPLED_MODEL, parties, config=three, **options)
    assert sampled.diagnostics["sampler"]["num_repeats"] == 2 and sampled.state.num_repeats == 2
    assert {len(estimates) for estimates in sampled.coalition_estimates.estimates.values()} == {2}
    assert {len(estimates) for estimates in before.coalition_estimates.estimates.values()} == {3}
    loaded = bv.ValuationResult.load(sampled.save(tmp_path / "sampled.npz"))
    assert loaded.diagnostics["sampler"] == sampled.diagnostics["sampler"]
    assert loaded.diagnostics["sampler"]["sampled_repeats"] == 2
    refused = (
        r"different game: .*num_repeats 3 in resume_from, 2 in this valuation "
        r"\(config=\.\.\.with_\(num_repeats=3\) resumes a result of 3 repeats\)$"
    )
    with pytest.raises(ValueError, match=refused), warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        bv.valuate(SAMPLED_MODEL, parties, config=three.with_(sampled_repeats=2), resume_from=before, **options)

    assert before.state.control_table is not None  # sampled against the Laplace surrogate
    with pytest.raises(ValueError, match=r"resume it without control_variate=False"):
        bv.valuate(SAMPLED_MODEL, parties, config=three, resume_from=before, control_variate=False)

    def no_sampling(*args, **kwargs):
        raise AssertionError("a resumed game sampled a coalition again")

    monkeypatch.setattr(CoalitionSurprise, "_sample", no_sampling)
    monkeypatch.setattr(bv.models.LinearRegression, "surrogate_surprises", no_sampling)  # the saved one is used
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        resumed = bv.valuate(SAMPLED_MODEL, parties, config=three.with_(num_repeats=3), resume_from=before, **options)
    assert resumed.state.num_repeats == 3
    np.testing.assert_array_equal(resumed.values, before.values)
    np.testing.assert_array_equal(resumed.state.control_table, before.state.control_table)


def test_a_sampled_result_of_the_chains_resumes_only_on_their_route_and_the_refusal_says_how(syn):
    """A sampled game's coalitions take importance sampling by default where it pays (from 4,000 chain-sweeps a
    coalition, here 2 chains x 1,000 sweeps x 2 repeats); a result whose coalitions were sampled by the chains (every
    sampled result before 2026-11-29, or surprise='mcmc') is another game, refused with the argument that resumes it,
    and resumed with it."""
    parties = _split_syn(syn, 4)
    budget = BUDGET.with_(num_warmup=100, num_samples=900)
    options = dict(config=budget, exact_up_to=3, key=0, control_variate=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        chains = bv.valuate(
            bv.models.LinearRegression(), parties, stop=bv.games.MaxEvaluations(10), surprise="mcmc", **options
        )
        with pytest.raises(ValueError, match=r"sampled by MCMC chains .* pass surprise='mcmc' to resume it$"):
            bv.valuate(
                bv.models.LinearRegression(), parties, stop=bv.games.MaxEvaluations(20), resume_from=chains, **options
            )
        resumed = bv.valuate(
            bv.models.LinearRegression(),
            parties,
            stop=bv.games.MaxEvaluations(20),
            resume_from=chains,
            surprise="mcmc",
            **options,
        )
    assert "route" not in chains.diagnostics and "route" not in resumed.diagnostics
    np.testing.assert_array_equal(resumed.values, chains.values)  # its coalitions, all sampled, taken over


def test_a_result_sampled_with_plain_permutations_resumes_with_them_and_new_runs_use_latin_blocks(syn, monkeypatch):
    """5 parties beyond exact_up_to=4: a new run samples Latin blocks (5 permutations a batch here); a result saved by
    plain permutations (as every result before Latin blocks came in) resumes with plain permutations, in the batch
    size it was sampled with, instead of being refused as another game."""
    from bayesval.parties import valuation as party_valuation

    monkeypatch.setattr(party_valuation, "PERMUTATION_BATCH", 2)
    parties = _split_syn(syn, 5)
    options = dict(config=BUDGET.with_(num_samples=20, num_warmup=10), exact_up_to=4, key=0, control_variate=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        latin = bv.valuate(SAMPLED_MODEL, parties, stop=bv.games.MaxEvaluations(30), **options)
        today = party_valuation.permutation_sampler  # plain permutations, as before Latin blocks
        monkeypatch.setattr(
            party_valuation,
            "permutation_sampler",
            lambda n, resumed=None, vectorised=True: (bv.games.PermutationSampler(), 2),
        )
        before = bv.valuate(SAMPLED_MODEL, parties, stop=bv.games.MaxEvaluations(12), **options)
        monkeypatch.setattr(party_valuation, "permutation_sampler", today)
        resumed = bv.valuate(SAMPLED_MODEL, parties, stop=bv.games.MaxEvaluations(72), resume_from=before, **options)
    assert latin.state.sampler == "permutation (Latin)" and latin.state.streams[next(iter(latin.state.streams))][0] == 5
    assert before.state.sampler == resumed.state.sampler == "permutation"
    # a batch: 2 permutations of 6 coalitions and the 12 exact-size coalitions twice, 36 evaluations; one more batch
    assert [batches for _, batches in resumed.state.streams.values()] == [2]


def test_valuate_dispatches_data_point_estimators(rng):
    """The front door also values training points; same values as the estimator object."""
    from bayesval.estimators import TKNNShapley

    X = rng.normal(size=(300, 4))
    y = (X[:, 0] > 0).astype(int)
    X_val = rng.normal(size=(40, 4))
    y_val = (X_val[:, 0] > 0).astype(int)
    direct = TKNNShapley(tau=-0.5).fit(X, y).value(X_val, y_val)
    result = bv.valuate(TKNNShapley(tau=-0.5), (X, y), validation=(X_val, y_val))
    np.testing.assert_allclose(result.values, direct.values)
    with pytest.raises(ValueError, match="pass validation=\\(X_val, y_val\\)"):
        bv.valuate(TKNNShapley(), (X, y))


def test_negligible_noise_values_every_coalition_within_3_percent_of_the_closed_form(syn, syn_parties):
    """At epsilon = 1e7 the noise-aware posterior is the exact-statistics NIG posterior, so v_C must equal the
    closed-form KL(NIG posterior || NIG prior) of each coalition's pooled exact statistics. Measured at the
    fast preset (docs/benchmarks.md); here at a test budget, where the prior-density estimator's error
    (~0.5 % bias, ~0.3 % spread at this size) is still far inside 3 %."""
    from bayesval.divergence import nig_kl

    model = bv.models.LinearRegression()
    parties = syn_parties(epsilons=(1e7, 1e7, 1e7))
    result = bv.valuate(model, parties, key=3, config=BUDGET, progress_bar=False)
    prior = model.priors(2).model
    for mask, value in zip(result.coalition_masks, result.coalition_values):
        members = [p for p, member in zip(parties, mask) if member]
        statistic = sum(p.exact_statistic() for p in members)
        exact = nig_kl(model.exact_posterior(statistic, sum(len(p.X) for p in members), 2), prior)
        assert value == pytest.approx(exact, rel=0.03), (mask, value, exact)
    assert result.diagnostics["kl_estimator"] == "prior-density"


def test_bad_keep_draws_is_refused_before_any_release(syn, result, rng):
    parties = [bv.Party(X, y, epsilon=1.0, bounds=syn.bounds, name=f"new {i}") for i, (X, y) in enumerate(syn.parties)]
    model = bv.models.LinearRegression()
    with pytest.raises(TypeError, match="keep_draws must be True or False"):
        bv.valuate(model, parties, config=BUDGET, keep_draws=1)
    with pytest.raises(ValueError, match="keep_draws=True cannot resume"):
        bv.valuate(model, parties, config=BUDGET, keep_draws=True, resume_from=result)
    assert all(party.ledger.releases == [] for party in parties)
    X, y = rng.normal(size=(20, 2)), rng.integers(0, 2, 20)
    with pytest.raises(ValueError, match="keep_draws apply to party models"):
        bv.valuate(bv.estimators.KNNShapley(3), (X, y), validation=(X, y), keep_draws=True)


def test_a_party_key_given_to_an_estimator_says_where_that_estimator_samples_from(rng):
    """A key passed to `valuate` is a party model's; an estimator that samples (LayeredShapley draws its layers and
    permutations) is told to take it in its own constructor, one that samples nothing (KNN-Shapley) is told so."""
    X, y = rng.normal(size=(12, 2)), np.arange(12) % 2
    with pytest.raises(ValueError, match=re.escape("it samples from its own key: pass LayeredShapley(key=...)")):
        bv.valuate(bv.estimators.LayeredShapley(), (X, y), validation=(X, y), key=1)
    with pytest.raises(ValueError, match="key apply to party models, not to KNNShapley \\(it samples nothing;"):
        bv.valuate(bv.estimators.KNNShapley(3), (X, y), validation=(X, y), key=1)


def test_every_public_subpackage_is_reachable_from_a_fresh_import():
    """`import bayesval as bv` is enough for bv.models, bv.estimators and bv.games (no import order to know)."""
    import subprocess
    import sys

    code = "import bayesval as bv; print(bv.estimators.TKNNShapley.__name__, bv.models.LinearRegression.__name__, "
    code += "bv.games.semivalue.__name__, sorted(set(bv.__all__) - set(dir(bv))))"
    output = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert output.split() == ["TKNNShapley", "LinearRegression", "semivalue", "[]"]


def test_a_sampled_game_that_valued_every_coalition_is_judged_by_the_repeats_it_reports(syn):
    """Its values are the exact Shapley values of every coalition's estimates, whose standard errors are the spread
    of 2 repeats (1 degree of freedom): never trusted, whatever the permutations' own verdicts (the first batch
    of permutations, which valued all 15 coalitions, met a tolerance of 10 nats from their own draws)."""
    parties = _split_syn(syn, 4)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        result = bv.valuate(bv.models.LinearRegression(), parties, config=SAMPLED_BUDGET, exact_up_to=3, tolerance=10)
    assert result.method.endswith("(all coalitions sampled in 32 permutations)"), result.method
    assert not result.converged.any()
    indices = result.diagnostics["indices"]
    assert indices["dof"] == [1] * 4
    assert all("the spread of 2 repeats (1 degree of freedom" in verdict for verdict in indices["verdict"])
