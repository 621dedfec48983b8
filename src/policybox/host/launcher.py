"""Starting cells: a socketpair plus a process, by fresh interpreter (spawn) or by fork of a
pre-warmed zygote; and the means to kill and reap a cell whichever way it started."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from policybox.host.sandbox import CellSandbox
from policybox.host.zygote import Zygote

REAP_TIMEOUT_S = 5.0


@dataclass
class CellProcess:
    """One running cell: its pid (leader of its own process group), its host-side sandbox (uid,
    scratch folder, cgroups), the host's socket end, and how to learn its exit status."""

    pid: int
    sock: socket.socket
    sandbox: CellSandbox
    wait: Callable[[float], int | None]  # the exit code (negative: that signal) once it ends, else None
    code: int | None = None
    seat_socks: list[socket.socket] = field(default_factory=list)  # --cells forked: the other seats' ends

    def kill(self) -> None:
        """SIGKILL the cell's whole process group and cgroup (it and anything it spawned)."""
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.pid, signal.SIGKILL)
        self.sandbox.kill()

    def exit_status(self, timeout: float) -> int | None:
        """The exit code once the cell has ended (asked for at most once of its reaper), else None."""
        if self.code is None:
            self.code = self.wait(timeout)
        return self.code

    @property
    def closed(self) -> bool:
        return self.sock.fileno() == -1

    def close(self) -> None:
        """Kill the group, reap the process, remove its cgroups, close the socket: nothing survives."""
        if self.closed:
            return
        self.kill()
        self.exit_status(REAP_TIMEOUT_S)
        self.sandbox.close()
        self.sock.close()
        for sock in self.seat_socks:
            sock.close()


class Launcher(Protocol):
    def launch(
        self, output_fd: int, sandbox: CellSandbox, torch: bool = False, seat_outputs: Sequence[int] = ()
    ) -> CellProcess:
        """Start one cell whose stdout and stderr are ``output_fd`` (the write end of its output pipe);
        ``torch``: its policy imports torch, so a cell that already has it starts faster. ``seat_outputs``:
        the cell is the loader of forked seats (``policybox.cell.seats``), the first writing to
        ``output_fd``, one more for each of these outputs; each seat gets a socket of its own."""
        ...


class SpawnLauncher:
    """Each cell is ``sys.executable -I -u -m policybox.cell``: a clean interpreter, never a PATH shim.

    ``-I`` ignores PYTHON* variables, the user site and the current folder, so nothing of the host's
    environment decides what the cell imports; ``-u`` keeps the policy's prints in order in its log.
    """

    def launch(
        self, output_fd: int, sandbox: CellSandbox, torch: bool = False, seat_outputs: Sequence[int] = ()
    ) -> CellProcess:
        def start(cell_fds: list[int]) -> tuple[int, Callable[[float], int | None]]:
            command = [sys.executable, "-I", "-u", "-m", "policybox.cell", "--fd", str(cell_fds[0])]
            seats = zip(cell_fds[1:], seat_outputs, strict=True)
            command += [arg for fd, output in seats for arg in ("--seat-fd", f"{fd},{output}")]
            popen = subprocess.Popen(
                [*command, "--parent-pid", str(os.getpid())],
                pass_fds=(*cell_fds, *seat_outputs),
                stdin=subprocess.DEVNULL,
                stdout=output_fd,
                stderr=subprocess.STDOUT,
                env=sandbox.environment(),
                cwd=sandbox.scratch,
                start_new_session=True,  # own process group: killable as a whole, deaf to the host's Ctrl-C
            )
            return popen.pid, lambda timeout: _popen_wait(popen, timeout)

        return _launch(sandbox, start, 1 + len(seat_outputs))


class ZygoteLauncher:
    """Each cell is a fork of a zygote that has already imported numpy and MettaGrid (never policy code);
    a cell whose policy imports torch, of its sibling that has torch too (``Zygote.with_torch``)."""

    def __init__(self, zygote: Zygote) -> None:
        self._zygote = zygote

    def launch(
        self, output_fd: int, sandbox: CellSandbox, torch: bool = False, seat_outputs: Sequence[int] = ()
    ) -> CellProcess:
        zygote = self._zygote.with_torch() if torch else self._zygote

        def start(cell_fds: list[int]) -> tuple[int, Callable[[float], int | None]]:
            cwd = str(sandbox.scratch) if sandbox.scratch else None
            fds = [cell_fds[0], output_fd, *cell_fds[1:], *seat_outputs]
            pid = zygote.fork(sandbox.shared_environment(), cwd, fds)  # the spec's variables come in SETUP
            return pid, lambda timeout: zygote.wait(pid, timeout)

        return _launch(sandbox, start, 1 + len(seat_outputs))


def _launch(
    sandbox: CellSandbox, start: Callable[[list[int]], tuple[int, Callable[[float], int | None]]], seats: int
) -> CellProcess:
    pairs = [socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM) for _ in range(seats)]
    try:
        with contextlib.ExitStack() as cell_ends:
            for _, cell_sock in pairs:
                cell_ends.enter_context(cell_sock)
            pid, wait = start([cell_sock.fileno() for _, cell_sock in pairs])
    except BaseException:
        for host_sock, _ in pairs:
            host_sock.close()
        raise
    for host_sock, _ in pairs:
        host_sock.setblocking(False)
    # The cell runs no policy code before its SETUP, which is sent after this: nothing it
    # starts can be outside its cgroups.
    sandbox.attach(pid)
    return CellProcess(pid, pairs[0][0], sandbox, wait, seat_socks=[host_sock for host_sock, _ in pairs[1:]])


def _popen_wait(popen: subprocess.Popen[bytes], timeout: float) -> int | None:
    try:
        return popen.wait(timeout)
    except subprocess.TimeoutExpired:
        return None
