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
"""

from __future__ import annotations

import re
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import NamedTuple

import jaxlib

# two: a sampler's sweep program and the KL program it feeds compile beside each other and the start program
_WORKER = ThreadPoolExecutor(max_workers=2, thread_name_prefix="bayesval-compile")


# one: the programs of the next step, compiled in order behind the current step's
_LATER = ThreadPoolExecutor(max_workers=1, thread_name_prefix="bayesval-compile-later")


# XLA's CPU fusion emitters (the MLIR path that lowers each fused loop) are off for the samplers' programs: the
# Gibbs sweep program of Syn's demo compiles in 7.3 s against 14.8 s with them and runs as fast, and Diab's whole
# valuation takes 30 s against 34 s (docs/benchmarks.md, "Compiling without the fusion emitters"). The option is
# read by the CPU compiler only. jaxlib 0.5.0 and earlier do not have it (its name is not in their XLA; 0.6.0 has
# it), and XLA refuses to compile with an option it does not know, so there the programs keep XLA's defaults.
FUSION_EMITTERS_OPTION_FROM = (0, 6, 0)


def cpu_compile_options(jaxlib_version: str) -> dict[str, bool]:
    """The compiler options of the samplers' programs under jaxlib `jaxlib_version` (its first three numbers
    compared with FUSION_EMITTERS_OPTION_FROM): the fusion emitters off where its XLA has the option, else none."""
    release = tuple(int(part) for part in re.findall(r"\d+", jaxlib_version)[:3])
    return {"xla_cpu_use_fusion_emitters": False} if release >= FUSION_EMITTERS_OPTION_FROM else {}


CPU_COMPILE_OPTIONS = cpu_compile_options(jaxlib.__version__)


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
        """Lower and compile the program: the compiled executable (`jax.stages.Compiled`)."""
        return self.function.lower(*self.args, **self.kwargs).compile()


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
