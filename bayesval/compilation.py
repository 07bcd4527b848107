"""Programs compiled ahead, in a background thread, while the host goes on with other work.

XLA compiles a program without holding Python's global interpreter lock, so a second program (a sampler's start
program, say) can trace, compile and run on the other core meanwhile. `compile_ahead(jitted, *args)` lowers and
compiles `jitted` for the shapes of `args` (arrays, or `jax.ShapeDtypeStruct`s from `jax.eval_shape` for inputs
not computed yet) in a background thread; once its future is done, calling `jitted` with arrays of those shapes
finds the program in jit's cache and does not compile it again (docs/architecture.md, "Programs compiled ahead").
The program is the one a plain call compiles, so values are unchanged to the last bit.

`compile_for_later(programs)` compiles the programs of a step that comes after the current one (the next batch
shape's sampler and summary programs, say) one after another in a thread of their own, so that they never hold up
the programs the current step waits for.

`use_persistent_cache()` keeps the programs that take a second or more to compile on disk for the next process
(JAX's persistent compilation cache), which the command line turns on where a process holds no party's data
(docs/architecture.md, "Compiled programs kept between runs").
"""

from __future__ import annotations

import functools
import importlib.util
import os
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import NamedTuple

import jax
import numpy as np

# three: a sampler's sweep program, its start program and the KL program the draws feed compile beside each other
_WORKER = ThreadPoolExecutor(max_workers=3, thread_name_prefix="bayesval-compile")

# Tracing and lowering run Python, under the global interpreter lock; XLA's compiling does not. Programs lowered
# beside each other share the interpreter and the cores, and the sweep program, the longest to trace, waits longest:
# one lowering at a time lets each trace at full speed, and their compiling overlaps (docs/benchmarks.md,
# "Programs compiled ahead").
_LOWERING = threading.Lock()


# one: the programs of the next step, compiled in order behind the current step's
_LATER = ThreadPoolExecutor(max_workers=1, thread_name_prefix="bayesval-compile-later")


# XLA's CPU fusion emitters (the MLIR path that lowers each fused loop) are off for the samplers' programs: the
# Gibbs sweep program of Syn's demo compiles in 7.3 s against 14.8 s with them and runs as fast, and Diab's whole
# valuation takes 30 s against 34 s (docs/benchmarks.md, "Compiling without the fusion emitters"). XLA refuses to
# compile with an option it does not know ("No such compile option"), and not every compiler knows this one: the CPU
# compiler of jaxlib 0.5.0 and earlier lacks it, and so does the CUDA compiler of jaxlib 0.11.2. So the option is
# asked only of a backend that compiles with it (`sampler_compile_options`).
FUSION_EMITTERS_OFF = {"xla_cpu_use_fusion_emitters": False}

# A program that runs once per sampler call (a chain's start) is worth only its compile time: XLA's cheapest backend
# settings compile NUTS's start program for Diab ~30 % faster (CPU time) and the Gibbs start program for Syn in 1.8-2.6
# s against 4.2-4.8 s, and its one run's speed does not matter. The sweep programs keep their optimisation: at these
# settings the Gibbs sweeps ran 2x slower (docs/benchmarks.md, "Compiling a start program for its one run").
RUN_ONCE_OPTIONS = {"xla_backend_optimization_level": 0, "xla_llvm_disable_expensive_passes": True}


def compiles_with(options: dict) -> bool:
    """Whether the default backend's compiler takes these compiler `options`: False where it refuses one it does not
    know ("No such compile option", XLA's words in every jaxlib release); any other failure to compile a
    one-operation program with them (the backend failing to start, say) is raised, not read as a refusal."""
    try:
        jax.jit(lambda x: x + 1, compiler_options=options).lower(np.float32(0)).compile()
    except Exception as error:  # the error's type differs between jaxlib releases; XLA's message does not
        if "No such compile option" in str(error):
            return False
        raise
    return True


@functools.cache
def sampler_compile_options() -> dict[str, bool]:
    """The compiler options the samplers' and the k-NN summary's programs add to their own: `FUSION_EMITTERS_OFF`
    where the default backend compiles with it (XLA's CPU compiler from jaxlib 0.6.0 on), else none. Decided once,
    at the first program's first use (`sampler_jit`), not on import: asking for the backend initialises it, and a
    process that splits a valuation must call `jax.distributed.initialize` first (docs/multihost.md). The probe runs
    on the default backend, which is where the samplers' programs run unless a caller pins another device."""
    return FUSION_EMITTERS_OFF if compiles_with(FUSION_EMITTERS_OFF) else {}


class _FirstUseJit:
    """`jax.jit(function, compiler_options=options | sampler_compile_options(), **settings)`, made at its first use
    (a call, `lower`, or another attribute of the jitted function, such as `_cache_size`) and the same jitted
    function from then on. Copies are the object itself, as a module-level jitted function is shared."""

    _FIELDS = frozenset({"_function", "_options", "_settings", "_lock", "_jitted"})

    def __init__(self, function: Callable, options: dict, settings: dict) -> None:
        functools.update_wrapper(self, function)
        self._function, self._options, self._settings = function, options, settings
        self._lock = threading.Lock()
        self._jitted = None

    @property
    def jitted(self):
        """The jitted function, made on the first use."""
        if self._jitted is None:
            with self._lock:
                if self._jitted is None:
                    options = self._options | sampler_compile_options()
                    self._jitted = jax.jit(self._function, compiler_options=options, **self._settings)
        return self._jitted

    def __call__(self, *args, **kwargs):
        return self.jitted(*args, **kwargs)

    def __getattr__(self, name: str):
        # only what the instance lacks comes here: its own fields before __init__ sets them, and Python's protocol
        # names (__signature__, __deepcopy__, ...) are not the jitted function's to answer, nor worth starting a
        # backend for
        if name in self._FIELDS or (name.startswith("__") and name.endswith("__")):
            raise AttributeError(name)
        return getattr(self.jitted, name)

    def __copy__(self):
        return self

    def __deepcopy__(self, memo):
        return self


def sampler_jit(function: Callable | None = None, /, *, compiler_options: dict | None = None, **settings):
    """`jax.jit` for the samplers' and the summary's programs: their own `compiler_options` (none by default) with
    `sampler_compile_options()`, decided at the first use; `settings` go to `jax.jit` (`static_argnames`, ...).
    As a decorator, bare or with arguments: `@sampler_jit(static_argnames=("k",))`."""
    if function is None:
        return functools.partial(sampler_jit, compiler_options=compiler_options, **settings)
    return _FirstUseJit(function, dict(compiler_options or {}), settings)


AHEAD = True  # False: every program compiles when it is first called (the path before; benchmarks/bench_compile.py)


def _done() -> Future:
    """A future that is done and holds None."""
    done: Future = Future()
    done.set_result(None)
    return done


def compile_ahead(jitted, *args, **kwargs) -> Future:
    """Start lowering and compiling the jitted function `jitted` for these arguments (static ones as its call
    takes them) in a background thread; wait on the returned future before calling it, so that the call finds
    the compiled program. An error is raised by the call that waits, as the plain call would raise it. With
    `AHEAD` off the future is done at once and holds None."""
    if not AHEAD:
        return _done()
    return _WORKER.submit(Program(jitted, args, kwargs).compile)


class Program(NamedTuple):
    """A jitted function and the arguments (arrays or `jax.ShapeDtypeStruct`s; static ones as its call takes them)
    of one call of it: one compiled program."""

    function: Callable
    args: tuple
    kwargs: dict = {}

    def compile(self):
        """Lower and compile the program: the compiled executable (`jax.stages.Compiled`). One program lowers at a
        time (`_LOWERING`)."""
        with _LOWERING:
            lowered = self.function.lower(*self.args, **self.kwargs)
        return lowered.compile()


def compile_for_later(programs: list[Program]) -> Future:
    """Start lowering and compiling `programs`, in order, in a background thread apart from `compile_ahead`'s; a
    later call with arrays of those shapes finds them compiled. Nothing needs to wait on the returned future: a
    program that fails to compile here leaves its error in the future, and fails again, with that error, when it
    is called. With `AHEAD` off nothing is compiled."""
    if not AHEAD:
        return _done()

    def compile_each() -> None:
        for program in programs:
            program.compile()

    return _LATER.submit(compile_each)


CACHE_DIRECTORY_VARIABLE = "BAYESVAL_CACHE_DIR"  # where `use_persistent_cache` keeps programs; "off" for nowhere
CACHE_OFF = frozenset({"", "0", "off", "none", "false", "no"})
CACHE_LIMIT_BYTES = 2**30  # past this, JAX evicts the least recently used programs


def persistent_cache_directory() -> Path | None:
    """Where `use_persistent_cache` keeps compiled programs: $BAYESVAL_CACHE_DIR, or bayesval/jax in the user's
    cache directory ($XDG_CACHE_HOME, else ~/.cache); None where $BAYESVAL_CACHE_DIR is 'off' (or '', '0', 'none',
    'false', 'no')."""
    setting = os.environ.get(CACHE_DIRECTORY_VARIABLE)
    if setting is not None:
        return None if setting.strip().lower() in CACHE_OFF else Path(setting).expanduser()
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "bayesval" / "jax"


def use_persistent_cache() -> Path | None:
    """Keep this process's compiled programs on disk for the processes after it (JAX's persistent compilation cache),
    in `persistent_cache_directory()`, at most CACHE_LIMIT_BYTES (JAX evicts by last use, which needs the `filelock`
    package); returns the directory in use, or None. Where JAX already has a cache directory
    (JAX_COMPILATION_CACHE_DIR, or `jax.config`), that one is kept, as are its limits. Call it before the first
    program compiles: JAX reads the setting at its first compilation. A directory that cannot be made leaves the
    cache off.

    JAX keeps the programs that took at least a second to compile (the samplers' sweep, start and summary programs;
    `jax_persistent_cache_min_compile_time_secs`), keyed by the whole computation, the compiler options and the JAX
    version, so a stale program is never used. Syn's valuation took 22 s where it took 32 s compiling its programs
    (docs/benchmarks.md, "Compiled programs kept between runs"). A program takes its arrays as arguments, but an
    array a function closes over is compiled into it as a constant, so the command line keeps programs only where no
    party's data are in the process (`bayesval.cli.holds_no_party_data`): the demo's synthetic parties and release
    files, not data tables."""
    if jax.config.jax_compilation_cache_dir:
        return Path(jax.config.jax_compilation_cache_dir)
    directory = persistent_cache_directory()
    if directory is None:
        return None
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError:
        return None
    jax.config.update("jax_compilation_cache_dir", str(directory))
    if importlib.util.find_spec("filelock") is not None:  # without it JAX refuses every entry under a size cap
        jax.config.update("jax_compilation_cache_max_size", CACHE_LIMIT_BYTES)
    return directory
