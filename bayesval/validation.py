"""Argument checks that turn bad input into clear errors.

Every check names the argument, shows the bad value and says what would be valid, and raises from
here rather than from deep inside numpy or JAX: TypeError for a value of the wrong kind (a string or
a bool where a number belongs, a float where a count belongs), ValueError for a value of the right
kind out of range (NaN, inf, <= 0, a shape that does not fit). `bool` is not a number here: `True`
for an epsilon or a sample count is a mistake, not a 1.
"""

from __future__ import annotations

import math
import numbers
import sys

import jax
import jax.numpy as jnp
import numpy as np


def show_value(value) -> str:
    """`value` as shown in an error: its repr, shortened."""
    try:
        text = repr(value)
    except ValueError:  # an int too long to print
        return f"<{type(value).__name__} too long to print>"
    return text if len(text) <= 80 else text[:77] + "..."


def describe_value(value) -> str:
    """`value` as shown in an error: its repr (shortened) and its type."""
    return f"{show_value(value)} ({type(value).__name__})"


def _is_bool(value) -> bool:
    return isinstance(value, (bool, np.bool_)) or (
        isinstance(value, np.ndarray) and value.ndim == 0 and value.dtype.kind == "b"
    )


def to_float(name: str, value) -> float:
    """Type check only: `value` must be a real number (int, float, a numpy integer or floating scalar,
    or a 0-d numeric array), not a bool, a string or None. Returns it as a float, which may be NaN or
    +-inf: the caller checks the range and words that error itself."""
    if _is_bool(value):
        raise TypeError(f"{name} must be a number, got {describe_value(value)}")
    kind = getattr(getattr(value, "dtype", None), "kind", None)
    numeric_0d = getattr(value, "shape", None) == () and kind in ("i", "u", "f")  # a 0-d numpy or JAX array
    if not (isinstance(value, numbers.Real) or numeric_0d):
        raise TypeError(f"{name} must be a number, got {describe_value(value)}")
    try:
        return float(value)
    except OverflowError:  # a python int beyond float64
        return math.inf if value > 0 else -math.inf


def check_real(name: str, value) -> float:
    """`value` must be a finite real number (not a bool); returned as a float."""
    number = to_float(name, value)
    if not math.isfinite(number):
        raise ValueError(f"{name} must be a finite number, got {show_value(value)}")
    return number


def check_positive(name: str, value) -> float:
    """`value` must be a finite number > 0."""
    number = to_float(name, value)
    if not (math.isfinite(number) and number > 0):
        raise ValueError(f"{name} must be a finite number > 0, got {show_value(value)}")
    return number


def check_non_negative(name: str, value) -> float:
    """`value` must be a finite number >= 0."""
    number = to_float(name, value)
    if not (math.isfinite(number) and number >= 0):
        raise ValueError(f"{name} must be a finite number >= 0, got {show_value(value)}")
    return number


def check_probability(name: str, value) -> float:
    """`value` must lie in the open interval (0, 1)."""
    number = to_float(name, value)
    if not 0 < number < 1:
        raise ValueError(f"{name} must lie in (0, 1), got {show_value(value)}")
    return number


def check_int(name: str, value, minimum: int | None = None, maximum: int | None = None) -> int:
    """`value` must be an integer (a python int or a numpy integer, not a bool and not a float such as
    3.0) within [minimum, maximum] where given; returned as a python int."""
    if minimum is not None and maximum is not None:
        valid = f"an integer in [{minimum}, {maximum}]"
    elif minimum is not None:
        valid = f"an integer >= {minimum}"
    elif maximum is not None:
        valid = f"an integer <= {maximum}"
    else:
        valid = "an integer"
    integral = isinstance(value, (numbers.Integral, np.integer)) or (
        isinstance(value, np.ndarray) and value.ndim == 0 and value.dtype.kind in "iu"
    )
    if _is_bool(value) or not integral:
        hint = f" (write {int(value)})" if isinstance(value, float) and value.is_integer() else ""
        raise TypeError(f"{name} must be {valid}, got {describe_value(value)}{hint}")
    number = int(value)
    if (minimum is not None and number < minimum) or (maximum is not None and number > maximum):
        raise ValueError(f"{name} must be {valid}, got {number}")
    return number


# The largest count of sampler iterations, chains or moves: such counts become JAX loop bounds and array
# sizes, which must fit a 32-bit index (a larger one fails deep inside JAX, or never finishes).
MAX_COUNT = 2**31 - 1


def check_count(name: str, value, minimum: int = 0) -> int:
    """A count of sampler iterations, chains or moves: an integer >= minimum (as `check_int`), at most MAX_COUNT."""
    number = check_int(name, value, minimum=minimum)
    if number > MAX_COUNT:
        raise ValueError(
            f"{name} must be an integer >= {minimum} and at most 2^31 - 1 (it becomes a JAX loop bound or array "
            f"size), got {show_value(value)}"
        )
    return number


def check_bool(name: str, value) -> bool:
    """`value` must be True or False (a python or numpy bool; 0 and 1 are not accepted)."""
    if not _is_bool(value):
        raise TypeError(f"{name} must be True or False, got {describe_value(value)}")
    return bool(value)


_SEED_RANGE = (-(2**63), 2**63 - 1)


def check_seed(name: str, seed) -> int:
    """An int seed in [-2^63, 2^63) (python or numpy integer, not a bool), checked without making a key: nothing
    here starts JAX's backend, whose CPU devices a command may still choose (`bayesval.cli`)."""
    low, high = _SEED_RANGE
    return check_int(name, seed, minimum=low, maximum=high)


def check_key(name: str, key) -> jax.Array:
    """A single JAX PRNG key from `key`: an int seed (python or numpy integer in [-2^63, 2^63), not a
    bool) becomes jax.random.key(seed); a typed key (jax.random.key) of shape () is returned as is; a
    legacy raw key (jax.random.PRNGKey: uint32 of shape (2,)) is wrapped as a typed key with the same
    random stream. Anything else, including a batch of keys, is refused."""
    integer_array = isinstance(key, np.ndarray) and key.shape == () and key.dtype.kind in "iu"
    if _is_bool(key) or isinstance(key, (numbers.Integral, np.integer)) or integer_array:
        return jax.random.key(check_seed(f"{name} (an int seed or a jax.random.key)", key))
    dtype = getattr(key, "dtype", None)
    shape = tuple(getattr(key, "shape", ()))
    if dtype is not None and jax.dtypes.issubdtype(dtype, jax.dtypes.prng_key):
        if shape != ():
            raise ValueError(f"{name} must be a single jax.random.key, got a batch of keys of shape {shape}")
        return key
    try:
        raw = dtype is not None and np.dtype(dtype) == np.uint32 and shape == (2,)
    except TypeError:
        raw = False
    if raw:
        return jax.random.wrap_key_data(jnp.asarray(key))
    raise TypeError(
        f"{name} must be an int seed or a jax.random.key(seed), got {describe_value(key)}"
        + (f" of dtype {dtype} and shape {shape}" if dtype is not None else "")
    )


def _as_array(name: str, array, what: str, dtype=None) -> np.ndarray:
    """np.asarray(array, dtype), with ragged nesting turned into an error naming `name`."""
    try:
        return np.asarray(array, dtype=dtype)
    except ValueError as error:
        raise ValueError(
            f"{name} must be a rectangular array of {what}; its rows have different lengths ({error})"
        ) from None


def _first_index(mask: np.ndarray) -> list[int]:
    return np.argwhere(mask)[0].tolist()


def check_real_array(name: str, array, ndim: int) -> np.ndarray:
    """`array` as float64 of the given rank, whose entries may be NaN or +-inf (the caller checks their range).

    Integers and bools are converted; strings, complex numbers, dates and objects that are not all
    real numbers (None, say) are a TypeError; ragged nesting and the wrong rank a ValueError. Each
    error names `name` and, for a bad entry, its index.
    """
    raw = _as_array(name, array, "numbers")
    kind = raw.dtype.kind
    if kind == "O":
        flat = raw.reshape(-1)
        bad = [i for i, item in enumerate(flat) if not isinstance(item, (numbers.Real, np.bool_))]
        if bad:
            where = list(np.unravel_index(bad[0], raw.shape)) if raw.ndim else []
            raise TypeError(
                f"{name} must hold numbers, got {describe_value(flat[bad[0]])} at index {[int(i) for i in where]}"
            )
    elif kind in "US":
        first = raw.reshape(-1)[0].item() if raw.size else ""
        raise TypeError(f"{name} must hold numbers, got strings (dtype {raw.dtype}), e.g. {first!r}")
    elif kind == "c":
        raise TypeError(f"{name} must hold real numbers, got complex numbers (dtype {raw.dtype})")
    elif kind not in "biuf":
        raise TypeError(f"{name} must hold numbers, got an array of dtype {raw.dtype}")
    if raw.ndim != ndim:
        raise ValueError(f"{name} must be a {ndim}-D array, got shape {raw.shape}")
    try:
        return raw.astype(np.float64)
    except OverflowError:  # python ints beyond float64 in an object array
        raise ValueError(f"{name} has entries too large for float64; rescale it before valuation") from None


def check_finite_array(
    name: str, array, ndim: int, remedy: str = "remove or impute them before valuation"
) -> np.ndarray:
    """`array` as float64 of the given rank (as `check_real_array`), with every entry a finite number: NaN or inf
    entries are a ValueError naming `name`, the first bad index and the `remedy`."""
    values = check_real_array(name, array, ndim)
    bad = ~np.isfinite(values)
    if bad.any():
        raise ValueError(
            f"{name} has {int(bad.sum())} non-finite entries (first at index {_first_index(bad)}); {remedy}"
        )
    return values


def check_magnitude(name: str, values: np.ndarray, bound: float, why: str) -> np.ndarray:
    """`values` (finite), or a ValueError naming `name`, the first entry above `bound` in absolute value, its index,
    the bound and `why` the arithmetic behind it needs the bound (inputs that would overflow it to inf or NaN)."""
    large = np.abs(values) > bound
    if large.any():
        index = _first_index(large)
        raise ValueError(
            f"{name} has {int(large.sum())} entries above {bound:g} in absolute value (first {values[tuple(index)]:g} "
            f"at index {index}): {why}; rescale them"
        )
    return values


def check_count_array(name: str, array, ndim: int = 1, maximum: int | None = None) -> np.ndarray:
    """`array` as int64 of the given rank, every entry a count: a whole number >= 0 (and <= maximum where given).

    Integer arrays pass, and so do float arrays of whole numbers (what `np.linspace` or a saved file gives); a
    fraction, NaN or inf, a negative entry or one above `maximum` is a ValueError naming `name` and the first bad
    index; bools and everything `check_real_array` refuses are a TypeError.
    """
    raw = _as_array(name, array, "counts")
    if raw.dtype.kind == "b":
        raise TypeError(f"{name} must hold counts (whole numbers >= 0), got booleans")
    values = check_real_array(name, raw, ndim)
    limit = math.inf if maximum is None else maximum
    valid = f"whole numbers in [0, {maximum}]" if maximum is not None else "whole numbers >= 0"
    bad = ~(np.isfinite(values) & (values == np.round(values)) & (values >= 0) & (values <= limit))
    if bad.any():
        index = _first_index(bad)
        entry = raw[tuple(index)]
        raise ValueError(
            f"{name} must hold counts ({valid}), got "
            f"{show_value(entry.item() if isinstance(entry, np.generic) else entry)} "
            f"at index {index}" + (f" ({int(bad.sum())} such entries)" if bad.sum() > 1 else "")
        )
    return values.astype(np.int64)


def row_norms(X) -> np.ndarray:
    """Euclidean norm of each row of `X` (of the last axis), without overflow or underflow.

    Each row is divided by its largest |entry| before squaring, so rows of 1e200 get ~1.4e200 (not
    inf) and rows of 1e-200 get ~1.4e-200 (not 0). All-zero rows get 0, rows with an inf entry inf,
    rows with a NaN entry NaN.
    """
    X = np.asarray(X, dtype=np.float64)
    if X.ndim == 0:
        raise ValueError(f"row_norms needs an array with at least one axis, got shape {X.shape}")
    magnitude = np.abs(X)
    scale = np.max(magnitude, axis=-1, initial=0.0)
    with np.errstate(invalid="ignore"):
        safe = np.where((scale > 0) & np.isfinite(scale), scale, 1.0)
        norms = safe * np.sqrt(np.sum(np.square(X / safe[..., None]), axis=-1))
    norms = np.where(np.isinf(scale), np.inf, norms)
    return np.where(np.isnan(magnitude).any(axis=-1), np.nan, norms)


def check_labels(name: str, y, n_rows: int, rows_name: str = "X") -> np.ndarray:
    """Classification labels: a non-empty 1-D array with one label per row of `rows_name` (`n_rows`
    of them), numbers (finite: a NaN label must not silently become a class of its own) or strings,
    not both. Returned as an array of the labels' own dtype."""
    # a list goes through the object-array checks, so that [1, "a"] or [1, None] are errors rather
    # than numpy's silent conversion to the strings "1" and "None"
    labels = _as_array(name, y, "labels", dtype=None if hasattr(y, "dtype") else object)
    if labels.ndim != 1 or len(labels) != n_rows:
        raise ValueError(
            f"{name} must be 1-D with one label per row of {rows_name} ({n_rows} labels), got shape {labels.shape}"
        )
    if len(labels) == 0:
        raise ValueError(f"{name} is empty: valuation needs at least one labelled row")
    kind = labels.dtype.kind
    if kind == "O":
        is_text = np.array([isinstance(item, (str, np.str_)) for item in labels])
        is_number = np.array([isinstance(item, (numbers.Real, np.bool_)) for item in labels])
        neither = ~(is_text | is_number)
        if neither.any():
            index = int(np.flatnonzero(neither)[0])
            raise TypeError(
                f"{name} must hold numbers or strings, got {describe_value(labels[index])} at index {index}"
            )
        if is_text.any() and is_number.any():
            index = int(np.flatnonzero(is_text != is_text[0])[0])
            raise TypeError(
                f"{name} mixes strings and numbers (label {labels[0]!r} at index 0, {labels[index]!r} at "
                f"index {index}): use one kind of label"
            )
        labels = np.array(labels.tolist())
        kind = labels.dtype.kind
    if kind == "c":
        raise TypeError(f"{name} must hold real numbers or strings, got complex numbers (dtype {labels.dtype})")
    if kind not in "biufUS":
        raise TypeError(f"{name} must hold numbers or strings, got an array of dtype {labels.dtype}")
    if kind == "f":
        bad = ~np.isfinite(labels)
        if bad.any():
            index = int(np.flatnonzero(bad)[0])
            raise ValueError(
                f"{name} has {int(bad.sum())} non-finite labels (first {labels[index].item()!r} at index {index}); "
                "a NaN or inf label would become a class of its own: drop those rows or fix their labels"
            )
    return labels


__all__ = [
    "MAX_COUNT",
    "check_bool",
    "check_count",
    "check_count_array",
    "check_finite_array",
    "check_int",
    "check_key",
    "check_labels",
    "check_non_negative",
    "check_positive",
    "check_probability",
    "check_real",
    "check_real_array",
    "describe_value",
    "row_norms",
    "show_value",
    "to_float",
]


def user_stacklevel() -> int:
    """The `stacklevel` at which a warning issued by the calling function points at the first frame outside
    bayesval: the user's own line, however deep in the package the warning is raised."""
    frame, level = sys._getframe(1), 1
    while frame is not None and frame.f_globals.get("__name__", "").split(".")[0] == "bayesval":
        frame, level = frame.f_back, level + 1
    return level
