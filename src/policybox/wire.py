"""The host <-> cell wire protocol: frame encoding and decoding, nothing else (no I/O).

Every message is one frame: a 12-byte little-endian header followed by ``length`` payload bytes::

    offset  size  field
    0       1     type      (FrameType)
    1       3     reserved  (zero)
    4       4     sequence  (u32: the step index for OBSERVATION/ACTION, else 0)
    8       4     length    (u32: payload size; bounded by the reader, never trusted)

Conversation (host on the left, one cell on the right)::

    SETUP  {protocol, agents, seed, threads,
            log_limit_bytes, spec, env, sandbox} ->
                                               <-  READY {protocol, policy, minimum_action_timeout_ms,
                                                          torch, sandbox: {layer: status}, pid}
                                               or  ERROR {phase: "init", type, message, traceback}
    OBSERVATION seq=t  <observations>          ->
                                               <-  ACTION seq=t  <replies>
    STOP                                       ->  (cell exits; a closed socket means the same)

A cell plays the seats ``agents`` (a list of agent ids): one with ``--cells per-agent``, all the seats
of one submission with ``--cells per-policy``; with ``--cells forked`` the host sends a submission's SETUP
to its loader on its first seat's socket, and each forked seat answers READY (with its own ``pid``, which
the host verifies before it signals it: ``policybox.host.seats``) on its own. ``spec.env``, the policy's
own variables, the cell sets itself before it imports its policy: they may be secrets, and never pass
through a zygote. ``env`` is
the game's setup of the cell's half. An OBSERVATION frame holds the observations of the
agents asked at step t, each as ``<II`` (agent id, length) then that many bytes; the ACTION frame that
answers it holds one reply per agent asked, in the same order, each as ``<IBI`` (agent id, kind,
length) then that many bytes. A reply's kind is ACTION (the env-specific action bytes),
INVALID_ACTION (a UTF-8 reason: the cell could not encode what the policy returned) or ERROR (a JSON
report ``{phase: "step", type, message, traceback}``: the policy raised for that agent, which the
cell then no longer plays). The host checks READY's fields: ``minimum_action_timeout_ms`` a whole
number of ms from 0 to a day, ``torch`` true or false, ``sandbox`` an object of layer names to texts
(each kept to its first 300 characters); an ERROR report's fields are made text and cut short.

``env`` is what the environment adapter's cell half needs (for MettaGrid: its PolicyEnvInterface
and action names); ``sandbox`` is the SandboxPlan the cell applies before importing the policy
(null with ``--sandbox off``). JSON payloads are UTF-8 objects that nest arrays and objects at most
``MAX_JSON_DEPTH`` (32) levels deep, checked with bounded, non-recursive work before the JSON is
parsed. Observation and action bytes are opaque here: each environment adapter (``policybox.envs``)
defines them -- for MettaGrid, the raw observation token bytes and a packed action id. Nothing is
ever pickled. A reader rejects unknown types, non-zero reserved bytes, oversize lengths, malformed or
too deeply nested JSON and replies that do not answer exactly the agents asked with
``ProtocolError``; the host turns that -- and anything else a cell's bytes make it raise -- into a
failure of the agents of that cell (``error``, kind ``ProtocolError``), never of the host's episode.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Sequence
from enum import IntEnum
from typing import Any, NamedTuple

PROTOCOL_VERSION = 2

HEADER = struct.Struct("<B3xII")
HEADER_SIZE = HEADER.size
# The header read as three words: the first holds the type in its low byte and the reserved bytes above it.
HEADER_WORDS = struct.Struct("<III")

# A cell has no reason to send more than an action or a short error report per seat it plays; the host
# reads at most this much per frame and seat, so a hostile cell cannot make it allocate more.
MAX_CELL_FRAME = 256 * 1024
# The host's frames carry observations and the environment description; bound them all the same (per seat).
MAX_HOST_FRAME = 64 * 1024 * 1024
# Far more than any report or READY needs, far less than the depth at which json.loads (or anything
# else that walks a value) would recurse out of the stack.
MAX_JSON_DEPTH = 32


class FrameType(IntEnum):
    SETUP = 1
    READY = 2
    ERROR = 3
    OBSERVATION = 4
    ACTION = 5
    INVALID_ACTION = 6
    STOP = 7


HOST_TO_CELL = frozenset({FrameType.SETUP, FrameType.OBSERVATION, FrameType.STOP})
CELL_TO_HOST = frozenset({FrameType.READY, FrameType.ERROR, FrameType.ACTION})
# What a seat's reply may be, by its kind byte.
REPLY_KINDS = {kind.value: kind for kind in (FrameType.ACTION, FrameType.INVALID_ACTION, FrameType.ERROR)}
OBSERVATION_ENTRY = struct.Struct("<II")  # agent id, length
REPLY_ENTRY = struct.Struct("<IBI")  # agent id, kind, length
# A frame of one entry, its header and entry packed or read at once (a cell of one seat, on the hot path).
ONE_OBSERVATION = struct.Struct("<B3xIIII")  # type, sequence, length; agent id, length
ONE_REPLY = struct.Struct("<B3xIIIBI")  # type, sequence, length; agent id, kind, length
ONE_REPLY_WORDS = struct.Struct("<IIIIBI")  # as ONE_REPLY, the type and reserved bytes as one word

Reply = tuple[FrameType, bytes]  # one agent's reply: its kind and bytes


class ProtocolError(Exception):
    """A peer sent bytes that are not a valid frame of this protocol."""


class Frame(NamedTuple):  # a tuple: made once per frame on the hot path, where a dataclass costs more
    type: FrameType
    seq: int
    payload: bytes


def encode_header(frame_type: FrameType, seq: int, length: int) -> bytes:
    return HEADER.pack(frame_type, seq, length)


def encode_frame(frame_type: FrameType, seq: int = 0, payload: bytes = b"") -> bytes:
    return HEADER.pack(frame_type, seq, len(payload)) + payload


def encode_json(frame_type: FrameType, obj: dict[str, Any], seq: int = 0) -> bytes:
    return encode_frame(frame_type, seq, encode_report(obj))


def encode_report(obj: dict[str, Any]) -> bytes:
    """A JSON object as payload bytes (a frame's, or an ERROR reply's)."""
    return json.dumps(obj, separators=(",", ":")).encode()


def decode_json(frame: Frame) -> dict[str, Any]:
    return decode_object(frame.payload, f"{frame.type.name} frame")


def decode_object(payload: bytes, what: str) -> dict[str, Any]:
    """The JSON object ``payload`` holds (``what`` names it in the error), as ``decode_value`` reads it."""
    value = decode_value(payload, what)
    if not isinstance(value, dict):
        raise ProtocolError(f"{what} holds JSON {type(value).__name__}, expected an object")
    return value


def decode_value(payload: bytes | memoryview, what: str, finite: bool = False) -> Any:
    """The JSON value a peer's ``payload`` holds (``what`` names it in the error), nested at most
    ``MAX_JSON_DEPTH`` deep; its strings are valid text (a lone surrogate, which JSON's ``\\ud800``
    escape can carry but no UTF-8 writer can write, is replaced by its visible escape). ``finite``:
    ``NaN`` and ``Infinity``, which Python's parser takes but JSON has not, are refused too."""
    data = bytes(payload)
    if not nests_within(data, MAX_JSON_DEPTH):
        raise ProtocolError(f"{what} nests JSON arrays and objects more than {MAX_JSON_DEPTH} deep, or leaves one open")
    try:
        value = json.loads(data.decode("utf-8"), parse_constant=_not_json if finite else None)
    except (UnicodeDecodeError, ValueError) as exc:
        raise ProtocolError(f"{what} does not hold valid UTF-8 JSON: {exc}") from None
    return _valid_text(value)


def _not_json(constant: str) -> Any:
    raise ValueError(f"{constant} is not a JSON number")


_ONE_BRACKET = bytes.maketrans(b"{}", b"[]")  # an object nests as an array does
_NOT_BRACKETS = bytes(byte for byte in range(256) if byte not in b"[]{}")


def nests_within(payload: bytes, depth: int) -> bool:
    """Whether the JSON in ``payload`` closes every array and object it opens, at most ``depth`` deep --
    found in a few passes over bytes, no recursion and no parsing, so that nesting a parser would
    recurse into is refused before one sees it. Strings are taken out first (escaped backslashes, then
    escaped quotes, then what lies between quotes), leaving the brackets; each pass then removes every
    innermost pair, so nesting within ``depth`` is gone after ``depth`` passes. Bytes that are not
    valid JSON may pass; the parser refuses them, having read no deeper than this allows."""
    unescaped = payload.replace(b"\\\\", b"").replace(b'\\"', b"")
    brackets = b"".join(unescaped.split(b'"')[::2]).translate(_ONE_BRACKET, _NOT_BRACKETS)
    for _ in range(depth):
        inner_removed = brackets.replace(b"[]", b"")
        if len(inner_removed) == len(brackets):  # nothing closes any more
            break
        brackets = inner_removed
    return b"[" not in brackets


def _valid_text(value: Any) -> Any:
    """``value`` with every string made writable as UTF-8: a result holding a lone surrogate could
    not be saved, so a cell could otherwise void its episode with one crafted error report."""
    if isinstance(value, str):
        return value.encode("utf-8", "backslashreplace").decode("utf-8")
    if isinstance(value, dict):
        return {_valid_text(key): _valid_text(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_valid_text(item) for item in value]
    return value


def check_protocol(message: dict[str, Any]) -> None:
    """A SETUP message from a host of another protocol version is refused with a clear message."""
    if message.get("protocol") != PROTOCOL_VERSION:
        raise ProtocolError(
            f"protocol version mismatch: host speaks {message.get('protocol')}, this cell speaks "
            f"{PROTOCOL_VERSION}; install the same policybox version for host and cells"
        )


class FrameDecoder:
    """Incremental frame parser: feed it bytes as they arrive, take whole frames out.

    Validates each header as soon as its 12 bytes are in, so an absurd length or unknown type is
    rejected before any payload is buffered.
    """

    def __init__(self, allowed: frozenset[FrameType], max_length: int) -> None:
        self._allowed = {frame_type.value: frame_type for frame_type in allowed}  # by the header's first word
        self._max_length = max_length
        self._buffer = bytearray()
        self._need: tuple[FrameType, int, int] | None = None

    def allow(self, max_length: int) -> None:
        """Accept frames of up to ``max_length`` bytes from now on (bytes already buffered are kept)."""
        self._max_length = max_length

    @property
    def pending_bytes(self) -> int:
        """Bytes received that do not yet form a whole frame (a half frame is in flight)."""
        return len(self._buffer) + (HEADER_SIZE if self._need else 0)

    def feed(self, data: bytes) -> list[Frame]:
        if not self._buffer and self._need is None and len(data) >= HEADER_SIZE:
            # The common case, one whole frame per read: no buffering at all.
            frame_type, seq, length = self._parse_header(data)
            if len(data) == HEADER_SIZE + length:
                return [Frame(frame_type, seq, data[HEADER_SIZE:])]
            self._need = (frame_type, seq, length)
            data = data[HEADER_SIZE:]
        self._buffer += data
        frames: list[Frame] = []
        while True:
            if self._need is None:
                if len(self._buffer) < HEADER_SIZE:
                    return frames
                self._need = self._parse_header(bytes(self._buffer[:HEADER_SIZE]))
                del self._buffer[:HEADER_SIZE]
            frame_type, seq, length = self._need
            if len(self._buffer) < length:
                return frames
            frames.append(Frame(frame_type, seq, bytes(self._buffer[:length])))
            del self._buffer[:length]
            self._need = None

    def _parse_header(self, data: bytes) -> tuple[FrameType, int, int]:
        """The header ``data`` starts with, checked. One unpack and one lookup for a valid header (a word
        holding only an allowed type: reserved bytes zero); what they do not accept is told apart after."""
        word, seq, length = HEADER_WORDS.unpack_from(data)
        frame_type = self._allowed.get(word)
        if frame_type is None:
            raise ProtocolError(self._refusal(data[:HEADER_SIZE]))
        if length > self._max_length:
            raise ProtocolError(f"{frame_type.name} frame claims {length} bytes, limit is {self._max_length}")
        return frame_type, seq, length

    @staticmethod
    def _refusal(header: bytes) -> str:
        """Why ``header``, whose type is not allowed here or whose reserved bytes are set, is refused."""
        if header[1:4] != b"\x00\x00\x00":
            return f"frame header has non-zero reserved bytes: {header.hex()}"
        try:
            frame_type = FrameType(header[0])
        except ValueError:
            return f"unknown frame type {header[0]}"
        return f"frame type {frame_type.name} is not allowed in this direction"


def observation_parts(step: int, observations: Sequence[tuple[int, bytes | memoryview]]) -> list[bytes | memoryview]:
    """One OBSERVATION frame for ``(agent id, payload)`` pairs, as parts for ``sendmsg`` (no payload is copied)."""
    if len(observations) == 1:  # a cell of one seat: its header and entry in one pack
        ((agent_id, payload),) = observations
        size = len(payload)
        header = ONE_OBSERVATION.pack(FrameType.OBSERVATION, step, OBSERVATION_ENTRY.size + size, agent_id, size)
        return [header, payload]
    parts: list[bytes | memoryview] = [b""]
    length = 0
    for agent_id, payload in observations:
        parts += (OBSERVATION_ENTRY.pack(agent_id, len(payload)), payload)
        length += OBSERVATION_ENTRY.size + len(payload)
    parts[0] = HEADER.pack(FrameType.OBSERVATION, step, length)
    return parts


def decode_observations(payload: bytes | memoryview) -> list[tuple[int, bytes | memoryview]]:
    """The ``(agent id, payload)`` pairs of an OBSERVATION frame."""
    view, at = memoryview(payload), 0
    entries: list[tuple[int, bytes | memoryview]] = []
    while at < len(view):
        agent_id, length = _entry(OBSERVATION_ENTRY, view, at)
        at += OBSERVATION_ENTRY.size
        entries.append((agent_id, _body(view, at, length)))
        at += length
    return entries


def one_observation(payload: bytes, agent_id: int) -> memoryview | None:
    """The observation of an OBSERVATION frame's ``payload`` when it holds exactly one, for agent
    ``agent_id`` (a cell of one seat, on its hot path); None for anything else, which
    ``decode_observations`` then reads."""
    if len(payload) < OBSERVATION_ENTRY.size:
        return None
    entry_agent, length = OBSERVATION_ENTRY.unpack_from(payload)
    if entry_agent != agent_id or length != len(payload) - OBSERVATION_ENTRY.size:
        return None
    return memoryview(payload)[OBSERVATION_ENTRY.size :]


def encode_reply(step: int, agent_id: int, reply: Reply) -> bytes:
    """The ACTION frame answering step ``step`` of a cell of one seat, ``agent_id``: as ``encode_replies``
    writes it, in one pack."""
    kind, data = reply
    return ONE_REPLY.pack(FrameType.ACTION, step, REPLY_ENTRY.size + len(data), agent_id, kind, len(data)) + data


def one_reply(data: bytes, step: int, agent_id: int) -> bytes | None:
    """The action bytes in ``data`` when it is exactly one whole ACTION frame for step ``step`` whose only
    reply is agent ``agent_id``'s action -- a cell of one seat's usual answer, read with one unpack on the
    host's hot path. None for anything else, which ``FrameDecoder`` and ``decode_replies`` then read and
    refuse if it is not the protocol: only frames they would read as this same action are taken here."""
    if len(data) < ONE_REPLY_WORDS.size:
        return None
    word, seq, length, entry_agent, kind, size = ONE_REPLY_WORDS.unpack_from(data)
    whole = length == len(data) - HEADER_SIZE <= MAX_CELL_FRAME and size == length - REPLY_ENTRY.size
    if not whole or word != FrameType.ACTION or seq != step or entry_agent != agent_id or kind != FrameType.ACTION:
        return None
    return data[ONE_REPLY_WORDS.size :]


def encode_replies(step: int, replies: Sequence[tuple[int, Reply]]) -> bytes:
    """The ACTION frame answering step ``step``: one ``(agent id, (kind, bytes))`` per agent asked."""
    parts = [b""]
    for agent_id, (kind, data) in replies:
        parts += (REPLY_ENTRY.pack(agent_id, kind, len(data)), data)
    parts[0] = HEADER.pack(FrameType.ACTION, step, sum(map(len, parts)))
    return b"".join(parts)


def decode_replies(payload: bytes, asked: Sequence[int]) -> list[Reply]:
    """The replies of an ACTION frame, which must answer exactly the agents ``asked``, in order. (On the
    host's path once per cell and step: bytes slices and a dict of kinds, no enum calls or helpers.)"""
    replies: list[Reply] = []
    at, size = 0, len(payload)
    for expected in asked:
        if at + REPLY_ENTRY.size > size:
            raise ProtocolError("frame ends inside an entry's header")
        agent_id, raw_kind, length = REPLY_ENTRY.unpack_from(payload, at)
        if agent_id != expected:
            raise ProtocolError(f"ACTION frame answers agent {agent_id} where agent {expected} was asked")
        kind = REPLY_KINDS.get(raw_kind)
        if kind is None:
            raise ProtocolError(f"ACTION frame holds a reply of unknown kind {raw_kind} for agent {agent_id}")
        start = at + REPLY_ENTRY.size
        at = start + length
        if at > size:
            raise ProtocolError(f"an entry claims {length} bytes, {size - start} are left in its frame")
        replies.append((kind, payload[start:at]))
    if at != size:
        raise ProtocolError(f"ACTION frame holds {size - at} bytes after the replies of the agents asked")
    return replies


def _entry(entry: struct.Struct, data: bytes | memoryview, at: int) -> tuple[int, ...]:
    if at + entry.size > len(data):
        raise ProtocolError("frame ends inside an entry's header")
    return entry.unpack_from(data, at)


def _body(data: bytes | memoryview, at: int, length: int) -> bytes | memoryview:
    if at + length > len(data):
        raise ProtocolError(f"an entry claims {length} bytes, {len(data) - at} are left in its frame")
    return data[at : at + length]
