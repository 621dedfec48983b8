"""The zygote: ``python -I -u -m policybox.cell.zygote --fd N --parent-pid P [--preload MOD ...]``.

A pre-warmed process that has imported only shared libraries (numpy, the game family's adapter
and library, optionally torch) -- never policy code -- and forks one cell per request from its
host. A forked cell starts exactly where a spawned one would after its imports: it applies its
whole sandbox, then imports its policy.

Control messages are one JSON datagram each on a SOCK_SEQPACKET socket:

    host -> zygote  {"env": {...}, "cwd": str|null}   with fds [cell socket, output pipe]
    zygote -> host  {"forked": pid}
    zygote -> host  {"exited": pid, "code": exit code, negative for a signal}

The zygote reaps its cells and reports how they ended; it dies with its host, and its cells die
with it (parent-death signal), so nothing outlives the host.
"""

from __future__ import annotations

import argparse
import gc
import importlib
import json
import os
import select
import signal
import socket
import sys
from typing import Any

from policybox.cell.__main__ import die_with_parent, run_cell

# The cell's own sandbox modules too: imported once here rather than in every cell. The host adds
# its game family's modules (``ZYGOTE_PRELOAD`` of the adapter) and the user's --preload.
DEFAULT_PRELOAD = (
    "numpy",
    "threadpoolctl",
    "policybox.cell.runtime",
    "policybox.cell.seccomp",
    "policybox.cell.landlock",
)
MAX_MESSAGE = 1 << 20


def preload(modules: list[str]) -> None:
    for module in modules:
        importlib.import_module(module)
    # Work a family's cells would each repeat (MettaGrid's shorthand registry, read from source).
    from policybox.envs import FAMILIES, family

    for name, module in FAMILIES.items():
        if module in sys.modules:
            family(name).warm()
    # Keep the imported objects out of the collector's reach: a collection in a forked cell would
    # otherwise touch (and so copy) every page holding them.
    gc.collect()
    gc.freeze()


def serve(control: socket.socket) -> None:
    wake_read, wake_write = os.pipe()
    os.set_blocking(wake_write, False)
    signal.set_wakeup_fd(wake_write)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    while True:
        readers: list[socket.socket | int] = [control, wake_read]
        ready, _, _ = select.select(readers, [], [])
        if wake_read in ready:
            os.read(wake_read, 4096)
            _report_exits(control)
        if control in ready:
            message, fds, _, _ = socket.recv_fds(control, MAX_MESSAGE, 2)
            if not message:
                return  # the host is gone
            pid = _fork_cell(json.loads(message), fds, control, (wake_read, wake_write))
            for fd in fds:
                os.close(fd)
            control.send(json.dumps({"forked": pid}).encode())


def _report_exits(control: socket.socket) -> None:
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        control.send(json.dumps({"exited": pid, "code": os.waitstatus_to_exitcode(status)}).encode())


def _fork_cell(request: dict[str, Any], fds: list[int], control: socket.socket, wake: tuple[int, int]) -> int:
    cell_fd, output_fd = fds
    zygote_pid = os.getpid()
    pid = os.fork()
    if pid:
        return pid
    # The child: become a fresh cell. Nothing here may raise past os._exit.
    code = 1
    try:
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        for fd in (*wake, control.fileno()):
            os.close(fd)
        os.setsid()  # its own session and process group, like a spawned cell
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.dup2(output_fd, 1)
        os.dup2(output_fd, 2)
        os.close(null)
        os.close(output_fd)
        os.environ.clear()
        os.environ.update(request["env"])
        if request.get("cwd"):
            os.chdir(request["cwd"])
        die_with_parent(zygote_pid)  # a fork does not inherit the parent-death signal
        code = run_cell(cell_fd, zygote_pid)
    finally:
        os._exit(code)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="policybox.cell.zygote", description=__doc__)
    parser.add_argument("--fd", type=int, required=True)
    parser.add_argument("--parent-pid", type=int, required=True)
    parser.add_argument("--preload", action="append", default=[])
    args = parser.parse_args(argv)
    die_with_parent(args.parent_pid)
    control = socket.socket(fileno=args.fd)
    try:
        preload([*DEFAULT_PRELOAD, *args.preload])
    except Exception as exc:  # e.g. --preload torch where torch is not installed
        control.send(json.dumps({"error": f"preload failed: {type(exc).__name__}: {exc}"}).encode())
        return 1
    try:
        control.send(json.dumps({"ready": os.getpid()}).encode())
        serve(control)
    except ConnectionError:  # the host is gone (it was stopped while this started): nothing to tell anyone
        return 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
