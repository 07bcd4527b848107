"""Programs compiled ahead, in a background thread, while the host goes on with other work.

XLA compiles a program without holding Python's global interpreter lock, so a second program (a sampler's start
program, say) can trace, compile and run on the other core meanwhile. `compile_ahead(jitted, *args)` lowers and
compiles `jitted` for the shapes of `args` (arrays, or `jax.ShapeDtypeStruct`s from `jax.eval_shape` for inputs
not computed yet) in a background thread; once its future is done, calling `jitted` with arrays of those shapes
finds the program in jit's cache and does not compile it again (docs/architecture.md, "Programs compiled ahead").
The program is the one a plain call compiles, so values are unchanged to the last bit.
"""

from __future__ import annotations

from concurrent.futures import Future, ThreadPoolExecutor

# two: a sampler's sweep program and the KL program it feeds compile beside each other and the start program
_WORKER = ThreadPoolExecutor(max_workers=2, thread_name_prefix="bayesval-compile")


AHEAD = True  # False: every program compiles when it is first called (the path before; benchmarks/bench_compile.py)


def compile_ahead(jitted, *args, **kwargs) -> Future:
    """Start lowering and compiling the jitted function `jitted` for these arguments (static ones as its call
    takes them) in a background thread; wait on the returned future before calling it, so that the call finds
    the compiled program. An error is raised by the call that waits, as the plain call would raise it. With
    `AHEAD` off the future is done at once and holds None."""
    if not AHEAD:
        done: Future = Future()
        done.set_result(None)
        return done
    return _WORKER.submit(lambda: jitted.lower(*args, **kwargs).compile())
