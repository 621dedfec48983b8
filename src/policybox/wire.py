"""The host <-> cell wire protocol: frame encoding and decoding, nothing else (no I/O).

Every message is one frame: a 12-byte little-endian header followed by ``length`` payload bytes::

    offset  size  field
    0       1     type      (FrameType)
    1       3     reserved  (zero)
    4       4     sequence  (u32: the step index for OBSERVATION/ACTION/INVALID_ACTION/ERROR, else 0)
    8       4     length    (u32: payload size; bounded by the reader, never trusted)

Conversation (host on the left, one cell on the right)::

    SETUP  {protocol, agent_id, seed, threads,
            log_limit_bytes, spec, env, sandbox} ->
                                               <-  READY {protocol, policy, minimum_action_timeout_ms,
                                                          sandbox: {layer: status}}
                                               or  ERROR {phase: "init", type, message, traceback}
    OBSERVATION seq=t  <env-specific bytes>    ->
                                               <-  ACTION seq=t          <env-specific action bytes>
                                               or  INVALID_ACTION seq=t  <utf-8 reason>
                                               or  ERROR seq=t {phase: "step", ...}
    STOP                                       ->  (cell exits; a closed socket means the same)

``env`` is what the environment adapter's cell half needs (for MettaGrid: its PolicyEnvInterface
and action names); ``sandbox`` is the SandboxPlan the cell applies before importing the policy
(null with ``--sandbox off``). JSON payloads are UTF-8 objects. Observation and action payloads are
opaque here: each environment adapter (``policybox.envs``) defines them -- for MettaGrid, the raw
observation token bytes and a packed action id. Nothing is ever pickled. A reader rejects unknown
types, oversize lengths and malformed JSON with ``ProtocolError``; the host turns that into a
failure of that one agent.
"""

from __future__ import annotations

import json
import struct
from dataclasses import dataclass
from enum import IntEnum
from typing import Any

PROTOCOL_VERSION = 1

HEADER = struct.Struct("<B3xII")
HEADER_SIZE = HEADER.size

# A cell has no reason to send more than an action or a short error report; the host reads at most
# this much per frame, so a hostile cell cannot make it allocate more.
MAX_CELL_FRAME = 256 * 1024
# The host's frames carry observations and the environment description; bound them all the same.
MAX_HOST_FRAME = 64 * 1024 * 1024


class FrameType(IntEnum):
    SETUP = 1
    READY = 2
    ERROR = 3
    OBSERVATION = 4
    ACTION = 5
    INVALID_ACTION = 6
    STOP = 7


HOST_TO_CELL = frozenset({FrameType.SETUP, FrameType.OBSERVATION, FrameType.STOP})
CELL_TO_HOST = frozenset({FrameType.READY, FrameType.ERROR, FrameType.ACTION, FrameType.INVALID_ACTION})


class ProtocolError(Exception):
    """A peer sent bytes that are not a valid frame of this protocol."""


@dataclass(frozen=True, slots=True)
class Frame:
    type: FrameType
    seq: int
    payload: bytes


def encode_header(frame_type: FrameType, seq: int, length: int) -> bytes:
    return HEADER.pack(frame_type, seq, length)


def encode_frame(frame_type: FrameType, seq: int = 0, payload: bytes = b"") -> bytes:
    return HEADER.pack(frame_type, seq, len(payload)) + payload


def encode_json(frame_type: FrameType, obj: dict[str, Any], seq: int = 0) -> bytes:
    return encode_frame(frame_type, seq, json.dumps(obj, separators=(",", ":")).encode())


def decode_json(frame: Frame) -> dict[str, Any]:
    """A JSON object frame; its strings are valid text (a lone surrogate, which JSON's ``\\ud800``
    escape can carry but no UTF-8 writer can write, is replaced by its visible escape)."""
    try:
        value = json.loads(frame.payload.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise ProtocolError(f"{frame.type.name} frame does not hold valid UTF-8 JSON: {exc}") from None
    if not isinstance(value, dict):
        raise ProtocolError(f"{frame.type.name} frame holds JSON {type(value).__name__}, expected an object")
    valid: dict[str, Any] = _valid_text(value)
    return valid


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
        self._allowed = allowed
        self._max_length = max_length
        self._buffer = bytearray()
        self._need: tuple[FrameType, int, int] | None = None

    @property
    def pending_bytes(self) -> int:
        """Bytes received that do not yet form a whole frame (a half frame is in flight)."""
        return len(self._buffer) + (HEADER_SIZE if self._need else 0)

    def feed(self, data: bytes) -> list[Frame]:
        if not self._buffer and self._need is None and len(data) >= HEADER_SIZE:
            # The common case, one whole frame per read: no buffering at all.
            frame_type, seq, length = self._parse_header(data[:HEADER_SIZE])
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

    def _parse_header(self, header: bytes) -> tuple[FrameType, int, int]:
        raw_type, seq, length = HEADER.unpack(header)
        if header[1:4] != b"\x00\x00\x00":
            raise ProtocolError(f"frame header has non-zero reserved bytes: {header.hex()}")
        try:
            frame_type = FrameType(raw_type)
        except ValueError:
            raise ProtocolError(f"unknown frame type {raw_type}") from None
        if frame_type not in self._allowed:
            raise ProtocolError(f"frame type {frame_type.name} is not allowed in this direction")
        if length > self._max_length:
            raise ProtocolError(f"{frame_type.name} frame claims {length} bytes, limit is {self._max_length}")
        return frame_type, seq, length
