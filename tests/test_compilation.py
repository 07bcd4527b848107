"""Programs compiled ahead in a background thread (`bayesval.compilation`): the call that follows finds the
program in jit's cache, programs lower one at a time while their compiling overlaps, and the samplers lower each
program once, in the background, with no program of their own before them (the Gibbs chains' keys are derived in
the sampler's programs, the draw dimension is traced)."""

import argparse
import copy
import inspect
import os
import subprocess
import sys
import time
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import bayesval as bv
from bayesval import compilation
from bayesval.compilation import compile_ahead
from bayesval.datasets.synthetic import make_syn
from bayesval.inference.data import NoiseAwareData
from bayesval.parties import plan as party_plan
from bayesval.parties import release_all
from bayesval.parties import surprise as party_surprise
from bayesval.statistics import Bounds


@pytest.fixture(scope="module", autouse=True)
def _no_program_compiled_before():
    """The tests here see which programs lower and where, so none starts in jit's cache from an earlier module of
    this worker (tests/conftest.py keeps them between modules)."""
    jax.clear_caches()


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


def test_programs_compiled_ahead_lower_one_at_a_time():
    """Tracing holds Python's interpreter lock: three programs asked for at once trace one after another (each
    trace's span of wall time apart from the others'), not interleaved."""
    spans = []

    def slow_to_trace(x):
        start = time.perf_counter()
        for _ in range(3000):  # a trace of a quarter of a second: threads traced side by side interleave
            x = jnp.sin(x) + 1.0
        spans.append((start, time.perf_counter()))
        return x

    futures = [compile_ahead(jax.jit(slow_to_trace), jnp.ones(size)) for size in (3, 4, 5)]
    for future in futures:
        future.result()
    spans.sort()
    assert len(spans) == 3
    assert all(end <= next_start for (_, end), (next_start, _) in zip(spans, spans[1:])), spans


def test_the_draw_dimension_is_traced_not_drawn(lowered):
    """`draw_dimension` reads the prior draws' shape without compiling a prior-sampling program, and a model whose
    `prior_draws` leaves JAX (NumPy on the key) is asked for one concrete draw."""
    syn = make_syn(seed=0)
    parties = [
        bv.Party(X, y, epsilon=1.0, bounds=syn.bounds, name=f"p{i}", noise_seed=330 + i)
        for i, (X, y) in enumerate(syn.parties)
    ]
    model = bv.models.LinearRegression()
    data = NoiseAwareData.from_releases(release_all(model, parties))
    assert party_surprise.draw_dimension(model, data) == 4  # w (2 slopes and a bias) and sigma^2
    assert not any("nig_draws" in name for name, _ in lowered())

    class NumPyPrior:
        def prior_draws(self, key, data, num_draws):
            seed = int(np.asarray(jax.random.key_data(key)).ravel()[-1])
            return np.random.default_rng(seed).normal(size=(num_draws, 5))

    assert party_surprise.draw_dimension(NumPyPrior(), data) == 5


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
    for program in ("jit(_initial_states)", "jit(_advance)", "jit(summarise)"):
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
    of the path that compiles every program when it is called. The kernel is Algorithm 1 as printed, the quickest
    sweep program to compile: which programs compile where does not depend on the kernel."""
    monkeypatch.setattr(party_plan, "PACK_FROM_CHAIN_SWEEPS", 0)  # pack at this test's budget
    syn = make_syn(seed=0, sizes=(40,) * 6)
    parties = [
        bv.Party(X, y, epsilon=1.0, bounds=syn.bounds, name=f"p{i}", noise_seed=320 + i)
        for i, (X, y) in enumerate(syn.parties)
    ]
    config = bv.SamplerConfig(num_chains=2, num_warmup=9, num_samples=17, thinning=1, num_repeats=2, progress_bar=False)
    model = bv.models.LinearRegression(collapsed_moves=0)
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


def test_the_fusion_emitters_option_is_asked_only_of_a_compiler_that_takes_it():
    """XLA refuses to compile with an option it does not know ('No such compile option': jaxlib 0.5.0's CPU compiler
    and jaxlib 0.11.2's CUDA compiler lack `xla_cpu_use_fusion_emitters`), so every sampler program would fail
    there. The option is asked only where the default backend compiles with it: this CPU's XLA does."""
    if jax.default_backend() != "cpu":
        pytest.skip("the fusion emitters are an option of XLA's CPU compiler")
    assert compilation.compiles_with(compilation.FUSION_EMITTERS_OFF)
    assert compilation.sampler_compile_options() == compilation.FUSION_EMITTERS_OFF
    assert not compilation.compiles_with({"xla_not_an_option": False})
    with pytest.raises(Exception, match="No such compile option"):
        jax.jit(lambda x: x, compiler_options={"xla_not_an_option": False}).lower(1.0).compile()


def test_a_compiler_that_lacks_the_option_compiles_the_sampler_programs_without_it(monkeypatch):
    """As on a GPU whose compiler does not know the option: none is asked, and a sampler program compiles."""
    monkeypatch.setattr(compilation, "FUSION_EMITTERS_OFF", {"xla_not_an_option": False})
    compilation.sampler_compile_options.cache_clear()
    try:
        assert compilation.sampler_compile_options() == {}
        program = compilation.sampler_jit(
            lambda x: jnp.cos(x) + 1, compiler_options={"xla_backend_optimization_level": 1}
        )
        np.testing.assert_allclose(program(jnp.zeros(2)), 2.0)
    finally:
        compilation.sampler_compile_options.cache_clear()


def test_a_sampler_program_is_jitted_at_its_first_use_with_the_backends_options():
    """`sampler_jit` makes its jitted function when first used, with the program's own options and the backend's
    sampler options; a call, `lower` and the jit cache all reach that one function."""

    def twice_sine(x, scale):
        return jnp.sin(x) * scale

    program = compilation.sampler_jit(twice_sine, compiler_options={"xla_backend_optimization_level": 1})
    assert program._jitted is None and program.__name__ == "twice_sine"
    # introspection and copies neither jit it nor recurse: a copy is the program itself, as a jitted function's is
    assert list(inspect.signature(program).parameters) == ["x", "scale"]
    assert copy.copy(program) is program and copy.deepcopy(program) is program and program._jitted is None
    np.testing.assert_allclose(program(jnp.ones(3), 2.0), 2 * np.sin(1.0))
    assert program._cache_size() == 1
    program.lower(jnp.ones(3), 2.0).compile()
    program(jnp.zeros(3), 3.0)
    assert program._cache_size() == 1  # one shape, one program: the same jitted function throughout
    bare = compilation.sampler_jit(static_argnames=("scale",))(twice_sine)
    np.testing.assert_allclose(bare(jnp.ones(2), scale=3.0), 3 * np.sin(1.0))


def test_importing_bayesval_initialises_no_backend():
    """Deciding the compiler options waits for the first program: a process that splits a valuation calls
    `jax.distributed.initialize` after importing bayesval and before any backend starts (docs/multihost.md)."""
    code = (
        "import bayesval, bayesval.parties.surprise, bayesval.inference.nuts\n"
        "from jax._src import xla_bridge\n"
        "assert not xla_bridge.backends_are_initialized(), 'a backend was initialised on import'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_the_persistent_cache_directory_follows_the_environment(monkeypatch, tmp_path):
    """$BAYESVAL_CACHE_DIR names the directory, 'off' (and its kin) turns the cache off; unset, the user's cache
    directory ($XDG_CACHE_HOME, else ~/.cache) holds bayesval/jax."""
    monkeypatch.setenv("BAYESVAL_CACHE_DIR", str(tmp_path / "mine"))
    assert compilation.persistent_cache_directory() == tmp_path / "mine"
    for off in ("off", "OFF", "", "0", "none", "false", "no"):
        monkeypatch.setenv("BAYESVAL_CACHE_DIR", off)
        assert compilation.persistent_cache_directory() is None, off
    monkeypatch.delenv("BAYESVAL_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert compilation.persistent_cache_directory() == tmp_path / "xdg" / "bayesval" / "jax"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert compilation.persistent_cache_directory() == tmp_path / "home" / ".cache" / "bayesval" / "jax"


def test_a_cache_directory_jax_already_has_is_kept(monkeypatch, tmp_path):
    """The suite's own cache directory (tests/conftest.py) is JAX's already: `use_persistent_cache` keeps it and its
    limits, whatever $BAYESVAL_CACHE_DIR says."""
    before = jax.config.jax_compilation_cache_dir, jax.config.jax_compilation_cache_max_size
    assert before[0]
    monkeypatch.setenv("BAYESVAL_CACHE_DIR", str(tmp_path / "elsewhere"))
    assert str(compilation.use_persistent_cache()) == before[0]
    assert (jax.config.jax_compilation_cache_dir, jax.config.jax_compilation_cache_max_size) == before
    assert not (tmp_path / "elsewhere").exists()


@pytest.mark.parametrize("setting", ["cache", "off"])
def test_a_fresh_process_keeps_its_programs_in_the_cache_directory_unless_it_is_off(setting, tmp_path):
    """In a fresh process without JAX's own cache setting, `use_persistent_cache` before the first compilation makes
    JAX write the programs to $BAYESVAL_CACHE_DIR (every program, with the compile-time floor at 0 s), capped at
    CACHE_LIMIT_BYTES; with 'off' nothing is written and the cache stays off."""
    directory = tmp_path / "programs"
    environment = {name: value for name, value in os.environ.items() if not name.startswith("JAX_")}
    environment |= {"BAYESVAL_CACHE_DIR": str(directory) if setting == "cache" else "off"}
    environment["JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS"] = "0"
    code = (
        "import jax, jax.numpy as jnp\n"
        "from bayesval.compilation import use_persistent_cache\n"
        "used = use_persistent_cache()\n"
        "jax.jit(lambda x: jnp.sin(x) * 2.0)(jnp.ones(3)).block_until_ready()\n"
        "print(used, jax.config.jax_compilation_cache_max_size)\n"
    )
    printed = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True, env=environment)
    used, limit = printed.stdout.split()
    if setting == "off":
        assert used == "None" and not directory.exists()
        return
    assert used == str(directory) and int(limit) == compilation.CACHE_LIMIT_BYTES
    assert any(path.is_file() for path in directory.rglob("*")), "no program was written to the cache"


def test_the_command_line_keeps_programs_only_where_no_party_data_are_in_the_process(monkeypatch, tmp_path):
    """`bayesval demo` (synthetic parties) and `bayesval valuate` of release files turn the persistent cache on
    before any work; `valuate` of data tables and the party side's commands do not (a closed-over array would be
    compiled into a program as a constant)."""
    from bayesval import cli

    calls = []
    monkeypatch.setattr(cli, "use_persistent_cache", lambda: calls.append(True))
    parse = lambda *argv: argparse.Namespace(command=argv[0], files=list(argv[1:]))  # noqa: E731
    assert cli.holds_no_party_data(parse("demo"))
    assert cli.holds_no_party_data(parse("valuate", "a.release.json", "b.release.json"))
    assert not cli.holds_no_party_data(parse("valuate", "a.csv", "b.parquet"))
    assert not cli.holds_no_party_data(parse("release", "a.csv"))
    for argv, cached in (
        (["valuate", str(tmp_path / "missing.release.json")], True),
        (["valuate", str(tmp_path / "missing.csv"), "--target", "y"], False),
    ):
        calls.clear()
        with pytest.raises(SystemExit):
            cli.main(argv)
        assert calls == ([True] if cached else []), argv
