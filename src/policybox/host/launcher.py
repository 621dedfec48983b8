"""Starting cell processes: a socketpair plus a fresh interpreter, and the means to kill and reap it."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from policybox.host.sandbox import CellSandbox

REAP_TIMEOUT_S = 5.0


@dataclass
class CellProcess:
    """One running cell: its process (leader of its own process group), its host-side sandbox (uid,
    scratch folder, cgroups) and the host's socket end."""

    popen: subprocess.Popen[bytes]
    sock: socket.socket
    sandbox: CellSandbox

    @property
    def pid(self) -> int:
        return self.popen.pid

    def kill(self) -> None:
        """SIGKILL the cell's whole process group and cgroup (it and anything it spawned)."""
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.popen.pid, signal.SIGKILL)
        self.sandbox.kill()

    def exit_status(self, timeout: float) -> int | None:
        """The exit code (negative: killed by that signal) once the process ends, else None."""
        try:
            return self.popen.wait(timeout)
        except subprocess.TimeoutExpired:
            return None

    @property
    def closed(self) -> bool:
        return self.sock.fileno() == -1

    def close(self) -> None:
        """Kill the group, reap the process, remove its cgroups, close the socket: nothing survives."""
        if self.closed:
            return
        self.kill()
        self.popen.wait(REAP_TIMEOUT_S)
        self.sandbox.close()
        self.sock.close()


class SpawnLauncher:
    """Each cell is ``sys.executable -I -u -m policybox.cell``: a clean interpreter, never a PATH shim.

    ``-I`` ignores PYTHON* variables, the user site and the current folder, so nothing of the host's
    environment decides what the cell imports; ``-u`` keeps the policy's prints in order in its log.
    """

    def launch(self, log_path: Path, sandbox: CellSandbox) -> CellProcess:
        host_sock, cell_sock = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            with cell_sock, open(log_path, "ab") as log:
                command = [
                    sys.executable,
                    "-I",
                    "-u",
                    "-m",
                    "policybox.cell",
                    "--fd",
                    str(cell_sock.fileno()),
                    "--parent-pid",
                    str(os.getpid()),
                ]
                popen = subprocess.Popen(
                    command,
                    pass_fds=(cell_sock.fileno(),),
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    env=sandbox.environment(),
                    cwd=sandbox.scratch,
                    start_new_session=True,  # own process group: killable as a whole, deaf to the host's Ctrl-C
                )
        except BaseException:
            host_sock.close()
            raise
        host_sock.setblocking(False)
        # The cell runs no policy code before its SETUP, which is sent after this: nothing it
        # starts can be outside its cgroups.
        sandbox.attach(popen.pid)
        return CellProcess(popen, host_sock, sandbox)
