"""Coalition posteriors in fixed-size batches: many parties complete, one compiled sampler serves every batch,
values do not depend on batch size or device count, and Shapley standard errors are the real spread."""

import os
import subprocess
import sys
import warnings
from dataclasses import replace

import jax
import numpy as np
import pytest
from pinned_valuations import RELEASE_FILES
from sampler_calls import record_sampler_calls

import bayesval as bv
from bayesval.datasets.synthetic import make_syn
from bayesval.games.stopping import MaxEvaluations, StandardError
from bayesval.inference import gibbs
from bayesval.inference.batching import coalition_keys, use_cpu_cores
from bayesval.inference.data import NoiseAwareData
from bayesval.parties import plan as party_plan
from bayesval.parties import surprise as party_surprise
from bayesval.parties import valuation as party_valuation

TINY = bv.SamplerConfig(num_chains=2, num_warmup=10, num_samples=20, thinning=1, num_repeats=2, progress_bar=False)
SMALL = TINY.with_(num_warmup=30, num_samples=100, num_repeats=3)  # 21 rows for 3 parties: one compiled program
# Algorithm 1 as printed (no interweaving or collapsed moves): the smallest program, the quickest to compile. It was
# `LinearRegression(interweaving_moves=0)` while interweaving moves were the default; since collapsed moves became the
# default that was the default sampler, whose programs took twice as long here (8 parties: 126 s, against 60 s on one
# core with a cold compilation cache). The model of tests/test_multiprocess.py, so the four-device test's program is
# this module's SMALL one.
ALGORITHM_1 = bv.models.LinearRegression(interweaving_moves=0, collapsed_moves=0)


def _releases(num_parties: int, epsilon: float = 0.5):
    syn = make_syn(seed=0, sizes=(100,) * num_parties)
    parties = [
        bv.Party(X, y, epsilon=epsilon, bounds=syn.bounds, name=f"p{i}", noise_seed=100 + i)
        for i, (X, y) in enumerate(syn.parties)
    ]
    return [p.release() for p in parties]


def _valuate(releases, model=ALGORITHM_1, **options):
    """`bv.valuate` at these tiny budgets, without the control variate (the surrogate's 4,095 fits at 12 parties
    would take longer than the sampling here; tests/test_control_variate.py and test_valuate.py test it)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        return bv.valuate(model, releases, **({"control_variate": False} | options))


def test_eight_parties_complete_exactly_in_two_batches():
    """6+ parties once deadlocked XLA's CPU thread pool in batched LAPACK kernels (docs/architecture.md).
    8 parties: 255 coalitions x 2 repeats = 510 rows, more than one batch (MAX_BATCH_ROWS = 256) holds."""
    num_parties = 8
    result = _valuate(_releases(num_parties), key=0, config=TINY)
    assert result.method.startswith(bv.models.LinearRegression.name) and "exact Shapley" in result.method
    assert len(result.coalition_values) == 2**num_parties - 1 and np.isfinite(result.values).all()
    assert result.values.sum() == pytest.approx(result.coalition_value([f"p{i}" for i in range(num_parties)]))


def test_nine_parties_by_permutation_compile_once_report_counts_and_resume_exactly(tmp_path, monkeypatch):
    """9 parties beyond exact_up_to=8 by permutation sampling, the code of 12 parties by default at a third of their
    rows (batches of one Latin block of 9 permutations here, of 10 coalitions each, and the 18 coalitions of the exact
    sizes 0 and 8 twice; coalitions of two bytes of packed bits): the sampler compiles at most twice (at this budget
    members are not packed, `worth_packing`); the result reports the permutations, each party's draws (the
    permutations and 4 exact-size draws a batch) and converged flag; a run stopped after one batch, saved, loaded and
    resumed to two batches gives the uninterrupted two-batch run's values to the last bit, and samples only the
    coalitions the first run had not; a result is refused as the start of another game. (12 parties by default:
    examples/many_parties.py, run by tests/test_examples.py.)"""
    num_parties = batch = 9  # permutations a batch, one Latin block: the default's 36 would sample four times the rows
    monkeypatch.setattr(party_valuation, "PERMUTATION_BATCH", batch)
    sampler, batch_size = party_valuation.permutation_sampler(num_parties)
    assert sampler.latin and batch_size == batch
    releases, options = _releases(num_parties), dict(key=0, config=TINY, exact_up_to=num_parties - 1)
    one_batch, two_batches = MaxEvaluations(batch * (num_parties + 1)), MaxEvaluations(2 * batch * (num_parties + 1))
    before = gibbs._advance._cache_size()
    whole = _valuate(releases, stop=StandardError(0.02) | two_batches, **options)
    assert gibbs._advance._cache_size() - before <= 2
    assert whole.method.endswith(f"({2 * batch} permutations)") and "permutation Shapley" in whole.method
    np.testing.assert_array_equal(whole.counts, 2 * batch + 2 * 4)
    assert whole.converged.dtype == bool and len(whole.converged) == num_parties
    np.testing.assert_array_equal(whole.converged, whole.stderr <= 0.02)
    assert np.isfinite(whole.values).all() and np.isfinite(whole.stderr).all()
    assert np.all(whole.coalition_stderr > 0)  # every sampled coalition has repeats, so a standard error
    assert whole.state.noise.masks.shape[1] == 2  # its coalitions' cached estimates, under two bytes of members
    indices = whole.diagnostics["indices"]  # each party's draws, degrees of freedom and verdict, as the README says
    assert indices["draws"] == whole.counts.tolist() and len(indices["dof"]) == num_parties
    assert [verdict in ("exact", "converged") for verdict in indices["verdict"]] == whole.converged.tolist()

    games = []  # the game the first run values (`CoalitionSurprise.game`)
    real_game = party_valuation.coalition_game
    monkeypatch.setattr(party_valuation, "coalition_game", lambda *a: games.append(real_game(*a)) or games[-1])
    first = _valuate(releases, stop=one_batch, **options)
    np.testing.assert_array_equal(first.counts, batch + 4)
    loaded = bv.ValuationResult.load(first.save(tmp_path / "first"))
    assert loaded.diagnostics["indices"] == first.diagnostics["indices"]  # saved with the result
    resumed = _valuate(releases, stop=two_batches, resume_from=loaded, **options)
    np.testing.assert_array_equal(resumed.values, whole.values)
    np.testing.assert_array_equal(resumed.stderr, whole.stderr)
    np.testing.assert_array_equal(resumed.counts, 2 * batch + 2 * 4)
    np.testing.assert_array_equal(resumed.coalition_values, whole.coalition_values)
    sampled_first, sampled_resumed = first.diagnostics["coalitions"], resumed.diagnostics["coalitions"]
    assert sampled_resumed[: len(sampled_first)] == sampled_first  # taken over, and not sampled again:
    assert len(sampled_resumed) == len(whole.diagnostics["coalitions"])  # no coalition twice

    # a run that ran out of memory resumes under a lower limit (this one packs the same calls), and a result saved
    # while the fingerprint held the limit (before 2026-12-02) resumes too, taking today's fingerprint
    lower = options | dict(config=TINY.with_(memory_limit_mb=1.0))
    np.testing.assert_array_equal(
        _valuate(releases, stop=two_batches, resume_from=loaded, **lower).values, whole.values
    )
    saved_limit = loaded.diagnostics["sampler"]["memory_limit_mb"]
    old = party_surprise.game_fingerprint(games[0].game, saved_memory_limit_mb=saved_limit)
    estimates, state = loaded.coalition_estimates, loaded.state
    saved_before = replace(
        loaded,
        coalition_estimates=replace(estimates, game=old),
        state=replace(state, game=state.game | {"id": party_valuation.party_game_id(old)}),
    )
    from_before = _valuate(releases, stop=two_batches, resume_from=saved_before, **options)
    np.testing.assert_array_equal(from_before.values, whole.values)
    assert from_before.coalition_estimates.game == estimates.game != old
    assert from_before.state.game["id"] == state.game["id"]
    other_limit = replace(saved_before, diagnostics=saved_before.diagnostics | {"sampler": {"memory_limit_mb": 64.0}})
    with pytest.raises(ValueError, match="resume_from is a result of a different game"):
        _valuate(releases, stop=two_batches, resume_from=other_limit, **options)

    with pytest.raises(ValueError, match="resume_from is a result of a different game"):
        _valuate(releases, **options | dict(config=TINY.with_(num_samples=40)), stop=two_batches, resume_from=loaded)
    syn = make_syn(seed=0, sizes=(100,) * num_parties)
    other = bv.Party(*syn.parties[-1], epsilon=0.4, bounds=syn.bounds, name="p8", noise_seed=999).release()
    with pytest.raises(ValueError, match="resume_from is a result of a different game"):
        _valuate(releases[:-1] + [other], resume_from=loaded, **options)  # another release of p8
    with pytest.raises(ValueError, match="resume_from is a result of a different game: its parties are"):
        _valuate(releases[::-1], resume_from=loaded, **options)
    with pytest.raises(TypeError, match="resume_from must be the ValuationResult of an earlier party valuation"):
        _valuate(releases, resume_from=whole.state, **options)


def test_permutations_come_in_latin_blocks_up_to_16_parties_and_prefixed_beyond():
    """Latin blocks where two of them fit in one batch of 32 permutations, in batches of about 32 permutations
    rounded to whole blocks; beyond, prefixed permutations, 32 in all a batch (whole and cut) on the chains' calls and
    8 where coalitions are valued one after another."""
    prefixes = party_valuation.PREFIXES
    cases = {4: (True, 32), 11: (True, 33), 12: (True, 36), 16: (True, 32), 17: (False, 32 // (1 + prefixes))}
    cases |= {20: (False, 32 // (1 + prefixes)), 50: (False, 32 // (1 + prefixes))}
    for parties, expected in cases.items():
        sampler, batch_size = party_valuation.permutation_sampler(parties)
        assert (sampler.latin, batch_size) == expected, parties
        assert sampler.prefixes == (0 if sampler.latin else prefixes)
        sampler.plan(parties, batch_size, bv.games.SHAPLEY)  # a batch the sampler accepts
    sampler, batch_size = party_valuation.permutation_sampler(50, vectorised=False)
    assert batch_size * (1 + prefixes) == party_valuation.SEQUENTIAL_BATCH


def test_a_call_holds_more_rows_on_an_accelerator_within_the_memory_limit(monkeypatch):
    """On CPU a call holds at most 256 rows a process; on a GPU or TPU up to 16,384 (every row of a 12-party game,
    docs/benchmarks.md), and never more than `memory_limit_mb` holds."""
    model, data = bv.models.LinearRegression(), NoiseAwareData.from_releases(_releases(12))
    config = bv.SamplerConfig.preset("fast")  # 6,400 draws of 4 coordinates a row, 32 bytes each: 2,621 rows in 2 GiB
    assert party_surprise.batch_rows(model, data, config, 4095 * 3) == 256
    monkeypatch.setattr(party_plan.jax, "default_backend", lambda: "gpu")
    assert party_plan.max_rows_per_process("gpu") == party_plan.max_rows_per_process("tpu") == 16384
    assert party_surprise.batch_rows(model, data, config, 793 * 3) == 2379  # every coalition of width 4
    assert party_surprise.batch_rows(model, data, config, 4095 * 3) == 2**31 // (6400 * 4 * 32)  # memory binds
    wide = config.with_(memory_limit_mb=65536)  # 83,886 rows
    assert party_surprise.batch_rows(model, data, wide, 4095 * 3) == 4095 * 3  # every row of the game
    assert party_surprise.batch_rows(model, data, wide, 10**5) == 16384


def test_a_widths_last_call_is_cut_to_its_rows_rounded_up_to_a_step_on_cpu_at_a_budget_that_pays():
    """A call is padded to its rows rounded up to a multiple of CALL_ROWS_STEP (itself rounded up to the devices
    times a posterior's repeats, so every process's block starts a posterior), never beyond a full call; calls are
    cut on CPU at a budget where packing pays, and never on an accelerator."""
    assert party_plan.CALL_ROWS_STEP == 64

    def rows(held, full=256, multiple=1):
        return party_plan.call_rows(held, full, multiple)

    held = (1, 14, 64, 65, 128, 129, 192, 193, 256)
    assert [rows(count) for count in held] == [64, 64, 64, 128, 128, 192, 192, 256, 256]
    assert [rows(count, multiple=3) for count in (14, 67, 133, 199)] == [66, 132, 198, 256]  # 3 repeats a posterior
    assert rows(14, multiple=2 * 3) == 66 and rows(73, multiple=4 * 3) == 144  # and 2 or 4 devices
    assert rows(130, full=189) == 189 and rows(3, full=21) == 21  # no call beyond a full one

    fast = bv.SamplerConfig.preset("fast")
    assert party_plan.cuts_calls(fast) and not party_plan.cuts_calls(TINY)  # 28,800 chain-sweeps against 120
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(party_plan.jax, "default_backend", lambda: "gpu")
        assert not party_plan.cuts_calls(fast)


def _sizes_and_repeats(codes, repeats: int) -> tuple[np.ndarray, np.ndarray]:
    """The rows (code, repeat) of every repeat of each coalition `codes`: their sizes and repeats, as planned."""
    sizes = np.repeat([code.bit_count() for code in codes], repeats)
    return sizes, np.tile(np.arange(repeats), len(codes))


def test_the_plan_of_a_game_holds_every_row_once_in_calls_of_whole_posteriors():
    """The planner alone (no sampling): 3 parties at the NUTS fast preset (3 repeats; calls cut on CPU) lay their
    7 coalitions x 3 repeats = 21 rows out in one call of 21; with at most 9 rows a call (3 posteriors), in calls of
    9, 9 and 3, the last cut to its rows (`call_rows` at a step of 64, no larger than a full call: 9); 12 parties
    packed into widths 4, 8 and 12 give 3 widths, ascending, every row once, no posterior split between calls."""
    fast = bv.SamplerConfig.preset("fast", "nuts")
    sizes, repeats = _sizes_and_repeats(range(1, 8), 3)
    whole = party_plan.CallLayout(3, fast, batch_rows=21, packs_members=False).plan(sizes, repeats)
    assert [(len(call.rows), call.size, call.width, call.group) for call in whole] == [(21, 21, 3, 3)]
    narrow = party_plan.CallLayout(3, fast, batch_rows=9, packs_members=False).plan(sizes, repeats)
    assert [(len(call.rows), call.size) for call in narrow] == [(9, 9), (9, 9), (3, 9)]
    sizes, repeats = _sizes_and_repeats(range(1, 2**12), 3)
    packed = party_plan.CallLayout(12, fast, batch_rows=256, packs_members=True).plan(sizes, repeats)
    assert sorted({call.width for call in packed}) == [4, 8, 12] and packed == sorted(packed, key=lambda c: c.width)
    rows = np.concatenate([call.rows for call in packed])
    assert sorted(rows.tolist()) == list(range(len(sizes)))
    assert all(len(call.rows) % 3 == 0 and repeats[call.rows[0]] == 0 for call in packed)
    # 4,095 x 3 rows: widths 4, 8 and 12 hold 793, 3,003 and 299 coalitions, in calls of at most 255 rows
    assert len(packed) == sum(-(-count * 3 // 255) for count in (793, 3003, 299)) == 50


def test_a_rerun_of_one_coalition_plans_that_coalitions_rows_alone():
    """A rerun of one unconverged coalition of three parties sampled 21 posteriors (a full call of the game's rows,
    padded to its compiled size, though a rerun's budget compiles programs of its own). Its plan now holds that
    coalition's 3 repeats in one call of 3 rows (CPU, where calls are cut), two coalitions 6 rows and three 12 (whole
    posteriors rounded up to a power of two, so a sampled game's reruns compile few sizes), never more than a full
    call; on an accelerator (calls not cut) a rerun's call is padded as the game's are. The rows' keys are folded
    from (coalition, repeat) alone (`bayesval.parties.keys.row_keys`), so the call's size moves no key."""
    fast = bv.SamplerConfig.preset("fast", "nuts")
    layout = party_plan.CallLayout(3, fast, batch_rows=21, packs_members=False)
    rerun = fast.rerun(1)

    def planned(failed: int) -> list[tuple[int, int]]:
        sizes, repeats = _sizes_and_repeats([3] * failed, 3)
        calls = layout.plan(sizes, repeats, rerun, width=3, rerun=True)
        assert all(call.config == rerun and call.width == 3 for call in calls)
        return [(len(call.rows), call.size) for call in calls]

    assert [planned(failed) for failed in (1, 2, 3, 7)] == [[(3, 3)], [(6, 6)], [(9, 12)], [(21, 21)]]
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(party_plan.jax, "default_backend", lambda: "gpu")
        assert planned(1) == [(3, 21)]


def test_a_short_last_call_samples_the_rows_a_full_one_would(monkeypatch):
    """Three parties, 7 coalitions x 2 repeats in calls of at most 12 rows (MAX_BATCH_ROWS patched): the last call
    holds 2 rows. Cut to 2 (the step patched to 1, and PACK_FROM_CHAIN_SWEEPS so that `cuts_calls` holds) it gives every
    estimate and diagnostic of the run that pads it to 12, because a row's chains depend on its key, mask and width
    alone (up to rounding: XLA may vectorise a program of another shape differently; 1.7e-14 apart on 12 parties,
    docs/benchmarks.md)."""
    releases = _releases(3)
    monkeypatch.setattr(party_plan, "MAX_BATCH_ROWS", 12)
    monkeypatch.setattr(party_plan, "PACK_FROM_CHAIN_SWEEPS", 0)
    calls = record_sampler_calls(monkeypatch.setattr)
    results, sizes = {}, {}
    for step in (1, 10**6):
        monkeypatch.setattr(party_plan, "CALL_ROWS_STEP", step)
        calls.clear()
        results[step] = _valuate(releases, key=0, config=TINY)
        sizes[step] = list(calls)
    assert sizes == {1: [(12, 12), (2, 2)], 10**6: [(12, 12), (2, 12)]}
    cut, whole = results[1], results[10**6]
    np.testing.assert_allclose(cut.coalition_values, whole.coalition_values, rtol=1e-12)
    np.testing.assert_allclose(cut.values, whole.values, rtol=1e-12)
    for name in ("r_hat", "ess"):
        np.testing.assert_allclose(cut.diagnostics[name], whole.diagnostics[name], rtol=1e-12)


def test_row_keys_are_folded_from_code_and_repeat_in_one_program_for_any_number_of_parties():
    """`coalition_keys` gives each (code, repeat) row key(code, repeat) by fold_in, the keys of codes below 2**32
    unchanged from folding one row at a time, and codes past 32 parties (0, 0, low bits, high bits, repeat) keep
    their high bits: a coalition of party 33 alone is not the empty coalition's key (tests/test_keys.py)."""
    key = jax.random.key(7)
    codes, repeats = [0, 5, 2**32 - 1, 2**32, 2**32 + 5, 2**49 + 5], [1, 0, 2, 1, 0, 0]
    rows = np.asarray(jax.random.key_data(coalition_keys(key, codes, repeats)))
    for row, code, repeat in zip(rows[:3], codes[:3], repeats[:3]):
        expected = jax.random.fold_in(jax.random.fold_in(key, code), repeat)
        np.testing.assert_array_equal(row, jax.random.key_data(expected))
    wide = jax.random.fold_in(jax.random.fold_in(key, 0), 0)  # codes past 32 bits: a branch of their own
    high = jax.random.fold_in(jax.random.fold_in(jax.random.fold_in(wide, 5), 2**17), 0)
    np.testing.assert_array_equal(rows[5], jax.random.key_data(high))
    assert len({tuple(row) for row in rows.tolist()}) == len(codes)


def test_memory_limit_below_one_posterior_is_refused_before_any_release():
    syn = make_syn(seed=0)
    parties = [bv.Party(X, y, epsilon=1.0, bounds=syn.bounds, name=f"p{i}") for i, (X, y) in enumerate(syn.parties)]
    with pytest.raises(ValueError, match="memory_limit_mb=0.001 is too small for one coalition posterior"):
        bv.valuate(bv.models.LinearRegression(), parties, config=TINY.with_(memory_limit_mb=0.001))
    assert all(not p.ledger.releases for p in parties)


_FOUR_DEVICES = """
import logging, warnings, jax, numpy as np, bayesval as bv
from bayesval.datasets.synthetic import make_syn
compiled = []  # the programs XLA compiles (JAX's compile log)
class CompileLog(logging.Handler):
    def emit(self, record):
        compiled.append(record.getMessage())
logging.getLogger("jax").addHandler(CompileLog())
jax.config.update("jax_log_compiles", True)
def compiles(name):
    return sum(message.startswith(f"Finished XLA compilation of jit({name})") for message in compiled)
syn = make_syn(seed=0, sizes=(100, 100, 100))
releases = [bv.Party(X, y, epsilon=1.0, bounds=syn.bounds, name=f"p{i}", noise_seed=100 + i).release()
            for i, (X, y) in enumerate(syn.parties)]
config = bv.SamplerConfig(num_chains=2, num_warmup=30, num_samples=100, thinning=1, num_repeats=3, progress_bar=False)
rng = np.random.default_rng(0)
labelled = []
for i in range(2):
    X = rng.normal(size=(100, 2)) * 0.5
    y = (X @ np.array([1.0, -1.0]) > 0).astype(int)
    labelled.append(bv.Party(X, y, epsilon=1.0, bounds=bv.Bounds(x_norm=2.0), name=f"q{i}", noise_seed=10 + i))
with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    result = bv.valuate(bv.models.LinearRegression(collapsed_moves=0), releases, key=3, config=config)
    before = compiles("_advance")
    bv.valuate(bv.models.LinearRegression(), releases[:2], key=3, config=config)  # the collapsed moves' states too
    bv.valuate(bv.models.LogisticRegression(), labelled, key=3, config=config.with_(num_samples=40, num_repeats=2))
print(jax.local_device_count(), compiles("_advance") - before, compiles("run"), repr(result.coalition_values.tolist()))
"""


def test_four_devices_give_the_values_of_one():
    """21 rows (7 coalitions x 3 repeats) padded to 24 and sharded over 4 forced CPU devices, against 21 rows on
    one device: neither the batch size nor the device layout changes a value (Algorithm 1 as printed, the quickest
    program to compile). And the default kernel's sweep program compiles once for a valuation over the 4 devices, the
    chain states kept split by rows between its calls (left to XLA's propagation, the collapsed moves' proposal
    moments came back in other layouts, and it compiled 4 times), and so does NUTS's sampling program for a logistic
    valuation (its states and trace likewise)."""
    env = dict(os.environ, XLA_FLAGS="--xla_force_host_platform_device_count=4", JAX_PLATFORMS="cpu")
    script = [sys.executable, "-c", _FOUR_DEVICES]  # NUTS's LAPACK kernels once hung over CPU devices: time out
    output = subprocess.run(script, env=env, capture_output=True, text=True, check=True, timeout=900)
    devices, sweep_programs, nuts_programs, values = output.stdout.strip().splitlines()[-1].split(" ", 3)
    assert int(devices) == 4
    assert int(sweep_programs) == 1
    assert int(nuts_programs) == 1
    single = _valuate(_releases(3, epsilon=1.0), ALGORITHM_1, key=3, config=SMALL)
    assert SMALL == bv.SamplerConfig(
        num_chains=2, num_warmup=30, num_samples=100, thinning=1, num_repeats=3, progress_bar=False
    )
    np.testing.assert_allclose(eval(values), single.coalition_values, rtol=1e-9)


_CPU_CORES = """
import jax
import bayesval as bv
import bayesval.cli as cli
from bayesval.cli import _cores_for
from bayesval.inference.batching import use_cpu_cores, usable_cores
cli._valuate_and_report = lambda *args, **kwargs: None  # the command up to its valuation
{call}
print(len(jax.devices("cpu")), usable_cores())
"""
PINNED_RELEASES = [str(path) for path in RELEASE_FILES]


@pytest.mark.parametrize(
    "flags, call, expected",
    [
        ("", "use_cpu_cores()", "cores"),
        ("--xla_force_host_platform_device_count=3", "use_cpu_cores()", 3),
        ("", "cli.main(['demo', '--no-progress'])", "cores"),
        ("", f"cli.main(['valuate', *{PINNED_RELEASES!r}, '--no-progress'])", "cores"),
        ("", "_cores_for(bv.models.LogisticRegression())", 1),
    ],
    ids=["one device per core", "a count chosen by XLA_FLAGS is kept", "demo", "valuate, linear", "a NUTS model"],
)
def test_use_cpu_cores_gives_a_fresh_process_one_cpu_device_per_core(flags, call, expected):
    """Before the backend starts, one CPU device per usable core; a count chosen in XLA_FLAGS stays as chosen. The
    command line asks for them where the model is sampled by Gibbs, before anything it runs starts JAX (the demo's
    data, the valuation of release files), and a NUTS model (LAPACK) keeps one."""
    env = {key: value for key, value in os.environ.items() if key not in ("XLA_FLAGS", "JAX_NUM_CPU_DEVICES")}
    env.update(XLA_FLAGS=flags, JAX_PLATFORMS="cpu")
    script = _CPU_CORES.format(call=call)
    output = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, check=True)
    devices, cores = map(int, output.stdout.strip().splitlines()[-1].split())
    assert devices == (cores if expected == "cores" else expected)


def test_use_cpu_cores_leaves_a_started_backend_as_it_is():
    """The backend of this process has started (the tests have run programs): the count cannot change, and asking
    is no error."""
    jax.numpy.zeros(1).block_until_ready()
    before = len(jax.devices("cpu"))
    assert use_cpu_cores() == before == len(jax.devices("cpu"))


def test_reported_stderr_matches_the_spread_over_independent_valuations():
    """30 valuations of the same releases with different sampling keys: the spread of their Shapley values is
    what each valuation's stderr (from its per-repeat Shapley vectors) claims."""
    releases = _releases(3, epsilon=1.0)
    runs = [_valuate(releases, key=key, config=SMALL) for key in range(30)]
    values = np.array([r.values for r in runs])
    reported = np.sqrt(np.mean([r.stderr**2 for r in runs], axis=0))
    ratio = reported / values.std(axis=0, ddof=1)
    assert np.all((ratio > 0.6) & (ratio < 1.6)), ratio
