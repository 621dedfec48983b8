"""A policy writes to the operator's terminal: every text it controls reaches the screen inert.

Judged from the bytes a real pseudo-terminal received from ``policybox run``: none of the policy's
control sequences arrive raw, each is visible in its escaped form, and the result file keeps the
exact text the policy raised.
"""

from __future__ import annotations

import fcntl
import os
import pty
import re
import struct
import subprocess
import sys
import termios
import time

import pyte
import pytest
from conftest import policy

from policybox.inert import inert
from policybox.results import EpisodeResult

FORGER = policy("terminal.py:ForgeTerminal")
CRASHER = policy("terminal.py:ForgeTerminal", **{"kw.crash": "true"}) + ",name=crasher"
# What the policy sends and a terminal would obey; none may reach it raw.
RAW = {
    "clear screen": b"\x1b[2J",
    "window title": b"\x1b]0;PWNED",
    "hyperlink": b"\x1b]8;;http://evil",
    "cursor up, erase line": b"\x1b[1A\x1b[2KFORGED",
    "bell": b"\x07",
    "C1 CSI": "\x9b".encode(),
    "right-to-left override": "\u202e".encode(),
}
ESCAPED = [rb"\x1b[2J", rb"\x1b]0;PWNED-TITLE\x07", rb"\x1b]8;;http://evil.example/", rb"\x1b[1A\x1b[2KFORGED-STATUS"]


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("\x1b[2J", r"\x1b[2J"),
        ("a\tb\nc", "a\tb\nc"),  # tab and newline are text
        ("\r\x00\x7f\x9b", r"\x0d\x00\x7f\x9b"),
        ("\u202eevil\u2066", r"\u202eevil\u2066"),
        ("caf\u00e9 \u4e2d", "caf\u00e9 \u4e2d"),  # printable Unicode is left alone
        ("\ud800", r"\ud800"),
    ],
)
def test_inert_shows_every_control_character_escaped(text, shown):
    assert inert(text) == shown


def in_terminal(args: list[str], columns: int = 200) -> tuple[bytes, int]:
    """Run ``policybox ARGS`` with a pseudo-terminal as its stdin, stdout and stderr: every byte the
    terminal received, and the exit code."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 50, columns, 0, 0))
    env = {**os.environ, "TERM": "xterm-256color"}
    env.pop("COLUMNS", None)
    process = subprocess.Popen(
        [sys.executable, "-m", "policybox", *args], stdin=slave, stdout=slave, stderr=slave, env=env
    )
    os.close(slave)
    received = bytearray()
    give_up = time.monotonic() + 300
    while time.monotonic() < give_up:
        try:
            chunk = os.read(master, 65536)
        except OSError:  # EIO: the last holder of the terminal's other end has gone
            break
        if not chunk:
            break
        received += chunk
    os.close(master)
    return bytes(received), process.wait(timeout=60)


def test_run_shows_a_policys_control_sequences_inert(tmp_path):
    out = tmp_path / "result.json"
    args = ["run", "-n", "3", "-p", FORGER, "-p", CRASHER, "-p", "noop", "--steps", "5", "--out", str(out)]
    received, code = in_terminal([*args, "--log-dir", str(tmp_path / "logs")])
    assert code == 1, received.decode(errors="replace")
    for what, raw in RAW.items():
        assert raw not in received, f"the policy's {what} reached the terminal raw"
    for escaped in ESCAPED:  # the traceback and the crasher's log tail show each sequence, visibly
        assert received.count(escaped) >= 2, escaped
    assert b"[bold red]MARKUP[/]" in received  # rich markup in a policy's text is text, never style
    assert rb"\ud800" in received  # a lone surrogate, which no terminal can be sent, is shown escaped
    forger, crasher, _ = EpisodeResult.model_validate_json(out.read_text()).agents
    assert (forger.status, crasher.status) == ("error", "crashed")
    assert "\x1b[2J\x1b]0;PWNED-TITLE\x07" in forger.failure.message  # the result keeps the exact text
    assert forger.failure.message.endswith(r"REVERSED\ud800")  # all but the surrogate, made writable
    assert "\x1b[1A\x1b[2KFORGED-STATUS ok" in crasher.failure.log_tail


def test_a_terminal_shows_the_table_the_host_printed(tmp_path):
    """Played into a terminal emulator: the screen keeps every row of the table and shows the
    policy's sequences as text; the window title is untouched and nothing was erased or forged."""
    out = tmp_path / "result.json"
    args = ["run", "-n", "2", "-p", FORGER, "-p", "noop", "--steps", "3", "--out", str(out)]
    received, _ = in_terminal([*args, "--log-dir", str(tmp_path / "logs")], columns=200)
    screen = pyte.Screen(200, 400)
    pyte.ByteStream(screen).feed(received)
    lines = [line.rstrip() for line in screen.display]
    assert screen.title == ""
    assert any("ForgeTerminal" in line and " error " in line for line in lines)  # its row of the table
    assert any(r"error: RuntimeError at step 2: policy says: \x1b[2J" in line for line in lines)
    squeezed = "".join(re.sub(r"\s", "", line) for line in lines)
    assert r"\x1b[1A\x1b[2KFORGED-STATUSok" in squeezed
    assert any(" noop " in line and " ok " in line for line in lines)
    assert not any(line.lstrip("│ ").startswith("FORGED-STATUS") for line in lines)


def test_evaluate_shows_a_policys_failure_inert(tmp_path):
    """evaluate's failure causes quote the first failure's message: inert there too."""
    out = tmp_path / "board"
    args = ["evaluate", "-p", FORGER, "-p", "noop", "--episodes", "2", "--agents", "2", "--steps", "5"]
    received, code = in_terminal([*args, "--out", str(out), "--workers", "1"])
    assert code == 0, received.decode(errors="replace")
    for what, raw in RAW.items():
        assert raw not in received, f"the policy's {what} reached the terminal raw"
    screen = pyte.Screen(200, 400)
    pyte.ByteStream(screen).feed(received)
    text = "\n".join(line.rstrip() for line in screen.display)
    assert "ForgeTerminal error RuntimeError ×2" in text and r"\x1b[2J\x1b]0;PWNED-TITLE\x07" in text
    assert screen.title == ""
