"""One valuation split over two processes (`jax.distributed`, CPU collectives by gloo, docs/multihost.md): each
process samples its block of the global device mesh and gets every row back, so both return the values of one
process with the same key, with a row count the processes do not divide padded, and with a last call cut to its
rows (`plan.call_rows`)."""

import json
import os
import socket
import subprocess
import sys
import warnings
from typing import NamedTuple

import jax
import numpy as np
import pytest
from sampler_calls import record_sampler_calls

import bayesval as bv
from bayesval.datasets.synthetic import make_syn
from bayesval.inference.batching import process_block
from bayesval.parties import plan

# the valuation of tests/test_coalition_batches.py's device test: the single process reuses its compiled program
CONFIG = bv.SamplerConfig(num_chains=2, num_warmup=30, num_samples=100, thinning=1, num_repeats=3, progress_bar=False)
MODEL = bv.models.LinearRegression(collapsed_moves=0)  # Algorithm 1 as printed: the quickest program to compile
KEY = 3

# One process of a run: jax.distributed first (before any JAX computation, hence before importing bayesval), then
# the global mesh's layout of 22 rows, a gather, a valuation and a game that differs in one process.
_WORKER = """
import json, sys, warnings
from typing import NamedTuple
import jax
jax.config.update("jax_cpu_collectives_implementation", "gloo")
port, process, out, cache = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
if cache:  # the compiled programs of earlier runs (tests/conftest.py)
    jax.config.update("jax_compilation_cache_dir", cache)
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
jax.distributed.initialize(coordinator_address=f"127.0.0.1:{port}", num_processes=2, process_id=process)
import numpy as np
import bayesval as bv
from bayesval.inference.batching import gather_rows, process_block
class Block(NamedTuple):  # gather_rows takes named per-row outputs
    rows: object
from tests.test_multiprocess import CONFIG, CUT_REPORT, KEY, MODEL, releases, valuation_in_cut_calls
report = {"process": jax.process_index(), "devices": jax.device_count(), "local": jax.local_device_count()}
block = process_block(22)
report["block"] = [block.start, block.stop]
report["gathered"] = gather_rows(Block(np.arange(22)[block] * 10)).rows.tolist()
with warnings.catch_warnings():
    warnings.simplefilter("ignore", UserWarning)
    result = bv.valuate(MODEL, releases(), key=KEY, config=CONFIG)
    report |= {name: getattr(result, name).tolist() for name in ("values", "stderr", "coalition_values")}
    report["sampled"] = result.diagnostics["coalitions"]
    try:
        bv.valuate(MODEL, releases(), key=KEY + process, config=CONFIG)
    except ValueError as error:
        report["other_key"] = str(error)
    result, report["cut_calls"] = valuation_in_cut_calls(setattr)
    report["cut"] = {name: np.asarray(getattr(result, name)).tolist() for name in CUT_REPORT[:3]}
    report["cut"] |= {name: np.asarray(result.diagnostics[name]).tolist() for name in CUT_REPORT[3:]}
json.dump(report, open(out, "w"))
"""
CUT_REPORT = ("values", "stderr", "coalition_values", "r_hat", "ess")


def releases():
    """The releases of three Syn parties, the same in every process (fixed noise seeds)."""
    syn = make_syn(seed=0, sizes=(100, 100, 100))
    parties = [
        bv.Party(X, y, epsilon=1.0, bounds=syn.bounds, name=f"p{i}", noise_seed=100 + i)
        for i, (X, y) in enumerate(syn.parties)
    ]
    return [p.release() for p in parties]


def valuation_in_cut_calls(set_attribute) -> tuple[bv.ValuationResult, list[tuple[int, int]]]:
    """The valuation with at most 9 rows a process a call, `cuts_calls` on and a step of 1 row (each patched by
    `set_attribute`), and its calls' (rows, padded size). One process samples 21 rows in calls of 9, 9 and 3; two
    processes in calls of 18 and 3, the second cut to 6 (the step rounded up to 2 devices x 3 repeats), so that each
    process's block of 3 rows starts a posterior's run of repeats and R-hat pools their chains."""
    for name, value in (("MAX_BATCH_ROWS", 9), ("PACK_FROM_CHAIN_SWEEPS", 0), ("CALL_ROWS_STEP", 1)):
        set_attribute(plan, name, value)
    calls = record_sampler_calls(set_attribute)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        return bv.valuate(MODEL, releases(), key=KEY, config=CONFIG), calls


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def two_processes(tmp_path_factory) -> list[dict]:
    """What each of two processes reports (`_WORKER`), run once for the tests of this module."""
    tmp_path = tmp_path_factory.mktemp("processes")
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    paths = [root, os.path.join(root, "tests"), os.environ.get("PYTHONPATH", "")]  # the package and test helpers
    env = dict(os.environ, JAX_PLATFORMS="cpu", PYTHONPATH=os.pathsep.join(paths))
    env.pop("XLA_FLAGS", None)  # one CPU device per process
    port, outs = _free_port(), [tmp_path / f"process{i}.json" for i in range(2)]
    cache = jax.config.jax_compilation_cache_dir or ""
    logs = [open(tmp_path / f"process{i}.log", "w") for i in range(2)]
    workers = [
        subprocess.Popen(
            [sys.executable, "-c", _WORKER, str(port), str(i), str(outs[i]), cache],
            env=env,
            cwd=root,
            stdout=logs[i],
            stderr=subprocess.STDOUT,
        )
        for i in range(2)
    ]
    try:
        codes = [worker.wait(timeout=900) for worker in workers]
    finally:
        for worker in workers:
            worker.kill()
        for log in logs:
            log.close()
    if any(codes):
        logs = "\n".join((tmp_path / f"process{i}.log").read_text()[-3000:] for i in range(2))
        pytest.fail(f"a process failed (exit codes {codes}):\n{logs}")
    return [json.loads(out.read_text()) for out in outs]


def test_two_processes_split_one_valuation_and_both_return_the_values_of_one(two_processes):
    """7 coalitions x 3 repeats = 21 rows, padded to 22 for 2 devices in 2 processes: process 0 samples rows 0..10,
    process 1 rows 11..21 (the padding), and both return what one process returns with the same key (to float64
    round-off, docs/multihost.md). A process with another key is told so, in both processes, before any sampling."""
    first, second = two_processes
    assert [(r["process"], r["devices"], r["local"]) for r in (first, second)] == [(0, 2, 1), (1, 2, 1)]
    assert first["block"] == [0, 11] and second["block"] == [11, 22]
    assert first["gathered"] == second["gathered"] == list(range(0, 220, 10))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        single = bv.valuate(MODEL, releases(), key=KEY, config=CONFIG)
    for name, rtol in (("values", 1e-13), ("stderr", 1e-11), ("coalition_values", 1e-13)):
        np.testing.assert_array_equal(first[name], second[name])  # the processes agree to the last bit
        # and with one process to float64 round-off: a block of 11 rows is summed in another order than 21 rows.
        # Ten times the largest disagreement measured (docs/multihost.md): 9.5e-15 on the values, 1.0e-12 on the
        # standard errors, whose few repeats' spread keeps fewer correct digits
        np.testing.assert_allclose(first[name], getattr(single, name), rtol=rtol, atol=0)
    assert first["sampled"] == single.diagnostics["coalitions"]
    assert "processes [1] have another game, reruns, memory limit or key than process 0" in first["other_key"]
    assert first["other_key"] == second["other_key"]


def test_two_processes_cut_a_last_call_and_return_the_values_and_flags_of_one(two_processes, monkeypatch):
    """The last call of 3 rows is cut to 6, not padded to 18 (`valuation_in_cut_calls`): each process samples one
    posterior's 3 repeats or 3 rows of padding, and both return every value, standard error, R-hat and ESS that one
    process returns in calls cut the same way (to float64 round-off)."""
    first, second = two_processes
    single, calls = valuation_in_cut_calls(monkeypatch.setattr)
    assert calls == [(9, 9), (9, 9), (3, 3)]
    assert first["cut_calls"] == second["cut_calls"] == [[18, 18], [3, 6]]
    for name in CUT_REPORT:
        np.testing.assert_array_equal(first["cut"][name], second["cut"][name])
        expected = getattr(single, name) if name in CUT_REPORT[:3] else single.diagnostics[name]
        np.testing.assert_allclose(first["cut"][name], expected, rtol=1e-12, atol=0)


class _Device(NamedTuple):
    process_index: int


def test_a_process_block_is_the_rows_of_its_devices_in_the_global_mesh(monkeypatch):
    """2 processes x 2 devices: 24 rows, 6 a device, put rows 0..11 on process 0 and 12..23 on process 1; 22 rows
    are refused (pad them to 24 first), and so are processes whose devices interleave in the global order."""
    devices = [_Device(0), _Device(0), _Device(1), _Device(1)]
    monkeypatch.setattr(jax, "devices", lambda: devices)
    monkeypatch.setattr(jax, "process_count", lambda: 2)
    for process, rows in ((0, range(0, 12)), (1, range(12, 24))):
        monkeypatch.setattr(jax, "process_index", lambda process=process: process)
        assert list(range(24))[process_block(24)] == list(rows)
    with pytest.raises(ValueError, match="22 rows do not split evenly over 4 devices: pad them first"):
        process_block(22)
    devices[1:3] = [_Device(1), _Device(0)]
    with pytest.raises(ValueError, match=r"process 1 holds devices \[1, 3\] of 4"):
        process_block(24)
