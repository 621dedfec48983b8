"""InlinePool: every agent's policy in the host process, stepped one after another.

The reference for process mode: the same AgentRuntime, the same bytes in and out, so a
deterministic policy acts identically in both. It cannot enforce deadlines (nothing can pre-empt
a policy in the same process) and it isolates nothing; use it to debug and to check results.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from policybox.cell.report import PolicyFailure, failure_report
from policybox.cell.runtime import AgentRuntime
from policybox.host.record import AgentRecord
from policybox.results import AgentStatus, Failure
from policybox.wire import FrameType

Reply = tuple[FrameType, bytes]


class InlinePool:
    def __init__(self, records: list[AgentRecord]) -> None:
        self._records = records
        self._runtimes: list[AgentRuntime | None] = [None] * len(records)

    def __enter__(self) -> InlinePool:
        return self

    def __exit__(self, *exc: object) -> None:
        self._runtimes = [None] * len(self._records)

    def start(self, setups: list[dict[str, Any]]) -> None:
        for index, (record, setup) in enumerate(zip(self._records, setups, strict=True)):
            try:
                runtime = AgentRuntime(setup, owns_process=False)
                ready = runtime.start()
            except PolicyFailure as failure:
                record.fail(AgentStatus.ERROR, Failure.from_report(failure.report, None))
                continue
            except Exception as exc:
                record.fail(AgentStatus.ERROR, Failure.from_report(failure_report(exc, "init"), None))
                continue
            record.minimum_action_timeout_ms = ready["minimum_action_timeout_ms"]
            self._runtimes[index] = runtime

    def retire_stopped(self) -> None:
        """Drop the runtimes of agents that no longer play: failed for good, or left the game."""
        for index, record in enumerate(self._records):
            if not record.playing:
                self._runtimes[index] = None

    def act(self, step: int, observations: Mapping[int, bytes | memoryview]) -> list[Reply | None]:
        """Step every agent of ``observations`` (by agent id), one after another; replies in the
        records' order (None: not asked, or failed)."""
        replies: list[Reply | None] = []
        for record, runtime in zip(self._records, self._runtimes, strict=True):
            reply = None
            if runtime is not None and record.playing and record.agent_id in observations:
                started = time.monotonic_ns()
                try:
                    reply = runtime.step(bytes(observations[record.agent_id]))
                    record.latencies_ns.append(time.monotonic_ns() - started)
                except PolicyFailure as failure:
                    record.fail(AgentStatus.ERROR, Failure.from_report(failure.report, step))
            replies.append(reply)
        return replies
