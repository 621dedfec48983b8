"""CellJob: a policy that does one job in a cell of its own as it loads -- SetupScript runs a version's
setup script; ``policybox.files.build_policy`` does a step of building an environment.

``policybox.files.setup_scripts`` starts it, with the version's stored files as its checkpoint (so they are
bound into the cell read-only). Loading that checkpoint copies the files into ``COPY`` in the cell's
scratch folder and runs ``python SCRIPT`` with the copy of the script's folder as its working folder
-- as MettaGrid's ``_run_setup_script`` does on its host -- for at most ``timeout_s``. The script and
everything it starts are the cell's processes: in its cgroup, under its sandbox and limits, able to
write only the scratch folder. Its output comes through a pipe (not a file: a script that fills its
scratch folder must still be able to say so), and its tail goes to the cell's log.

A job whose command exits non-zero, is killed or runs out of time raises ``SetupFailed``, so the
cell's READY means the job succeeded. Either way, every process it left behind is killed first: this
process is their subreaper (an orphan comes back to it, even one that left its session), so none can
still be changing the copy when the host reads it. It has the shape of every family's policies
(MettaGrid's ``agent_policy``/``step``, PettingZoo's ``act``), so it runs under any game; it never plays.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import select
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil

COPY = "version"
OUTPUT_TAIL_BYTES = 8192
READ_SLICE_S = 0.1
READ_CHUNK = 1 << 16
READ_BYTES = 1 << 22
PR_SET_CHILD_SUBREAPER = 36
SWEEP_S = 10.0  # to kill what the script left: a fork bomb inside its pids limit takes a few rounds
TIMED_OUT = "did not finish within"  # how a command that ran out of time failed


class SetupFailed(RuntimeError):
    """The job failed; the message says how (its output is in the cell's log)."""


class CellJob:
    """A policy that does one job as its files load, in ``workdir`` (the scratch folder, unless there is
    none: ``--sandbox off``), within ``timeout_s``: the cell's READY means the job succeeded, and it
    never plays. ``run`` is the job; its commands run with ``command``."""

    def __init__(self, *env_info: object, timeout_s: float, workdir: str | None = None, **kwargs: object) -> None:
        self._timeout_s = timeout_s
        self._deadline = 0.0  # set when the job starts
        self._workdir = Path(workdir or os.getcwd())

    def load_policy_data(self, files: str) -> None:
        self._deadline = time.monotonic() + self._timeout_s
        _become_subreaper()
        tail = bytearray()
        try:
            failure = self.run(Path(files), tail)
        finally:
            stuck = _end_leftovers()
            sys.stdout.write(tail.decode("utf-8", "replace"))  # into the cell's log, where the host reads it
            sys.stdout.flush()
        failures = [failure, f"it left {stuck} processes that would not stop" if stuck else None]
        if any(failures):
            raise SetupFailed("; ".join(failure for failure in failures if failure))

    def load(self, files: str) -> None:  # PettingZoo's name for it
        self.load_policy_data(files)

    def run(self, files: Path, tail: bytearray) -> str | None:
        """Do the job with ``files`` (bound read-only); why it failed, or None."""
        raise NotImplementedError

    def command(
        self, what: str, argv: list[str], cwd: Path, tail: bytearray, env: dict[str, str] | None = None
    ) -> str | None:
        """Run ``argv`` in ``cwd`` within what is left of the time, its output kept in ``tail``; how ``what``
        failed, or None."""
        code = _run(argv, cwd, tail, max(0.0, self._deadline - time.monotonic()), env)
        if code is None:
            return f"{what} {TIMED_OUT} {self._timeout_s:g} s"
        if code < 0:
            return f"{what} was killed by {signal.Signals(-code).name}"
        return f"{what} exited with code {code}" if code else None

    def agent_policy(self, agent_id: int) -> CellJob:
        return self

    def step(self, observation: object) -> str:
        return "noop"

    def act(self, observation: object) -> int:
        return 0


class SetupScript(CellJob):
    """Runs ``script`` (relative to ``folder``) in ``folder`` (relative to the version's files) of a copy of them."""

    def __init__(
        self,
        *env_info: object,
        script: str,
        folder: str,
        timeout_s: float,
        workdir: str | None = None,
        **kwargs: object,
    ) -> None:
        super().__init__(*env_info, timeout_s=timeout_s, workdir=workdir)
        self._script, self._folder = script, folder

    def run(self, files: Path, tail: bytearray) -> str | None:
        copy = self._workdir / COPY
        shutil.copytree(files, copy)
        script = copy / self._folder / self._script
        return self.command(f"setup script {self._script}", [sys.executable, str(script)], copy / self._folder, tail)


def _become_subreaper() -> None:
    if ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_CHILD_SUBREAPER)")


def _run(argv: list[str], cwd: Path, tail: bytearray, timeout_s: float, env: dict[str, str] | None) -> int | None:
    """``argv`` in ``cwd``, the end of its output kept in ``tail``; its exit code, or None if it ran out
    of time (it is killed then)."""
    process = subprocess.Popen(
        argv,
        cwd=cwd,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    assert process.stdout is not None
    with process.stdout as output:
        os.set_blocking(output.fileno(), False)
        deadline = time.monotonic() + timeout_s
        while process.poll() is None and (remaining := deadline - time.monotonic()) > 0:
            select.select([output], [], [], min(remaining, READ_SLICE_S))
            if not _read(output.fileno(), tail):  # its output is closed: only its exit is left to wait for
                with contextlib.suppress(subprocess.TimeoutExpired):
                    process.wait(remaining)
        if process.poll() is None:
            process.kill()
            process.wait()
            return None
        _read(output.fileno(), tail)
    return process.returncode


def _read(fd: int, tail: bytearray) -> bool:
    """Read what ``fd`` holds now (at most READ_BYTES, so that a flood still lets the clock be read) into
    ``tail``, keeping only its last OUTPUT_TAIL_BYTES; False at its end."""
    for _ in range(READ_BYTES // READ_CHUNK):
        try:
            chunk = os.read(fd, READ_CHUNK)
        except BlockingIOError:
            return True
        if not chunk:
            return False
        tail += chunk
        del tail[:-OUTPUT_TAIL_BYTES]
    return True


def _end_leftovers() -> int:
    """SIGKILL every process the script left, round after round (one may fork while it is killed),
    and reap them; orphans are reparented here, so all of them are this process's descendants. How
    many were still there when it gave up (0: none is left)."""
    give_up = time.monotonic() + SWEEP_S
    while left := psutil.Process().children(recursive=True):
        if time.monotonic() > give_up:
            return len(left)
        for process in left:
            with contextlib.suppress(psutil.Error):
                process.kill()
        _reap()
        time.sleep(0.01)
    return 0


def _reap() -> None:
    with contextlib.suppress(ChildProcessError):
        while os.waitpid(-1, os.WNOHANG)[0]:
            pass
