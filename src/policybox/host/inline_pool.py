"""InlinePool: every cell's policy in the host process, stepped one after another.

The reference for process mode: the same CellRuntime, the same cells (one per agent, or per policy;
forked seats each with the policy built as its loader built it, ``policybox.cell.seats``), the same
bytes in and out, so a deterministic policy acts identically in both. It cannot enforce deadlines
(nothing can pre-empt a policy in the same process) and it isolates nothing; use it to debug and to
check results.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

from policybox.cell.report import PolicyFailure, failure_report
from policybox.cell.runtime import CellRuntime
from policybox.cell.seats import inline_seat
from policybox.host.cell_groups import CellGroup
from policybox.host.cell_pool import CellPool
from policybox.host.record import AgentRecord
from policybox.results import AgentStatus, Failure, MemoryBudget
from policybox.wire import FrameType, Reply, decode_object

Start = Callable[[], tuple[CellRuntime, dict[str, Any]]]  # a cell's runtime, built, and its READY report


class InlinePool(CellPool):
    def __init__(self, groups: list[CellGroup]) -> None:
        self._groups = groups
        self._cells: list[tuple[list[AgentRecord], CellRuntime | None]] = []  # each cell's seats and runtime

    def __enter__(self) -> InlinePool:
        return self

    def __exit__(self, *exc: object) -> None:
        self._cells = []

    @property
    def cleanup(self) -> str:
        """Nothing to stop: its policies ran in the host."""
        return "inline"

    @property
    def memory_budget(self) -> MemoryBudget | None:
        """No memory limit: its policies share the host's."""
        return None

    def scratch_view(self, agent_id: int) -> Path | None:
        """No scratch folder: its policies see the host's files."""
        return None

    def start(self, setups: list[dict[str, Any]]) -> None:
        for group, setup in zip(self._groups, setups, strict=True):
            for records, start in _starts(group, setup):
                self._cells.append((records, _started(records, start)))

    def retire_stopped(self) -> None:
        """Drop the runtimes none of whose seats still play: failed for good, or left the game."""
        self._cells = [(records, runtime if _playing(records) else None) for records, runtime in self._cells]

    def act(self, step: int, observations: Mapping[int, bytes | memoryview]) -> dict[int, Reply]:
        """Step every cell's seats in ``observations`` (by agent id), one cell after another; the
        replies by agent id (none: not asked, or failed)."""
        replies: dict[int, Reply] = {}
        for records, runtime in self._cells:
            asked = [record for record in records if record.playing and record.agent_id in observations]
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


def _starts(group: CellGroup, setup: dict[str, Any]) -> Iterator[tuple[list[AgentRecord], Start]]:
    """The cells ``group`` is played by: its one, or (forked) one per seat."""
    if not group.forks:
        yield group.records, lambda: _runtime(setup)
        return
    for record in group.records:
        yield [record], functools.partial(inline_seat, setup, record.agent_id)


def _playing(records: list[AgentRecord]) -> bool:
    return any(record.playing for record in records)


def _runtime(setup: dict[str, Any]) -> tuple[CellRuntime, dict[str, Any]]:
    runtime = CellRuntime(setup, owns_process=False)
    return runtime, runtime.start()


def _started(records: list[AgentRecord], start: Start) -> CellRuntime | None:
    """The cell's runtime, ready; None if its policy could not be built (its seats then failed)."""
    try:
        runtime, ready = start()
    except PolicyFailure as failure:
        report = failure.report
    except Exception as exc:
        report = failure_report(exc, "init")
    else:
        for record in records:
            record.minimum_action_timeout_ms = ready["minimum_action_timeout_ms"]
        return runtime
    for record in records:
        record.fail(AgentStatus.ERROR, Failure.from_report(report, None))
    return None
