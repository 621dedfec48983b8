"""The frame codec: round trips, and every way a hostile peer's bytes are rejected."""

import pytest

from policybox.wire import (
    CELL_TO_HOST,
    HEADER,
    HOST_TO_CELL,
    REPLY_ENTRY,
    FrameDecoder,
    FrameType,
    ProtocolError,
    decode_json,
    decode_observations,
    decode_replies,
    encode_frame,
    encode_json,
    encode_replies,
    observation_parts,
)


def cell_decoder(limit: int = 1024) -> FrameDecoder:
    return FrameDecoder(CELL_TO_HOST, limit)


def test_frames_round_trip_when_fed_one_byte_at_a_time():
    data = encode_frame(FrameType.ACTION, 7, b"\x01\x00\xff\xff") + encode_json(FrameType.READY, {"a": 1})
    decoder = cell_decoder()
    frames = [frame for byte in data for frame in decoder.feed(bytes([byte]))]
    assert [(f.type, f.seq) for f in frames] == [(FrameType.ACTION, 7), (FrameType.READY, 0)]
    assert frames[0].payload == b"\x01\x00\xff\xff"
    assert decode_json(frames[1]) == {"a": 1}
    assert decoder.pending_bytes == 0


def test_half_frame_is_held_until_complete():
    data = encode_frame(FrameType.ACTION, 1, b"abcd")
    decoder = cell_decoder()
    assert decoder.feed(data[:14]) == []
    assert decoder.pending_bytes == 14
    assert decoder.feed(data[14:])[0].payload == b"abcd"


def test_absurd_length_is_rejected_before_buffering():
    decoder = cell_decoder(limit=1024)
    with pytest.raises(ProtocolError, match="claims 4294967295 bytes, limit is 1024"):
        decoder.feed(HEADER.pack(FrameType.ACTION, 0, 0xFFFFFFFF))


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (HEADER.pack(99, 0, 0), "unknown frame type 99"),
        (HEADER.pack(FrameType.OBSERVATION, 0, 0), "OBSERVATION is not allowed in this direction"),
        (b"\x05\x01\x00\x00" + b"\x00" * 8, "non-zero reserved bytes"),
    ],
)
def test_bad_headers_are_rejected(data, message):
    with pytest.raises(ProtocolError, match=message):
        cell_decoder().feed(data)


def test_each_direction_allows_only_its_own_frames():
    assert FrameDecoder(HOST_TO_CELL, 100).feed(encode_frame(FrameType.STOP))[0].type == FrameType.STOP
    with pytest.raises(ProtocolError):
        FrameDecoder(HOST_TO_CELL, 100).feed(encode_frame(FrameType.ACTION))


@pytest.mark.parametrize("payload", [b"\xff\xfe", b"{not json", b"[1, 2]"])
def test_json_payloads_must_be_utf8_objects(payload):
    frame = cell_decoder().feed(encode_frame(FrameType.READY, 0, payload))[0]
    with pytest.raises(ProtocolError):
        decode_json(frame)


def test_several_frames_in_one_read():
    data = b"".join(encode_frame(FrameType.ACTION, seq, bytes([seq]) * 4) for seq in range(3))
    frames = cell_decoder().feed(data + encode_frame(FrameType.ACTION, 3, b"abcd")[:5])
    assert [(f.seq, f.payload) for f in frames] == [(seq, bytes([seq]) * 4) for seq in range(3)]


def test_a_cells_observations_and_replies_round_trip():
    parts = observation_parts(7, [(3, b"abc"), (5, memoryview(b"")), (9, b"\x00" * 10)])
    frame = FrameDecoder(HOST_TO_CELL, 1024).feed(b"".join(parts))[0]
    assert (frame.type, frame.seq) == (FrameType.OBSERVATION, 7)
    assert [(agent, bytes(data)) for agent, data in decode_observations(frame.payload)] == [
        (3, b"abc"),
        (5, b""),
        (9, b"\x00" * 10),
    ]
    replies = [
        (3, (FrameType.ACTION, b"\x01\x00")),
        (5, (FrameType.INVALID_ACTION, b"why")),
        (9, (FrameType.ERROR, b"{}")),
    ]
    frame = cell_decoder().feed(encode_replies(7, replies))[0]
    assert decode_replies(frame.payload, [3, 5, 9]) == [reply for _, reply in replies]


@pytest.mark.parametrize(
    ("payload", "asked", "message"),
    [
        (REPLY_ENTRY.pack(4, FrameType.ACTION, 0), [3], "answers agent 4 where agent 3 was asked"),
        (REPLY_ENTRY.pack(3, FrameType.SETUP, 0), [3], "unknown kind 1 for agent 3"),
        (REPLY_ENTRY.pack(3, FrameType.ACTION, 9) + b"ab", [3], "claims 9 bytes, 2 are left"),
        (REPLY_ENTRY.pack(3, FrameType.ACTION, 0)[:5], [3], "ends inside an entry's header"),
        (REPLY_ENTRY.pack(3, FrameType.ACTION, 0) * 2, [3], "bytes after the replies of the agents asked"),
        (REPLY_ENTRY.pack(3, FrameType.ACTION, 0), [3, 5], "ends inside an entry's header"),
    ],
)
def test_replies_that_do_not_answer_exactly_the_agents_asked_are_rejected(payload, asked, message):
    with pytest.raises(ProtocolError, match=message):
        decode_replies(payload, asked)
