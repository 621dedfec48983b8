"""ProcessPool: the episode's cells (one per agent, or per policy); each step is sent to all cells, then
gathered by a deadline.

Time belongs to the host. Each cell has at most one request in flight. A cell that misses a step's
deadline plays the fallback action for that step and every later step until its late reply arrives; that
reply answers an old observation, so it is dropped, and the cell gets the *current* observation at
the next step. Time past the deadline is taken from the agent's time bank; an agent whose bank is
spent -- by a late reply, or by still not answering -- is disabled and its cell killed. With
``wait_on_bank`` (Kaggle's overage time) the step waits past the deadline while the bank of a cell asked
lasts, and a reply in that time counts; its lateness is drawn from the bank all the same.

The host never blocks on one cell: a frame a cell does not read at once waits in that cell's
outbox and goes out as its socket becomes writable (EPOLLOUT), while the others play on. Every
CPU_CHECK_S the host reads each cell's CPU time over all its processes and stops a cell past its
CPU limit. All cells share this host's memory budget (``policybox.host.budget``); a cell the
kernel's OOM killer killed is ``crashed`` with the limit that was reached named. Each cell, as the
pool holds it, is a ``PoolCell`` (``policybox.host.pool_cell``).
"""

from __future__ import annotations

import contextlib
import os
import select
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from policybox.host.budget import host_budget
from policybox.host.cell_groups import CellGroup
from policybox.host.cell_pool import CellPool
from policybox.host.launcher import CellProcess, Launcher
from policybox.host.output import OutputPump
from policybox.host.pool_cell import PoolCell, PoolSeat
from policybox.host.record import AgentRecord
from policybox.host.sandbox import CellSandbox, ScratchRoot, wanted_layers
from policybox.host.seats import SeatProcess
from policybox.host.uids import UidLease, lease_uids
from policybox.limits import Limits
from policybox.results import AgentStatus, Failure, MemoryBudget
from policybox.sandbox import Layer, SandboxLevel
from policybox.wire import (
    FrameType,
    Reply,
    encode_header,
    encode_json,
    observation_parts,
)

STOP_GRACE_S = 1.0
CPU_CHECK_S = 0.25
EPOLLOUT = select.EPOLLOUT  # read once per event of every step: a global, not a module attribute


class ProcessPool(CellPool):
    """All cells of one episode. Use as a context manager: every cell is killed and reaped on exit."""

    def __init__(
        self, groups: list[CellGroup], limits: Limits, level: SandboxLevel, seccomp: bool, launcher: Launcher
    ) -> None:
        self._groups = groups
        # What the memory budget is divided by where no budget cgroup holds it: every process that steps
        # (a forked group's seats each), so that per-process limits never add up past the budget.
        self._stepping = sum(len(group.records) if group.forks else 1 for group in groups)
        self._limits = limits
        self._level = level
        self._layers = wanted_layers(level, seccomp)
        self._budget = host_budget(limits.memory_budget_mb) if Layer.MEMORY in self._layers else None
        self._scratch = ScratchRoot() if self._layers else None
        self._launcher = launcher
        self._poller = select.epoll()  # epoll directly: the selectors wrapper costs microseconds per step
        self._by_fd: dict[int, PoolCell] = {}
        self._cells: list[PoolCell] = []
        self._loaders: list[CellProcess] = []  # --cells forked: each group's loader, which its seats share
        self._group_cells: list[list[PoolCell]] = []  # each group's cells: its one, or a forked group's seats
        self._output = OutputPump(limits.log_limit_bytes)
        self._next_cpu_check = 0.0
        self._leftovers: str | None = None  # what cleanup could not remove of the cells' scratch

    def __enter__(self) -> ProcessPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def cleanup(self) -> str:
        """How cells are killed: with their cgroup (catches setsid escapes) or by process group."""
        all_cgroups = self._cells and all(cell.process.sandbox.kill_cgroup is not None for cell in self._cells)
        how = "cgroup+process-group" if all_cgroups else "process-group"
        return how if self._leftovers is None else f"{how}; not removed: {self._leftovers}"

    @property
    def memory_budget(self) -> MemoryBudget | None:
        """The memory budget this episode's cells shared (None: they had no memory limit)."""
        return None if self._budget is None else self._budget.describe(self._stepping)

    def scratch_view(self, agent_id: int) -> Path | None:
        """Agent ``agent_id``'s scratch folder as the host can read it while the cell runs: through
        ``/proc/<pid>/root``, since with the disk layer its files are in a tmpfs that only the cell's own
        mount namespace shows. None once its cell has stopped, or if it has no scratch folder. What is
        in it is the cell's: hostile, and still changing if the cell is."""
        for cell in self._cells:
            scratch = cell.process.sandbox.scratch
            seats = [record.agent_id for record in cell.records]
            if agent_id in seats and scratch is not None and not cell.process.closed:
                return Path(f"/proc/{cell.process.pid}/root") / scratch.relative_to("/")
        return None

    def start(self, setups: list[dict[str, Any]]) -> None:
        """Launch every cell at once, hand each its SETUP (``setups[i]``: the i-th group's), then wait
        for all READY replies."""
        # One scan of the machine's processes for all the uids, not one per cell.
        wants_uids = Layer.UID in self._layers and os.geteuid() == 0
        leases = lease_uids(len(self._groups)) if wants_uids else [None] * len(self._groups)
        for index, (group, lease) in enumerate(zip(self._groups, leases, strict=True)):
            try:
                self._launch(group, lease)
            except BaseException:
                for unused in leases[index:]:  # no cell owns them (releasing one twice does nothing)
                    if unused is not None:
                        unused.release()
                raise
        deadline = time.monotonic_ns() + int(self._limits.init_timeout_s * 1e9)
        for cells, setup in zip(self._group_cells, setups, strict=True):
            plan = cells[0].process.sandbox.plan() if self._layers else None
            setup = {**setup, "sandbox": plan.model_dump(mode="json") if plan else None}
            for cell in cells:
                cell.plan = plan
                if isinstance(cell, PoolSeat) and cell is not cells[0]:
                    cell.await_ready()  # the loader reads the SETUP sent its first seat
                else:
                    self._send(cell, [encode_json(FrameType.SETUP, setup)], 0, [])
        self._gather(deadline, None)
        for cell in self._cells:
            if cell.playing and cell.in_flight is not None:
                message = f"not ready within the init timeout of {self._limits.init_timeout_s:g} s"
                cell.fail(AgentStatus.DISABLED, Failure(step=None, phase="init", kind="Timeout", message=message))
        self.retire_stopped()

    def _launch(self, group: CellGroup, lease: UidLease | None) -> None:
        """Start ``group``'s cell in its sandbox, its output piped to its log (StorageFull if the
        log cannot be made); on failure the sandbox (and ``lease``) is released."""
        first = group.first
        assert first.log_path is not None
        root = self._scratch.path if self._scratch else Path()
        sandbox = CellSandbox(first, self._level, self._layers, self._limits, root, lease, self._budget, self._stepping)
        seat_logs = [record.log_path for record in group.records[1:]] if group.forks else []
        outputs: list[int] = []
        try:
            try:
                for log in (log for log in [first.log_path, *seat_logs] if log is not None):
                    outputs.append(self._output.open(log))  # one at a time: a log that cannot be made leaks none
                process = self._launcher.launch(outputs[0], sandbox, first.torch, outputs[1:])
            finally:
                for output in outputs:
                    os.close(output)  # the cell holds the only write end: its exit ends the log
        except BaseException:
            sandbox.close()  # its cgroups exist already; no cell will own them
            raise
        if group.forks:
            self._loaders.append(process)
            socks = [process.sock.dup(), *process.seat_socks]  # the first seat's: the loader keeps its own end
            cells: list[PoolCell] = [
                PoolSeat(record, SeatProcess.of(process, sock), self._limits)
                for record, sock in zip(group.records, socks, strict=True)
            ]
        else:
            cells = [PoolCell(group.records, process, self._limits)]
        self._group_cells.append(cells)
        for cell in cells:
            self._cells.append(cell)
            self._poller.register(cell.process.sock, select.EPOLLIN)
            self._by_fd[cell.process.sock.fileno()] = cell
        for record in group.records:
            record.sandbox = {layer: status for layer, status in sandbox.statuses.items()}  # a Layer is a str
            record.memory = sandbox.memory

    def act(self, step: int, observations: Mapping[int, bytes | memoryview]) -> dict[int, Reply]:
        """Send every cell that is free the observations of its seats in ``observations`` (by agent
        id), then gather replies until the deadline; the replies by agent id (none: no answer in time)."""
        due = [cell.asked_in(observations) for cell in self._cells]  # each cell's seats due an action
        deadline = time.monotonic_ns() + int(self._limits.act_timeout_ms * 1e6) + self._waited_ns(due)
        for cell, seats in zip(self._cells, due, strict=True):
            cell.replies = {}
            if cell.in_flight is None and seats:
                asked = [(record.agent_id, observations[record.agent_id]) for record in seats]
                self._send(cell, observation_parts(step, asked), step, [agent_id for agent_id, _ in asked])
        self._gather(deadline, step)
        now = time.monotonic_ns()
        check_cpu = self._cpu_check_due()
        replies: dict[int, Reply] = {}
        for cell, seats in zip(self._cells, due, strict=True):
            replies.update(cell.replies)
            if len(cell.replies) < len(seats):  # it answered only the seats asked: fewer replies, some missed
                missed = [record for record in seats if record.playing and record.agent_id not in cell.replies]
                for record in missed:
                    record.missed_deadline(step, self._limits.act_timeout_ms)
                if missed:
                    cell.check_overdue(now)
            if check_cpu and cell.playing:
                cell.check_cpu(self._limits.cpu_limit_s, step)
        self.retire_stopped()
        return replies

    def _waited_ns(self, due: list[list[AgentRecord]]) -> int:
        """How long past the deadline the step waits (``wait_on_bank``): the largest bank of a cell asked."""
        if not self._limits.wait_on_bank:
            return 0
        return max((max(cell.bank_ns, 0) for cell, seats in zip(self._cells, due, strict=True) if seats), default=0)

    def _send(self, cell: PoolCell, data: Sequence[bytes | memoryview], seq: int, asked: list[int]) -> None:
        cell.send(data, seq, asked)
        if cell.outbox is not None and cell.playing:
            self._poller.modify(cell.process.sock, select.EPOLLIN | select.EPOLLOUT)

    def _cpu_check_due(self) -> bool:
        now = time.monotonic()
        if now < self._next_cpu_check:
            return False
        self._next_cpu_check = now + CPU_CHECK_S
        return True

    def _gather(self, deadline_ns: int, step: int | None) -> None:
        """Read until every cell asked at this step has answered, or the deadline passes.

        Cells still busy with an older step are read too when they are readable (their late reply
        frees them for the next step), but never waited for.
        """
        current = 0 if step is None else step
        waiting = {cell for cell in self._cells if cell.playing and cell.in_flight == current}
        while waiting:
            remaining = (deadline_ns - time.monotonic_ns()) / 1e9
            if remaining <= 0:
                return
            for fd, events in self._poller.poll(remaining):
                cell = self._by_fd[fd]
                if events & EPOLLOUT and cell.outbox is not None:
                    emptied = cell.on_writable(step)
                    if emptied and cell.playing:
                        self._poller.modify(fd, select.EPOLLIN)
                if events & ~EPOLLOUT:
                    cell.on_readable(step)
                if not (playing := cell.playing):
                    self._forget(cell)  # read no more of it; it is retired after the gather
                if not playing or cell.in_flight != current:
                    waiting.discard(cell)

    def retire_stopped(self) -> None:
        """Stop the cells none of whose seats still play. One that failed is retired now (how it ended
        explains the failure); one whose seats all left the game is killed now and reaped when the pool
        closes, off the step path (a reap waits on the zygote's report and the cgroup's removal)."""
        for cell in self._cells:
            if cell.playing or cell.process.closed or cell.killed:
                continue
            if all(record.left_at_step is not None for record in cell.records):
                self._forget(cell)
                cell.process.kill()
                cell.killed = True
            else:
                self._retire(cell)

    def _retire(self, cell: PoolCell) -> None:
        self._forget(cell)
        cell.retire()

    def _forget(self, cell: PoolCell) -> None:
        if self._by_fd.pop(cell.process.sock.fileno(), None) is not None:
            self._poller.unregister(cell.process.sock)

    def close(self) -> None:
        """Ask live cells to stop and give them a moment; then, however that went (even on a second
        Ctrl-C), kill every cell's group and cgroup first and reap them after."""
        live = [cell for cell in self._cells if not cell.process.closed]
        try:
            stop = encode_header(FrameType.STOP, 0, 0)
            for cell in live:
                with contextlib.suppress(OSError):
                    cell.process.sock.send(stop)
            give_up = time.monotonic() + STOP_GRACE_S
            for cell in live:
                cell.process.exit_status(max(0.0, give_up - time.monotonic()))
        finally:
            for cell in live:
                cell.process.kill()
            for loader in self._loaders:
                loader.kill()
            for cell in live:
                self._forget(cell)
                cell.process.close()
            for loader in self._loaders:
                loader.close()
            self._poller.close()
            self._output.close()
            for record in (record for cell in self._cells for record in cell.records):
                log = record.log_path
                record.log_note = None if log is None else self._output.cut_short.get(log)
            if self._scratch is not None:
                self._leftovers = self._scratch.close()
