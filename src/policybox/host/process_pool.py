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
kernel's OOM killer killed is ``crashed`` with the limit that was reached named.
"""

from __future__ import annotations

import contextlib
import os
import reprlib
import select
import signal
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from policybox.host import torch_use
from policybox.host.budget import host_budget
from policybox.host.cell_groups import CellGroup
from policybox.host.cell_pool import CellPool
from policybox.host.launcher import CellProcess, Launcher
from policybox.host.output import OutputPump
from policybox.host.record import AgentRecord
from policybox.host.sandbox import CellSandbox, ScratchRoot, wanted_layers
from policybox.host.seats import SeatProcess
from policybox.host.uids import UidLease, lease_uids
from policybox.host.verify import verified_statuses
from policybox.limits import Limits
from policybox.results import AgentStatus, Failure, MemoryBudget
from policybox.sandbox import ACTIVE, Layer, SandboxLevel, SandboxPlan
from policybox.wire import (
    CELL_TO_HOST,
    MAX_CELL_FRAME,
    PROTOCOL_VERSION,
    Frame,
    FrameDecoder,
    FrameType,
    ProtocolError,
    Reply,
    decode_json,
    decode_object,
    decode_replies,
    encode_header,
    encode_json,
    observation_parts,
    one_reply,
)

RECV_SIZE = 1 << 16
STOP_GRACE_S = 1.0
SIGNAL_CAUSES = {
    "SIGXCPU": "its CPU time limit was reached",
    "SIGXFSZ": "its file size limit was reached",
    "SIGSYS": "it made a system call the seccomp filter forbids",
}
EXIT_WAIT_S = 1.0
CPU_CHECK_S = 0.25
MAX_MINIMUM_ACTION_TIMEOUT_MS = 24 * 3600 * 1000  # a policy may say it needs up to a day per step, no more
MAX_CLAIM_CHARS = 300  # of a cell's account of one sandbox layer
LAYER_NAMES = frozenset(Layer)
EPOLLOUT = select.EPOLLOUT  # read once per event of every step: a global, not a module attribute


class _Cell:
    """The host's view of one cell: the seats it plays, its process, frame decoder, request in flight
    and time bank. A cell answers for all its seats at once, so they share its deadline and bank."""

    def __init__(self, records: list[AgentRecord], process: CellProcess, limits: Limits) -> None:
        self.records = records
        self._by_id = {record.agent_id: record for record in records}
        self._seat = records[0].agent_id if len(records) == 1 else None  # a cell of one seat: its hot path
        self.process = process
        self.decoder = FrameDecoder(CELL_TO_HOST, MAX_CELL_FRAME * len(records))  # a reply per seat
        self.in_flight: int | None = None  # sequence number awaiting a reply
        self.asked: list[int] = []  # the agents the request in flight asked
        self.sent_ns = 0
        self.replies: dict[int, Reply] = {}  # this step's replies, by agent id
        self.outbox: memoryview | None = None  # the part of a frame the cell has not taken yet
        self.plan: SandboxPlan | None = None
        self.bank_ns = int(limits.time_bank_ms * 1e6)
        self.killed = False  # its seats left the game: killed at once, reaped when the pool closes
        self._act_timeout_ns = int(limits.act_timeout_ms * 1e6)

    @property
    def playing(self) -> bool:
        """Whether any of its seats still plays (asked several times a cell and step: a plain loop)."""
        for record in self.records:  # noqa: SIM110 - a third of any() over a generator's cost
            if record.playing:
                return True
        return False

    def asked_in(self, observations: Mapping[int, object]) -> list[AgentRecord]:
        """The seats it still plays that ``observations`` (by agent id) ask to act."""
        if self._seat is not None:  # one seat: no comprehension, asked once a cell and step
            record = self.records[0]
            return [record] if record.playing and self._seat in observations else []
        return [record for record in self.records if record.playing and record.agent_id in observations]

    def fail(self, status: AgentStatus, failure: Failure) -> None:
        """A failure of the whole cell: every seat it still plays gets it (a copy each)."""
        for record in self.records:
            if record.playing:
                record.fail(status, failure.model_copy())

    def send(self, data: Sequence[bytes | memoryview], seq: int, asked: list[int]) -> None:
        """Send one frame without blocking and mark it in flight; what the socket does not take now
        waits in the outbox (the caller then watches for EPOLLOUT). Its time starts before the send: the
        cell may be at work before the send returns here."""
        started_ns = time.monotonic_ns()
        try:
            sent = self.process.sock.sendmsg(data)
        except BlockingIOError:
            sent = 0
        except OSError as exc:
            self.crashed(seq, f"could not send to the cell ({exc})")
            return
        if sent < sum(map(len, data)):
            self.outbox = memoryview(b"".join(data))[sent:]
        self.in_flight, self.asked, self.sent_ns = seq, asked, started_ns

    def on_writable(self, step: int | None) -> bool:
        """Send more of the outbox; whether it is empty now (all sent, or the cell crashed). The time
        this takes is the cell's, as it reads at its own pace."""
        assert self.outbox is not None
        try:
            sent = self.process.sock.send(self.outbox)
        except BlockingIOError:
            return False
        except OSError as exc:
            self.outbox = None
            self.crashed(step, f"could not send to the cell ({exc})")
            return True
        self.outbox = self.outbox[sent:] if sent < len(self.outbox) else None
        return self.outbox is None

    def on_readable(self, step: int | None) -> None:
        """Take in whatever the cell sent; frames answer the request in flight or are violations. What
        a cell sends is data: anything its bytes make the host raise is a violation of that cell's."""
        try:
            data = self.process.sock.recv(RECV_SIZE)
        except OSError as exc:
            self.crashed(step, f"socket error ({exc})")
            return
        if not data:
            self.crashed(step, "the cell closed its connection")
            return
        if self._seat is not None and step is not None and self.in_flight == step and not self.decoder.pending_bytes:
            action = one_reply(data, step, self._seat)
            if action is not None:  # the whole of data is the on-time action of its one seat
                self._on_action(self._seat, action, step)
                return
        try:
            for frame in self.decoder.feed(data):
                self._on_frame(frame, step)
                if not self.playing:
                    return
        except ProtocolError as exc:
            self.violation(step, str(exc))
        except Exception as exc:  # a check we lack must still fail the cell, never end the episode
            self.violation(step, f"the host could not read what it sent: {type(exc).__name__}: {exc}")

    def _on_frame(self, frame: Frame, step: int | None) -> None:
        if self.in_flight is None or frame.seq != self.in_flight:
            raise ProtocolError(f"unexpected {frame.type.name} frame for sequence {frame.seq}")
        latency_ns = time.monotonic_ns() - self.sent_ns
        self.in_flight = None
        if frame.type == FrameType.ERROR:
            self.fail(AgentStatus.ERROR, Failure.from_report(decode_json(frame), None if step is None else frame.seq))
        elif step is None:
            self._on_ready(frame)
        elif frame.type == FrameType.READY:
            raise ProtocolError("READY frame during the episode")
        else:
            self._on_replies(frame, step, latency_ns)

    def _on_replies(self, frame: Frame, step: int, latency_ns: int) -> None:
        """Each seat's reply: an ERROR fails that seat; an action answers this step, or -- late, for an
        older step -- is dropped, its lateness paid from the bank."""
        on_time = frame.seq == step
        for agent_id, reply in zip(self.asked, decode_replies(frame.payload, self.asked)):  # noqa: B905 - as many
            record = self._by_id[agent_id]
            if reply[0] == FrameType.ERROR:
                report = decode_object(reply[1], f"agent {agent_id}'s ERROR reply")
                record.fail(AgentStatus.ERROR, Failure.from_report(report, frame.seq))
            elif on_time:
                self.replies[agent_id] = reply
                record.latencies_ns.append(latency_ns)
        if not on_time or latency_ns > self._act_timeout_ns:  # late, or waited for on the bank
            self.spend_bank(frame.seq, latency_ns - self._act_timeout_ns)

    def _on_action(self, seat: int, action: bytes, step: int) -> None:
        """Its one seat's action answers step ``step``, the request in flight: what ``_on_frame`` and
        ``_on_replies`` make of a frame holding just that, without their lists."""
        latency_ns = time.monotonic_ns() - self.sent_ns
        self.in_flight = None
        self.replies[seat] = (FrameType.ACTION, action)
        self.records[0].latencies_ns.append(latency_ns)
        if latency_ns > self._act_timeout_ns:  # waited for on the bank
            self.spend_bank(step, latency_ns - self._act_timeout_ns)

    def _on_ready(self, frame: Frame) -> None:
        if frame.type != FrameType.READY:
            raise ProtocolError(f"{frame.type.name} frame before READY")
        minimum, torch, claims = _ready_fields(decode_json(frame))
        first = self.records[0]
        if torch and not first.torch:
            torch_use.remember(first.spec)  # its next cells start with torch
        checked: dict[Layer, str] = verified_statuses(self.process.pid, self.plan, claims) if self.plan else {}
        statuses = {**self.process.sandbox.statuses, **checked}
        for record in self.records:
            record.minimum_action_timeout_ms = minimum
            record.sandbox = {layer: statuses[layer] for layer in Layer if layer in statuses}
            if not statuses.get(Layer.MEMORY, "").startswith(ACTIVE):
                record.memory = None  # the address-space limit did not hold: no limit in force

    def check_overdue(self, now_ns: int) -> None:
        """Disable the cell's seats if the request still in flight has already overrun its whole bank."""
        if self.in_flight is not None and now_ns - self.sent_ns - self._act_timeout_ns >= self.bank_ns:
            self.spend_bank(self.in_flight, now_ns - self.sent_ns - self._act_timeout_ns)

    def spend_bank(self, seq: int, overrun_ns: int) -> None:
        self.bank_ns -= overrun_ns
        if self.bank_ns <= 0:
            message = f"time bank used up: step {seq} ran {overrun_ns / 1e6:.0f} ms past its deadline"
            self.fail(AgentStatus.DISABLED, Failure(step=seq, phase="step", kind="TimeBank", message=message))

    def check_cpu(self, limit_s: float, step: int) -> None:
        """Stop the cell once all its processes together have used more CPU time than its limit."""
        used = self.process.sandbox.cpu_seconds()
        if used is not None and used > limit_s:
            message = f"its CPU time limit was reached: {used:.1f} s over all its processes, limit {limit_s:g} s"
            self.fail(AgentStatus.DISABLED, Failure(step=step, phase="step", kind="CpuLimit", message=message))

    def violation(self, step: int | None, message: str) -> None:
        self.fail(AgentStatus.ERROR, Failure(step=step, phase=_phase(step), kind="ProtocolError", message=message))

    def crashed(self, step: int | None, message: str) -> None:
        """The connection is gone; how the process ended is filled in when it is retired. The crash is
        pinned on the step the cell was working on, if any, not on the step the host noticed it."""
        if step is not None and self.in_flight is not None:
            step = self.in_flight
        self.fail(AgentStatus.CRASHED, Failure(step=step, phase=_phase(step), kind="Crashed", message=message))

    def retire(self) -> None:
        """Stop this cell for good, first noting how it exited if that explains a crash."""
        crashes = [r.failure for r in self.records if r.failure is not None and r.failure.kind == "Crashed"]
        code = self.process.exit_status(EXIT_WAIT_S) if crashes else None
        for failure in crashes:
            assert failure is not None
            if code is not None and code < 0:
                failure.signal = signal.Signals(-code).name
                failure.message = f"cell killed by {failure.signal}"
                if cause := self.process.sandbox.out_of_memory():
                    failure.kind = "OutOfMemory"
                    failure.message += f": out of memory: {cause}"
                elif failure.signal in SIGNAL_CAUSES:
                    failure.message += f": {SIGNAL_CAUSES[failure.signal]}"
            elif code is not None:
                failure.exit_code = code
                failure.message = f"cell exited with code {code} ({failure.message})"
        self.process.close()


class _Seat(_Cell):
    """A forked seat (``--cells forked``): a cell of its own to the host -- its socket, deadline, bank
    and failure -- in its loader's process and sandbox (``policybox.host.seats``)."""

    process: SeatProcess

    def __init__(self, record: AgentRecord, process: SeatProcess, limits: Limits) -> None:
        super().__init__([record], process, limits)

    def await_ready(self) -> None:
        """Its loader was sent the group's SETUP: the seat's READY is due on its own socket."""
        self.in_flight, self.asked, self.sent_ns = 0, [], time.monotonic_ns()

    def _on_ready(self, frame: Frame) -> None:
        ready = decode_json(frame) if frame.type == FrameType.READY else {}
        self.process.ready = frame.type == FrameType.READY
        self.process.claim(ready.get("pid"))  # its pid, signalled only if /proc confirms it is the team's
        super()._on_ready(frame)

    def retire(self) -> None:
        """Stop it for good. How it ended is known for a seat whose pid was verified (and whose loader has
        not reaped it), or that ended before READY (its loader's end): else a crash says its process ended,
        and names the OOM killer if the group's cgroup saw it."""
        crashes = [r.failure for r in self.records if r.failure is not None and r.failure.kind == "Crashed"]
        if crashes and self.process.exit_status(EXIT_WAIT_S) is None:
            for failure in crashes:
                assert failure is not None
                failure.message = f"its process ended ({failure.message}; how is not known to the host)"
                if cause := self.process.sandbox.out_of_memory():
                    failure.kind = "OutOfMemory"
                    failure.message += f": out of memory: {cause}"
        super().retire()


def _ready_fields(ready: dict[str, Any]) -> tuple[int, bool, dict[str, str]]:
    """What a READY says -- the least action timeout its policy needs (ms), whether it imported torch,
    its own account of its sandbox layers -- checked, as the cell's word is untrusted: a field of the
    wrong type or out of bounds is a ProtocolError; a layer's text is cut short."""
    if ready.get("protocol") != PROTOCOL_VERSION:
        raise ProtocolError(f"cell speaks protocol {reprlib.repr(ready.get('protocol'))}, host {PROTOCOL_VERSION}")
    minimum: Any = ready.get("minimum_action_timeout_ms")
    torch: Any = ready.get("torch")
    claims: Any = ready.get("sandbox")
    if type(minimum) is not int or not 0 <= minimum <= MAX_MINIMUM_ACTION_TIMEOUT_MS:
        raise ProtocolError(
            f"READY's minimum_action_timeout_ms is {reprlib.repr(minimum)}, not a whole number of ms from 0 "
            f"to {MAX_MINIMUM_ACTION_TIMEOUT_MS}"
        )
    if type(torch) is not bool:
        raise ProtocolError(f"READY's torch is {reprlib.repr(torch)}, not true or false")
    layers_and_texts = isinstance(claims, dict) and claims.keys() <= LAYER_NAMES
    if not layers_and_texts or not all(isinstance(text, str) for text in claims.values()):
        raise ProtocolError(f"READY's sandbox is {reprlib.repr(claims)}, not an object of layer names and texts")
    return minimum, torch, {layer: text[:MAX_CLAIM_CHARS] for layer, text in claims.items()}


def _phase(step: int | None) -> str:
    return "init" if step is None else "step"


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
        self._by_fd: dict[int, _Cell] = {}
        self._cells: list[_Cell] = []
        self._loaders: list[CellProcess] = []  # --cells forked: each group's loader, which its seats share
        self._group_cells: list[list[_Cell]] = []  # each group's cells: its one, or a forked group's seats
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
                if isinstance(cell, _Seat) and cell is not cells[0]:
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
            cells: list[_Cell] = [
                _Seat(record, SeatProcess.of(process, sock), self._limits)
                for record, sock in zip(group.records, socks, strict=True)
            ]
        else:
            cells = [_Cell(group.records, process, self._limits)]
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

    def _send(self, cell: _Cell, data: Sequence[bytes | memoryview], seq: int, asked: list[int]) -> None:
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

    def _retire(self, cell: _Cell) -> None:
        self._forget(cell)
        cell.retire()

    def _forget(self, cell: _Cell) -> None:
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
