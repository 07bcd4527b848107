"""The package's one padded-batch helper (bayesval.batching): fixed batch shapes, padding that is never read, and
outputs in row order, whatever the batch size; checked against plain NumPy on small arrays."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from bayesval.batching import (
    Batch,
    batches,
    even_splits,
    map_in_batches,
    pad_rows,
    padded_batches,
    padded_size,
    stacked_batches,
    sum_over_validation,
    unstacked,
)


def test_batches_cover_every_row_once_in_order():
    assert list(batches(7, 3)) == [Batch(0, 0, 3), Batch(1, 3, 6), Batch(2, 6, 7)]
    assert [b.count for b in batches(6, 3)] == [3, 3] and list(batches(0, 4)) == []
    assert [padded_size(n, 4) for n in (0, 1, 4, 5)] == [0, 4, 4, 8]


@pytest.mark.parametrize("module", [np, jnp])
def test_pad_rows_repeats_the_first_or_last_row_or_a_constant_and_keeps_the_array_type(module):
    rows = module.arange(6).reshape(3, 2)
    first, last, zeros = (pad_rows(rows, 5, fill) for fill in ("first", "last", 0))
    np.testing.assert_array_equal(first, np.array([[0, 1], [2, 3], [4, 5], [0, 1], [0, 1]]))
    np.testing.assert_array_equal(last[3:], np.array([[4, 5], [4, 5]]))
    np.testing.assert_array_equal(zeros[3:], np.zeros((2, 2)))
    assert all(type(a) is type(rows) and a.dtype == rows.dtype for a in (first, last, zeros))
    assert pad_rows(rows, 3) is rows
    with pytest.raises(ValueError, match="cannot pad 3 rows to 2"):
        pad_rows(rows, 2)


def test_padded_batches_have_one_shape_and_map_in_batches_drops_the_padding():
    rows = np.arange(10.0)
    shapes = {padded.shape for _, padded in padded_batches(rows, 4, fill=-1.0)}
    assert shapes == {(4,)}
    seen = []

    def double(index, batch):
        seen.append((index, batch.copy()))
        return 2 * batch

    np.testing.assert_array_equal(map_in_batches(double, rows, 4, fill=-1.0), 2 * rows)
    assert [i for i, _ in seen] == [0, 1, 2]
    np.testing.assert_array_equal(seen[-1][1], [8.0, 9.0, -1.0, -1.0])


def test_stacked_batches_round_trip_and_sum_over_validation_ignores_the_padded_copies():
    values = jnp.arange(14.0).reshape(7, 2)
    stacked = stacked_batches(values, 3, fill="last")
    assert stacked.shape == (3, 3, 2)
    np.testing.assert_array_equal(stacked[-1, 1:], np.array([[12.0, 13.0]] * 2))
    np.testing.assert_array_equal(unstacked(stacked, 7), values)

    def point(x, w):
        return x * w, jnp.sum(x)

    x, w = np.arange(7.0 * 3).reshape(7, 3), np.linspace(1.0, 2.0, 7)
    for batch_size in (1, 3, 7):
        total, extras = jax.jit(sum_over_validation, static_argnums=(0, 2, 3))(point, (x, w), 3, batch_size)
        np.testing.assert_allclose(total, (x * w[:, None]).sum(axis=0), rtol=1e-12)
        np.testing.assert_array_equal(extras, x.sum(axis=1))


def test_even_splits_are_numpy_array_split_sizes():
    for total in range(30):
        for parts in range(1, 12):
            expected = [len(c) for c in np.array_split(np.arange(total), min(parts, total))] if total else []
            assert even_splits(total, parts) == expected
