"""A free TCP port on 127.0.0.1 for a server a test starts (``ladder serve``, PostgreSQL): the suite's one
place that picks one. It imports nothing of the suite's, so that ``tests/postgres.py`` (which the
benchmarks load too) may use it."""

from __future__ import annotations

import socket


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]
