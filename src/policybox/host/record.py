"""AgentRecord: the host's bookkeeping for one agent -- status, first failure, counts, latency, digest."""

from __future__ import annotations

import hashlib
from array import array
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from policybox.results import AgentStatus, Failure, Latency, MemoryLimit
from policybox.spec import PolicySpec

NOOP_MARK = b"\x00noop"


@dataclass
class AgentRecord:
    agent_id: int
    spec: PolicySpec
    entrant: str  # the submission it plays for: with --cells per-policy, seats of one entrant share a cell
    threads: int  # the thread budget of its cell (policybox.threads)
    log_path: Path | None = None
    torch: bool = False  # its policy imports torch (policybox.host.torch_use): its cell may start with it
    # Its cell keeps the host's network: set by the host alone, for a wheels-only build of an environment
    # (policybox.files.environments), which runs no entrant code; never from a spec or a setting.
    online: bool = False
    log_note: str | None = None  # why its log was cut short (policybox.host.output), if it was
    status: AgentStatus = AgentStatus.OK
    failure: Failure | None = None
    first_failure_step: int | None = None
    turns: int = 0  # steps it was asked to act
    timeouts: int = 0
    invalid_actions: int = 0
    minimum_action_timeout_ms: int = 0
    latencies_ns: array[int] = field(default_factory=lambda: array("q"))  # 8 bytes a step, not a Python int
    sandbox: dict[str, str] = field(default_factory=dict)
    memory: MemoryLimit | None = None  # its cell's memory limit in force
    playing: bool = True  # whether the policy still gets observations (no terminal failure, still in the game)
    left_at_step: int | None = None  # when it left the game (terminated or truncated)
    _digest: hashlib._Hash = field(default_factory=hashlib.sha256)

    def fail(self, status: AgentStatus, failure: Failure) -> None:
        """Record a failure: the first one sets the status, a later terminal one overrides it."""
        if self.status.is_terminal:
            return
        if self.status == AgentStatus.OK:
            self.first_failure_step = failure.step
        if status.is_terminal or self.status == AgentStatus.OK:
            self.status, self.failure = status, failure
            self.playing = not status.is_terminal

    def leave(self, step: int) -> None:
        """The agent has left the game (not a failure): it gets no more observations."""
        self.left_at_step = step
        self.playing = False

    def missed_deadline(self, step: int, limit_ms: float) -> None:
        self.timeouts += 1
        if self.timeouts == 1:
            message = f"no action within {limit_ms:g} ms"
            self.fail(AgentStatus.TIMEOUT, Failure(step=step, phase="step", kind="Timeout", message=message))

    @property
    def late(self) -> bool:
        """Whether its failure is a missed deadline: the act timeout, or its time bank used up."""
        return self.failure is not None and self.failure.kind in ("Timeout", "TimeBank")

    def invalid_action(self, step: int, reason: str) -> None:
        self.invalid_actions += 1
        if self.invalid_actions == 1:
            failure = Failure(step=step, phase="step", kind="InvalidAction", message=reason)
            self.fail(AgentStatus.INVALID_ACTION, failure)

    def applied(self, payload: bytes | None) -> None:
        """Fold the action the env actually received (None: the fallback) into the action digest."""
        self._digest.update(NOOP_MARK if payload is None else bytes(payload))

    @property
    def action_digest(self) -> str:
        return self._digest.hexdigest()

    def latency(self) -> Latency:
        if not self.latencies_ns:
            return Latency()
        ms = np.asarray(self.latencies_ns, dtype=np.float64) / 1e6
        p50, p99 = np.percentile(ms, [50, 99])
        return Latency(count=len(ms), p50_ms=round(p50, 4), p99_ms=round(p99, 4), max_ms=round(float(ms.max()), 4))
