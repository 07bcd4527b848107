"""Reruns of coalition posteriors that fail the convergence flags (`SamplerConfig.reruns`): a lone slow posterior is
sampled again with twice the sweeps thinned by 2, in a call of its own rows, and its estimates and
diagnostics replace the failed ones; a budget that most coalitions fail is reported, not rerun."""

import warnings

import numpy as np
import pytest
from sampler_calls import record_sampler_calls

import bayesval as bv
from bayesval.inference.diagnostics import ESS_THRESHOLD, R_HAT_THRESHOLD
from bayesval.parties.surprise import game_fingerprint

# Syn's parties with fixed noise seeds, 4 chains x (200 + 800) sweeps x 3 repeats: with key 0 exactly one of the
# seven coalition posteriors fails the flags, with key 1 three of them do (measured; see the assertions).
SHORT = dict(num_chains=4, num_warmup=200, num_samples=800, num_repeats=3, progress_bar=False)


def _syn_parties(syn):
    return [
        bv.Party(X, y, epsilon=eps, rdp_order=2.0, bounds=syn.bounds, name=f"party {i + 1}", noise_seed=100 + i)
        for i, ((X, y), eps) in enumerate(zip(syn.parties, (0.2, 0.1, 0.2)))
    ]


def _valuate(syn, key, reruns):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = bv.valuate(
            bv.models.LinearRegression(),
            _syn_parties(syn),
            key=key,
            config=bv.SamplerConfig(**SHORT, reruns=reruns),
            progress_bar=False,
        )
    unconverged = [str(w.message) for w in caught if "did not converge" in str(w.message)]
    return result, unconverged


def _failing(result) -> np.ndarray:
    diagnostics = result.diagnostics
    r_hat, ess = np.array(diagnostics["r_hat"]), np.array(diagnostics["ess"])
    return (r_hat > R_HAT_THRESHOLD) | (ess < ESS_THRESHOLD)


def test_a_lone_unconverged_coalition_is_sampled_again_with_longer_chains(syn, monkeypatch):
    first, warned = _valuate(syn, key=0, reruns=0)
    assert _failing(first).sum() == 1 and warned and not first.diagnostics["converged"]

    calls = record_sampler_calls(monkeypatch.setattr)
    rerun, warned = _valuate(syn, key=0, reruns=1)
    # the game's 7 coalitions x 3 repeats in one call of 21 rows, then the rerun: the failed coalition's 3 repeats
    # alone, in a call of 3 rows (a full call of 21 before: 18 posteriors of padding at twice the sweeps)
    assert calls == [(21, 21), (3, 3)]
    failed = _failing(first)
    assert rerun.diagnostics["reruns"] == failed.astype(int).tolist()
    # the rerun's diagnostics replace the first run's, and its longer chains mixed better (R-hat 1.018 -> 1.005, bulk
    # ESS 161 -> 355: still short of 400, so the valuation warns; a rerun is a second chance, not a guarantee)
    before, after = ({name: np.array(r.diagnostics[name])[failed] for name in ("r_hat", "ess")} for r in (first, rerun))
    assert after["r_hat"] < before["r_hat"] and after["ess"] > 1.5 * before["ess"]
    assert rerun.diagnostics["converged"] == (not _failing(rerun).any()) and bool(warned) == _failing(rerun).any()
    # the coalitions that passed keep their estimates to the bit; the rerun's differ (fresh chains)
    np.testing.assert_array_equal(rerun.coalition_values[~failed], first.coalition_values[~failed])
    assert not np.array_equal(rerun.coalition_values[failed], first.coalition_values[failed])
    assert np.abs(rerun.coalition_values[failed] - first.coalition_values[failed]) < 4 * np.hypot(
        rerun.coalition_stderr[failed], first.coalition_stderr[failed]
    )


def test_a_budget_most_coalitions_fail_is_reported_not_rerun(syn):
    first, _ = _valuate(syn, key=1, reruns=0)
    assert _failing(first).sum() == 3
    again, warned = _valuate(syn, key=1, reruns=2)
    assert again.diagnostics["reruns"] == [0] * 7 and warned
    np.testing.assert_array_equal(again.coalition_values, first.coalition_values)


def test_rerun_budget_keeps_the_draws_per_chain_and_the_game():
    config = bv.SamplerConfig(num_samples=1600, thinning=2, reruns=2)
    second = config.rerun(2)
    assert (second.num_samples, second.thinning, second.reruns) == (6400, 8, 0)
    assert second.draws_per_repeat == config.draws_per_repeat
    game = bv.parties.surprise.SurpriseGame
    data = bv.NoiseAwareData(np.ones((2, 5)), np.ones(2), np.ones(2))  # a 1-feature linear statistic
    fingerprints = {
        game_fingerprint(game(bv.models.LinearRegression(), data, bv.SamplerConfig(reruns=r), 4, "prior-density"))
        for r in (0, 1, 3)
    }
    assert len(fingerprints) == 1  # a rerun's estimates stand for the same values, as another key's do
    for bad in (-1, 1.5, True, "1"):
        with pytest.raises((TypeError, ValueError), match="reruns"):
            bv.SamplerConfig(reruns=bad)
    # the last rerun's sweeps must stay a JAX loop bound: refused when the config is made, not when a rerun needs it
    assert bv.SamplerConfig(num_samples=2**29, reruns=1).rerun(1).num_samples == 2**30
    for num_samples, reruns in ((2**30, 1), (1600, 21), (1, 31)):
        with pytest.raises(ValueError, match="past 2\\^31 - 1"):
            bv.SamplerConfig(num_samples=num_samples, reruns=reruns)


def test_a_result_saved_before_reruns_resumes_with_none_rerun(syn):
    """A result whose diagnostics predate the reruns (no "reruns" entry) resumes: its coalitions count as not
    rerun, and no coalition is sampled again."""
    result, _ = _valuate(syn, key=0, reruns=0)
    del result.diagnostics["reruns"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        resumed = bv.valuate(
            bv.models.LinearRegression(),
            _syn_parties(syn),
            key=0,
            config=bv.SamplerConfig(**SHORT, reruns=0),
            progress_bar=False,
            resume_from=result,
        )
    assert resumed.diagnostics["reruns"] == [0] * 7
    np.testing.assert_array_equal(resumed.values, result.values)


def test_nuts_runs_a_rerun_budget_through_the_programs_it_compiled():
    """A rerun's budget (twice the draws, thinned by 2) on the NUTS path: no new program, the same draws per chain,
    and the thinned draws are every second state of the longer chain (lag-1 autocorrelation lower)."""
    import jax
    import jax.numpy as jnp
    import numpyro
    import numpyro.distributions as dist

    from bayesval.inference import nuts
    from bayesval.inference.data import NoiseAwareData

    def model(data, mask):
        theta = numpyro.sample("theta", dist.Normal(0.0, 1.0))
        with numpyro.plate("parties", data.counts.shape[0]), numpyro.handlers.mask(mask=mask):
            numpyro.sample("perturbed", dist.Normal(data.counts * theta, 1.0), obs=data.perturbed[:, 0])

    data = NoiseAwareData(jnp.ones((2, 1)), jnp.ones(2), jnp.ones(2))
    config = bv.SamplerConfig(num_chains=2, num_warmup=100, num_samples=400, progress_bar=False)
    draws = {}
    for attempt in (0, 1):
        budget = config.rerun(attempt)
        sample = nuts.sample_coalition_posteriors_nuts(
            jax.random.key(attempt),
            model,
            data,
            np.ones((1, 2), bool),
            ("theta",),
            num_chains=budget.num_chains,
            num_warmup=budget.num_warmup,
            num_samples=budget.num_samples,
            thinning=budget.thinning,
            max_tree_depth=1,  # one leapfrog step a draw: a strongly autocorrelated chain
            progress_bar=False,
        )
        draws[attempt] = sample.draws[0, :, :, 0]
        if attempt == 0:
            programs = dict(nuts._PROGRAMS)
            compiled = {key: program.run._cache_size() for key, program in programs.items()}
    assert nuts._PROGRAMS.keys() == programs.keys()
    assert {key: program.run._cache_size() for key, program in nuts._PROGRAMS.items()} == compiled
    assert draws[1].shape == draws[0].shape == (2, 400)

    def lag_one(chains):
        centred = chains - chains.mean(axis=1, keepdims=True)
        return float(np.sum(centred[:, 1:] * centred[:, :-1]) / np.sum(centred**2))

    assert lag_one(draws[1]) < lag_one(draws[0])
