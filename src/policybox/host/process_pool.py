"""ProcessPool: every agent in its own cell; steps are sent to all cells, then gathered with a deadline.

Each cell has at most one request in flight. A cell that misses a step's deadline plays the no-op
for that step and every following step until its late reply arrives; that reply is discarded (it
answers an old observation) and the cell gets the *current* observation at the next step.
"""

from __future__ import annotations

import contextlib
import selectors
import signal
import time
from collections.abc import Sequence
from typing import Any

from policybox.host.launcher import CellProcess, SpawnLauncher
from policybox.host.record import AgentRecord
from policybox.results import AgentStatus, Failure
from policybox.wire import (
    CELL_TO_HOST,
    MAX_CELL_FRAME,
    PROTOCOL_VERSION,
    Frame,
    FrameDecoder,
    FrameType,
    ProtocolError,
    decode_json,
    encode_header,
    encode_json,
)

Reply = tuple[FrameType, bytes]
RECV_SIZE = 1 << 16
STOP_GRACE_S = 1.0
EXIT_WAIT_S = 1.0


class _Cell:
    """The host's view of one cell: its record, process, frame decoder and the request in flight."""

    def __init__(self, record: AgentRecord, process: CellProcess) -> None:
        self.record = record
        self.process = process
        self.decoder = FrameDecoder(CELL_TO_HOST, MAX_CELL_FRAME)
        self.in_flight: int | None = None  # sequence number awaiting a reply
        self.sent_ns = 0
        self.reply: Reply | None = None
        self.ready: dict[str, Any] | None = None

    def send(self, data: Sequence[bytes | memoryview], seq: int, deadline_ns: int) -> bool:
        """Send one frame and mark it in flight; False (agent failed) if the cell will not take it."""
        try:
            sent = self.process.sock.sendmsg(data)
            total = sum(len(part) for part in data)
            if sent < total:
                self._send_rest(b"".join(bytes(part) for part in data)[sent:], deadline_ns)
        except (OSError, TimeoutError) as exc:
            self.crashed(seq, f"could not send to the cell: {exc}")
            return False
        self.in_flight, self.sent_ns = seq, time.monotonic_ns()
        return True

    def _send_rest(self, rest: bytes, deadline_ns: int) -> None:
        sock = self.process.sock
        sock.settimeout(max(0.0, (deadline_ns - time.monotonic_ns()) / 1e9))
        try:
            sock.sendall(rest)
        finally:
            sock.setblocking(False)

    def on_readable(self, step: int | None) -> None:
        """Take in whatever the cell sent; frames answer the request in flight or are violations."""
        try:
            data = self.process.sock.recv(RECV_SIZE)
        except OSError as exc:
            self.crashed(step, f"socket error: {exc}")
            return
        if not data:
            self.crashed(step, "the cell closed its connection")
            return
        try:
            for frame in self.decoder.feed(data):
                self._on_frame(frame, step)
                if not self.record.playing:
                    return
        except ProtocolError as exc:
            self.violation(step, str(exc))

    def _on_frame(self, frame: Frame, step: int | None) -> None:
        if self.in_flight is None or frame.seq != self.in_flight:
            raise ProtocolError(f"unexpected {frame.type.name} frame for sequence {frame.seq}")
        latency_ns = time.monotonic_ns() - self.sent_ns
        self.in_flight = None
        if frame.type == FrameType.ERROR:
            report = decode_json(frame)
            self.record.fail(AgentStatus.ERROR, Failure.from_report(report, None if step is None else frame.seq))
        elif step is None:
            self._on_ready(frame)
        elif frame.type == FrameType.READY:
            raise ProtocolError("READY frame during the episode")
        elif frame.seq == step:  # a reply to the current step; an older one is late and dropped
            self.reply = (frame.type, frame.payload)
            self.record.latencies_ns.append(latency_ns)

    def _on_ready(self, frame: Frame) -> None:
        if frame.type != FrameType.READY:
            raise ProtocolError(f"{frame.type.name} frame before READY")
        ready = decode_json(frame)
        if ready.get("protocol") != PROTOCOL_VERSION:
            raise ProtocolError(f"cell speaks protocol {ready.get('protocol')!r}, host {PROTOCOL_VERSION}")
        self.ready = ready
        minimum = ready.get("minimum_action_timeout_ms", 0)
        self.record.minimum_action_timeout_ms = minimum if isinstance(minimum, int) else 0

    def violation(self, step: int | None, message: str) -> None:
        self.record.fail(
            AgentStatus.ERROR, Failure(step=step, phase=_phase(step), kind="ProtocolError", message=message)
        )

    def crashed(self, step: int | None, message: str) -> None:
        code = self.process.exit_status(EXIT_WAIT_S)
        failure = Failure(step=step, phase=_phase(step), kind="Crashed", message=message)
        if code is not None and code < 0:
            failure.signal = signal.Signals(-code).name
            failure.message = f"{message}: killed by {failure.signal}"
        elif code is not None:
            failure.exit_code = code
            failure.message = f"{message}: exit code {code}"
        self.record.fail(AgentStatus.CRASHED, failure)


def _phase(step: int | None) -> str:
    return "init" if step is None else "step"


class ProcessPool:
    """All cells of one episode. Use as a context manager: every cell is killed and reaped on exit."""

    def __init__(self, records: list[AgentRecord], act_timeout_ms: float, init_timeout_s: float) -> None:
        self._records = records
        self._act_timeout_ns = int(act_timeout_ms * 1e6)
        self._act_timeout_ms = act_timeout_ms
        self._init_timeout_ns = int(init_timeout_s * 1e9)
        self._init_timeout_s = init_timeout_s
        self._launcher = SpawnLauncher()
        self._selector = selectors.DefaultSelector()
        self._cells: list[_Cell] = []

    def __enter__(self) -> ProcessPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def start(self, setups: list[dict[str, Any]]) -> None:
        """Launch every cell at once, hand each its SETUP, then wait for all READY replies."""
        for record in self._records:
            assert record.log_path is not None
            cell = _Cell(record, self._launcher.launch(record.log_path))
            self._cells.append(cell)
            self._selector.register(cell.process.sock, selectors.EVENT_READ, cell)
        deadline = time.monotonic_ns() + self._init_timeout_ns
        for cell, setup in zip(self._cells, setups, strict=True):
            cell.send([encode_json(FrameType.SETUP, setup)], 0, deadline)
        for cell in self._gather(deadline, None):
            message = f"not ready within the init timeout of {self._init_timeout_s:g} s"
            cell.record.fail(AgentStatus.DISABLED, Failure(step=None, phase="init", kind="Timeout", message=message))
        self._retire_failed()

    def act(self, step: int, observations: Sequence[bytes | memoryview]) -> list[Reply | None]:
        """Send every playing agent its observation, then gather replies until the deadline."""
        deadline = time.monotonic_ns() + self._act_timeout_ns
        for cell in self._cells:
            cell.reply = None
            if cell.record.playing and cell.in_flight is None:
                payload = observations[cell.record.agent_id]
                cell.send([encode_header(FrameType.OBSERVATION, step, len(payload)), payload], step, deadline)
        self._gather(deadline, step)
        for cell in self._cells:
            if cell.record.playing and cell.reply is None:
                cell.record.missed_deadline(step, self._act_timeout_ms)
        self._retire_failed()
        return [cell.reply for cell in self._cells]

    def _gather(self, deadline_ns: int, step: int | None) -> list[_Cell]:
        """Process replies until every playing cell answered or the deadline passed; the late cells."""
        waiting = {cell for cell in self._cells if cell.record.playing and cell.in_flight is not None}
        while waiting:
            remaining = (deadline_ns - time.monotonic_ns()) / 1e9
            if remaining <= 0:
                break
            for key, _ in self._selector.select(remaining):
                cell: _Cell = key.data
                cell.on_readable(step)
                if cell.in_flight is None or not cell.record.playing:
                    waiting.discard(cell)
        return [cell for cell in waiting if cell.record.playing]

    def _retire_failed(self) -> None:
        for cell in self._cells:
            if not cell.record.playing and not cell.process.closed:
                self._selector.unregister(cell.process.sock)
                cell.process.close()

    def close(self) -> None:
        """Ask live cells to stop, give them a moment, then kill every process group and reap."""
        live = [cell for cell in self._cells if not cell.process.closed]
        stop = encode_header(FrameType.STOP, 0, 0)
        for cell in live:
            with contextlib.suppress(OSError):
                cell.process.sock.send(stop)
        give_up = time.monotonic() + STOP_GRACE_S
        for cell in live:
            cell.process.exit_status(max(0.0, give_up - time.monotonic()))
        for cell in live:
            self._selector.unregister(cell.process.sock)
            cell.process.close()
        self._selector.close()
