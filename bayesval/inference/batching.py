"""How a batch of coalition posteriors is laid out: one key per row and the row axis over the global device mesh
(`jax.devices()`, every device of every process after `jax.distributed.initialize()`); rows are padded to fixed
sizes by the package's one padded-batch helper, `bayesval.batching`.

A row is one (coalition, repeat) posterior. Its key is derived from the row alone (`coalition_keys`), and
every sampler maps rows independently, so a posterior does not depend on which batch, chunk, device or process
it lands in: padding, chunking and sharding change the speed, never the values.

Across processes (docs/multihost.md) each process samples the block of a batch that the global mesh puts on its
own devices (`process_block`), sharded over those devices (`shard_rows`), and the per-row outputs of every
block are gathered into every process (`gather_rows`): the samplers run process-local programs, with no
collective inside their loops, and the processes meet once per batch. `same_in_every_process` checks that
every process values the same game, which the gathered rows assume.

On a CPU, JAX gives a process one device, and XLA runs one device's sweep program on about one and a half cores.
`use_cpu_cores` gives the CPU backend one device per core before it starts, so that the rows split over the cores as
they split over GPUs: the demo's valuation call ran in 6.9 s against 10.4 s on 2 cores, its draws the same to the
last bit (docs/benchmarks.md, "Two CPU devices, one sweep program")."""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from functools import partial
from typing import TypeVar

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import multihost_utils
from jax.sharding import Mesh, NamedSharding, PartitionSpec

RowBlocks = TypeVar("RowBlocks", bound=tuple)


WIDE_CODES = (0, 0)  # folded into the key before a code past 32 bits: the empty coalition's code, then 0


def coalition_keys(key: jax.Array, codes, repeats) -> jax.Array:
    """The keys (R,) of coalitions `codes` (their bitmasks, any number of parties) in repeats `repeats`, one per
    (code, repeat) pair, derived in one program: `key` folded with the code (a code below 2^32: its value; beyond:
    WIDE_CODES, then its low and its high 32 bits), then with the repeat. So every row key is one path of folds
    from `key` that is no prefix of another row's: a code below 2^32 is never 0 (the empty coalition is not
    sampled), and the codes past 32 bits start on the branch of 0 (before, a code whose low bits are 0 passed
    through the key that other coalitions' rows and reruns are folded from)."""
    codes = np.asarray(codes, np.uint64).reshape(-1)
    low, high = (codes & np.uint64(0xFFFFFFFF)).astype(np.uint32), (codes >> np.uint64(32)).astype(np.uint32)
    return _coalition_keys(key, low, high, np.asarray(repeats, np.uint32).reshape(-1))


@jax.jit
@partial(jax.vmap, in_axes=(None, 0, 0, 0))
def _coalition_keys(key: jax.Array, low, high, repeat) -> jax.Array:
    def wide():
        branch = jax.random.fold_in(jax.random.fold_in(key, WIDE_CODES[0]), WIDE_CODES[1])
        return jax.random.fold_in(jax.random.fold_in(branch, low), high)

    key = jax.lax.cond(high > 0, wide, lambda: jax.random.fold_in(key, low))
    return jax.random.fold_in(key, repeat)


def coalition_key(key: jax.Array, code: int, repeat: int) -> jax.Array:
    """The key of coalition `code` (its bitmask) in repeat `repeat` (`coalition_keys` of one row)."""
    return coalition_keys(key, [code], [repeat])[0]


def row_keys(key: jax.Array, num_rows: int) -> jax.Array:
    """One key per row: `key` itself if it already holds num_rows keys, else num_rows keys split from it."""
    key = jnp.asarray(key) if not isinstance(key, jax.Array) else key
    if key.shape == (num_rows,):
        return key
    if key.shape != ():
        raise ValueError(f"need one key or one key per coalition row ({num_rows}), got keys of shape {key.shape}")
    return jax.random.split(key, num_rows)


def shard_rows(*arrays):
    """Place arrays with the row axis (leading) split over this process's devices (its block of the global mesh,
    `process_block`); unchanged on one device. The row count must be a multiple of the local device count
    (`bayesval.batching.padded_size`)."""
    devices = jax.local_devices()
    if len(devices) == 1:
        return arrays if len(arrays) > 1 else arrays[0]
    sharding = NamedSharding(Mesh(np.asarray(devices), ("rows",)), PartitionSpec("rows"))
    placed = tuple(jax.device_put(a, sharding) for a in arrays)
    return placed if len(placed) > 1 else placed[0]


def on_rows_of(row_keys: jax.Array) -> Callable:
    """What lays a tree of per-row arrays (leading axis: rows, or rows times chains) out as the row keys are: split by
    rows over the devices where the keys are (`shard_rows`), unchanged on one device. A sampler whose states go from
    one call of its program to the next places them so before every call, and the program compiles once: left to
    XLA's propagation, states that came back in other layouts compiled the Gibbs sweep program five times over two
    CPU devices and NUTS's three times (docs/benchmarks.md, "Two CPU devices, one sweep program"). Arrays are placed
    and `jax.ShapeDtypeStruct`s given the sharding, so that a program compiled ahead is the one the calls find."""
    sharding = getattr(row_keys, "sharding", None)
    if not isinstance(sharding, NamedSharding):
        return lambda tree: tree

    def place(leaf):
        if isinstance(leaf, jax.Array):
            return jax.device_put(leaf, sharding)
        return jax.ShapeDtypeStruct(leaf.shape, leaf.dtype, sharding=sharding)

    return lambda tree: jax.tree.map(place, tree)


FORCED_DEVICES = re.compile(r"--xla_force_host_platform_device_count=\d+")  # a count XLA_FLAGS chose


def usable_cores() -> int:
    """The cores this process may run on (its CPU affinity where the system tells it, else every core)."""
    affinity = getattr(os, "sched_getaffinity", None)
    return len(affinity(0)) if affinity is not None else os.cpu_count() or 1


def use_cpu_cores() -> int:
    """Give JAX's CPU backend one device per core this process may use (`jax_num_cpu_devices`), so that the rows of a
    sampler call, split over the devices (`shard_rows`), run on every core at once; returns the CPU devices the
    process has. Left as it is where the backend has started (the count is read when it starts), where the count
    was chosen already (`jax_num_cpu_devices`, or XLA_FLAGS' --xla_force_host_platform_device_count), or where
    JAX runs on another platform (JAX_PLATFORMS).

    For the Gibbs sampler's programs, which call no LAPACK kernel (tests/test_linalg.py): NUTS models' programs call
    LAPACK, whose batched kernels hung the process with two CPU devices (docs/architecture.md), so a process that
    samples a NUTS model keeps one. Rows are padded to a multiple of the devices (`bayesval.batching.padded_size`),
    and no value depends on the layout."""
    platforms = os.environ.get("JAX_PLATFORMS", "")
    forced = FORCED_DEVICES.search(os.environ.get("XLA_FLAGS", ""))
    chosen = jax.config.jax_num_cpu_devices > 0 or forced is not None
    if not chosen and platforms in ("", "cpu"):
        try:
            jax.config.update("jax_num_cpu_devices", usable_cores())
        except RuntimeError:  # the backend has started: its devices are fixed
            pass
    return len(jax.devices("cpu"))


def row_sharding() -> NamedSharding:
    """The row axis (leading) split over the global device mesh, `jax.devices()` in order."""
    return NamedSharding(Mesh(np.asarray(jax.devices()), ("rows",)), PartitionSpec("rows"))


def process_block(num_rows: int) -> slice:
    """The rows of a batch of num_rows rows that the global mesh (`row_sharding`) puts on this process's devices:
    one contiguous block, as many rows as every other process; every row when there is one process. num_rows must
    be a multiple of the global device count (`bayesval.batching.padded_size(rows, jax.device_count())`)."""
    devices = jax.devices()
    if num_rows % len(devices):
        raise ValueError(f"{num_rows} rows do not split evenly over {len(devices)} devices: pad them first")
    mine = [i for i, device in enumerate(devices) if device.process_index == jax.process_index()]
    if mine != list(range(mine[0], mine[0] + len(mine))) or len(mine) * jax.process_count() != len(devices):
        raise ValueError(
            f"process {jax.process_index()} holds devices {mine} of {len(devices)}: rows split over processes "
            "need the same number of devices in every process, in one run of the global device order"
        )
    per_device = num_rows // len(devices)
    return slice(mine[0] * per_device, (mine[-1] + 1) * per_device)


def gather_rows(blocks: RowBlocks) -> RowBlocks:
    """Per-row outputs of this process's block (`process_block`), a NamedTuple of arrays each (block rows, ...)
    or None, as the whole batch's rows in every process, on the host (NumPy), in a NamedTuple of the same type: each
    block placed where the global mesh put it (`jax.make_array_from_process_local_data`) and the global array
    gathered (`jax.experimental.multihost_utils.process_allgather`), field by field in order. One process: its
    blocks, as NumPy arrays."""
    if jax.process_count() == 1:
        return type(blocks)(*(None if block is None else np.asarray(block) for block in blocks))
    sharding = row_sharding()
    return type(blocks)(
        *(
            None
            if block is None
            else np.asarray(
                multihost_utils.process_allgather(
                    jax.make_array_from_process_local_data(sharding, np.asarray(block)), tiled=True
                )
            )
            for block in blocks
        )
    )


def same_in_every_process(what: str, digest: bytes) -> None:
    """Raise a clear error unless every process passed the same `digest` (e.g. a SHA-256 of the game and the key):
    processes that split one valuation must value the same releases, settings and key. Nothing with one process."""
    if jax.process_count() == 1:
        return
    mine = np.frombuffer(digest, np.uint8)
    every = np.asarray(multihost_utils.process_allgather(mine))
    differing = [int(p) for p in np.flatnonzero((every != every[0]).any(axis=1))]
    if differing:
        raise ValueError(
            f"processes {differing} have another {what} than process 0: processes that split one valuation must "
            "pass the same releases (the same files, or parties with the same noise_seed), settings and key"
        )
