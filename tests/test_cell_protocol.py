"""The cell's side of the handshake, driven directly over its socket."""

import json
import socket
from pathlib import Path

from policybox.host.launcher import SpawnLauncher
from policybox.host.record import AgentRecord
from policybox.host.sandbox import CellSandbox
from policybox.limits import Limits
from policybox.sandbox import SandboxLevel
from policybox.spec import PolicySpec
from policybox.wire import CELL_TO_HOST, MAX_CELL_FRAME, FrameDecoder, FrameType, encode_json


def launch(tmp_path):
    record = AgentRecord(0, PolicySpec(class_path="noop"), "noop", threads=1)
    unsandboxed = CellSandbox(record, SandboxLevel.OFF, [], Limits(), Path())
    with open(tmp_path / "cell.log", "wb") as output:
        return SpawnLauncher().launch(output.fileno(), unsandboxed)


def handshake(tmp_path, setup: dict):
    cell = launch(tmp_path)
    try:
        cell.sock.setblocking(True)
        cell.sock.settimeout(60)
        cell.sock.sendall(encode_json(FrameType.SETUP, setup))
        decoder = FrameDecoder(CELL_TO_HOST, MAX_CELL_FRAME)
        while not (frames := decoder.feed(cell.sock.recv(65536))):
            pass
        return frames[0], cell.exit_status(30)
    finally:
        cell.close()


def test_protocol_version_mismatch_is_a_clear_error(tmp_path):
    frame, exit_code = handshake(tmp_path, {"protocol": 999, "agents": [0], "seed": 0, "spec": {}, "env": {}})
    assert frame.type == FrameType.ERROR
    report = json.loads(frame.payload)
    assert report["phase"] == "init"
    assert "protocol version mismatch: host speaks 999, this cell speaks 2" in report["message"]
    assert exit_code == 1


def test_cell_exits_when_the_host_closes_its_end(tmp_path):
    cell = launch(tmp_path)
    try:
        cell.sock.shutdown(socket.SHUT_RDWR)
        assert cell.exit_status(30) == 2  # no SETUP ever came
    finally:
        cell.close()
