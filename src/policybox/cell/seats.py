"""Forked seats (``--cells forked``): a loader builds one submission's policy once, then forks a process
per seat, so the seats share one physical copy of its network (copy-on-write) and each keeps its own
process, random streams and failure.

The loader is a cell like any other: it applies its whole sandbox before it imports entrant code
(``policybox.cell.__main__``), and it was launched holding one socket per seat, the host's SETUP
arriving on the first. It builds the policy under the first seat's streams with ONE thread -- an
OpenMP pool started before a fork hangs the children that use it, and a pool of one is no pool -- then
freezes the collector (a collection in a seat would otherwise touch, and so copy, every page of the
policy) and forks the seats. Each seat keeps only its own socket, dies with the loader, applies its
own ``AgentState`` (streams and thread budget) and builds its agent from the policy; ``serve`` then
answers READY, with the seat's pid, and its steps as in any cell. The loader keeps no seat's socket,
so a seat that ends closes its connection; it waits for its seats -- reaping none, so that the host can
read how each ended (``policybox.host.seats``) -- and exits.

``inline_seat`` is the same in the host (inline mode): for each seat, the policy built afresh under the
loader's freshly applied state, then the seat's agent under the seat's -- which is what the seat's copy
of the loader's memory holds -- so both modes give identical results.
"""

from __future__ import annotations

import contextlib
import gc
import os
import socket
from typing import Any

from policybox.cell.lifeline import die_with_parent
from policybox.cell.report import PolicyFailure, failure_report
from policybox.cell.runtime import Built, CellRuntime
from policybox.wire import FrameType, encode_json

LOADER_THREADS = 1


def loader_setup(setup: dict[str, Any]) -> dict[str, Any]:
    """The loader's share of a group's SETUP: its first seat's streams, one thread."""
    return {**setup, "threads": LOADER_THREADS}


def seat_setup(setup: dict[str, Any], agent_id: int) -> dict[str, Any]:
    """One seat's share of its group's SETUP: that agent alone, with its own streams and thread budget."""
    return {**setup, "agents": [agent_id]}


def fork_seats(
    setup: dict[str, Any], seats: list[tuple[socket.socket, int | None]]
) -> tuple[socket.socket, CellRuntime, Built]:
    """In the loader, holding ``seats`` (one per agent of ``setup``, in order: its socket, and the output
    its log reads, None for the loader's own): build the policy and fork a seat per agent. Returns in each
    seat only: its socket, its runtime (its own state applied) and the policy to build its agent from
    (``CellRuntime.start``); the loader waits for its seats and exits (SystemExit). A policy that cannot
    be built fails every seat: the ERROR goes to each socket but the first, and is raised for the caller
    to send on that one."""
    agent_ids = [int(agent_id) for agent_id in setup["agents"]]
    socks = [sock for sock, _ in seats]
    if len(agent_ids) != len(socks):
        raise ValueError(f"SETUP names {len(agent_ids)} agents for {len(socks)} seat sockets")
    try:
        built = CellRuntime(loader_setup(setup), owns_process=True).build()
    except Exception as exc:
        report = exc.report if isinstance(exc, PolicyFailure) else failure_report(exc, "init")
        for sock in socks[1:]:
            with contextlib.suppress(OSError):
                sock.sendall(encode_json(FrameType.ERROR, report))
        raise
    gc.freeze()  # what the policy built stays out of the collector's reach: its pages stay shared
    loader = os.getpid()
    pids = []
    for agent_id, seat in zip(agent_ids, seats, strict=True):
        if (pid := os.fork()) == 0:
            return _become_seat(loader, seat, seats, seat_setup(setup, agent_id), built)
        pids.append(pid)
    _close(seats)  # the seats' own: a seat that ends closes its connection
    _wait_for_seats(pids)
    raise SystemExit(0)


def _become_seat(
    loader: int,
    own: tuple[socket.socket, int | None],
    seats: list[tuple[socket.socket, int | None]],
    setup: dict[str, Any],
    built: Built,
) -> tuple[socket.socket, CellRuntime, Built]:
    """In a seat just forked: write to its own log, hold no other seat's socket or output, die with the
    loader, apply its own state."""
    die_with_parent(loader)
    sock, output = own
    if output is not None:
        os.dup2(output, 1)
        os.dup2(output, 2)
    _close([seat for seat in seats if seat[0] is not sock] + [(sock, output)], keep=sock)
    return sock, CellRuntime(setup, owns_process=True), built  # the runtime applies the seat's streams, threads


def _close(seats: list[tuple[socket.socket, int | None]], keep: socket.socket | None = None) -> None:
    """Close the seats' sockets (but ``keep``) and outputs."""
    for sock, output in seats:
        if sock is not keep:
            sock.close()
        if output is not None:
            os.close(output)


def _wait_for_seats(pids: list[int]) -> None:
    """Wait until every seat has ended, reaping none: a seat that ends stays a zombie, whose exit status
    the host reads in /proc (``policybox.host.seats``), until the loader exits."""
    for pid in pids:
        with contextlib.suppress(ChildProcessError):
            os.waitid(os.P_PID, pid, os.WEXITED | os.WNOWAIT)


def inline_seat(setup: dict[str, Any], agent_id: int) -> tuple[CellRuntime, dict[str, Any]]:
    """Inline mode: seat ``agent_id``'s runtime, its agent built as its forked process would have it (the
    policy built afresh under a fresh loader's state), and its READY report; PolicyFailure if either
    cannot be built."""
    built = CellRuntime(loader_setup(setup), owns_process=False).build()
    runtime = CellRuntime(seat_setup(setup, agent_id), owns_process=False)
    return runtime, runtime.start(built)
