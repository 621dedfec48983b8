"""A pytest plugin that measures what each test costs -- the CPU seconds it used, children included, and
the processes (and threads) it started -- and prints the costliest tests at the end of the run, so that
whoever wonders where the suite's CPU goes sees it; ``--costs-file FILE`` writes every test's. ``-p no:costs``
switches it off.

A test's cost runs from the start of its setup to the end of its teardown: the fixtures it builds count
(a session-scoped one is paid by the first test that asks for it), and so does what servers started
earlier do for it meanwhile.

It measures with Linux's ``perf_event_open``, on the thread that runs the tests, with ``inherit``: the
kernel then follows every process and thread created after the events were opened -- cells, zygotes,
browsers, servers, detached or not, live or exited -- and nothing else. That is exact per xdist worker,
where machine-wide counters (/proc/stat) would mix in the other worker's tests and the process tree
(psutil) misses what already exited or was orphaned. Two kinds of events:

* a task clock, one counter: reading it gives the CPU nanoseconds of this thread and of every process
  and thread started since (by it or by them), so the difference across a test is the test's CPU;
* a dummy event with ``task`` set on each CPU, whose ring buffer receives a fork record for each new
  process or thread; a process is one whose pid is its tid. One buffer per CPU because the kernel
  refuses to map a buffer of an inherited event that follows a task on every CPU; per-CPU buffers are
  what ``perf record`` uses. Should a buffer fill up within a test the kernel drops records and says how
  many (``PERF_FORMAT_LOST``): that test's counts are then lower bounds, printed with "≥".

Where ``perf_event_open`` is unavailable (not Linux, not allowed, an old kernel), the CPU comes from
``getrusage`` (this process and its reaped children) plus the CPU of the live descendants -- approximate,
for it misses what was orphaned -- and processes are not counted ("?"). Measuring never fails a test:
an error stops it, and the summary says why.

Under xdist the workers measure and send each test's cost to the controller in its teardown report's
``user_properties`` (as ``("cost", {...})``, which xdist serialises, and ``--junitxml`` would write as a
property); the controller prints the summary."""

from __future__ import annotations

import contextlib
import ctypes
import json
import mmap
import os
import platform
import resource
import struct
import sys
import threading
import time
from collections.abc import Generator
from pathlib import Path
from typing import Any, NamedTuple

import psutil
import pytest

SHOWN = 15
TITLE = "costliest tests (CPU seconds, children included)"

# perf_event_open(2) and linux/perf_event.h.
SYSCALL_NUMBERS = {"x86_64": 298, "aarch64": 241, "riscv64": 241}
PERF_TYPE_SOFTWARE = 1
PERF_COUNT_SW_TASK_CLOCK = 1
PERF_COUNT_SW_DUMMY = 9  # counts nothing: there for the records it asks for
INHERIT = 1 << 1  # bits of the flags word of struct perf_event_attr
TASK = 1 << 13  # fork and exit records
PERF_FORMAT_LOST = 1 << 4  # read() also gives the records dropped for want of room (Linux 6.0)
PERF_FLAG_FD_CLOEXEC = 1 << 3
PERF_RECORD_FORK = 7
# All CPUs' ring buffers together. With two CPUs, 2 MiB each: 65536 fork and exit records (32 bytes) per CPU
# and test, room for a test that starts thousands of threads (a Ray cluster, a browser).
BUFFER_BYTES = 4 << 20
DATA_HEAD = 1024  # offset of data_head (then data_tail) in the buffer's first page


class Reading(NamedTuple):
    """What this thread and all it started since measuring began have used; for one test, the
    difference of two readings."""

    cpu_s: float
    wall_s: float  # the monotonic clock: a test that waits more than it works shows here
    processes: int | None  # None: not counted
    threads: int | None
    lost: int  # fork records the kernel dropped: the counts are then lower bounds

    def since(self, start: Reading) -> Reading:
        return Reading(
            self.cpu_s - start.cpu_s,
            self.wall_s - start.wall_s,
            _difference(self.processes, start.processes),
            _difference(self.threads, start.threads),
            self.lost - start.lost,
        )


def _difference(end: int | None, start: int | None) -> int | None:
    return None if end is None or start is None else end - start


def perf_event_open(config: int, flags: int, cpu: int, read_format: int = 0) -> int:
    """A software event on the calling thread (and, with INHERIT, on all it starts from now on)."""
    machine = platform.machine()
    if sys.platform != "linux" or machine not in SYSCALL_NUMBERS:
        raise OSError(f"no perf_event_open on {sys.platform} {machine}")
    attr = bytearray(128)  # struct perf_event_attr, PERF_ATTR_SIZE_VER7
    struct.pack_into("IIQ", attr, 0, PERF_TYPE_SOFTWARE, len(attr), config)
    struct.pack_into("QQ", attr, 32, read_format, flags)
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    arguments = (ctypes.c_long(0), ctypes.c_long(cpu), ctypes.c_long(-1), ctypes.c_ulong(PERF_FLAG_FD_CLOEXEC))
    pointer = (ctypes.c_char * len(attr)).from_buffer(attr)  # writable: the kernel may write its size back
    fd = libc.syscall(ctypes.c_long(SYSCALL_NUMBERS[machine]), pointer, *arguments)
    if fd < 0:
        error = ctypes.get_errno()
        raise OSError(error, f"perf_event_open: {os.strerror(error)}")
    return fd


def online_cpus() -> list[int]:
    """The CPUs tasks run on, from /sys's "0-3,6" (numbers may have gaps)."""
    cpus: list[int] = []
    for span in Path("/sys/devices/system/cpu/online").read_text().strip().split(","):
        first, _, last = span.partition("-")
        cpus += range(int(first), int(last or first) + 1)
    return cpus


class ForkRing:
    """One CPU's ring buffer of fork and exit records, of this thread's descendants while they run there."""

    def __init__(self, cpu: int, data_pages: int) -> None:
        self.fd = perf_event_open(PERF_COUNT_SW_DUMMY, INHERIT | TASK, cpu, PERF_FORMAT_LOST)
        self.size = data_pages * mmap.PAGESIZE
        try:
            self.map = mmap.mmap(self.fd, mmap.PAGESIZE + self.size)  # writable: the kernel keeps unread records
        except Exception:
            os.close(self.fd)
            raise

    def drain(self) -> tuple[int, int]:
        """The processes and threads started since the last drain; their records' room is the kernel's again."""
        head, tail = struct.unpack_from("QQ", self.map, DATA_HEAD)
        start, end = tail % self.size, tail % self.size + head - tail
        data = self._data(start, min(end, self.size)) + self._data(0, max(end - self.size, 0))  # wraps around
        processes = threads = position = 0
        while position < len(data):
            kind, _, size = struct.unpack_from("IHH", data, position)
            if kind == PERF_RECORD_FORK:
                pid, _, tid, _ = struct.unpack_from("IIII", data, position + 8)
                if pid == tid:
                    processes += 1
                else:
                    threads += 1  # of an existing process
            position += size
        struct.pack_into("Q", self.map, DATA_HEAD + 8, head)
        return processes, threads

    def _data(self, start: int, end: int) -> bytes:
        return self.map[mmap.PAGESIZE + start : mmap.PAGESIZE + end]

    def lost(self) -> int:
        return struct.unpack("QQ", os.read(self.fd, 16))[1]  # (count, lost): a dummy's count stays 0

    def close(self) -> None:
        self.map.close()
        os.close(self.fd)


class PerfMeter:
    """Readings from perf events opened on the calling thread."""

    def __init__(self) -> None:
        self.clock = perf_event_open(PERF_COUNT_SW_TASK_CLOCK, INHERIT, -1)
        self.rings: list[ForkRing] = []
        try:
            cpus = online_cpus()
            pages = max(BUFFER_BYTES // mmap.PAGESIZE // len(cpus), 16)
            for cpu in cpus:
                self.rings.append(ForkRing(cpu, 1 << (pages.bit_length() - 1)))  # a power of two, as mmap wants
        except Exception:
            self.close()  # a leftover event would go on following every process
            raise
        self.processes = self.threads = 0  # started since the rings were opened

    def read(self) -> Reading:
        cpu_s = struct.unpack("Q", os.read(self.clock, 8))[0] / 1e9  # first: what follows is not the test's
        for ring in self.rings:
            processes, threads = ring.drain()
            self.processes += processes
            self.threads += threads
        lost = sum(ring.lost() for ring in self.rings)
        return Reading(cpu_s, time.monotonic(), self.processes, self.threads, lost)

    def close(self) -> None:
        for ring in self.rings:
            ring.close()
        os.close(self.clock)


class UsageMeter:
    """The fallback: this process's and its reaped children's CPU, plus what the live descendants have
    used (they count their own reaped children)."""

    def read(self) -> Reading:
        cpu_s = 0.0
        for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN):
            usage = resource.getrusage(who)
            cpu_s += usage.ru_utime + usage.ru_stime
        for process in psutil.Process().children(recursive=True):
            with contextlib.suppress(psutil.Error):  # gone since it was listed: its parent counts it now
                cpu_s += sum(process.cpu_times()[:4])  # user, system, children_user, children_system
        return Reading(cpu_s, time.monotonic(), None, None, 0)

    def close(self) -> None:
        pass


def open_meter() -> tuple[PerfMeter | UsageMeter, str | None]:
    """The meter, and what the summary should say about it."""
    try:
        return PerfMeter(), None
    except Exception as error:
        return (
            UsageMeter(),
            f"perf_event_open unavailable ({error}): CPU from getrusage and psutil, processes not counted",
        )


class Costs:
    """Measures each test (in a plain run, or in an xdist worker) and, where the summary is printed
    (a plain run, or the xdist controller), collects the costs and prints the costliest."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.meter: PerfMeter | UsageMeter | None = None
        self.thread = 0  # the one the meter was opened on
        self.start: Reading | None = None
        self.note: str | None = None  # for the summary: sent with the next test's cost
        self.costs: list[tuple[str, dict[str, Any]]] = []
        self.notes: set[str] = set()

    def pytest_sessionstart(self) -> None:
        if self.config.pluginmanager.hasplugin("dsession"):
            return  # the xdist controller: it runs no test
        self.thread = threading.get_native_id()  # perf follows this thread and what it starts, not others
        self.meter, self.note = open_meter()

    def pytest_runtest_logstart(self, nodeid: str) -> None:
        if self.meter is None:
            return
        if threading.get_native_id() != self.thread:
            self.stop(f"{nodeid} runs on a thread other than the one measured")
            return
        try:
            self.start = self.meter.read()
        except Exception as error:
            self.stop(f"{error!r} at {nodeid}")

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(
        self, item: pytest.Item, call: pytest.CallInfo[None]
    ) -> Generator[None, pytest.TestReport, pytest.TestReport]:
        end = self.end_of(item.nodeid) if call.when == "teardown" else None
        report = yield
        rounded = None if end is None else end._replace(cpu_s=round(end.cpu_s, 3), wall_s=round(end.wall_s, 3))
        cost: dict[str, Any] = {} if rounded is None else rounded._asdict()
        if self.note and call.when == "teardown":
            cost["note"], self.note = self.note, None
        if cost:
            report.user_properties.append(("cost", cost))
        return report

    def end_of(self, nodeid: str) -> Reading | None:
        """The cost of the test now over, from the start of its setup."""
        start, self.start = self.start, None
        if self.meter is None or start is None:
            return None
        try:
            return self.meter.read().since(start)
        except Exception as error:
            self.stop(f"{error!r} at {nodeid}")
            return None

    def stop(self, why: str) -> None:
        if self.meter is not None:
            self.meter.close()
        self.meter, self.note = None, f"measuring stopped: {why}"

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.when != "teardown":
            return
        for name, cost in report.user_properties:  # pairs: lists, not tuples, once xdist has sent them
            if name == "cost":
                if "note" in cost:
                    self.notes.add(cost["note"])
                if "cpu_s" in cost:
                    self.costs.append((report.nodeid, cost))

    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        if not self.costs and not self.notes:
            return
        terminalreporter.write_sep("=", TITLE)
        terminalreporter.write_line(f"{'CPU s':>9} {'wall s':>7} {'processes':>10} {'threads':>8}  test")
        for nodeid, cost in sorted(self.costs, key=lambda entry: -entry[1]["cpu_s"])[:SHOWN]:
            processes, threads = (_count(cost[key], cost["lost"]) for key in ("processes", "threads"))
            terminalreporter.write_line(
                f"{cost['cpu_s']:9.2f} {cost['wall_s']:7.1f} {processes:>10} {threads:>8}  {nodeid}"
            )
        terminalreporter.write_line(self.totals())
        for note in sorted(self.notes):
            terminalreporter.write_line(f"costs: {note}")
        if path := self.config.getoption("costs_file"):
            Path(path).write_text("".join(json.dumps({"test": nodeid, **cost}) + "\n" for nodeid, cost in self.costs))
            terminalreporter.write_line(f"costs: every test's in {path}")

    def totals(self) -> str:
        costs = [cost for _, cost in self.costs]
        lost = sum(cost["lost"] for cost in costs)
        processes, threads = (_count(_sum([cost[key] for cost in costs]), lost) for key in ("processes", "threads"))
        cpu_s = sum(cost["cpu_s"] for cost in costs)
        return f"all {len(costs)} tests measured: {cpu_s:.2f} CPU s, {processes} processes, {threads} threads"

    def pytest_unconfigure(self) -> None:
        if self.meter is not None:
            self.meter.close()
            self.meter = None


def _sum(counts: list[int | None]) -> int | None:
    """None if any test's count is unknown (a worker that fell back to getrusage)."""
    return None if None in counts else sum(counts)  # type: ignore[arg-type]


def _count(count: int | None, lost: int) -> str:
    """A count as printed: "?" if not counted, "≥n" if records were lost."""
    return "?" if count is None else f"≥{count}" if lost else str(count)


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--costs-file", metavar="FILE", help="write every test's cost to FILE, a JSON object a line")


def pytest_configure(config: pytest.Config) -> None:
    # An object of its own per configuration: pytester runs pytest inside pytest, with this module too.
    config.pluginmanager.register(Costs(config), "costs-of-this-run")
