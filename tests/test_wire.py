"""The frame codec: round trips, and every way a hostile peer's bytes are rejected."""

import json
import random
import time

import pytest

from policybox.wire import (
    CELL_TO_HOST,
    HEADER,
    HOST_TO_CELL,
    MAX_CELL_FRAME,
    MAX_JSON_DEPTH,
    REPLY_ENTRY,
    FrameDecoder,
    FrameType,
    ProtocolError,
    decode_json,
    decode_object,
    decode_observations,
    decode_replies,
    encode_frame,
    encode_json,
    encode_replies,
    encode_reply,
    nests_within,
    observation_parts,
    one_observation,
    one_reply,
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


def test_a_cell_of_one_seat_reads_and_writes_the_frames_a_group_would():
    parts = observation_parts(7, [(3, b"abc")])
    frame = FrameDecoder(HOST_TO_CELL, 1024).feed(b"".join(parts))[0]
    assert [(agent, bytes(data)) for agent, data in decode_observations(frame.payload)] == [(3, b"abc")]
    assert bytes(one_observation(frame.payload, 3) or b"-") == b"abc"
    assert one_observation(frame.payload, 4) is None  # another seat's: read as a group, which refuses it
    two = FrameDecoder(HOST_TO_CELL, 1024).feed(b"".join(observation_parts(7, [(3, b"a"), (3, b"b")])))[0]
    assert one_observation(two.payload, 3) is None
    for reply in [(FrameType.ACTION, b"\x01\x00"), (FrameType.INVALID_ACTION, b"why"), (FrameType.ERROR, b"{}")]:
        assert encode_reply(7, 3, reply) == encode_replies(7, [(3, reply)])


def honest_read(data: bytes, step: int, agent: int) -> bytes | None:
    """The action the general path (decoder, then decode_replies) reads in ``data`` as agent ``agent``'s
    on-time action at ``step``; None if it reads anything else or refuses it."""
    try:
        frames = cell_decoder(MAX_CELL_FRAME).feed(data)
        if len(frames) != 1 or frames[0].type != FrameType.ACTION or frames[0].seq != step:
            return None
        ((kind, action),) = decode_replies(frames[0].payload, [agent])
    except ProtocolError:
        return None
    return action if kind == FrameType.ACTION else None


def test_a_one_seat_reply_is_taken_only_where_the_general_path_reads_the_same_action():
    """The host's hot path for a cell of one seat takes a frame only when decoding it in full would give
    that same on-time action: every byte of valid frames mutated, cut or extended, it never takes more."""
    rng = random.Random(44)
    valid = [encode_reply(7, 3, (FrameType.ACTION, bytes(rng.randrange(256) for _ in range(n)))) for n in (0, 2, 9)]
    cases = [*valid, encode_reply(7, 3, (FrameType.ERROR, b"{}")), encode_reply(7, 3, (FrameType.INVALID_ACTION, b"x"))]
    for frame in valid:
        cases += [frame[:cut] for cut in range(len(frame))] + [frame + b"\x00", frame + frame]
        for at in range(len(frame)):
            for value in {0, 1, 2, 3, 5, 6, 7, 8, 255, rng.randrange(256)}:
                cases.append(frame[:at] + bytes([value]) + frame[at + 1 :])
    taken = 0
    for data in cases:
        action = one_reply(data, 7, 3)
        assert action is None or action == honest_read(data, 7, 3), data.hex()
        taken += action is not None
    assert taken >= len(valid)
    assert [one_reply(frame, 7, 3) for frame in valid] == [honest_read(frame, 7, 3) for frame in valid]
    assert one_reply(valid[1], 8, 3) is None and one_reply(valid[1], 7, 4) is None  # another step, another seat


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


def depth(value: object) -> int:
    """How deep ``value`` nests lists and dicts (the reference the scanner is checked against)."""
    if isinstance(value, dict):
        value = list(value.values())
    return 1 + max(map(depth, value), default=0) if isinstance(value, list) else 0


def nested(rng: random.Random, levels: int) -> object:
    """A JSON value nesting exactly ``levels`` deep, its strings full of brackets, quotes and backslashes."""
    text = "".join(rng.choice('[]{}"\\x\u00e9\n') for _ in range(rng.randrange(6)))
    if levels == 0:
        return rng.choice([text, 1, None, 2.5])
    siblings = [nested(rng, rng.randrange(min(levels, 3))) for _ in range(rng.randrange(3))]  # shallower
    inner = [*siblings, nested(rng, levels - 1)]
    rng.shuffle(inner)
    return {f"{text}{i}": item for i, item in enumerate(inner)} if rng.random() < 0.5 else inner


def test_the_nesting_scanner_agrees_with_the_parser_on_every_depth():
    rng = random.Random(7)
    for _ in range(400):
        value = nested(rng, rng.randrange(40))
        payload = json.dumps(value, ensure_ascii=rng.random() < 0.5).encode()
        levels = depth(value)
        assert nests_within(payload, levels), payload
        assert levels == 0 or not nests_within(payload, levels - 1), payload


def test_json_nested_as_deep_as_the_limit_is_read_and_deeper_is_refused():
    def report(levels: int) -> bytes:
        return b'{"a":' * levels + b"1" + b"}" * levels

    assert decode_object(report(MAX_JSON_DEPTH), "report") == json.loads(report(MAX_JSON_DEPTH))
    with pytest.raises(ProtocolError, match=f"report nests JSON arrays and objects more than {MAX_JSON_DEPTH} deep"):
        decode_object(report(MAX_JSON_DEPTH + 1), "report")


def test_brackets_quotes_and_backslashes_inside_strings_do_not_nest():
    value = {"a": "[" * 1000, "b": '\\"[{', "c": "\\", "d": ["\\\\", '"]]]]']}
    assert decode_object(json.dumps(value).encode(), "report") == value


@pytest.mark.parametrize(
    "payload",
    [
        b'{"type":"Deep","message":' + b"[" * 5000 + b"]" * 5000 + b"}",  # the hostile review's 10 KB
        b"[" * (1 << 20),  # a mebibyte of brackets that never close
        b'{"a":' * (1 << 18),
        b'{"a":[' + b",".join([b"[" * MAX_JSON_DEPTH + b"]" * MAX_JSON_DEPTH] * 16_000) + b"]}",  # each one too deep
    ],
    ids=["deep-report", "open-brackets", "open-objects", "many-too-deep"],
)
def test_deep_or_unclosed_json_is_refused_in_linear_time_without_recursion(payload):
    started = time.monotonic()
    with pytest.raises(ProtocolError) as refused:
        decode_object(payload, "ERROR frame")
    assert time.monotonic() - started < 2  # a quadratic scan of a mebibyte would take hours
    assert not isinstance(refused.value.__context__, RecursionError)


def test_the_scanner_reads_a_string_that_never_ends_once():
    endless = b'"' + b'\\"[' * (1 << 18)  # an escaped quote and a bracket, a quarter of a million times
    started = time.monotonic()
    assert nests_within(endless, MAX_JSON_DEPTH)  # all inside the string: the parser refuses it
    assert time.monotonic() - started < 2
