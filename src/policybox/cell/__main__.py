"""Cell bootstrap: ``python -I -m policybox.cell --fd N --parent-pid P``.

Runs in a fresh interpreter with the socket to the host inherited as fd N. It ties its life to the
host, reads SETUP, builds the policy, answers READY (or ERROR), then serves OBSERVATION frames until
STOP or until the host's end of the socket closes. Nothing of the protocol touches stdout/stderr:
those are the agent's log file. With ``--seat-fd`` (``--cells forked``) it is a loader, which forks its
seats after SETUP (``policybox.cell.seats``); each seat goes on from READY as any cell.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import os
import socket
import sys
from typing import TYPE_CHECKING

from policybox.cell import sandbox
from policybox.cell.lifeline import die_with_parent
from policybox.cell.output import cap_output
from policybox.cell.report import PolicyFailure, failure_report
from policybox.process_names import CELL, name_process
from policybox.sandbox import SandboxPlan
from policybox.wire import (
    HOST_TO_CELL,
    MAX_HOST_FRAME,
    Frame,
    FrameDecoder,
    FrameType,
    ProtocolError,
    check_protocol,
    decode_json,
    decode_observations,
    encode_json,
    encode_replies,
    encode_reply,
    one_observation,
)

if TYPE_CHECKING:  # imported by serve once the sandbox is applied: it imports numpy
    from policybox.cell.runtime import CellRuntime

RECV_SIZE = 1 << 16
OOM_SCORE_ADJ_MAX = 1000


def first_to_go_under_memory_pressure() -> None:
    """Make this cell, and every process it starts (they inherit it), the kernel's first choice of
    victim when memory runs out -- before the host, its zygote, evaluate's workers or any process
    that is not policybox's. Done while the cell is still root: where root has CAP_SYS_RESOURCE the
    kernel then also forbids lowering it again (``oom_score_adj_min``); elsewhere it is the uid
    switch (a process that changed uid is not dumpable, so its /proc files are root's) and Landlock
    (/proc is read-only too) that keep a policy from lowering it."""
    # No /proc: there is nothing to adjust either.
    with contextlib.suppress(OSError), open("/proc/self/oom_score_adj", "w") as adj:
        adj.write(str(OOM_SCORE_ADJ_MAX))


class HostConnection:
    """Blocking frame reader/writer over the inherited socket."""

    def __init__(self, sock: socket.socket) -> None:
        self._sock = sock
        self._decoder = FrameDecoder(HOST_TO_CELL, MAX_HOST_FRAME)
        self._frames: list[Frame] = []

    def playing_seats(self, seats: int) -> None:
        """The cell plays ``seats`` seats: a frame may carry an observation for each."""
        self._decoder.allow(MAX_HOST_FRAME * seats)

    def read(self) -> Frame | None:
        """The next frame, or None once the host closed its end."""
        while not self._frames:
            data = self._sock.recv(RECV_SIZE)
            if not data:
                return None
            self._frames = self._decoder.feed(data)
        return self._frames.pop(0)

    def send(self, data: bytes) -> None:
        self._sock.sendall(data)


def serve(conn: HostConnection, parent_pid: int, seats: list[tuple[socket.socket, int | None]] | None = None) -> int:
    """``seats``: with ``--cells forked``, each seat's socket (``conn``'s first) and output (the first's:
    this cell's), and this cell is their loader (``policybox.cell.seats``): it returns only in the seats."""
    setup = conn.read()
    if setup is None or setup.type != FrameType.SETUP:
        return 2
    try:
        message = decode_json(setup)
        check_protocol(message)
        # The spec's own variables, which may be secrets: in SETUP, never through a zygote
        # (``CellSandbox.shared_environment``).
        os.environ.update(message["spec"].get("env") or {})
        cap_output(int(message["log_limit_bytes"]))
        plan = message.get("sandbox")
        statuses = sandbox.apply(SandboxPlan.model_validate(plan), parent_pid) if plan else {}
        # Only now: numpy (imported by the runtime) starts threads, and policy code may run.
        from policybox.cell.runtime import CellRuntime

        built = None
        if seats:  # the loader: what follows runs in each seat it forks, on the seat's own socket
            from policybox.cell.seats import fork_seats

            own, runtime, built = fork_seats(message, seats)
            conn = HostConnection(own)
        else:
            runtime = CellRuntime(message, owns_process=True)
        conn.playing_seats(len(runtime.agent_ids))
        ready = runtime.start(built)
    except PolicyFailure as failure:
        conn.send(encode_json(FrameType.ERROR, failure.report))
        return 1
    except Exception as exc:  # a bad SETUP, a version mismatch, a strict sandbox refused
        conn.send(encode_json(FrameType.ERROR, failure_report(exc, "init")))
        return 1
    conn.send(encode_json(FrameType.READY, {**ready, "sandbox": statuses, "pid": os.getpid()}))
    seat = runtime.agent_ids[0] if len(runtime.agent_ids) == 1 else None  # a cell of one seat: its hot path
    while (frame := conn.read()) is not None and frame.type == FrameType.OBSERVATION:
        gc.disable()  # no collector pause between an observation and its reply: collect while waiting
        conn.send(answer(runtime, frame, seat))
        gc.enable()
        if not runtime.playing:  # every seat's policy raised
            return 1
    return 0


def answer(runtime: CellRuntime, frame: Frame, seat: int | None) -> bytes:
    """The ACTION frame answering an OBSERVATION frame. A cell of one seat (``seat``) reads a frame of one
    observation for that seat without building lists; anything else is read as a group, which refuses
    observations for seats the cell does not play."""
    try:
        if seat is not None and (observation := one_observation(frame.payload, seat)) is not None:
            return encode_reply(frame.seq, seat, runtime.step_seat(seat, observation))
        return encode_replies(frame.seq, runtime.step(decode_observations(frame.payload)))
    except ValueError as exc:  # observations for seats it does not play: the host broke the protocol
        raise ProtocolError(str(exc)) from None


def run_cell(fd: int, parent_pid: int, seat_fds: list[tuple[int, int]] | None = None) -> int:
    """Serve the host over socket ``fd`` until it says stop; the cell's exit code. ``seat_fds``: with
    ``--cells forked``, the socket and output of each seat after the first (``fd``'s), which it forks."""
    name_process(CELL)
    first_to_go_under_memory_pressure()
    sock = socket.socket(fileno=fd)
    # A cell the host wakes must not preempt the host while it is still handing out a step's
    # observations: SCHED_BATCH tasks never preempt on wakeup (they run when a CPU is free).
    os.sched_setscheduler(0, os.SCHED_BATCH, os.sched_param(0))
    try:
        seats = [(sock, None), *((socket.socket(fileno=s), out) for s, out in seat_fds)] if seat_fds else None
        return serve(HostConnection(sock), parent_pid, seats)
    except (ProtocolError, OSError) as exc:
        print(f"policybox cell: connection to host failed: {exc}", file=sys.stderr)
        return 3
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        with contextlib.suppress(OSError):  # the policy may have closed the fd itself
            sock.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="policybox.cell", description=__doc__)
    parser.add_argument("--fd", type=int, required=True)
    parser.add_argument("--parent-pid", type=int, required=True)
    parser.add_argument("--seat-fd", type=_fds, action="append", help="--cells forked: SOCKET,OUTPUT of a seat")
    args = parser.parse_args(argv)
    die_with_parent(args.parent_pid)
    return run_cell(args.fd, args.parent_pid, args.seat_fd)


def _fds(text: str) -> tuple[int, int]:
    sock, output = text.split(",")
    return int(sock), int(output)


if __name__ == "__main__":
    sys.exit(main())
