"""Caps what a policy can write to its log: a shared byte budget for stdout and stderr, then silence.

Python-level output (print, logging, warnings, tracebacks) goes through sys.stdout/sys.stderr and
is cut at the budget with one notice. Output that bypasses Python's streams (os.write, C code, child
processes) is bounded by the sandbox's file-size limit instead (RLIMIT_FSIZE, see cell.sandbox).
"""

from __future__ import annotations

import io
import os
import sys

NOTICE = b"\n[policybox: log limit reached; further output from this agent is discarded]\n"


class _Budget:
    def __init__(self, limit: int) -> None:
        self.remaining = max(0, limit - len(NOTICE))
        self.noticed = False


class CappedFd(io.RawIOBase):
    """Writes to a file descriptor until the shared budget is spent; then drops everything."""

    def __init__(self, fd: int, budget: _Budget) -> None:
        super().__init__()
        self._fd = fd
        self._budget = budget

    def writable(self) -> bool:
        return True

    # RawIOBase.write takes any buffer (and may return None); TextIOWrapper only ever gives this one bytes.
    def write(self, data: bytes | bytearray | memoryview) -> int:  # type: ignore[override]
        size = len(data)
        keep = bytes(data[: self._budget.remaining])
        self._budget.remaining -= len(keep)
        if len(keep) < size and not self._budget.noticed:
            keep += NOTICE
            self._budget.noticed = True
        view = memoryview(keep)
        while view:
            view = view[os.write(self._fd, view) :]
        return size


def cap_output(limit_bytes: int) -> None:
    budget = _Budget(limit_bytes)
    for name, fd in (("stdout", 1), ("stderr", 2)):
        # typeshed wants the buffer of a TextIOWrapper to be readable too (read, name); this stream only writes.
        stream = io.TextIOWrapper(
            CappedFd(fd, budget),  # type: ignore[type-var]
            encoding="utf-8",
            errors="backslashreplace",
            line_buffering=True,
            write_through=True,
        )
        setattr(sys, name, stream)
        setattr(sys, f"__{name}__", stream)
