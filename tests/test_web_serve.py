"""``policybox ladder serve`` as a process on 127.0.0.1, against clients that open connections and
send nothing or half a request: it keeps answering, stays alive, and writes no traceback per
connection. Judged from outside: HTTP answers, the process, its stderr.
"""

from __future__ import annotations

import contextlib
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers.ladders import api_ladder
from helpers.ports import free_port
from helpers.servers import answer_within

DESCRIPTORS = 512  # the server's limit on open files: fewer than the attack's connections
ATTACK = 1100


@pytest.fixture
def server(tmp_path: Path) -> Iterator[tuple[subprocess.Popen, int, Path]]:
    """``ladder serve`` of an empty ladder, with ``DESCRIPTORS`` open files at most (hard limit)."""
    folder = tmp_path / "cup"
    with api_ladder(folder):
        pass
    port, stderr = free_port(), tmp_path / "serve.stderr"
    command = [
        "prlimit",
        f"--nofile={DESCRIPTORS}:{DESCRIPTORS}",
        sys.executable,
        "-m",
        "policybox",
        "ladder",
        "serve",
        str(folder),
        "--port",
        str(port),
        "--request-timeout",
        "2",
    ]
    with stderr.open("wb") as errors:
        process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=errors)
    try:
        assert answer_within(port, 120) is not None, stderr.read_text()
        yield process, port, stderr
    finally:
        process.terminate()
        process.wait(30)


def test_silent_and_half_open_connections_do_not_lock_visitors_out(server):
    process, port, stderr = server
    attackers: list[socket.socket] = []
    give_up = time.monotonic() + 60
    with contextlib.ExitStack() as closing:
        while len(attackers) < ATTACK and time.monotonic() < give_up:
            try:
                attacker = socket.create_connection(("127.0.0.1", port), timeout=5)
            except OSError:
                continue  # the kernel's queue was full for a moment
            closing.callback(attacker.close)
            attackers.append(attacker)
            if len(attackers) % 2:
                with contextlib.suppress(OSError):  # one the server refused may be reset already
                    attacker.sendall(b"GET / HT")  # half a request line, never finished
        assert len(attackers) > DESCRIPTORS
        waited = answer_within(port, 20)  # while every attacker still holds its connection
        assert waited is not None, stderr.read_text()[-2000:]
        assert process.poll() is None
    assert answer_within(port, 10) is not None  # and once they have all gone
    assert process.poll() is None
    assert stderr.stat().st_size < 20_000, stderr.read_text()[-2000:]
