"""How a ladder's names played: the step latency and failure causes of each name's playing version
over all its matches (the report's), by the rules of ``evaluate``'s summary (``summary``)."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from pydantic import BaseModel, Field

from policybox.league.ladder import reads
from policybox.league.ladder.database import reading
from policybox.league.ladder.folder import LadderFolder
from policybox.league.views.summary import FailureCause, LatencySummary, failure_causes, latency
from policybox.results import Failure


class Conduct(BaseModel):
    """How the agents of a name's playing version ran, over all its matches."""

    name: str
    version: int
    latency: LatencySummary = Field(description="The median over its agents of their p50 and p99 step times")
    failures: list[FailureCause] = Field(description="How its agents failed, most often first, with the first example")


def conduct(ladder: LadderFolder) -> list[Conduct]:
    """Step latency and failure causes of each name's playing version (one row per name that has one),
    by the rules of ``evaluate``'s summary. A failure's example is its one line: no log tail."""
    with reading(ladder.engine) as connection:
        current = {row.id: row for row in reads.current_versions(connection).values()}
        seats = reads.played_seats(connection, current)
    by_version: dict[int, list[Any]] = defaultdict(list)
    for seat in seats:
        by_version[seat.version_id].append(seat)
    return [
        Conduct(
            name=version.name,
            version=version.number,
            latency=latency([(seat.p50_ms, seat.p99_ms) for seat in by_version[version_id]]),
            failures=failure_causes(
                (seat.match_id, seat.status, _failure(seat))
                for seat in by_version[version_id]
                if seat.status != "ok" and seat.failure_kind is not None
            ),
        )
        for version_id, version in sorted(current.items())
    ]


def _failure(seat: Any) -> Failure:
    """A stored seat's failure, as much of it as its one line needs."""
    step = seat.failure_step
    phase = "init" if step is None else "step"
    return Failure(step=step, phase=phase, kind=seat.failure_kind, message=seat.failure_message or "")
