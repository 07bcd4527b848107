"""Programs compiled ahead in a background thread (`bayesval.compilation`): the call that follows finds the
program in jit's cache, and the samplers lower each program once, their sweep and summary programs in the
background while the start program compiles and runs on the calling thread."""

import logging
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import bayesval as bv
from bayesval import compilation
from bayesval.compilation import compile_ahead
from bayesval.datasets.synthetic import make_syn
from bayesval.parties import surprise as party_surprise
from bayesval.statistics import Bounds


@pytest.fixture
def lowered(caplog):
    """(program name, thread name) of every program jit lowers while the test runs, in any thread (the setting,
    not its thread-local context manager)."""
    caplog.set_level(logging.WARNING)
    jax.config.update("jax_log_compiles", True)
    try:
        yield lambda: [
            (record.getMessage().split()[1], record.threadName)
            for record in caplog.records
            if record.getMessage().startswith("Compiling jit(")
        ]
    finally:
        jax.config.update("jax_log_compiles", False)


def test_a_call_after_compile_ahead_compiles_nothing(lowered):
    @jax.jit
    def f(x, scale):
        return jnp.sin(x) * scale["a"]

    x = jnp.ones((3, 5))
    future = compile_ahead(f, x, jax.eval_shape(lambda: {"a": jnp.ones((3, 5))}))
    assert future.result() is not None
    scale = {"a": 2 * x}
    before = len(lowered())
    np.testing.assert_allclose(f(x, scale), 2 * np.sin(1.0))
    assert len(lowered()) == before  # found in jit's cache
    threads = [thread for name, thread in lowered() if name == "jit(f)"]
    assert len(threads) == 1 and threads[0].startswith("bayesval-compile")


def test_an_error_in_a_program_compiled_ahead_is_raised_by_the_wait():
    @jax.jit
    def f(x):
        return x @ x  # (2, 3) @ (2, 3): no such product

    with pytest.raises(TypeError, match="dot_general"):
        compile_ahead(f, jnp.ones((2, 3))).result()


def _programs_of_the_valuation(lowered, model, parties, config, **options) -> dict[str, list[str]]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        result = bv.valuate(model, parties, key=0, config=config, **options)
    assert np.isfinite(result.values).all()
    threads: dict[str, list[str]] = {}
    for name, thread in lowered():
        threads.setdefault(name, []).append(thread)
    return threads


def test_a_gibbs_valuation_lowers_each_program_once_its_sweeps_and_summary_in_the_background(lowered):
    syn = make_syn(seed=0)
    parties = [
        bv.Party(X, y, epsilon=1.0, bounds=syn.bounds, name=f"p{i}", noise_seed=300 + i)
        for i, (X, y) in enumerate(syn.parties)
    ]
    config = bv.SamplerConfig(
        num_chains=2, num_warmup=11, num_samples=23, thinning=1, num_repeats=2, progress_bar=False
    )
    threads = _programs_of_the_valuation(lowered, bv.models.LinearRegression(), parties, config)
    assert "jit(stack)" not in threads  # rows' keys and releases are not stacked on the device, one operand a row
    assert len(threads["jit(_initial_states)"]) == 1
    for program in ("jit(_advance)", "jit(summarise)"):
        assert len(threads[program]) == 1
        assert threads[program][0].startswith("bayesval-compile")


def test_a_nuts_valuation_lowers_each_program_once_its_sampling_and_summary_in_the_background(lowered, rng):
    X, y = rng.normal(size=(200, 2)), rng.choice([-1.0, 1.0], 200)
    parties = [
        bv.Party(X[i::2], y[i::2], epsilon=0.5, bounds=Bounds(x_norm=6.0), name=f"p{i}", noise_seed=310 + i)
        for i in range(2)
    ]
    config = bv.SamplerConfig(num_chains=2, num_warmup=7, num_samples=19, thinning=1, num_repeats=2, progress_bar=False)
    threads = _programs_of_the_valuation(lowered, bv.models.LogisticRegression(max_sq_norm=6.0), parties, config)
    assert len(threads["jit(start)"]) == 1
    for program in ("jit(run)", "jit(summarise)"):
        assert len(threads[program]) == 1
        assert threads[program][0].startswith("bayesval-compile")


def test_the_next_widths_programs_compile_while_one_width_samples_with_the_same_values(lowered, monkeypatch):
    """Six parties with members packed: three widths (2, 4 and 6 party slots), each one sampler call. The first
    width's programs compile as before; the second's and third's start, sweep and summary programs are lowered
    once each, in the `bayesval-compile-later` thread while the width before samples, and the values equal those
    of the path that compiles every program when it is called."""
    monkeypatch.setattr(party_surprise, "PACK_FROM_CHAIN_SWEEPS", 0)  # pack at this test's budget
    syn = make_syn(seed=0, sizes=(40,) * 6)
    parties = [
        bv.Party(X, y, epsilon=1.0, bounds=syn.bounds, name=f"p{i}", noise_seed=320 + i)
        for i, (X, y) in enumerate(syn.parties)
    ]
    config = bv.SamplerConfig(num_chains=2, num_warmup=9, num_samples=17, thinning=1, num_repeats=2, progress_bar=False)
    model = bv.models.LinearRegression()
    threads = _programs_of_the_valuation(lowered, model, parties, config, exact_up_to=6)
    for program in ("jit(_initial_states)", "jit(_advance)", "jit(summarise)"):
        assert len(threads[program]) == 3, program
        assert sum(thread.startswith("bayesval-compile-later") for thread in threads[program]) == 2, program
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        ahead = bv.valuate(model, parties, key=0, config=config, exact_up_to=6)
        monkeypatch.setattr(compilation, "AHEAD", False)
        when_called = bv.valuate(model, parties, key=0, config=config, exact_up_to=6)
    np.testing.assert_array_equal(ahead.values, when_called.values)


@pytest.mark.parametrize(
    "version, known",
    [("0.4.30", False), ("0.5.0", False), ("0.6.0", True), ("0.6.0.dev20250301", True), ("0.10.2", True)],
)
def test_the_fusion_emitters_option_is_asked_of_the_jaxlib_releases_that_have_it(version, known):
    """jaxlib 0.5.0's XLA has no `xla_cpu_use_fusion_emitters` and refuses to compile with an option it does not
    know; from 0.6.0 the samplers' programs compile with the fusion emitters off."""
    expected = {"xla_cpu_use_fusion_emitters": False} if known else {}
    assert compilation.cpu_compile_options(version) == expected


def test_this_xla_compiles_with_the_samplers_compiler_options():
    """The options are the ones the installed XLA knows: with an unknown one, every sampler program would fail to
    compile ('No such compile option')."""
    program = jax.jit(lambda x: jnp.sin(x) * 2, compiler_options=compilation.CPU_COMPILE_OPTIONS)
    np.testing.assert_allclose(program(jnp.ones(3)), 2 * np.sin(1.0))
    with pytest.raises(Exception, match="No such compile option"):
        jax.jit(lambda x: x, compiler_options={"xla_not_an_option": False}).lower(1.0).compile()
