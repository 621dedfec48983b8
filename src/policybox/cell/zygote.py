"""The zygote: ``python -I -u -m policybox.cell.zygote --fd N --parent-pid P [--preload MOD ...]``.

A pre-warmed process that has imported only shared libraries (numpy, the game family's adapter
and library, optionally torch) -- never policy code -- and forks one cell per request from its
host (and, asked, one of the host's own processes: below). A forked cell starts exactly where a
spawned one would after its imports: it applies its whole sandbox, then imports its policy.

Control messages are one JSON datagram each on a SOCK_SEQPACKET socket:

    host -> zygote  {"env": {...}, "cwd": str|null, "cpus": [int]}   with fds [cell socket, output pipe,
                    and, --cells forked, the other seats' sockets, then their output pipes]
    zygote -> host  {"forked": pid}
    zygote -> host  {"exited": pid, "code": exit code, negative for a signal}
    host -> zygote  {"channel": true}   with fds [socket]
    host -> zygote  {"process": module, "argv": [str], "cpus": [int]}   with fds [stdout, stderr, *passed]

A process is one of the host's own, forked here so that it starts with these imports warm (a pool's
worker: about 0.04 s of CPU rather than a fresh interpreter's 0.8 s): ``module``'s ``main(argv)``,
where ``{N}`` in ``argv`` stands for the N-th passed fd, with ``--parent-pid`` added. It starts with
the zygote's environment and folder, which hold none of the host's secrets: what it needs of the
host's, the host sends it. Its exit is reported as a cell's.

A channel is one more control socket, for a process the host started (a worker of its pool, which
then forks its cells here rather than starting a zygote of its own); it may ask for cells only,
and hears of its own cells' exits only. When a channel closes (its worker ended, or was killed),
the cells forked for it are killed: they die with their worker as they die with their host.

The zygote reaps what it forked and reports how each ended. It ends when its host process does: its
control socket closes, and a pidfd of the host becomes readable. (Not a parent-death signal: that
fires when the host *thread* that started it ends, and a program may start it from a short-lived
thread.) What it forked dies with it (a parent-death signal: the zygote has one thread), so nothing
outlives the host.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import importlib
import json
import os
import select
import signal
import socket
import sys
import traceback
from collections.abc import Callable
from typing import Any

from policybox.cell import sandbox
from policybox.cell.__main__ import run_cell
from policybox.cell.agent_state import thread_pools
from policybox.cell.lifeline import die_with_parent
from policybox.process_names import ZYGOTE, name_process

# The cell's own sandbox modules too: imported once here rather than in every cell. The host adds
# its game family's modules (``ZYGOTE_PRELOAD`` of the adapter) and the user's --preload.
DEFAULT_PRELOAD = (
    "numpy",
    "numpy.random",  # numpy imports it lazily, and every cell seeds its streams with it: ~20 ms a cell
    "threadpoolctl",
    "policybox.cell.runtime",
    "policybox.cell.seccomp",
    "policybox.cell.landlock",
)
MAX_MESSAGE = 1 << 20
MAX_FDS = 253  # the kernel's most in one message (SCM_MAX_FD): a forked cell's seats, one socket each


def preload(modules: list[str]) -> None:
    # No collection while importing: what is imported here lives as long as the zygote, so each pass
    # over it (a full one at the end too) was work thrown away -- about 0.1 s of a zygote's 0.7 s start.
    gc.disable()
    for module in modules:
        importlib.import_module(module)
    # Work a family's cells would each repeat (MettaGrid's shorthand registry, read from source).
    from policybox.envs import FAMILIES, family

    for name, module in FAMILIES.items():
        if module in sys.modules:
            family(name).warm()
    # And work every cell would repeat before its policy loads: nothing is imported after this.
    sandbox.plan_ahead()
    thread_pools()
    # Keep the imported objects out of the collector's reach: a collection in a forked cell would
    # otherwise touch (and so copy) every page holding them. Python's advice for a process that forks
    # without exec: disable early, freeze before forking; cells collect as usual after.
    gc.freeze()
    gc.enable()


def serve(control: socket.socket, host: int | None) -> None:
    """Answer ``control`` (and the channels it opens) until it closes or ``host``, a pidfd (if there is
    one), says the host process has ended."""
    wake_read, wake_write = os.pipe()
    os.set_blocking(wake_write, False)
    signal.set_wakeup_fd(wake_write)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    channels: dict[socket.socket, set[int]] = {control: set()}  # each control socket: what was forked for it
    watched = [] if host is None else [host]
    while True:
        readers: list[socket.socket | int] = [*channels, wake_read, *watched]
        ready, _, _ = select.select(readers, [], [])
        if host in ready:
            return  # the host is gone
        if wake_read in ready:
            os.read(wake_read, 4096)
            _report_exits(channels)
        for sock in (sock for sock in ready if sock in channels):
            message, fds, _, _ = socket.recv_fds(sock, MAX_MESSAGE, MAX_FDS)
            if not message:
                if sock is control:
                    return  # the host is gone
                _close_channel(channels, sock)
                continue
            request = json.loads(message)
            try:
                if ("channel" in request or "process" in request) and sock is not control:
                    continue  # the host's alone: a channel cannot open others, nor start host processes
                if "channel" in request:
                    channels[socket.socket(fileno=fds.pop(0))] = set()
                    continue
                fork = _fork_process if "process" in request else _fork_cell
                pid = fork(request, fds, [*channels, wake_read, wake_write, *watched])
            finally:
                for fd in fds:
                    os.close(fd)
            channels[sock].add(pid)
            try:
                sock.send(json.dumps({"forked": pid}).encode())
            except OSError:
                if sock is control:
                    raise  # the host is gone
                _close_channel(channels, sock)  # its worker is gone: the cell goes too


def _report_exits(channels: dict[socket.socket, set[int]]) -> None:
    """Reap every child that ended; tell the control socket it was forked for (if that is still open)."""
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        owner = next((sock for sock, pids in channels.items() if pid in pids), None)
        if owner is not None:
            channels[owner].discard(pid)
            with contextlib.suppress(OSError):  # its worker may be gone: the channel closes on the next read
                owner.send(json.dumps({"exited": pid, "code": os.waitstatus_to_exitcode(status)}).encode())


def _close_channel(channels: dict[socket.socket, set[int]], sock: socket.socket) -> None:
    """A channel's worker is gone: kill what it left running (each cell leads its own process group)."""
    for pid in channels.pop(sock):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pid, signal.SIGKILL)
    sock.close()


def _fork_cell(request: dict[str, Any], fds: list[int], zygotes: list[socket.socket | int]) -> int:
    """Fork a cell for ``request``; ``zygotes``: the zygote's own sockets and fds, which no cell keeps."""
    cell_fd, output_fd, *more = fds  # more: the other seats' sockets, then their outputs (--cells forked)
    seat_fds = list(zip(more[: len(more) // 2], more[len(more) // 2 :], strict=True))

    def cell(zygote_pid: int) -> int:
        os.environ.clear()
        os.environ.update(request["env"])
        if request.get("cwd"):
            os.chdir(request["cwd"])
        return run_cell(cell_fd, zygote_pid, seat_fds)

    return _fork(request, zygotes, output_fd, output_fd, cell)


def _fork_process(request: dict[str, Any], fds: list[int], zygotes: list[socket.socket | int]) -> int:
    """Fork a process of the host's own for ``request`` (the module's docstring); ``zygotes`` as for a cell."""
    stdout, stderr, *passed = fds

    def process(zygote_pid: int) -> int:
        argv = [arg.format(*passed) for arg in request["argv"]]
        code: int = importlib.import_module(request["process"]).main([*argv, "--parent-pid", str(zygote_pid)])
        return code

    return _fork(request, zygotes, stdout, stderr, process)


def _fork(
    request: dict[str, Any], zygotes: list[socket.socket | int], stdout: int, stderr: int, become: Callable[[int], int]
) -> int:
    """Fork a child that leaves the zygote (``_leave_zygote``), then runs ``become(zygote's pid)`` and exits
    with what it returns; the child's pid. Nothing in the child may raise past ``os._exit``: it would go on
    as a copy of the zygote."""
    zygote_pid = os.getpid()
    pid = os.fork()
    if pid:
        return pid
    code = 1
    try:
        _leave_zygote(zygote_pid, zygotes, request, stdout, stderr)
        code = become(zygote_pid)
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    except BaseException:
        traceback.print_exc()
    finally:
        with contextlib.suppress(BaseException):  # a policy may have replaced them with anything
            sys.stdout.flush()
            sys.stderr.flush()
        os._exit(code)


def _leave_zygote(
    zygote_pid: int, zygotes: list[socket.socket | int], request: dict[str, Any], stdout: int, stderr: int
) -> None:
    """In a child just forked: hold nothing of the zygote's; run on the CPUs the request names, in a
    session of its own, writing to ``stdout`` and ``stderr``; die with the zygote."""
    signal.set_wakeup_fd(-1)
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    for held in zygotes:
        os.close(held if isinstance(held, int) else held.fileno())
    if request.get("cpus"):
        os.sched_setaffinity(0, request["cpus"])  # the CPUs of the process that asked for it
    os.setsid()  # its own session and process group, like a spawned process
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.dup2(stdout, 1)
    os.dup2(stderr, 2)
    for fd in {null, stdout, stderr}:
        os.close(fd)
    die_with_parent(zygote_pid)  # a fork does not inherit the parent-death signal


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="policybox.cell.zygote", description=__doc__)
    parser.add_argument("--fd", type=int, required=True)
    parser.add_argument("--parent-pid", type=int, required=True)
    parser.add_argument("--preload", action="append", default=[])
    args = parser.parse_args(argv)
    try:
        host: int | None = os.pidfd_open(args.parent_pid)  # readable once every thread of the host has ended
    except OSError:  # no pidfds here (a kernel before 5.3, a seccomp profile): its control socket, and
        host = None  # the parent-death signal, which ends it with the thread that started it
        die_with_parent(args.parent_pid)
    if os.getppid() != args.parent_pid:
        return 1  # the host ended before it could be watched
    name_process(ZYGOTE)
    control = socket.socket(fileno=args.fd)
    try:
        preload([*DEFAULT_PRELOAD, *args.preload])
    except Exception as exc:  # e.g. --preload torch where torch is not installed
        control.send(json.dumps({"error": f"preload failed: {type(exc).__name__}: {exc}"}).encode())
        return 1
    try:
        control.send(json.dumps({"ready": os.getpid()}).encode())
        serve(control, host)
    except ConnectionError:  # the host is gone (it was stopped while this started): nothing to tell anyone
        return 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
