"""Gymnasium spaces across the process boundary as raw array bytes, with no pickle.

A PettingZoo game's observation and action spaces are sent once at setup as JSON (``describe_space``);
after that every observation and action is only the bytes of its leaves, walked in the space's order,
their dtypes and shapes coming from the schema. Pickle is never used: a cell must not be able to run
code in the host by what it sends, and the host's bytes stay plain data.

Observation payload (host -> cell, both trusted, exact): per leaf, one tag byte, then

- ``EXACT``: an ndarray of the schema's dtype and shape -- its raw C-order bytes;
- ``NP_SCALAR``: a numpy scalar of the schema's dtype for a shape-``()`` leaf -- its raw bytes;
- ``PY_INT`` / ``PY_FLOAT`` / ``PY_BOOL``: a Python int (``<q``), float (``<d``) or bool (``<?``);
- ``ARRAY`` / ``SCALAR``: any other numeric or bool ndarray / numpy scalar, self-described as
  ``<B`` dtype-string length, the dtype string (``'<f8'``, ``'>i4'``, ``'|b1'``), ``<B`` ndim,
  ``<q`` per dimension, then its raw C-order bytes.

Action payload (cell -> host, untrusted): the leaves' raw bytes and nothing else, Discrete as
``<i8``; its length is fixed by the schema, and the host checks ``space.contains`` on what it parsed.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
from gymnasium import spaces

from policybox.envs.base import ConfigError, InvalidAction

SUPPORTED = "Box, Discrete, MultiDiscrete, MultiBinary, Dict (with str keys) and Tuple"
LEAF_TYPES = (spaces.Box, spaces.Discrete, spaces.MultiDiscrete, spaces.MultiBinary)
NUMERIC_KINDS = "biufc"  # bool, signed, unsigned, float, complex: dtypes whose bytes are plain data

EXACT, NP_SCALAR, PY_INT, PY_FLOAT, PY_BOOL, ARRAY, SCALAR = range(7)
INT64 = struct.Struct("<q")
FLOAT64 = struct.Struct("<d")
BOOL = struct.Struct("<?")
PYTHON_SCALARS = {int: (PY_INT, INT64), float: (PY_FLOAT, FLOAT64), bool: (PY_BOOL, BOOL)}
PYTHON_TAGS = dict(PYTHON_SCALARS.values())
ACTION_INT = np.dtype("<i8")

KeyPath = tuple[str | int, ...]  # a leaf's place in its space: Dict keys and Tuple indices, outermost first
_ABSENT = object()  # the walker's "no value": decoding builds the tree instead of splitting one


class UnsupportedSpace(ConfigError):
    """A space the codec cannot carry (Text, Graph, Sequence, OneOf, custom classes)."""


def _where(path: KeyPath) -> str:
    return f" at {''.join(f'[{key!r}]' for key in path)}" if path else ""


def _unsupported(space: Any, path: KeyPath) -> UnsupportedSpace:
    return UnsupportedSpace(f"{space!r}{_where(path)} is not supported: the codec carries {SUPPORTED} spaces")


def _child(value: Any, key: Any) -> Any:
    return _ABSENT if value is _ABSENT else value[key]


def _map_leaves(
    space: Any,
    leaf: Callable[[Any, Any, KeyPath], Any],
    value: Any = _ABSENT,
    path: KeyPath = (),
    error: type[Exception] = ValueError,
) -> Any:
    """``leaf(space, value, path)`` for each leaf in the space's order, in a tree shaped like the space.

    The one walker of every codec operation: with ``value`` it splits that value along the space
    (a Dict needs exactly the space's keys, a Tuple its length, else ``error``); without, each leaf
    gets ``_ABSENT`` and builds its part (decoding, fallback actions, the action layout).
    """
    kind = type(space)
    if kind is spaces.Dict:
        if value is not _ABSENT and not (isinstance(value, Mapping) and value.keys() == space.spaces.keys()):
            raise error(f"expected a dict with keys {list(space.spaces)}{_where(path)}, got {_summary(value)}")
        return {
            key: _map_leaves(sub, leaf, _child(value, key), (*path, key), error) for key, sub in space.spaces.items()
        }
    if kind is spaces.Tuple:
        if value is not _ABSENT and not (isinstance(value, tuple | list) and len(value) == len(space.spaces)):
            raise error(f"expected a tuple of {len(space.spaces)}{_where(path)}, got {_summary(value)}")
        return tuple(_map_leaves(sub, leaf, _child(value, i), (*path, i), error) for i, sub in enumerate(space.spaces))
    if kind in LEAF_TYPES:
        return leaf(space, value, path)
    raise _unsupported(space, path)


def _summary(value: Any) -> str:
    if isinstance(value, Mapping):
        return f"{type(value).__name__} with keys {list(value)}"
    if isinstance(value, tuple | list):
        return f"{type(value).__name__} of {len(value)}"
    return type(value).__name__


# ---------------------------------------------------------------------------------------------
# Schema


def describe_space(space: Any) -> dict[str, Any]:
    """A JSON-serializable description of ``space`` that ``space_from_description`` rebuilds (no seed)."""
    return _describe(space, ())


def _describe(space: Any, path: KeyPath) -> dict[str, Any]:
    kind = type(space)
    if kind is spaces.Box:
        low, high = _bound(space.low), _bound(space.high)
        return {"type": "Box", "dtype": space.dtype.str, "shape": list(space.shape), "low": low, "high": high}
    if kind is spaces.Discrete:
        return {"type": "Discrete", "n": int(space.n), "start": int(space.start), "dtype": space.dtype.str}
    if kind is spaces.MultiDiscrete:
        nvec, start = space.nvec.tolist(), space.start.tolist()
        return {"type": "MultiDiscrete", "nvec": nvec, "start": start, "dtype": space.dtype.str}
    if kind is spaces.MultiBinary:
        return {"type": "MultiBinary", "n": space.n if isinstance(space.n, int) else [int(n) for n in space.n]}
    if kind is spaces.Dict:
        if not all(type(key) is str for key in space.spaces):
            raise _unsupported(space, path)
        items = space.spaces.items()
        return {"type": "Dict", "spaces": [[key, _describe(sub, (*path, key))] for key, sub in items]}
    if kind is spaces.Tuple:
        return {"type": "Tuple", "spaces": [_describe(sub, (*path, i)) for i, sub in enumerate(space.spaces)]}
    raise _unsupported(space, path)


def _bound(array: np.ndarray) -> Any:
    """One number when every element has it (a 84x84x3 image Box stays a short schema), else nested lists."""
    if array.size == 0:
        return 0  # nothing to fill, and tolist() would lose the shape
    first = array.flat[0]
    return first.item() if np.all(array == first) else array.tolist()


def space_from_description(d: dict[str, Any]) -> spaces.Space[Any]:
    """The space ``describe_space`` described (equal to it; its seed is not carried)."""
    kind = d.get("type")
    if kind == "Box":
        dtype, shape = np.dtype(d["dtype"]), tuple(d["shape"])
        return spaces.Box(np.full(shape, d["low"], dtype), np.full(shape, d["high"], dtype), shape, dtype)
    if kind == "Discrete":
        return spaces.Discrete(d["n"], start=d["start"], dtype=d["dtype"])
    if kind == "MultiDiscrete":
        return spaces.MultiDiscrete(np.array(d["nvec"]), dtype=d["dtype"], start=np.array(d["start"]))
    if kind == "MultiBinary":
        return spaces.MultiBinary(d["n"] if isinstance(d["n"], int) else tuple(d["n"]))
    if kind == "Dict":
        # Pairs, not a dict: Dict sorts the keys of a dict, and the leaves are walked in the space's key order.
        return spaces.Dict([(key, space_from_description(sub)) for key, sub in d["spaces"]])
    if kind == "Tuple":
        return spaces.Tuple([space_from_description(sub) for sub in d["spaces"]])
    raise UnsupportedSpace(f"a space of type {kind!r} is not supported: the codec carries {SUPPORTED} spaces")


# ---------------------------------------------------------------------------------------------
# Reading payloads


class _Reader:
    """A cursor over a payload; every array it returns is a copy.

    Copying (``ndarray(buffer=...).copy()``) costs one memcpy per leaf and buys arrays that own their
    memory: the payload buffer may be reused by the caller, a leaf may sit at an unaligned offset,
    and a view of ``bytes`` would be read-only -- a policy writing into its observation
    would crash. Converting the whole payload to ``bytes`` first would cost a copy as well and still
    hand out read-only, possibly unaligned views.
    """

    def __init__(self, payload: bytes | memoryview) -> None:
        self.view = memoryview(payload).cast("B")  # counted in bytes whatever the buffer's item format
        self.pos = 0

    def _advance(self, size: int) -> int:
        """The offset of the next ``size`` bytes, which the cursor moves past."""
        start, self.pos = self.pos, self.pos + size
        if self.pos > len(self.view):
            raise ValueError(f"payload of {len(self.view)} bytes ends inside a value")
        return start

    def byte(self) -> int:
        return self.view[self._advance(1)]

    def unpack(self, layout: struct.Struct) -> Any:
        return layout.unpack_from(self.view, self._advance(layout.size))[0]

    def text(self, size: int) -> str:
        start = self._advance(size)
        return str(self.view[start : self.pos], "ascii")

    def array(self, dtype: np.dtype, shape: tuple[int, ...]) -> np.ndarray:
        start = self._advance(math.prod(shape) * dtype.itemsize)
        return np.ndarray(shape, dtype, self.view, start).copy()  # one call: faster than frombuffer().reshape()

    def finish(self) -> None:
        if self.pos != len(self.view):
            raise ValueError(f"payload of {len(self.view)} bytes has {len(self.view) - self.pos} bytes left over")


# ---------------------------------------------------------------------------------------------
# Observations: exact, trusted


def _encode_leaf(out: bytearray, space: Any, value: Any, path: KeyPath) -> None:
    dtype, shape = space.dtype, space.shape
    kind = type(value)
    if kind is np.ndarray and value.dtype == dtype and value.shape == shape:
        out.append(EXACT)
        out += value.tobytes()  # C order whatever the strides
    elif isinstance(value, np.generic) and value.dtype == dtype and shape == ():
        out.append(NP_SCALAR)
        out += value.tobytes()
    elif kind in PYTHON_SCALARS:
        tag, layout = PYTHON_SCALARS[kind]
        try:
            packed = layout.pack(value)
        except struct.error:
            raise ValueError(f"observation{_where(path)}: {value!r} does not fit in 64 bits") from None
        out.append(tag)
        out += packed
    elif kind is np.ndarray or isinstance(value, np.generic):
        _encode_self_described(out, value, path)
    else:
        raise ValueError(f"observation{_where(path)} is a {kind.__name__}, which cannot be carried exactly for {space}")


def _encode_self_described(out: bytearray, value: np.ndarray | np.generic, path: KeyPath) -> None:
    if value.dtype.kind not in NUMERIC_KINDS:
        raise ValueError(f"observation{_where(path)} has dtype {value.dtype}: only numeric and bool values are carried")
    tag = ARRAY if isinstance(value, np.ndarray) else SCALAR
    dtype = value.dtype.str.encode()
    out += struct.pack(f"<BB{len(dtype)}sB{value.ndim}q", tag, len(dtype), dtype, value.ndim, *value.shape)
    out += value.tobytes()


def _decode_leaf(reader: _Reader, space: Any) -> Any:
    tag = reader.byte()
    if tag == EXACT:
        return reader.array(space.dtype, space.shape)
    if tag == NP_SCALAR:
        return reader.array(space.dtype, ())[()]
    if tag in PYTHON_TAGS:
        return reader.unpack(PYTHON_TAGS[tag])
    if tag not in (ARRAY, SCALAR):
        raise ValueError(f"unknown observation leaf tag {tag}")
    dtype = np.dtype(reader.text(reader.byte()))
    if dtype.kind not in NUMERIC_KINDS:
        raise ValueError(f"observation leaf of dtype {dtype}: only numeric and bool values are carried")
    shape = tuple(reader.unpack(INT64) for _ in range(reader.byte()))
    array = reader.array(dtype, shape)
    return array if tag == ARRAY else array[()]


# ---------------------------------------------------------------------------------------------
# Actions: strict, the host parses untrusted bytes


def _action_layout(space: Any) -> tuple[np.dtype, tuple[int, ...]]:
    return (ACTION_INT, ()) if type(space) is spaces.Discrete else (space.dtype, space.shape)


def _encode_action_leaf(out: bytearray, space: Any, value: Any, path: KeyPath) -> None:
    if type(space) is spaces.Discrete:
        if isinstance(value, bool) or not isinstance(value, int | np.integer):
            raise InvalidAction(f"expected an integer for {space}{_where(path)}, got {type(value).__name__}")
        try:
            out += INT64.pack(int(value))
        except struct.error:
            raise InvalidAction(f"{value} for {space}{_where(path)} does not fit in 64 bits") from None
        return
    out += _exact_array(value, space, path).tobytes()


def _exact_array(value: Any, space: Any, path: KeyPath) -> np.ndarray:
    """``value`` as an array of the leaf's dtype and shape, or InvalidAction if that changes a value."""
    dtype, shape = space.dtype, space.shape
    try:
        array = np.asarray(value)
    except (ValueError, TypeError, OverflowError) as exc:
        raise InvalidAction(f"expected an array for {space}{_where(path)}, got {type(value).__name__}: {exc}") from None
    if array.dtype.kind not in "biuf":
        raise InvalidAction(f"expected numbers for {space}{_where(path)}, got an array of {array.dtype}")
    if array.shape != shape:
        raise InvalidAction(f"expected shape {shape} for {space}{_where(path)}, got {array.shape}")
    with np.errstate(all="ignore"):
        converted = array.astype(dtype)
    if not _same_values(array, converted):
        raise InvalidAction(f"{array.dtype} values for {space}{_where(path)} change when converted to {dtype}")
    return converted


def _same_values(source: np.ndarray, converted: np.ndarray) -> bool:
    if np.can_cast(source.dtype, converted.dtype):  # a safe cast changes no value
        return True
    if converted.dtype.kind == "f":  # a float rounds by nature; only overflow to inf is a changed value
        return not np.any(np.isinf(converted) & np.isfinite(source))
    # An integer or bool must come back unchanged -- and keep its sign, as an int <-> uint wrap comes back.
    with np.errstate(all="ignore"):
        back = converted.astype(source.dtype)
    return np.array_equal(back, source) and np.array_equal(converted < 0, source < 0)


def _parse_action_leaf(reader: _Reader, space: Any, path: KeyPath) -> Any:
    if type(space) is spaces.Discrete:
        return reader.unpack(INT64)
    array = reader.array(space.dtype, space.shape)
    # A bool byte other than 0 or 1 is a bool numpy does not expect (it would view as 2, compare oddly).
    if array.dtype.kind == "b" and np.any(array.view(np.uint8) > 1):
        raise InvalidAction(f"bool action{_where(path)} has a byte other than 0 or 1")
    return array


# ---------------------------------------------------------------------------------------------


class SpaceCodec:
    """Observations and actions of one space as bytes; both sides build it from the same schema."""

    def __init__(self, space: Any) -> None:
        describe_space(space)  # UnsupportedSpace for anything the codec cannot carry
        self.space = space
        sizes: list[int] = []
        _map_leaves(space, lambda leaf, _value, _path: sizes.append(_nbytes(*_action_layout(leaf))))
        self._action_nbytes = sum(sizes)

    def describe(self) -> dict[str, Any]:
        return describe_space(self.space)

    @classmethod
    def from_description(cls, d: dict[str, Any]) -> SpaceCodec:
        return cls(space_from_description(d))

    def encode(self, value: Any) -> bytes:
        """An observation's bytes; ValueError (naming the leaf) for a value that cannot be carried exactly."""
        out = bytearray()
        _map_leaves(self.space, lambda leaf, v, path: _encode_leaf(out, leaf, v, path), value)
        return bytes(out)

    def decode(self, payload: bytes | memoryview) -> Any:
        """Exactly the observation ``encode`` was given, in arrays that own their memory."""
        reader = _Reader(payload)
        value = _map_leaves(self.space, lambda leaf, _value, _path: _decode_leaf(reader, leaf))
        reader.finish()
        return value

    def encode_action(self, value: Any) -> bytes:
        """A policy's action as bytes; InvalidAction if it is not exactly representable in the space's leaves."""
        out = bytearray()
        _map_leaves(
            self.space, lambda leaf, v, path: _encode_action_leaf(out, leaf, v, path), value, error=InvalidAction
        )
        return bytes(out)

    def parse_action(self, payload: bytes | memoryview) -> Any:
        """The action in untrusted ``payload``; InvalidAction unless it is exactly a value of the space."""
        reader = _Reader(payload)
        if len(reader.view) != self._action_nbytes:
            raise InvalidAction(f"action payload of {len(reader.view)} bytes, expected {self._action_nbytes}")
        value = _map_leaves(self.space, lambda leaf, _value, path: _parse_action_leaf(reader, leaf, path))
        if not self.space.contains(value):
            raise InvalidAction(f"{value!r} is not an action of {self.space}")
        return value


def _nbytes(dtype: np.dtype, shape: tuple[int, ...]) -> int:
    return math.prod(shape) * dtype.itemsize


def fallback_action(space: Any, observation: Any = None) -> Any:
    """What a failed agent plays: the first legal action of a masked Discrete, else the space's zero."""
    mask = observation.get("action_mask") if isinstance(observation, Mapping) else None
    if mask is not None and type(space) is spaces.Discrete:
        legal = np.flatnonzero(np.asarray(mask).reshape(-1)[: int(space.n)])
        return int(space.start) + (int(legal[0]) if legal.size else 0)
    return _map_leaves(space, lambda leaf, _value, _path: _zero(leaf))


def _zero(space: Any) -> Any:
    kind = type(space)
    if kind is spaces.Discrete:
        return int(space.start)
    if kind is spaces.Box:
        zeros = np.zeros(space.shape, space.dtype)
        return np.clip(zeros, space.low, space.high, out=zeros)  # out=: an array even for shape ()
    if kind is spaces.MultiDiscrete:
        return np.array(space.start, dtype=space.dtype)
    return np.zeros(space.shape, space.dtype)  # MultiBinary
