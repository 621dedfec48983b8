"""PoolCell: one cell as the process pool holds it (``policybox.host.process_pool``) -- the seats it
plays, its process, its frame decoder, the request in flight, its outbox and its time bank -- and
PoolSeat, a forked seat held so. What a cell says is untrusted: a READY is checked field by field, a
frame for a seat it does not play breaks the protocol, and how a crashed cell ended is read from the
kernel, never from the cell.
"""

from __future__ import annotations

import reprlib
import signal
import time
from collections.abc import Mapping, Sequence
from typing import Any

from policybox.host import torch_use
from policybox.host.launcher import CellProcess
from policybox.host.record import AgentRecord
from policybox.host.seats import SeatProcess
from policybox.host.verify import verified_statuses
from policybox.limits import Limits
from policybox.results import AgentStatus, Failure
from policybox.sandbox import ACTIVE, Layer, SandboxPlan
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
    one_reply,
)

RECV_SIZE = 1 << 16
SIGNAL_CAUSES = {
    "SIGXCPU": "its CPU time limit was reached",
    "SIGXFSZ": "its file size limit was reached",
    "SIGSYS": "it made a system call the seccomp filter forbids",
}
EXIT_WAIT_S = 1.0
MAX_MINIMUM_ACTION_TIMEOUT_MS = 24 * 3600 * 1000  # a policy may say it needs up to a day per step, no more
MAX_CLAIM_CHARS = 300  # of a cell's account of one sandbox layer
LAYER_NAMES = frozenset(Layer)


class PoolCell:
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


class PoolSeat(PoolCell):
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
