"""OutputPump: every cell's stdout and stderr reach its log file through a pipe the host reads and caps.

A cell holds only the write end of a pipe, never a descriptor of a host file: it cannot seek,
truncate, ``fallocate`` or otherwise reach the host's disk through its output. One thread per
episode copies every pipe into its agent's log file (created 0600) until the agent's byte cap;
past the cap it writes one notice and closes the pipe, so a cell that keeps writing (from C code,
a child process, ``os.write``) gets EPIPE instead of the host's disk or CPU. The cell's own Python
streams stop quietly at the same cap first (``policybox.cell.output``), so a policy that merely
prints a lot never sees the pipe close.

A log the host cannot write (a full disk) is cut short at the first write that fails: the pump
writes nothing more to it, so it has no hole, and keeps reading the pipe to the same cap, so the
agent plays on as if nothing happened; ``cut_short`` says why, for the agent's result. A log file
that cannot even be made is ``StorageFull`` from ``open``.
"""

from __future__ import annotations

import os
import select
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from policybox.storage import full_error, write_all, writing

CHUNK = 1 << 16
NOTICE = b"\n[policybox: output limit reached; the pipe from this agent is closed]\n"
POLL_S = 0.1
LOG_TAIL_BYTES = 4096  # of an agent's log: the end its result and its failure quote


@dataclass
class _Sink:
    log: int  # the log file's descriptor
    path: Path
    left: int  # bytes it may still take
    cut: bool = False  # a write failed: nothing more is written to it


class OutputPump:
    """Copies the output of every cell of one episode to its log file, on one background thread."""

    def __init__(self, limit_bytes: int) -> None:
        self._limit = limit_bytes
        self._poller = select.epoll()
        self._sinks: dict[int, _Sink] = {}
        self.cut_short: dict[Path, str] = {}  # the logs a write to failed, and why
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._wake_read, self._wake_write = os.pipe2(os.O_CLOEXEC | os.O_NONBLOCK)  # ends a poll at close
        self._poller.register(self._wake_read, select.EPOLLIN)
        self._thread = threading.Thread(target=self._run, name="policybox-output", daemon=True)
        self._thread.start()

    def open(self, log_path: Path) -> int:
        """A new pipe whose output goes to ``log_path`` (made 0600); its write end, for the cell only.

        The caller hands the write end to the cell and closes its own copy. StorageFull when the
        log's filesystem is full.
        """
        with writing(log_path):
            log = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_APPEND | os.O_CLOEXEC, 0o600)
        os.fchmod(log, 0o600)  # an existing file keeps its mode otherwise
        read_end, write_end = os.pipe2(os.O_CLOEXEC)
        os.set_blocking(read_end, False)
        with self._lock:
            self._sinks[read_end] = _Sink(log, log_path, self._limit)
            self._poller.register(read_end, select.EPOLLIN)
        return write_end

    def _run(self) -> None:
        while True:
            events = self._poller.poll(POLL_S)
            with self._lock:
                for fd, _ in events:
                    if fd in self._sinks:
                        self._copy(fd)
                if self._stopping.is_set() and (not self._sinks or all(fd == self._wake_read for fd, _ in events)):
                    return

    def _copy(self, fd: int) -> None:
        try:
            data = os.read(fd, CHUNK)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        sink = self._sinks[fd]
        if not data:
            self._retire(fd)
            return
        keep = data[: sink.left]
        sink.left -= len(keep)
        self._write(sink, keep)
        if len(keep) < len(data):
            self._write(sink, NOTICE)
            self._retire(fd)

    def _write(self, sink: _Sink, data: bytes) -> None:
        if sink.cut:
            return
        try:
            write_all(sink.log, data)
        except OSError as exc:  # a full disk must not stop the episode: the log is cut short, its result says why
            sink.cut = True
            full = full_error(exc, sink.path)
            self.cut_short[sink.path] = f"cut short: {full.problem if full else exc.strerror}"

    def _retire(self, fd: int) -> None:
        sink = self._sinks.pop(fd)
        self._poller.unregister(fd)
        os.close(fd)
        os.close(sink.log)

    def close(self, timeout: float = 1.0) -> None:
        """Copy what the (already stopped) cells left in their pipes, then close everything.

        Waits at most ``timeout`` for pipes still held open (a process that escaped its cell)."""
        give_up = time.monotonic() + timeout
        while self._sinks and time.monotonic() < give_up:
            time.sleep(0.01)
        self._stopping.set()
        os.write(self._wake_write, b"x")
        self._thread.join()
        with self._lock:
            for fd in list(self._sinks):
                self._retire(fd)
        self._poller.close()
        os.close(self._wake_read)
        os.close(self._wake_write)


def log_tail(path: Path) -> str | None:
    """The end of an agent's log (its last LOG_TAIL_BYTES), None if it is empty or cannot be read."""
    try:
        with open(path, "rb") as log:
            log.seek(max(0, path.stat().st_size - LOG_TAIL_BYTES))
            return log.read().decode("utf-8", "replace") or None
    except OSError:
        return None
