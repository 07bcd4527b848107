"""What a Python value is made of, as digests that are the same in every process: what a fingerprint reads of a
utility or a model beyond its name, so that a run resumes only the game it sampled (docs/architecture.md,
"One resume mechanism"; docs/games.md, "Resume and merge").

What is read:
* an array, or a pytree of arrays and numbers (a prior's parameters, a tuple of costs) that holds no list, dict or
  set, by each leaf's dtype, shape and bytes (`array_digest`);
* a function by its code (bytecode, the names it uses, its constants and nested code; a set constant in sorted order,
  since a set's order changes with the process's hash seed), its defaults and what it closes over; a
  `functools.partial` by its function and arguments; a wrapper (`jax.jit`, `functools.wraps`) by what it wraps;
* an array-like object of one numeric type (a pandas table, a tensor) as an array; any other object by its class and
  its public attributes (a bound method by its object and its method's name); a tuple or a frozenset by its items, a
  string or a number by its value, a module or a class by its name.

What is not read, and why:
* an object's private attributes and a function's closure variables whose names start with an underscore, and what
  a `functools.cached_property` kept: state derived or cached as it runs, which would tell a utility from itself
  after use (the same object resumed in one process);
* the items of a list, a dict or a set (read as its type alone): a utility may fill one as it runs (a cache, a log
  of calls), so data it is made of belongs in arrays or tuples;
* an object's bare numbers: a utility may count with them (`fallbacks`), and a number that changes what it computes
  changes its values on every coalition, which the probe coalitions of `bayesval.games.fingerprint` see;
* the globals a function reads: two functions that differ only there are told apart by their values alone;
* an object deeper than `MAX_DEPTH` objects down, met again inside itself, or that cannot be read: its class's name.
Bytecode differs between Python versions, so a function's digest holds within one.
"""

from __future__ import annotations

import functools
import hashlib
import types
from dataclasses import fields, is_dataclass

import jax
import numpy as np

SIMPLE = (int, float, str, bool, type(None))  # values read by their repr
NUMBERS = (int, float, np.number, np.bool_)  # an object attribute of these is not read
MUTABLE = (list, dict, set)  # read as their type alone (a utility may fill them as it runs)
MAX_DEPTH = 4  # objects read inside objects; deeper ones by their class's name


def content_digest(value) -> bytes:
    """The digest (32 bytes) of what `value` is made of (the module's docstring); an array or a pytree of them gives
    `array_digest`'s."""
    return _Reader().digest(value, 0)


def content_parts(value) -> dict[str, str]:
    """What `value` is made of, part by part, each part's digest in hex, for an error to name what differs: a
    function's 'code', 'defaults' and 'closure <name>' of each variable it closes over; an object's (a bound method's,
    a callable object's) 'class' and 'attribute <name>' of each public attribute read, and a bound method's
    'method'; anything else one part, 'value'."""
    return {name: digest.hex() for name, digest in _Reader().parts(value, 0).items()}


def array_digest(value) -> bytes:
    """An array's, or a pytree of arrays' and numbers', digest: each leaf's dtype, shape and bytes, in leaf order."""
    digest = hashlib.sha256()
    for leaf in jax.tree_util.tree_leaves(value):
        array = np.asarray(_key_data(leaf))
        digest.update(repr((array.dtype.str, array.shape)).encode() + np.ascontiguousarray(array).tobytes())
    return digest.digest()


def is_array_tree(value) -> bool:
    """Whether `value` is an array, or a pytree whose every leaf is a numeric array or a number and which holds no
    list, dict or set (`MUTABLE`, read as their type alone)."""
    leaves = jax.tree_util.tree_leaves(value, is_leaf=lambda node: isinstance(node, MUTABLE))
    return all(isinstance(leaf, (np.ndarray, jax.Array, np.generic, int, float)) for leaf in leaves) and all(
        np.asarray(_key_data(leaf)).dtype != object for leaf in leaves
    )


def _key_data(leaf):
    """A typed PRNG key array's bits (NumPy cannot hold the keys themselves); any other leaf as it is."""
    if isinstance(leaf, jax.Array) and jax.dtypes.issubdtype(leaf.dtype, jax.dtypes.prng_key):
        return jax.random.key_data(leaf)
    return leaf


def stable_repr(value) -> bytes:
    """A value's repr where it names no memory address (which differs between processes), else its class's name."""
    shown = repr(value)
    return (type(value).__qualname__ if " at 0x" in shown else shown).encode()


def _hashed(*pieces: bytes) -> bytes:
    digest = hashlib.sha256()
    for piece in pieces:
        digest.update(len(piece).to_bytes(8, "little") + piece)
    return digest.digest()


class _Reader:
    """One reading of a value: the objects on the path from the value down (a cycle is read as its class's name)."""

    def __init__(self) -> None:
        self.path: set[int] = set()

    def digest(self, value, depth: int) -> bytes:
        try:
            return self._digest(value, depth)
        except Exception:  # a value that cannot be read (an attribute NumPy cannot hold) is named by its class
            return _hashed(b"unread", _class_name(value))

    def _digest(self, value, depth: int) -> bytes:
        if isinstance(value, SIMPLE):
            return _hashed(b"simple", repr(value).encode())
        if isinstance(value, MUTABLE):
            return _hashed(b"mutable", _class_name(value))
        if is_array_tree(value):
            return array_digest(value)
        parts = self._object_parts(value, depth)
        return _hashed(*(name.encode() + digest for name, digest in sorted(parts.items())))

    def parts(self, value, depth: int) -> dict[str, bytes]:
        if isinstance(value, SIMPLE + MUTABLE) or is_array_tree(value):
            return {"value": self.digest(value, depth)}
        return self._object_parts(value, depth)

    def _object_parts(self, value, depth: int) -> dict[str, bytes]:
        """The parts of a value that is neither simple, mutable nor an array tree (a cycle: its class's name)."""
        if id(value) in self.path:
            return {"value": _hashed(b"cycle", _class_name(value))}
        self.path.add(id(value))
        try:
            return self._parts(value, depth)
        finally:
            self.path.discard(id(value))

    def _parts(self, value, depth: int) -> dict[str, bytes]:
        if isinstance(value, functools.partial):
            arguments = (value.args, tuple(sorted(value.keywords.items())))
            return {"function": self.digest(value.func, depth), "arguments": self.digest(arguments, depth)}
        if isinstance(value, types.FunctionType):
            return self._function_parts(value, depth)
        if isinstance(value, types.MethodType):
            method = _hashed(b"method", value.__func__.__qualname__.encode())
            return {"method": method, **self.parts(value.__self__, depth)}
        wrapped = getattr(value, "__wrapped__", None)
        if callable(value) and wrapped is not None and wrapped is not value:
            return self.parts(wrapped, depth)
        if isinstance(value, (types.ModuleType, type, types.BuiltinFunctionType)):
            return {"value": _hashed(b"named", getattr(value, "__module__", "").encode(), _name(value))}
        if isinstance(value, tuple):
            return {"value": _hashed(b"sequence", *(self.digest(item, depth) for item in value))}
        if isinstance(value, frozenset):
            return {"value": _hashed(b"set", *sorted(self.digest(item, depth) for item in value))}
        if isinstance(value, np.ndarray):  # of objects
            return {"value": _hashed(b"objects", repr(value.shape).encode(), self.digest(value.tolist(), depth))}
        array = _as_array(value)
        if array is not None:  # a table or a tensor of one numeric type
            return {"value": array_digest(array)}
        return self._attribute_parts(value, depth)

    def _function_parts(self, function: types.FunctionType, depth: int) -> dict[str, bytes]:
        parts = {"code": _code_digest(function.__code__)}
        if function.__defaults__ or function.__kwdefaults__:
            parts["defaults"] = self.digest((function.__defaults__, function.__kwdefaults__), depth)
        for name, cell in zip(function.__code__.co_freevars, function.__closure__ or ()):
            if name.startswith("_"):
                continue
            try:
                contents = cell.cell_contents
            except ValueError:  # an empty cell
                continue
            parts[f"closure {name}"] = self.digest(contents, depth)
        return parts

    def _attribute_parts(self, value, depth: int) -> dict[str, bytes]:
        """An object's class (and its own name, where it has one: a ufunc's) and its public attributes but bare
        numbers and cached properties, each digested; past MAX_DEPTH, its class alone."""
        parts = {"class": _hashed(b"class", _class_name(value), _name(value))}
        if depth >= MAX_DEPTH:
            return parts
        return parts | {
            f"attribute {name}": self.digest(attribute, depth + 1)
            for name, attribute in sorted(_attributes(value).items())
            if not name.startswith("_")
            and not isinstance(attribute, NUMBERS)
            and not isinstance(getattr(type(value), name, None), functools.cached_property)
        }


def _as_array(value) -> np.ndarray | None:
    """An array-like object (a pandas table, a tensor: anything with `__array__`) as a NumPy array of numbers, or
    None where it is not one, or holds objects (a table of mixed types: read by its attributes)."""
    if not hasattr(value, "__array__"):
        return None
    try:
        array = np.asarray(value)
    except Exception:  # an array-like that will not convert
        return None
    return None if array.dtype == object else array


def _attributes(value) -> dict:
    """An object's attributes: its dataclass fields, its slots and its instance dictionary."""
    found = dict(getattr(value, "__dict__", {}) or {})
    if is_dataclass(value):
        found |= {field.name: getattr(value, field.name) for field in fields(value) if hasattr(value, field.name)}
    for cls in type(value).__mro__:
        for name in getattr(cls, "__slots__", ()):
            if isinstance(name, str) and hasattr(value, name):
                found.setdefault(name, getattr(value, name))
    return found


def _code_digest(code: types.CodeType) -> bytes:
    """A code object's bytecode, names and constants (nested code by its own digest, a set in sorted order)."""
    digest = hashlib.sha256(code.co_code + repr(code.co_names).encode())
    for constant in code.co_consts:
        if isinstance(constant, types.CodeType):
            digest.update(_code_digest(constant))
        elif isinstance(constant, frozenset):
            digest.update(repr(sorted(map(repr, constant))).encode())
        else:
            digest.update(repr(constant).encode())
    return digest.digest()


def _name(value) -> bytes:
    return str(getattr(value, "__qualname__", None) or getattr(value, "__name__", None) or "").encode()


def _class_name(value) -> bytes:
    return f"{type(value).__module__}.{type(value).__qualname__}".encode()
