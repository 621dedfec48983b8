"""Zygote: the host's handle on one pre-warmed forking process (``policybox.cell.zygote``).

Start it once and reuse it across episodes (``with Zygote() as zygote: ...``); it holds no host
state, imports only shared libraries, and dies with the host. Cells it forks are its children, so
it reaps them and reports each exit status here. A pool's workers fork their cells from their
driver's zygote (``shared_zygote``), each through a channel of its own (``Zygote.channel``, and
``Zygote(preload, channel)`` in the worker) rather than each starting one.

An episode (a build, a check) given no zygote starts one for itself and stops it after, about 0.6 s of
CPU, most of it importing the game. Within ``kept_zygotes()`` it takes instead the one kept for its
preload, started on first use and stopped when the block ends: for a program that plays many episodes
one after another in one process, a notebook or a test run (``zygote_for``).
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import select
import signal
import socket
import subprocess
import sys
import threading
import time
from typing import Any

from policybox.errors import PolicyboxError
from policybox.host.keeping import Keeping
from policybox.host.sandbox import host_environment
from policybox.host.torch_use import TORCH
from policybox.threads import thread_environment

MAX_MESSAGE = 1 << 16
START_TIMEOUT_S = 120.0  # torch can take a while to import on a loaded machine
POLL_S = 0.001  # how long wait() reads with the lock held: only a message already there
WAIT_SLICE_S = 0.05  # how long wait() sleeps without the lock before looking at the filed exits again
EXIT_REPORT_S = 5.0  # how long a process seen to end may take to be reaped and reported by its zygote


class ZygoteError(PolicyboxError, RuntimeError):
    """The zygote could not start (e.g. a --preload module is not installed) or has died."""


class Zygote:
    """A running zygote. One Zygote may be shared by threads running episodes concurrently: a lock
    makes each fork (the request and its "forked" reply) and each read of the control socket atomic,
    and exit reports read by any thread are filed for the thread waiting for that cell. Close it only
    once no episode uses it any more."""

    def __init__(self, preload: tuple[str, ...] = (), channel: socket.socket | None = None) -> None:
        """Start a zygote that preloads ``preload``; or, given a ``channel`` (``Zygote.channel()``, made by
        the process that started it), fork cells from that zygote through it instead."""
        self.preload = preload
        self._exits: dict[int, int] = {}
        self._lock = threading.Lock()  # held to fork, to read the control socket, and to close
        self._torch: Zygote | None = None  # this one's sibling with torch preloaded too, once a cell needs it
        self._torch_lock = threading.Lock()
        self._popen: subprocess.Popen[bytes] | None = None  # None: a channel to a zygote another process started
        self._gone = False  # a channel's zygote has exited
        if channel is None:
            self._start()
        else:
            self._control = channel

    def _start(self) -> None:
        preload = self.preload
        self._control, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        command = [sys.executable, "-I", "-u", "-m", "policybox.cell.zygote", "--fd", str(theirs.fileno())]
        command += ["--parent-pid", str(os.getpid()), *(arg for module in preload for arg in ("--preload", module))]
        with theirs:
            self._popen = subprocess.Popen(
                command,
                pass_fds=(theirs.fileno(),),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                # It forks the cells: it must hold none of the host's secrets. One thread for what it
                # preloads: a cell raises its budget where it has more; lowering it later would start
                # a thread (OpenBLAS does, after a fork) that the cell does not need.
                env={**host_environment(), **thread_environment(1)},
                start_new_session=True,
            )
        try:
            reply = self._receive(time.monotonic() + START_TIMEOUT_S)
        except TimeoutError:
            self.close()
            raise ZygoteError(f"the zygote did not start within {START_TIMEOUT_S:g} s") from None
        except BaseException:
            self.close()
            raise
        if "ready" not in reply:
            self.close()
            raise ZygoteError(reply.get("error", f"unexpected first message {reply!r}"))

    def __enter__(self) -> Zygote:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def with_torch(self) -> Zygote:
        """A zygote that preloads what this one does and torch (``policybox.host.torch_use``): this one if
        it preloads torch; else a sibling, started on first use and closed with this one -- or this one
        still, if torch cannot be imported here (a cell then imports it itself, or fails saying why)."""
        if TORCH in self.preload:
            return self
        with self._torch_lock:
            if self._torch is None:
                try:
                    self._torch = Zygote((*self.preload, TORCH))
                except ZygoteError:
                    self._torch = self
            return self._torch

    @property
    def pids(self) -> set[int]:
        """This zygote's process (none for a channel) and its sibling's with torch, if it has started (not
        the cells)."""
        sibling = self._torch
        own = set() if self._popen is None else {self._popen.pid}
        return own | (sibling.pids if sibling is not None and sibling is not self else set())

    @property
    def alive(self) -> bool:
        """Whether the zygote is still running (its cells die with it)."""
        return not self._gone if self._popen is None else self._popen.poll() is None

    def channel(self) -> socket.socket:
        """One more control socket to this zygote, for a process this one starts (a worker): that process
        forks its cells here through it (``Zygote(preload, channel)``) instead of starting a zygote of its
        own. When it closes its end (or dies), the cells forked for it are killed."""
        zygote_end, their_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        with zygote_end:
            try:
                with self._lock:
                    socket.send_fds(self._control, [json.dumps({"channel": True}).encode()], [zygote_end.fileno()])
            except OSError as exc:
                their_end.close()
                raise ZygoteError(f"the zygote cannot open a channel ({exc}); it may have died") from None
        return their_end

    def fork(self, env: dict[str, str], cwd: str | None, fds: list[int]) -> int:
        """A new cell with the given environment and folder, serving the cell socket in fds[0], on the CPUs
        this process may use."""
        return self._forked({"env": env, "cwd": cwd}, fds, "a cell")

    def start(self, module: str, argv: list[str], fds: list[int]) -> ForkedProcess:
        """A process of this one's own forked there, with the zygote's imports warm: ``module``'s
        ``main(argv)``, where ``{N}`` in ``argv`` stands for ``fds[N]`` (``policybox.cell.zygote``). It
        writes where this process does and runs on its CPUs; it starts with the zygote's environment and
        folder (no secrets of this one's: send it what it needs), and dies with the zygote."""
        if self._popen is None:
            raise ZygoteError("only the process that started a zygote may start processes there")
        if not _pidfds():
            raise ZygoteError("this kernel has no pidfds, which watching a process the zygote forks needs")
        pid = self._forked({"process": module, "argv": argv}, [1, 2, *fds], "a process")
        return ForkedProcess(self, pid)

    def _forked(self, request: dict[str, Any], fds: list[int], what: str) -> int:
        request = {**request, "cpus": sorted(os.sched_getaffinity(0))}
        try:
            with self._lock:  # no other thread may read this fork's reply, nor fork meanwhile
                socket.send_fds(self._control, [json.dumps(request).encode()], fds)
                give_up = time.monotonic() + START_TIMEOUT_S
                while "forked" not in (reply := self._receive(give_up)):
                    if "exited" not in reply:
                        raise ZygoteError(f"unexpected zygote reply {reply!r}")
        except (OSError, ValueError, TimeoutError) as exc:
            raise ZygoteError(f"the zygote cannot fork {what} ({exc}); it may have died") from None
        return int(reply["forked"])

    def wait(self, pid: int, timeout: float) -> int | None:
        """The exit code of cell ``pid`` (negative: killed by that signal), or None if still running."""
        give_up = time.monotonic() + timeout
        while True:
            with self._lock:
                if pid in self._exits:
                    return self._exits.pop(pid)
                try:  # only what is already there: never hold the lock while waiting
                    self._receive(time.monotonic() + POLL_S)
                except TimeoutError:
                    pass
                except (OSError, ValueError, ZygoteError):
                    return None
            remaining = give_up - time.monotonic()
            if remaining <= 0:
                with self._lock:
                    return self._exits.pop(pid, None)
            try:  # wait for the next message without the lock; whichever thread reads it files it
                select.select([self._control], [], [], min(remaining, WAIT_SLICE_S))
            except (OSError, ValueError):
                return None

    def _receive(self, give_up: float) -> dict[str, Any]:
        """The next message; exit reports are also filed for wait()."""
        remaining = give_up - time.monotonic()
        if remaining <= 0 or not select.select([self._control], [], [], remaining)[0]:
            raise TimeoutError("no message from the zygote in time")
        data = self._control.recv(MAX_MESSAGE)
        if not data:
            self._gone = True
            code = "unknown to this process" if self._popen is None else self._popen.poll()
            raise ZygoteError(f"the zygote has exited (code {code})")
        message: dict[str, Any] = json.loads(data)
        if "exited" in message:
            self._exits[int(message["exited"])] = int(message["code"])
        return message

    def close(self) -> None:
        """Stop the zygote (and its sibling with torch): it exits when its control socket closes; killed
        if it does not."""
        with self._torch_lock:
            sibling, self._torch = self._torch, None
        if sibling is not None and sibling is not self:
            sibling.close()
        with self._lock:
            self._control.close()
        if self._popen is None:
            return  # a channel: the zygote is its starter's to stop
        try:
            self._popen.wait(5)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                self._popen.kill()
            self._popen.wait()


@functools.cache
def _pidfds() -> bool:
    """Whether this kernel gives pidfds (Linux 5.3 and later, unless a seccomp profile denies them)."""
    try:
        os.close(os.pidfd_open(os.getpid()))
    except OSError:
        return False
    return True


class ForkedProcess:
    """A process a zygote forked for this one (``Zygote.start``): not this one's child, so its end is seen
    through a pidfd, and its exit code is the zygote's report. What ``subprocess.Popen`` gives that a
    pool uses of its workers: ``pid``, ``poll``, ``wait``."""

    def __init__(self, zygote: Zygote, pid: int) -> None:
        self.pid = pid
        self.returncode: int | None = None
        self._zygote = zygote
        self._lock = threading.Lock()  # a pool's reader thread polls while another waits
        try:
            self._pidfd: int | None = os.pidfd_open(pid)
        except ProcessLookupError:
            self._pidfd = None  # it has already ended

    def poll(self) -> int | None:
        """Its exit code, or None while it runs."""
        return self._ended(0.0)

    def wait(self, timeout: float | None = None) -> int:
        """Its exit code once it has ended; ``subprocess.TimeoutExpired`` if it has not within ``timeout``."""
        code = self._ended(timeout)
        if code is None:
            raise subprocess.TimeoutExpired(f"process {self.pid}", timeout or 0.0)
        return code

    def _ended(self, timeout: float | None) -> int | None:
        with self._lock:
            return self.returncode if self.returncode is not None else self._reported(timeout)

    def _reported(self, timeout: float | None) -> int | None:
        """Its exit code, as its zygote reports it, once its pidfd says it has ended within ``timeout``."""
        if self._pidfd is not None:
            if not select.select([self._pidfd], [], [], timeout)[0]:
                return None
            os.close(self._pidfd)
            self._pidfd = None
        code = self._zygote.wait(self.pid, EXIT_REPORT_S)
        # No report: its zygote is gone too, and took it along (the parent-death signal).
        self.returncode = -signal.SIGKILL if code is None else code
        return self.returncode


def kept_zygotes(
    keep: dict[tuple[str, ...], Zygote] | None = None,
) -> contextlib.AbstractContextManager[dict[tuple[str, ...], Zygote]]:
    """Keep a zygote per preload for every episode in this block that is given none (see the module's
    docstring); yields them, by preload, as they are started, and stops them when the block ends. Given
    ``keep`` (an earlier block's), it uses and adds to those and leaves them running: whoever made
    ``keep`` owns them and closes them. Within a nested block, the inner one's zygotes serve."""
    return _KEPT.block(keep)


def zygote_for(preload: tuple[str, ...], stack: contextlib.ExitStack) -> Zygote:
    """The zygote for an episode given none: the one kept for ``preload`` (``kept_zygotes``; a new one if
    it has died), else a new one that ``stack`` stops."""
    with _KEPT.lock:
        kept = _KEPT.current
        return stack.enter_context(Zygote(preload)) if kept is None else zygote_in(kept, preload)


def shared_zygote(preload: tuple[str, ...], own: dict[tuple[str, ...], Zygote]) -> Zygote:
    """The zygote a pool of workers forks its cells from (``Zygote.channel``): the one kept for ``preload``
    (``kept_zygotes``), else the pool's ``own`` (started on first use; the pool stops them)."""
    with _KEPT.lock:
        return zygote_in(own if _KEPT.current is None else _KEPT.current, preload)


def zygote_in(kept: dict[tuple[str, ...], Zygote], preload: tuple[str, ...]) -> Zygote:
    """The zygote in ``kept`` for ``preload``; a new one if there is none, or it has died."""
    zygote = kept.get(preload)
    if zygote is None or not zygote.alive:
        if zygote is not None:
            zygote.close()  # reaped, its socket closed
        zygote = kept[preload] = Zygote(preload)
    return zygote


_KEPT: Keeping[tuple[str, ...], Zygote] = Keeping(Zygote.close)  # kept_zygotes()'s, by preload
