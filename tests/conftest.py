import logging
import os
import tempfile
from unittest import mock

import jax
import numpy as np
import pytest

import bayesval as bv
from bayesval.datasets.synthetic import make_syn

os.environ.setdefault("BAYESVAL_DATA", os.path.join(os.path.dirname(__file__), "..", "..", "shared", "data"))

# Compiled programs go to an on-disk cache shared by the test workers and, through the environment, by the
# processes tests start (examples, notebook kernels, the CLI): a module that needs a program another module, worker
# or process compiled loads it (~1 MB) instead of compiling it again (a small Syn valuation: 30.2 s, then 11.8 s;
# the Syn examples after the first: 56 s, then 18 s). Entries are keyed by the whole computation, JAX version and
# compiler options, so a stale one is never used. Every program is kept, however quick to compile: on a cold cache
# XLA's compiling was 1,893 s of the suite's 3,315 s of in-process test time (2026-11-30, an Intel Xeon sandbox), and
# `jax.clear_caches()` (below, once a worker holds many programs) leaves the programs under a second (most of a
# module's programs) to be compiled again by every module that meets them.
os.environ["JAX_COMPILATION_CACHE_DIR"] = os.path.join(tempfile.gettempdir(), "bayesval-tests-jax-cache")
os.environ["JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS"] = "0"
jax.config.update("jax_compilation_cache_dir", os.environ["JAX_COMPILATION_CACHE_DIR"])
jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)


@pytest.fixture(scope="session")
def syn():
    return make_syn(seed=0)


@pytest.fixture()
def syn_parties(syn):
    def build(epsilons=(0.2, 0.1, 0.2), seeds=(11, 12, 13), data=None):
        data = data or syn.parties
        return [
            bv.Party(X, y, epsilon=eps, bounds=syn.bounds, name=f"party {i + 1}", noise_seed=seed)
            for i, ((X, y), eps, seed) in enumerate(zip(data, epsilons, seeds))
        ]

    return build


def _isolated_noise_seeds():
    """Each test (and each module's shared fixtures) is its own experiment: noise seeds claimed in one do not
    bind another. Autouse fixtures come first within their scope, so module fixtures see a clean registry."""
    import bayesval.privacy.noise

    with mock.patch.dict(bayesval.privacy.noise._CLAIMED, clear=True):
        yield


def _memory_maps() -> tuple[int, int] | None:
    """(memory mappings this process holds, the system's limit on them), or None where /proc does not tell."""
    try:
        with open("/proc/self/maps") as maps, open("/proc/sys/vm/max_map_count") as limit:
            return sum(1 for _ in maps), int(limit.read())
    except (OSError, ValueError):
        return None


# The compiled programs are released before a module and before a test once the process holds this share of the limit
# on memory mappings, so that what comes has the other half (~9 of the largest Gibbs programs, ~3,500 mappings each).
MAPPINGS_KEPT = 1 / 2


def _release_compiled_programs():
    """Drop every compiled XLA program once the process nears its limit on memory mappings. XLA's CPU backend maps
    each kernel of a compiled program into its own memory pages (~3 mappings per kernel, ~1,200 to 3,500 per Gibbs
    program), and at the process limit (vm.max_map_count, 65,530) the next compile crashes (segmentation fault).
    Below it the programs stay, so a test that meets a program an earlier test of this worker compiled calls it
    without tracing, lowering or loading it again. Where /proc does not tell, they are dropped after every test and
    module.
    Autouse fixtures come first within their scope, so a module's own fixtures run after the check."""
    maps = _memory_maps()
    if maps is not None and maps[0] > MAPPINGS_KEPT * maps[1]:
        jax.clear_caches()
    yield
    if maps is None:
        jax.clear_caches()


release_compiled_programs_per_module = pytest.fixture(scope="module", autouse=True)(_release_compiled_programs)
release_compiled_programs_per_test = pytest.fixture(autouse=True)(_release_compiled_programs)


isolated_noise_seeds_per_module = pytest.fixture(scope="module", autouse=True)(_isolated_noise_seeds)
isolated_noise_seeds_per_test = pytest.fixture(autouse=True)(_isolated_noise_seeds)


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


@pytest.fixture()
def rng():
    """A fresh generator per test, so no test's numbers depend on which tests ran before it."""
    return np.random.default_rng(20261122)


# The slowest modules (seconds of test time on 2 cores, a whole clean-clone run of 10c7573 with a cold cache on an AMD
# EPYC sandbox, 2026-12-04: 4,410 s of test time in 2,236 s), run first: `--dist loadfile` hands whole modules to the
# two workers in collection order, so starting with the longest leaves short ones to even out the finish, where
# running them alphabetically left one worker alone with a slow module for the last ~8 minutes (2026-11-26). Modules
# not listed (each under 40 s) run after these, in alphabetical order.
SLOWEST_FIRST = (
    "test_importance.py",  # 656
    "test_examples.py",  # 291
    "test_gibbs.py",  # 260
    "test_valuate.py",  # 257
    "test_compilation.py",  # 205
    "test_notebooks.py",  # 183
    "test_games_calibration.py",  # 178
    "test_coalition_batches.py",  # 177
    "test_games_semivalues.py",  # 143
    "test_multiprocess.py",  # 133, two processes beside this one
    "test_member_packing.py",  # 120
    "test_rao_blackwell.py",  # 115
    "test_rewards.py",  # 113
    "test_linalg.py",  # 103
    "test_reruns.py",  # 97
    "test_doc_blocks.py",  # 96
    "test_california.py",  # 94
    "test_divergence.py",  # 91
    "test_diab_trends.py",  # 80
    "test_logistic.py",  # 79
    "test_party_product.py",  # 69
    "test_paper_trends.py",  # 69
    "test_shapley_policy.py",  # 58
    "test_knn_closed_forms.py",  # 54
    "test_party_valuation.py",  # 45
)


# The slow tier: checks that CI leaves out, to bring the quick suite (`python -m pytest`, the README's test command and
# CI's) toward its 20 minutes on 2 cores; `python -m pytest -m slow` runs them (docs/benchmarks.md, "The test suite in
# two tiers", says what each tier costs). Each is a check at a size or across a process boundary, and is listed only
# where leaving it out saves its time: a test whose programs a quick test compiles too only hands their compiling to
# that test (measured: the weighted-voting semivalue game's calibration, 110 s, moved 113 s onto the next game's).
# The quick suite keeps a sibling of each: the Gibbs route's values pinned bit for bit (test_behaviour_pinned.py), and
# every route checked against closed forms at negligible noise, so that a change of the default behaviour fails CI and
# these say whether the new behaviour is still right. Seconds of test time on 2 cores: a clean clone of f0cb12e with a
# cold cache, an AMD EPYC sandbox on a slow hour, 2026-12-06 (4,684 s of test time in all).
SLOW = {
    # across processes and devices: the quick suite's valuations run in one process on one device
    "test_coalition_batches.py::test_four_devices_give_the_values_of_one": 157,
    "test_multiprocess.py::test_two_processes_split_one_valuation_and_both_return_the_values_of_one": 121,
    "test_multiprocess.py::test_two_processes_cut_a_last_call_and_return_the_values_and_flags_of_one": 21,
    # agreement with another sampler at realistic noise (the default kernel's, "collapsed", stays quick)
    "test_gibbs.py::test_agrees_with_nuts_on_the_marginalised_model[interweaving]": 133,
    "test_gibbs.py::test_agrees_with_nuts_on_the_marginalised_model[shared]": 97,
    "test_importance.py::test_realistic_noise_agrees_with_the_gibbs_chains": 53,
    # the importance route at 12 and 24 parties, and on a bimodal coalition (its closed form at 3 parties stays quick)
    "test_importance.py::test_a_coalition_with_two_modes_is_drawn_about_both": 119,
    "test_importance.py::test_a_wide_coalition_draws_each_members_data_model_more_times": 115,
    "test_importance.py::test_each_members_inner_weights_have_a_variance[True]": 39,
    "test_importance.py::test_each_members_inner_weights_have_a_variance[False]": 35,
    "test_importance.py::test_a_fit_the_data_models_led_astray_is_replaced_by_the_profiled_one": 42,
    # a whole valuation of real data, and the sampler programs of compile-ahead, of nine parties and of packing
    "test_california.py::test_valuation_of_the_three_calih_parties": 73,
    "test_compilation.py::test_the_next_widths_programs_compile_while_one_width_samples_with_the_same_values": 57,
    "test_coalition_batches.py::test_nine_parties_by_permutation_compile_once_report_counts_and_resume_exactly": 46,
    "test_member_packing.py::test_a_lone_slow_coalition_is_rerun_in_the_width_whose_calls_carry_the_fewest_slots": 44,
}


def pytest_configure(config):
    config.addinivalue_line("markers", "slow: left out of the quick suite; `python -m pytest -m slow` runs it")


def _mark_slow(items) -> None:
    """Mark the tests SLOW names (tests/test_suite_tiers.py checks that each is still collected)."""
    for item in items:
        if f"{item.path.name}::{item.name}" in SLOW:
            item.add_marker(pytest.mark.slow)


@pytest.hookimpl(tryfirst=True)  # before `-m` deselects by mark
def pytest_collection_modifyitems(items):
    _mark_slow(items)

    def rank(item):
        name = item.path.name
        return SLOWEST_FIRST.index(name) if name in SLOWEST_FIRST else len(SLOWEST_FIRST)

    items.sort(key=rank)  # stable: the order within a module, and among the rest, is kept
