"""How a batch of coalition posteriors is laid out: one key per row and the row axis sharded over every local
device; rows are padded to fixed sizes by the package's one padded-batch helper, `bayesval.batching`.

A row is one (coalition, repeat) posterior. Its key is derived from the row alone (`coalition_key`), and
every sampler maps rows independently, so a posterior does not depend on which batch, chunk or device
it lands in: padding, chunking and sharding change the speed, never the values.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec


def coalition_key(key: jax.Array, code: int, repeat: int) -> jax.Array:
    """The key of coalition `code` (its bitmask) in repeat `repeat`."""
    return jax.random.fold_in(jax.random.fold_in(key, code), repeat)


def row_keys(key: jax.Array, num_rows: int) -> jax.Array:
    """One key per row: `key` itself if it already holds num_rows keys, else num_rows keys split from it."""
    key = jnp.asarray(key) if not isinstance(key, jax.Array) else key
    if key.shape == (num_rows,):
        return key
    if key.shape != ():
        raise ValueError(f"need one key or one key per coalition row ({num_rows}), got keys of shape {key.shape}")
    return jax.random.split(key, num_rows)


def shard_rows(*arrays):
    """Place arrays with the row axis (leading) split over all local devices; unchanged on one device.
    The row count must be a multiple of the device count (`bayesval.batching.padded_size`)."""
    devices = jax.local_devices()
    if len(devices) == 1:
        return arrays if len(arrays) > 1 else arrays[0]
    sharding = NamedSharding(Mesh(np.asarray(devices), ("rows",)), PartitionSpec("rows"))
    placed = tuple(jax.device_put(a, sharding) for a in arrays)
    return placed if len(placed) > 1 else placed[0]
