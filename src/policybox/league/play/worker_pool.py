"""The local backend: worker processes (``policybox.league.play.worker``) that play a driver's episodes.

Each worker is ``policybox.league.play.worker``, forked from the zygote its cells fork from (``Zygote.start``),
or where they fork from none a fresh interpreter (``sys.executable -I -m``); never a re-import of the
caller's ``__main__`` (so ``policybox.evaluate`` works from a script without a main guard, from
stdin and from a notebook); in a session of its own (a terminal's Ctrl-C reaches the driver alone,
never a worker mid-episode), killed by the kernel if the driver dies. One reader thread per worker
turns its replies into the futures ``submit`` handed out; a worker that is lost fails its futures
with ``WorkerLost`` (the machinery's failure: the driver plays those episodes again) and is replaced
on the next ``submit``.

Stopping is always bounded: when the driver is done it asks each worker to stop; when it is
interrupted (Ctrl-C, SIGTERM, an error) it sends SIGTERM at once -- a worker then stops its episode,
its cells and its zygote -- and SIGKILLs whatever is left after ``STOP_GRACE_S``.

A pool starts its workers with its first check or episode, from the zygote of that episode's game: about
0.04 s of CPU a worker, against 0.8 s for an interpreter that imports the game's host side itself; their
cells fork from the same zygote (``_Worker.offer``: one zygote a pool, not one a worker). A
program that runs one tournament or ladder run after another in one process (a notebook, a
script looping over ``Ladder.run``, a test run) may keep them instead: within ``kept_workers()`` a run
given no pool of its own takes the one kept for its worker count and budget (``local_workers``), and
when the run is over it gives the pool back rather than stopping it -- a worker still busy with the run's
work is stopped then (SIGTERM, as on an interrupt), the idle ones wait for the next run.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from concurrent.futures import Future
from multiprocessing.connection import Connection
from pathlib import Path
from typing import TYPE_CHECKING, Any

from policybox.host.budget import Budget
from policybox.host.keeping import Keeping
from policybox.host.zygote import ForkedProcess, Zygote, ZygoteError, shared_zygote
from policybox.league.play.runner import EpisodeJob
from policybox.settings import EpisodeSettings, zygote_preload
from policybox.spec import PolicySpec

if TYPE_CHECKING:
    from policybox.files.setup_scripts import SetupOutcome
    from policybox.files.version_files import Stored

WORKER = "policybox.league.play.worker"
STOP_GRACE_S = 5.0
MAX_CHECKS = 3  # a worker lost while it checks is replaced; the check is tried this often
Kept = dict[tuple[Any, ...], "LocalWorkers"]  # kept_workers()'s pools, by their role, worker count and budget


class WorkerLost(RuntimeError):
    """A worker process ended while episodes were in its hands (the machinery's failure, not a policy's)."""


class _Worker:
    """One worker process: its connection, the futures of what it was asked, and the thread reading replies.
    Forked from ``zygote`` where one is given (and can fork it), else a fresh interpreter."""

    def __init__(self, start: tuple[Any, ...], zygote: Zygote | None) -> None:
        ours, theirs = socket.socketpair()
        self._offers, their_offers = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            with theirs, their_offers:
                self.process = _worker_process(zygote, theirs.fileno(), their_offers.fileno())
        except BaseException:
            ours.close()
            self._offers.close()
            raise
        self.offered: dict[tuple[str, ...], Zygote] = {}  # the driver's zygotes it has a channel to
        self.connection = Connection(ours.detach())
        self.pending: dict[Any, Future[Any]] = {}
        self.alive = True
        self._lock = threading.Lock()
        self.connection.send(start)
        self._reader = threading.Thread(target=self._read, name=f"policybox-worker-{self.process.pid}", daemon=True)
        self._reader.start()

    def ask(self, key: Any, message: tuple[Any, ...]) -> Future[Any]:
        """Send ``message``; the future of its reply, keyed ``key`` (a job's, or "check")."""
        future: Future[Any] = Future()
        with self._lock:
            if not self.alive:
                future.set_exception(WorkerLost(f"worker {self.process.pid} is gone"))
                return future
            self.pending[key] = future
        try:
            self.connection.send(message)
        except OSError:
            self._lost()
        return future

    def offer(self, zygote: Zygote) -> None:
        """Give the worker a channel to ``zygote`` (the driver's), once: its cells of that preload fork there."""
        if self.offered.get(zygote.preload) is zygote:
            return
        try:
            with zygote.channel() as channel:
                socket.send_fds(self._offers, [json.dumps(zygote.preload).encode()], [channel.fileno()])
        except (ZygoteError, OSError):
            return  # the zygote or the worker is gone: the worker starts its own, or is found lost
        self.offered[zygote.preload] = zygote

    def _read(self) -> None:
        while True:
            try:
                reply = self.connection.recv()
            except (EOFError, OSError):
                self._lost()
                return
            key = "check" if reply[0] == "checked" else reply[1]
            with self._lock:
                future = self.pending.pop(key, None)
            if future is None:
                continue
            outcome = reply[-1]
            if isinstance(outcome, BaseException):
                future.set_exception(outcome)
            else:
                future.set_result(outcome)

    def _lost(self) -> None:
        with self._lock:
            self.alive = False
            pending, self.pending = self.pending, {}
        code = self.process.poll()
        for future in pending.values():
            future.set_exception(WorkerLost(f"worker {self.process.pid} was lost (exit code {code})"))

    def stop(self) -> None:
        """Ask the worker to finish (its zygote and cells go with it)."""
        with contextlib.suppress(OSError):
            self.connection.send(("stop",))

    def terminate(self) -> None:
        """SIGTERM the worker's whole process group: it stops its episode and cells at once."""
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.process.pid, signal.SIGTERM)

    def reap(self, give_up: float) -> None:
        """Wait for it until ``give_up`` (monotonic), SIGKILL its group after, close its end, and count it
        lost."""
        try:
            self.process.wait(max(0.0, give_up - time.monotonic()))
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()
        self.connection.close()
        self._offers.close()
        self._reader.join(timeout=1.0)
        self._lost()  # at once, not when its reader gets to it: a kept pool's next run must start another


def _worker_process(zygote: Zygote | None, fd: int, offers: int) -> subprocess.Popen[bytes] | ForkedProcess:
    """The worker process serving ``fd`` (and taking offers on ``offers``): forked from ``zygote`` if it can,
    else a fresh interpreter."""
    if zygote is not None:
        with contextlib.suppress(ZygoteError):  # it died meanwhile: an interpreter does as well, slower
            return zygote.start(WORKER, ["--fd", "{0}", "--offers", "{1}"], [fd, offers])
    command = [sys.executable, "-I", "-m", WORKER, "--fd", str(fd), "--offers", str(offers)]
    return subprocess.Popen(
        [*command, "--parent-pid", str(os.getpid())],
        pass_fds=(fd, offers),
        stdin=subprocess.DEVNULL,
        start_new_session=True,  # deaf to the terminal's Ctrl-C: the driver stops it
    )


class LocalWorkers:
    """The local backend (an ``EpisodeRunner``): ``count`` worker processes, each pinned to a CPU, started
    with the first check or episode (forked from the zygote its cells fork from, when they fork); their
    cells share ``budget``, and fork from one zygote per preload: the one this process keeps
    (``kept_zygotes``), else the pool's own, started with the first episode that needs it."""

    def __init__(self, count: int, budget: Budget | None) -> None:
        self.count = count
        self._budget = budget
        self._zygotes: dict[tuple[str, ...], Zygote] = {}  # the pool's own (outside kept_zygotes)
        self._workers: list[_Worker | None] = [None] * count  # None: not started yet
        self._jobs = 0
        self.kept = False  # kept_workers()'s: given back, not stopped, when a run is done with it
        self.in_use = False  # a kept pool serves one run at a time
        self.inherited = _inherited()  # what its workers start with: a run elsewhere needs others

    def __enter__(self) -> LocalWorkers:
        return self

    def __exit__(self, exc_type: object = None, *exc: object) -> None:
        self.close(interrupted=exc_type is not None)

    @property
    def pids(self) -> set[int]:
        """Its workers' processes (not their zygotes or cells)."""
        return {worker.process.pid for worker in self._started()}

    def check(self, specs: list[PolicySpec], settings: EpisodeSettings, agents: int) -> None:
        """The first worker's check; raise what it found wrong, if anything. A worker lost meanwhile is
        the machinery's failure: it is replaced and the check tried again."""
        for attempt in range(1, MAX_CHECKS + 1):
            try:
                self._live(0, settings).ask("check", ("check", specs, settings, agents)).result()
                return
            except WorkerLost:
                if attempt == MAX_CHECKS:
                    raise

    def submit(self, job: EpisodeJob) -> Future[str]:
        """Play ``job`` on the least busy worker; its EpisodeResult as JSON."""
        return self._ask("play", job.model_dump_json(), job.settings)

    def set_up(
        self, stored: Stored, settings: EpisodeSettings, out: Path, timeout_s: float, environments: Path, label: str
    ) -> Future[SetupOutcome]:
        """Run ``policybox.files.setup_scripts.prepare_version`` with these arguments on the least busy
        worker; its outcome."""
        return self._ask("setup", (stored, settings, out, timeout_s, environments, label), settings)

    def _ask(self, kind: str, payload: Any, settings: EpisodeSettings) -> Future[Any]:
        worker = min((self._live(index, settings) for index in range(self.count)), key=lambda w: len(w.pending))
        self._jobs += 1
        return worker.ask(self._jobs, (kind, self._jobs, payload))

    def _live(self, index: int, settings: EpisodeSettings) -> _Worker:
        """Worker ``index`` -- started if it was not yet, replaced if it was lost -- with a channel to the
        zygote its cells of ``settings`` fork from, if they fork (a new worker forks from it too)."""
        zygote = self._zygote(settings)
        worker = self._workers[index]
        if worker is None or not worker.alive:
            if worker is not None:
                worker.reap(time.monotonic())
            environment, folder = dict(os.environ), os.getcwd()  # a forked worker starts with the zygote's
            worker = self._workers[index] = _Worker(("start", self._budget, index, environment, folder), zygote)
        if zygote is not None:
            worker.offer(zygote)
        return worker

    def _zygote(self, settings: EpisodeSettings) -> Zygote | None:
        """The zygote cells of ``settings`` fork from, if they fork; None if it cannot start (a --preload
        not installed: the worker's own attempt says why)."""
        if settings.mode != "process" or settings.launcher != "zygote":
            return None
        try:
            return shared_zygote(zygote_preload(settings), self._zygotes)
        except ZygoteError:
            return None

    def _started(self) -> list[_Worker]:
        return [worker for worker in self._workers if worker is not None]

    def close(self, interrupted: bool) -> None:
        """Stop every worker within ``STOP_GRACE_S``: asked to, or at once with SIGTERM when interrupted.
        A kept pool is given back instead: only its workers still busy are stopped, with SIGTERM."""
        if self.kept:
            busy = [worker for worker in self._started() if worker.pending]
            for worker in busy:
                worker.terminate()
            self._reap(busy)
            self.in_use = False
            return
        for worker in self._started():
            worker.terminate() if interrupted else worker.stop()
        self._reap(self._started())
        for zygote in self._zygotes.values():
            zygote.close()
        self._zygotes.clear()

    def stop(self) -> None:
        """Stop every worker, kept or not (the end of ``kept_workers``)."""
        self.kept = False
        self.close(interrupted=False)

    @staticmethod
    def _reap(workers: list[_Worker]) -> None:
        give_up = time.monotonic() + STOP_GRACE_S
        for worker in workers:
            worker.reap(give_up)


def kept_workers(keep: Kept | None = None) -> contextlib.AbstractContextManager[Kept]:
    """Keep a pool of workers for every run in this block that is given none (see the module's docstring);
    yields them and stops them when the block ends. Given ``keep`` (an earlier block's), it uses and adds to
    those and leaves them running: whoever made ``keep`` stops them. Within a nested block, the inner one's
    pools serve."""
    return _KEPT.block(keep)


def local_workers(count: int, budget: Budget | None, role: str = "play") -> LocalWorkers:
    """The pool of ``count`` workers for a run's ``role`` (its episodes, or a ladder's setups beside them):
    within ``kept_workers()``, the one kept for these (its lost workers are replaced as it is used; it is
    started again if this process's environment or folder changed); else, or while another run uses that
    one, a new one the run stops."""
    key = (role, count, budget)
    with _KEPT.lock:
        kept = _KEPT.current
        pool = None if kept is None else kept.get(key)
        if pool is not None and not pool.in_use and pool.inherited != _inherited():
            pool.stop()  # its workers have another environment or folder: relative paths would land elsewhere
            pool = None
        if kept is not None and pool is None:
            pool = kept[key] = LocalWorkers(count, budget)
            pool.kept = True
        if pool is None or pool.in_use:
            return LocalWorkers(count, budget)
        pool.in_use = True
        return pool


# Variables no episode reads: the driver's terminal (no worker prints to it), and the test pytest is running
# (it names each test anew: a test run keeping its workers would start them again for every test).
UNREAD = frozenset({"COLUMNS", "LINES", "PYTEST_CURRENT_TEST"})


def _inherited() -> tuple[Any, ...]:
    """What a worker inherits from this process that its episodes read: the environment (but ``UNREAD``)
    and the folder."""
    return tuple(sorted(item for item in os.environ.items() if item[0] not in UNREAD)), os.getcwd()


_KEPT: Keeping[tuple[Any, ...], LocalWorkers] = Keeping(LocalWorkers.stop)
