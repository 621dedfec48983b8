"""InlinePool: every cell's policy in the host process, stepped one after another.

The reference for process mode: the same CellRuntime, the same cells (one per agent, or per policy),
the same bytes in and out, so a deterministic policy acts identically in both. It cannot enforce
deadlines (nothing can pre-empt a policy in the same process) and it isolates nothing; use it to
debug and to check results.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from policybox.cell.report import PolicyFailure, failure_report
from policybox.cell.runtime import CellRuntime
from policybox.host.cell_groups import CellGroup
from policybox.results import AgentStatus, Failure
from policybox.wire import FrameType, Reply, decode_object


class InlinePool:
    def __init__(self, groups: list[CellGroup]) -> None:
        self._groups = groups
        self._runtimes: list[CellRuntime | None] = [None] * len(groups)

    def __enter__(self) -> InlinePool:
        return self

    def __exit__(self, *exc: object) -> None:
        self._runtimes = [None] * len(self._groups)

    def start(self, setups: list[dict[str, Any]]) -> None:
        for index, (group, setup) in enumerate(zip(self._groups, setups, strict=True)):
            try:
                runtime = CellRuntime(setup, owns_process=False)
                ready = runtime.start()
            except PolicyFailure as failure:
                report = failure.report
            except Exception as exc:
                report = failure_report(exc, "init")
            else:
                for record in group.records:
                    record.minimum_action_timeout_ms = ready["minimum_action_timeout_ms"]
                self._runtimes[index] = runtime
                continue
            for record in group.records:
                record.fail(AgentStatus.ERROR, Failure.from_report(report, None))

    def retire_stopped(self) -> None:
        """Drop the runtimes none of whose seats still play: failed for good, or left the game."""
        for index, group in enumerate(self._groups):
            if not any(record.playing for record in group.records):
                self._runtimes[index] = None

    def act(self, step: int, observations: Mapping[int, bytes | memoryview]) -> dict[int, Reply]:
        """Step every cell's seats in ``observations`` (by agent id), one cell after another; the
        replies by agent id (none: not asked, or failed)."""
        replies: dict[int, Reply] = {}
        for group, runtime in zip(self._groups, self._runtimes, strict=True):
            asked = [record for record in group.records if record.playing and record.agent_id in observations]
            if runtime is None or not asked:
                continue
            started = time.monotonic_ns()
            answers = runtime.step([(record.agent_id, bytes(observations[record.agent_id])) for record in asked])
            latency_ns = time.monotonic_ns() - started
            for record, (_, reply) in zip(asked, answers, strict=True):
                if reply[0] == FrameType.ERROR:
                    record.fail(AgentStatus.ERROR, Failure.from_report(decode_object(reply[1], "report"), step))
                else:
                    replies[record.agent_id] = reply
                    record.latencies_ns.append(latency_ns)
        return replies
