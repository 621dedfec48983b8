"""A policy that forges what its cell sends the host, from inside the cell, as a hostile entrant would.

At init it finds its socket to the host among its open files, puts one end of a socketpair of its own
in that socket's place and relays between the two: the host's frames reach its cell unchanged, and
every frame its cell sends passes through the attack named by ``attack`` (an init kwarg) on its way
to the host -- so the forged bytes replace a real frame instead of being followed by it. It plays
noop. The frame layout is written out here: a hostile policy would not import policybox.

Attacks on the READY frame (``ready_*``, ``error_*`` -- an ERROR in its place --, ``before_ready``,
``unknown_type``, ...) happen at start-up; attacks on replies (``step_*``, ``reply_*``, ``frame_*``,
``seq_*``) rewrite the ACTION frame of step ``AT_STEP``: a reply attack changes the frame's last
seat's entry, or (``reply_error_*``) its first seat's. ``split`` sends every frame in many writes;
``mutate-N`` changes a few bytes of the READY frame (N even) or of step AT_STEP's replies (N odd),
chosen by a generator seeded with N -- but never the length field: a longer length only makes the
host wait for bytes that never come. ``none`` relays everything as it is.
"""

import json
import os
import random
import select
import socket
import struct
import threading
import time

from faults import host_socket_fd  # beside it in tests/policies, importable in its cell
from mettagrid.policy.noop import NoopPolicy

HEADER = struct.Struct("<B3xII")  # type, reserved, sequence, length
REPLY = struct.Struct("<IBI")  # agent id, kind, length
SETUP, READY, ERROR, ACTION, INVALID_ACTION = 1, 2, 3, 5, 6
LAYERS = ("uid", "network", "ipc", "filesystem", "disk", "proc", "landlock", "rlimits", "cpu", "memory")
LAYERS += ("processes", "environment", "seccomp")
AT_STEP = 1
DEEP = b"[" * 5000 + b"]" * 5000  # the hostile review's 10 KB
DEEP_OBJECT = b'{"type":"Deep","message":' + DEEP + b"}"


def frame(kind, seq, payload, length=None):
    return HEADER.pack(kind, seq, len(payload) if length is None else length) + payload


def json_frame(kind, seq, value):
    return frame(kind, seq, json.dumps(value).encode())


def entries(data):
    """The replies of an ACTION frame, as [agent id, kind, bytes] lists."""
    found, at = [], HEADER.size
    while at < len(data):
        agent, kind, length = REPLY.unpack_from(data, at)
        found.append([agent, kind, data[at + REPLY.size : at + REPLY.size + length]])
        at += REPLY.size + length
    return found


def replies(seq, found, tail=b"", last_length=None):
    """An ACTION frame of ``found``'s replies, then ``tail``; the last entry claiming ``last_length`` bytes."""
    parts = [REPLY.pack(agent, kind, len(body)) + body for agent, kind, body in found]
    if last_length is not None:
        agent, kind, body = found[-1]
        parts[-1] = REPLY.pack(agent, kind, last_length) + body
    return frame(ACTION, seq, b"".join(parts) + tail)


def reserved_set(data):
    return data[:1] + b"\x01" + data[2:]


def with_ready(**fields):
    """The cell's own READY with ``fields`` changed."""
    return lambda data: json_frame(READY, 0, {**json.loads(data[HEADER.size :]), **fields})


def first_reply(kind, body):
    def forge(data):
        found = entries(data)
        found[0][1:] = [kind, body]
        return replies(AT_STEP, found)

    return forge


def last_reply(change):
    def forge(data):
        found = entries(data)
        change(found[-1])
        return replies(AT_STEP, found)

    return forge


ON_READY = {
    "ready_deep": lambda data: frame(READY, 0, b'{"protocol":2,"deep":' + DEEP + b"}"),
    "ready_not_object": lambda data: frame(READY, 0, b"[2]"),
    "ready_bad_utf8": lambda data: frame(READY, 0, b'{"protocol":2,"policy":"\xff\xfe"}'),
    "ready_protocol": with_ready(protocol=99),
    "ready_minimum_bool": with_ready(minimum_action_timeout_ms=True),
    "ready_minimum_negative": with_ready(minimum_action_timeout_ms=-1),
    "ready_minimum_huge": with_ready(minimum_action_timeout_ms=10**30),
    "ready_minimum_float": with_ready(minimum_action_timeout_ms=5.5),
    "ready_torch_text": with_ready(torch="yes"),
    "ready_sandbox_list": with_ready(sandbox=[1, 2]),
    "ready_sandbox_unknown": with_ready(sandbox={f"layer{i}": "active" for i in range(10_000)}),
    "ready_sandbox_number": with_ready(sandbox={"uid": 7}),
    "ready_sandbox_long": with_ready(sandbox={layer: "x" * 15_000 for layer in LAYERS}),  # accepted, cut short
    "ready_twice": lambda data: data + data,
    "ready_wrong_seq": lambda data: data[:4] + struct.pack("<I", 7) + data[8:],
    "before_ready": lambda data: frame(ACTION, 0, REPLY.pack(0, ACTION, 4) + b"\x00\x00\xff\xff") + data,
    "error_deep": lambda data: frame(ERROR, 0, DEEP_OBJECT),
    "error_huge": lambda data: json_frame(ERROR, 0, {"type": "Huge", "message": "x" * 200_000}),
    "error_oversize": lambda data: frame(ERROR, 0, b"{}", length=300_000),
    "error_not_object": lambda data: frame(ERROR, 0, b'"a string"'),
    "error_bad_utf8": lambda data: frame(ERROR, 0, b'{"message":"\xff\xfe"}'),
    "error_surrogates": lambda data: frame(
        ERROR, 0, b'{"phase":"init","type":"\\ud800","message":"lone \\udfff","traceback":"\\udbff"}'
    ),
    "error_wrong_types": lambda data: frame(
        ERROR, 0, b'{"phase":[1],"type":{"a":[1]},"message":12345,"traceback":Infinity}'
    ),
    "unknown_type": lambda data: bytes([99]) + data[1:],
    "wrong_direction": lambda data: bytes([SETUP]) + data[1:],
    "reserved_bytes": reserved_set,
}

ON_STEP = {
    "step_error_deep": lambda data: frame(ERROR, AT_STEP, DEEP_OBJECT),
    "step_ready": lambda data: json_frame(READY, AT_STEP, {"protocol": 2}),
    "reply_truncated": lambda data: frame(ACTION, AT_STEP, data[HEADER.size : -len(entries(data)[-1][2]) - 4]),
    "reply_wrong_agent": last_reply(lambda entry: entry.__setitem__(0, 99)),
    "reply_unknown_kind": last_reply(lambda entry: entry.__setitem__(1, 42)),
    "reply_trailing": lambda data: replies(AT_STEP, entries(data), tail=b"\x00tail"),
    "reply_oversize_entry": lambda data: replies(AT_STEP, entries(data), last_length=0x7FFFFFFF),
    "reply_error_deep": first_reply(ERROR, DEEP_OBJECT),
    "reply_error_bad_utf8": first_reply(ERROR, b"\xff\xfe"),
    "reply_error_not_object": first_reply(ERROR, b"[]"),
    "reply_error_wrong_types": first_reply(ERROR, b'{"type":5,"message":["a"],"traceback":null}'),
    "reply_hostile_action": first_reply(ACTION, b"\xff" * 68),
    "reply_hostile_talk": lambda data: first_reply(ACTION, entries(data)[0][2][:4] + b"\xff\xfe")(data),
    "frame_oversize": lambda data: data[:8] + struct.pack("<I", 0x7FFFFFFF) + data[12:],
    "seq_old": lambda data: data[:4] + struct.pack("<I", 0) + data[8:],
    "seq_far": lambda data: data[:4] + struct.pack("<I", 0xFFFFFFFF) + data[8:],
    "step_unknown_type": lambda data: bytes([99]) + data[1:],
    "step_reserved": reserved_set,
}


def mutated(data, seed):
    """``data`` with one to four bytes, anywhere but the length field, set to random values."""
    rng = random.Random(seed)
    changed = bytearray(data)
    positions = [i for i in range(len(data)) if not 8 <= i < HEADER.size]
    for position in rng.sample(positions, rng.randint(1, 4)):
        changed[position] = rng.randrange(256)
    return bytes(changed)


def pieces(data):
    """``data`` as many writes: its first 24 bytes one at a time, then the rest in chunks of 64."""
    return [data[i : i + 1] for i in range(min(24, len(data)))] + [data[i : i + 64] for i in range(24, len(data), 64)]


class Relay(threading.Thread):
    """Stands between the cell and the host: the cell's socket descriptor now leads here."""

    def __init__(self, attack):
        super().__init__(daemon=True)
        fd = host_socket_fd()
        self.host = socket.socket(fileno=os.dup(fd))
        self.cell, mine = socket.socketpair()
        os.dup2(mine.fileno(), fd)
        mine.close()
        self.attack = attack

    def run(self):
        pending = b""
        while True:
            readable, _, _ = select.select([self.host, self.cell], [], [])
            if self.host in readable:
                data = self.host.recv(1 << 16)
                if not data:
                    break
                self.cell.sendall(data)
            if self.cell in readable:
                data = self.cell.recv(1 << 16)
                if not data:
                    break
                pending += data
                while len(pending) >= HEADER.size and len(pending) >= HEADER.size + HEADER.unpack_from(pending)[2]:
                    size = HEADER.size + HEADER.unpack_from(pending)[2]
                    self.send(self.forge(pending[:size]))
                    pending = pending[size:]
        self.cell.close()

    def forge(self, data):
        """What goes to the host in place of the cell's frame ``data``: a list of writes."""
        kind, seq, _ = HEADER.unpack_from(data)
        attack = self.attack
        if attack == "split":
            return pieces(data)
        if attack.startswith("mutate-"):
            seed = int(attack.removeprefix("mutate-"))
            target = (kind, seq) == (READY, 0) if seed % 2 == 0 else (kind, seq) == (ACTION, AT_STEP)
            return [mutated(data, seed) if target else data]
        if kind == READY and attack in ON_READY:
            return [ON_READY[attack](data)]
        if kind == ACTION and seq == AT_STEP and attack in ON_STEP:
            return [ON_STEP[attack](data)]
        return [data]

    def send(self, writes):
        for i, piece in enumerate(writes):
            if i:
                time.sleep(0.002)  # each piece its own read on the host
            self.host.sendall(piece)


class FrameForger(NoopPolicy):
    def __init__(self, policy_env_info, attack="none", **kwargs):
        super().__init__(policy_env_info, **kwargs)
        if attack not in {*ON_READY, *ON_STEP, "none", "split"} and not attack.startswith("mutate-"):
            raise ValueError(f"no attack {attack!r}")
        self._attack = attack
        self._relayed_in = None  # the process whose socket it relays: each forked seat relays its own

    def agent_policy(self, agent_id):
        if self._relayed_in != os.getpid():  # once a process: a cell, or each seat forked after init
            self._relayed_in = os.getpid()
            Relay(self._attack).start()
        return super().agent_policy(agent_id)
