"""A ladder's queue: the versions qualifying, oldest first, each with its place and ETA, and those
rejected, with why (``ladder submit``'s ETA, the queue page, the upload page's)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

from policybox.league.ladder import reads
from policybox.league.ladder.database import reading
from policybox.league.ladder.folder import LadderFolder
from policybox.league.ladder.life import VersionState
from policybox.league.views import pulse
from policybox.league.views.pulse import Eta, Pulse
from policybox.league.views.visibility import own, reason, visible


class QueueRow(BaseModel):
    name: str
    version: int
    state: str
    submitted_at: str
    reason: str | None = None
    setup_output: str | None = Field(default=None, description="Only for its own team (private views)")
    eta: Eta | None = Field(
        default=None,
        description="A qualifying version's place in the queue and ETA; None: its name is retired, and it waits "
        "until the name is reinstated",
    )
    under_way: bool = Field(default=False, description="Its qualification (setup, build or episode) is running")


class Queue(BaseModel):
    pulse: Pulse = Field(description="Whether ladder run is playing: with the matches in flight")
    qualifying: list[QueueRow] = Field(description="Oldest first: the order they qualify in")
    rejected: list[QueueRow]


def queue(ladder: LadderFolder, private_for: set[str] | None = None) -> Queue:
    """The versions qualifying and those rejected. ``private_for``: the names whose reasons and setup
    output are shown whole (None: every name's); the others' reasons are cut to their first line."""
    with reading(ladder.engine) as connection:
        rows = reads.queued(connection)
        now_playing = pulse.read(connection)

    def shown(r: Any) -> QueueRow:
        private = visible(r.name, private_for)
        return QueueRow(
            name=r.name,
            version=r.number,
            state=r.state,
            submitted_at=r.submitted_at,
            reason=reason(r.reason, private),
            setup_output=own(r.setup_output, private),
        )

    qualifying = [shown(r) for r in rows if r.state == VersionState.QUALIFYING]
    retired = {(r.name, r.number) for r in rows if r.retired}
    waiting = [row for row in qualifying if (row.name, row.version) not in retired]  # a retired name's waits
    for place, row in enumerate(waiting, 1):
        row.eta = pulse.eta(place, now_playing, ladder.settings.placement_matches)
        row.under_way = f"{row.name} v{row.version}" in now_playing.qualifying
    return Queue(
        pulse=now_playing,
        qualifying=qualifying,
        rejected=[shown(r) for r in rows if r.state == VersionState.REJECTED],
    )


def has_version(ladder: LadderFolder, name: str, version: int) -> bool:
    with reading(ladder.engine) as connection:
        return reads.version_id(connection, name, version) is not None


def queue_eta(ladder: LadderFolder, name: str, version: int) -> Eta | None:
    """When version ``version`` of ``name`` qualifies, by its place in the queue; None: it is not queued."""
    rows = queue(ladder, set()).qualifying
    return next((row.eta for row in rows if (row.name, row.version) == (name, version)), None)
