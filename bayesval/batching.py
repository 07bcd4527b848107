"""Fixed-size batches, for every part of the package that maps a compiled program over many rows.

A jitted program compiles once per input shape, so rows (coalition masks, validation points, (coalition, repeat)
posteriors) are cut into batches of one size, the last one padded, and the padded rows' outputs dropped. Padding
changes the speed, never the values: a padded row is a copy of a real row or a neutral one (the empty coalition),
each row's output depends on that row alone (its key is folded from the batch index or from the row itself,
`bayesval.inference.batching.coalition_key`), and a padded row's output is never read.

Three shapes of the same idea:

* `padded_batches` / `map_in_batches`: a Python loop over batches (`batches` gives their index and real rows),
  for programs with side effects or host work between batches (utilities of the game layer, samplers);
* `stacked_batches` / `unstacked`: all batches as one (num_batches, batch_size, ...) array, for `jax.lax.scan`
  inside a jitted program (`sum_over_validation`, the validation sums of Wang et al. 2023, Thm 1);
* `even_splits`: a number of iterations split into nearly equal runs (NUTS's progress segments), where no row is
  padded because the runs are lengths, not arrays.

Row keys and sharding over devices stay with the samplers (`bayesval.inference.batching`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

# Entries of one chunk (batch_size x N_train) by default: 2^17 float64s, 1 MiB per array, which
# stays in cache; at N_train = 10^5 this ran TKNN 5x faster than 16 MiB chunks on 2 CPU cores.
_CHUNK_ENTRIES = 2**17


class Batch(NamedTuple):
    """Batch `index` (0, 1, ...; what a batch's key is folded from) holds rows start..stop-1; the rest is padding."""

    index: int
    start: int
    stop: int

    @property
    def count(self) -> int:
        """Its real rows."""
        return self.stop - self.start


def padded_size(num_rows: int, multiple: int) -> int:
    """num_rows rounded up to a multiple of `multiple`."""
    return -(-num_rows // multiple) * multiple


def pad_rows(array, size: int, fill: Any = "first"):
    """The array with its leading axis padded to `size`: with copies of its first row (fill='first', the default),
    of its last ('last'), or with a constant (any other fill, e.g. False for empty coalitions). A NumPy array stays
    NumPy and a JAX array (or tracer) stays JAX; an array already of that size is returned as it is."""
    missing = size - array.shape[0]
    if missing < 0:
        raise ValueError(f"cannot pad {array.shape[0]} rows to {size}")
    if not missing:
        return array
    xp = jnp if isinstance(array, jax.Array) else np
    if isinstance(fill, str) and fill in ("first", "last"):
        padding = xp.repeat(array[:1] if fill == "first" else array[-1:], missing, axis=0)
    else:
        padding = xp.full((missing,) + array.shape[1:], fill, dtype=array.dtype)
    return xp.concatenate([array, padding])


def batches(num_rows: int, batch_size: int) -> Iterator[Batch]:
    """The batches of batch_size rows that cover num_rows rows, in order (the last one partly padding)."""
    for index, start in enumerate(range(0, num_rows, batch_size)):
        yield Batch(index, start, min(start + batch_size, num_rows))


def padded_batches(rows, batch_size: int, fill: Any = "first") -> Iterator[tuple[Batch, Any]]:
    """Each `Batch` of `rows` (leading axis) with its rows, padded to batch_size by `pad_rows(..., fill)`."""
    for batch in batches(rows.shape[0], batch_size):
        yield batch, pad_rows(rows[batch.start : batch.stop], batch_size, fill)


def map_in_batches(fn: Callable[[int, Any], Any], rows, batch_size: int, fill: Any = "first") -> np.ndarray:
    """fn(batch index, padded rows) over `padded_batches(rows, batch_size, fill)`, each output (batch_size, ...)
    cut to the batch's real rows, concatenated in row order: one output row per row (of at least one)."""
    if not rows.shape[0]:
        raise ValueError("map_in_batches needs at least one row (the outputs' shape comes from fn)")
    outputs = [
        np.asarray(fn(batch.index, padded))[: batch.count] for batch, padded in padded_batches(rows, batch_size, fill)
    ]
    return np.concatenate(outputs)


def stacked_batches(array, batch_size: int, fill: Any = "first"):
    """(num_batches, batch_size, ...): the array padded by `pad_rows(..., fill)` to a multiple of batch_size and cut
    into batches, for `jax.lax.scan` or `jax.lax.map` over batches inside a jitted program."""
    size = padded_size(array.shape[0], batch_size)
    return pad_rows(array, size, fill).reshape((size // batch_size, batch_size) + array.shape[1:])


def unstacked(stacked, num_rows: int):
    """The rows of stacked batches (num_batches, batch_size, ...) in order, padding dropped: (num_rows, ...)."""
    return stacked.reshape((-1,) + stacked.shape[2:])[:num_rows]


def even_splits(total: int, parts: int) -> list[int]:
    """`total` split into min(parts, total) run lengths that differ by at most one, the longer first (the sizes
    `numpy.array_split` gives); none for total 0."""
    if not total:
        return []
    parts = min(parts, total)
    size, longer = divmod(total, parts)
    return [size + 1] * longer + [size] * (parts - longer)


def auto_batch_size(n_train: int, n_val: int, batch_size: int | None = None) -> int:
    """`batch_size` (capped at `n_val`) if given, else as many validation points as fit in ~1 MiB."""
    if batch_size is None:
        batch_size = max(1, _CHUNK_ENTRIES // max(n_train, 1))
    return int(min(batch_size, max(n_val, 1)))


def sum_over_validation(
    point_values: Callable[..., tuple[jax.Array, Any]],
    per_point_args: tuple,
    n_train: int,
    batch_size: int,
) -> tuple[jax.Array, Any]:
    """Sum of ``point_values(*args_v)[0]`` over validation points v, with the per-point extras stacked.

    Values over a validation set are the *sum* of the per-point values (Shapley linearity, Wang et al. 2023, Thm 1).
    Validation points are `vmap`ped within a batch and batches are folded by `lax.scan`, so at most
    ``batch_size x N_train`` entries are alive at once; the N_val x N_train matrix never is. The last batch is
    padded with copies of the last point, whose values get weight 0.

    `per_point_args` is a tuple of arrays whose leading axis runs over validation points. `point_values` returns
    ``(values of shape (n_train,), extras)`` where `extras` is a pytree of scalars (e.g. the neighbour count of that
    validation point). Returns ``(sum, extras)`` with each extra of shape (N_val,). Call it inside `jax.jit` with a
    static `batch_size`.
    """
    n_val = per_point_args[0].shape[0]
    weights = stacked_batches(jnp.ones(n_val), batch_size, fill=0.0)
    args = tuple(stacked_batches(array, batch_size, fill="last") for array in per_point_args)

    def step(total, batch):
        batch_weights, batch_args = batch
        values, extras = jax.vmap(point_values)(*batch_args)
        return total + batch_weights @ values, extras

    init = jnp.zeros(n_train, dtype=jnp.result_type(float))
    total, extras = jax.lax.scan(step, init, (weights, args))
    return total, jax.tree_util.tree_map(lambda e: unstacked(e, n_val), extras)


__all__ = [
    "Batch",
    "auto_batch_size",
    "batches",
    "even_splits",
    "map_in_batches",
    "pad_rows",
    "padded_batches",
    "padded_size",
    "stacked_batches",
    "sum_over_validation",
    "unstacked",
]
