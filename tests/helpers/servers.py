"""Servers the tests start as processes of their own: ``policybox ladder serve`` of a folder until it
answers, how long it takes to answer, and stopping a process and its group."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

from helpers.ladders import wait_until
from helpers.ports import free_port


def stop(process: subprocess.Popen) -> None:
    """SIGTERM to its process group (it stops what it started), then wait; SIGKILL if it will not."""
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGTERM)
    try:
        process.communicate(timeout=120)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.communicate(timeout=60)


@contextlib.contextmanager
def serving(folder: Path, log: Path) -> Iterator[tuple[str, subprocess.Popen]]:
    """A real ``policybox ladder serve`` of ``folder`` on a free port, at its default address, its output in
    ``log``: its URL once it answers, and its process; stopped after. It inherits this process's
    environment (a test's own ``TMPDIR``: conftest's ``temp_folder``)."""
    port = free_port()
    with log.open("w") as output:
        command = [sys.executable, "-m", "policybox", "ladder", "serve", str(folder), "--port", str(port)]
        serve = subprocess.Popen(command, stdout=output, stderr=subprocess.STDOUT, start_new_session=True)
        url = f"http://127.0.0.1:{port}"
        try:
            wait_until(lambda: _answers(url, serve, log), 120, "ladder serve to answer")
            yield url, serve
        finally:
            stop(serve)


def _answers(url: str, serve: subprocess.Popen, log: Path) -> bool:
    assert serve.poll() is None, log.read_text()
    try:
        with urllib.request.urlopen(url + "/api/standings", timeout=30) as answer:
            return answer.status == 200
    except OSError:
        return False


def answers(port: int, timeout: float = 3) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=timeout) as response:
            return response.status == 200
    except OSError:
        return False


def answer_within(port: int, seconds: float) -> float | None:
    """How long until GET / answers 200, or None if it did not within ``seconds``."""
    start = time.monotonic()
    while time.monotonic() - start < seconds:
        if answers(port):
            return time.monotonic() - start
        time.sleep(0.2)
    return None


def standings_seconds(url: str) -> float | None:
    """How long /api/standings took to answer 200; None if it did not."""
    start = time.monotonic()
    try:
        with urllib.request.urlopen(url + "/api/standings", timeout=60) as answer:
            answer.read()
            return time.monotonic() - start if answer.status == 200 else None
    except OSError:
        return None
