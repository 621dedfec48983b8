"""Landlock confinement, checked in real child processes (the pytest process itself is never restricted).

Each test runs a fresh interpreter that calls ``restrict(...)`` and then tries things; the child exits 0
only if every attempt behaved as expected, and prints what went wrong otherwise.
"""

from __future__ import annotations

import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from policybox.cell.landlock import LandlockUnavailable, abi_version

PRELUDE = """\
import os, socket, sys
from policybox.cell.landlock import restrict

def denied(action, *args, **kwargs):
    try:
        action(*args, **kwargs)
    except PermissionError:
        return
    sys.exit(f"not denied: {action.__name__}{args}")

"""


@pytest.fixture
def abi() -> int:
    try:
        return abi_version()
    except LandlockUnavailable as exc:
        pytest.skip(str(exc))


def run_confined(body: str) -> None:
    """Run PRELUDE + body in a child interpreter; fail with its output unless it exits 0."""
    code = PRELUDE + textwrap.dedent(body)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, f"child exited {done.returncode}:\n{done.stdout}{done.stderr}"


def test_abi_version_is_positive(abi: int) -> None:
    assert isinstance(abi, int)
    assert abi >= 1


def test_filesystem_read_only_and_read_write(abi: int, tmp_path: Path) -> None:
    writable, other = tmp_path / "a", tmp_path / "b"
    writable.mkdir()
    other.mkdir()
    existing = other / "existing.txt"
    existing.write_text("original")
    run_confined(f"""
        restrict(read_only=["/"], read_write=[{str(writable)!r}])
        # Readable everywhere under /.
        assert open({str(existing)!r}).read() == "original"
        os.listdir({str(other)!r})
        # Writable inside read_write.
        with open({str(writable / "new.txt")!r}, "w") as f:
            f.write("written")
        os.mkdir({str(writable / "sub")!r})
        os.rename({str(writable / "new.txt")!r}, {str(writable / "sub" / "moved.txt")!r})
        # Nothing written, created or removed outside it.
        denied(open, {str(other / "new.txt")!r}, "w")
        denied(open, {str(existing)!r}, "a")
        denied(os.truncate, {str(existing)!r}, 0)
        denied(os.remove, {str(existing)!r})
        denied(os.mkdir, {str(other / "dir")!r})
    """)
    assert (writable / "sub" / "moved.txt").read_text() == "written"
    assert not (other / "new.txt").exists()
    assert not (other / "dir").exists()
    assert existing.read_text() == "original"


def test_read_write_file_rule(abi: int, tmp_path: Path) -> None:
    """A single file in read_write gets only the file rights (a directory right there would be EINVAL)."""
    target = tmp_path / "log.txt"
    target.write_text("")
    run_confined(f"""
        restrict(read_only=["/"], read_write=[{str(target)!r}, {str(tmp_path / "missing")!r}])
        with open({str(target)!r}, "a") as f:
            f.write("ok")
        denied(open, {str(tmp_path / "sibling.txt")!r}, "w")
    """)
    assert target.read_text() == "ok"


@pytest.mark.parametrize("block_tcp", [True, False])
def test_tcp_connect(abi: int, block_tcp: bool) -> None:
    if abi < 4:
        pytest.skip(f"Landlock ABI {abi} has no network rights (needs 4)")
    with socket.create_server(("127.0.0.1", 0)) as server:
        port = server.getsockname()[1]
        attempt = "denied(s.connect, ('127.0.0.1', port))" if block_tcp else "s.connect(('127.0.0.1', port))"
        run_confined(f"""
            restrict(read_only=["/"], read_write=[], block_tcp={block_tcp})
            port = {port}
            with socket.socket() as s:
                {attempt}
        """)
        # A loopback connect completes its handshake before connect() returns, so any connection the
        # child made is already queued: a non-blocking accept tells without waiting.
        server.setblocking(False)
        if block_tcp:
            with pytest.raises(BlockingIOError):
                server.accept()
        else:
            server.accept()[0].close()


@pytest.mark.parametrize("scope", [True, False])
def test_signal_scope(abi: int, scope: bool) -> None:
    if abi < 6:
        pytest.skip(f"Landlock ABI {abi} has no scopes (needs 6)")
    helper = subprocess.Popen(["sleep", "30"])
    try:
        attempt = "denied(os.kill, pid, 0)" if scope else "os.kill(pid, 0)"
        run_confined(f"""
            restrict(read_only=["/"], read_write=[], scope={scope})
            pid = {helper.pid}
            {attempt}
            os.kill(os.getpid(), 0)  # inside the domain: allowed
        """)
        assert helper.poll() is None
    finally:
        helper.kill()
        helper.wait()
