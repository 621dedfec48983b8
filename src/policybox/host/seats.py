"""The host's hold on one forked seat (``--cells forked``): its own socket, its loader's process and
sandbox, and -- only once verified -- its own pid.

A seat is forked by its loader, which has run entrant code: everything the loader and its seats say is
untrusted, the pid a seat claims in its READY included. A loader may not fork at all and answer every
seat itself, or name the host's pid, or another team's. So the host signals a seat's pid only once it
has verified, from outside, that the process is its team's own: a pidfd pins the process, /proc shows
it in the loader's session (which only the loader's descendants can be in: a process can leave a
session, never join one) and, with the uid layer, under the group's leased uid; and then its pidfd
still says it runs, so /proc spoke of that same process, and the loader's (opened at launch) says the
loader runs, so the session's id is still the loader's pid and no stranger's. A seat that cannot be
verified is stopped by closing its socket; the group's kill at the end of the episode (process group and
cgroup) takes it.

A seat is not the host's child (nor the zygote's): the host cannot wait for it. Its loader leaves each
seat that ends a zombie until all have ended, and the kernel keeps a zombie's exit status in
/proc/<pid>/stat: for a verified seat, the host reads it there, while its pidfd says that pid is still
that process (a pidfd can signal a zombie, never a reaped process). The loader's word is never taken;
a loader that reaps early, or a seat not verified, leaves the host saying only what it knows -- its
process ended, and whether the group's cgroup saw the OOM killer.
"""

from __future__ import annotations

import contextlib
import os
import re
import select
import signal
import socket
from dataclasses import dataclass, field
from typing import Any

from policybox.host.launcher import CellProcess

MAX_PID = 1 << 22  # Linux's PID_MAX_LIMIT


@dataclass(eq=False)
class SeatProcess(CellProcess):
    """One forked seat: ``pid``, ``sandbox`` and ``wait`` are its loader's (the group's); ``sock`` is its
    own. Killing it signals its own pid if verified, else closes its socket; closing it leaves the loader
    and the sandbox to the pool, which closes them once for the group."""

    loader: CellProcess | None = None
    pidfd: int | None = field(default=None, repr=False)  # its own process, once verified
    seat_pid: int | None = None  # its own pid, once verified
    loader_pidfd: int | None = field(default=None, repr=False)  # the loader, pinned from its launch
    ready: bool = False  # it answered READY: forked (or its loader says so)
    asked: bool = field(default=False, repr=False)  # exit_status has given its answer

    @classmethod
    def of(cls, loader: CellProcess, sock: socket.socket) -> SeatProcess:
        """Seat ``sock`` of ``loader``, just launched (it waits for its SETUP: its pid is its own still)."""
        try:
            loader_pidfd: int | None = os.pidfd_open(loader.pid)
        except OSError:  # no pidfds here, or it has already ended: no seat of it can be verified
            loader_pidfd = None
        return cls(loader.pid, sock, loader.sandbox, loader.wait, loader=loader, loader_pidfd=loader_pidfd)

    def claim(self, pid: Any) -> bool:
        """Take ``pid`` (a READY's word) as the seat's own if /proc confirms it is the team's: a process
        of the loader's session other than the loader, under the group's uid if it has one -- while the
        loader still runs (so its pid, the session's id, is still the loader's)."""
        if type(pid) is not int or not 0 < pid < MAX_PID or pid == self.pid or self.pidfd is not None:
            return False
        if self.loader_pidfd is None:
            return False
        try:
            pidfd = os.pidfd_open(pid)
        except OSError:
            return False
        if _in_session(pid, self.pid, self.sandbox.uid) and _running(pidfd) and _running(self.loader_pidfd):
            self.pidfd, self.seat_pid = pidfd, pid
            return True
        os.close(pidfd)
        return False

    def kill(self) -> None:
        """SIGKILL the seat if its pid was verified; either way, close the host's end of its socket for
        reading and writing, so a seat that lives on hears nothing more and can say nothing more."""
        if self.pidfd is not None:
            with contextlib.suppress(OSError):
                signal.pidfd_send_signal(self.pidfd, signal.SIGKILL)
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_RDWR)

    def exit_status(self, timeout: float) -> int | None:
        """The seat's exit code (negative: that signal) once it has ended, as the kernel kept it for its
        verified process; before READY, its loader's (the host's own child's: no seat was forked yet); None
        if unknown (at once, for a seat that answered READY unverified: nothing to wait on). Asked once."""
        if self.asked:
            return self.code
        if self.pidfd is not None:
            if select.select([self.pidfd], [], [], timeout)[0]:
                self.code = _zombie_status(self.pidfd, self.seat_pid)
        elif not self.ready and self.loader is not None:
            self.code = self.loader.exit_status(timeout)
        self.asked = True
        return self.code

    def close(self) -> None:
        if self.closed:
            return
        self.kill()
        for pidfd in (self.pidfd, self.loader_pidfd):
            if pidfd is not None:
                os.close(pidfd)
        self.pidfd = self.seat_pid = self.loader_pidfd = None
        self.sock.close()


def _in_session(pid: int, loader: int, uid: int | None) -> bool:
    """Whether /proc shows ``pid`` in session ``loader`` and, if ``uid`` is given, running as that uid."""
    try:
        fields = _stat_fields(pid)
        with open(f"/proc/{pid}/status", encoding="ascii", errors="replace") as status:
            uids = re.search(r"^Uid:\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)", status.read(), re.M)
    except OSError:
        return False
    session = int(fields[3]) if len(fields) > 3 and fields[3].isdigit() else None  # state ppid pgrp session
    same_uid = uid is None or (uids is not None and {int(value) for value in uids.groups()} == {uid})
    return session == loader and same_uid


def _stat_fields(pid: int | None) -> list[str]:
    """The fields of ``/proc/PID/stat`` after the process's name (which its process may set to anything,
    parentheses and spaces included): state first. Raises OSError as ``open`` does."""
    with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as stat:
        return stat.read().rpartition(")")[2].split()


def _running(pidfd: int) -> bool:
    """Whether the process of ``pidfd`` still runs (a pidfd becomes readable when it ends)."""
    return not select.select([pidfd], [], [], 0)[0]


def _zombie_status(pidfd: int, pid: int | None) -> int | None:
    """How the ended process of ``pidfd`` (pid ``pid``) exited, from the exit status the kernel keeps in
    its /proc stat while it is a zombie; None once it has been reaped (its pid may be another's by then)."""
    try:
        fields = _stat_fields(pid)
        signal.pidfd_send_signal(pidfd, 0)  # still the zombie: a reaped process cannot be signalled
    except OSError:
        return None
    if len(fields) < 50 or not fields[49].isdigit():  # exit_code, the 52nd field (Linux 3.5 and later)
        return None
    return os.waitstatus_to_exitcode(int(fields[49]))
