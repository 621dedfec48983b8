"""A team's scrimmages (``policybox.league.ladder.scrimmage``) as data: one row each for its team's
page, and one scrimmage's own page -- an unrated match, shown as a match page shows its seats.

**A scrimmage is its team's.** Only the team that asked for it sees it (its list, its page, its
replay): what a team tries out is nobody else's business. Within it, the privacy rule of every view
holds (``visibility.public`` and ``visibility.own``): the team sees its own names' log tails and whole
messages, the opponent's first lines only.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from pydantic import BaseModel, Field
from sqlalchemy import Connection

from policybox.errors import NotFound
from policybox.league.ladder import life, reads
from policybox.league.ladder.database import reading
from policybox.league.ladder.folder import HOUR, REPLAYS, LadderFolder
from policybox.league.ladder.schema import MatchState
from policybox.league.ladder.scrimmage import episode_name
from policybox.league.views import own_code
from policybox.league.views.match_list import PLACING, placings
from policybox.league.views.visibility import ID_MAX, own, public
from policybox.results import EpisodeResult
from policybox.settings import REPLAY_SUFFIX

UNRATED = "unrated scrimmage: it changes no rating and nothing on the board"
NOT_YOURS = "this ladder has no scrimmage {id} of your team's (only the team that asked for a scrimmage sees it)"


class ScrimmageSeat(BaseModel):
    seat: int
    name: str
    version: int
    reward: float | None = None
    status: str | None = None
    placing: str | None = Field(default=None, description=PLACING)
    cause: str | None = None
    step: int | None = None
    message: str | None = Field(default=None, description="Whole for the team's own names, else its first line")
    log_tail: str | None = Field(default=None, description="The team's own names' only")


class ScrimmageRow(BaseModel):
    id: int
    state: str = Field(description="scheduled (waiting to be played), played, or void")
    requested_at: str
    played_at: str | None
    name: str = Field(description="The asking team's name")
    version: int
    opponent: str
    opponent_version: int
    outcome: str | None = Field(default=None, description="The team's name's placing in it, once played")
    steps: int | None = None
    reason: str | None = Field(default=None, description="Why it is void")
    replay_file: str | None = Field(default=None, description="Its replay's file name, when the ladder kept one")


class ScrimmagePage(ScrimmageRow):
    team: str
    note: str = UNRATED
    seats: list[ScrimmageSeat]
    aborted: str | None = None
    game_fault: str | None = None


class ScrimmageForm(BaseModel):
    """What the name page's scrimmage form offers its team: the names it may meet and its room this hour."""

    name: str
    opponents: list[str] = Field(description="The names whose playing version is active, but this one")
    per_hour: int
    left: int
    count: int = Field(default=1, description="The count the form shows (as sent, after a refusal)")
    opponent: str | None = Field(default=None, description="The opponent the form shows chosen")


def form(ladder: LadderFolder, name: str, team: str) -> ScrimmageForm:
    """The scrimmage form of ``team``'s ``name``."""
    since = (datetime.now(UTC) - HOUR).isoformat(timespec="seconds")
    with reading(ladder.engine) as connection:
        current = reads.current_versions(connection)
        team_id = reads.team_id(connection, team)
        used = 0 if team_id is None else len(reads.scrimmages_since(connection, team_id, since))
    opponents = sorted(
        other for other, row in current.items() if other != name and not row.retired and row.state in life.PLAYING
    )
    per_hour = ladder.settings.scrimmages_per_hour
    return ScrimmageForm(name=name, opponents=opponents, per_hour=per_hour, left=max(0, per_hour - used))


def rows(ladder: LadderFolder, connection: Connection, team_id: int, limit: int) -> list[ScrimmageRow]:
    """The latest scrimmages ``team_id`` asked for, newest first."""
    found = reads.team_scrimmages(connection, team_id, limit)
    refs = reads.version_refs(connection, {v for r in found for v in (r.version_id, r.opponent_id)})
    return [_row(ladder, r, refs, _placed(ladder, r, refs)) for r in found]


def scrimmage_page(ladder: LadderFolder, scrimmage_id: int, team: str | None, owned: set[str]) -> ScrimmagePage:
    """Scrimmage ``scrimmage_id`` for ``team`` (whose names are ``owned``); NotFound for any other viewer."""
    if not 0 <= scrimmage_id <= ID_MAX:
        raise NotFound(NOT_YOURS.format(id=scrimmage_id))
    with reading(ladder.engine) as connection:
        row = reads.scrimmage(connection, scrimmage_id)
        if row is None or team is None or row.team != team:
            raise NotFound(NOT_YOURS.format(id=scrimmage_id))
        refs = reads.version_refs(connection, {row.version_id, row.opponent_id, *row.seats})
    seats = _placed(ladder, row, refs)
    result = EpisodeResult.model_validate(row.result) if row.result is not None else None
    if result is not None:
        for seat, agent in zip(seats, result.agents, strict=True):
            mine, failure = seat.name in owned, agent.failure
            seat.cause = public(failure.kind, mine) if failure else None
            seat.step = failure.step if failure else None
            seat.message = public(failure.message, mine) if failure else None
            seat.log_tail = own(agent.log_tail or (failure.log_tail if failure else None), mine)
    return ScrimmagePage(
        **_row(ladder, row, refs, seats).model_dump(),
        team=row.team,
        seats=seats,
        aborted=None if result is None else result.aborted,
        game_fault=None if result is None or result.game_fault is None else result.game_fault.one_line(),
    )


def replay_path(ladder: LadderFolder, scrimmage_id: int) -> Any:
    return ladder.folder / REPLAYS / f"{episode_name(scrimmage_id)}{REPLAY_SUFFIX}"


def _placed(ladder: LadderFolder, row: Any, refs: dict[int, tuple[str, int]]) -> list[ScrimmageSeat]:
    """Its seats, with each one's reward, status and placing once played."""
    seats = [ScrimmageSeat(seat=s, name=refs[v][0], version=refs[v][1]) for s, v in enumerate(row.seats)]
    if row.state != MatchState.PLAYED or row.result is None:
        return seats
    result = EpisodeResult.model_validate(row.result)
    placed = placings(result, [seat.name for seat in seats], ladder.settings.rank_by)
    for seat, agent, placing in zip(seats, result.agents, placed, strict=True):
        seat.reward, seat.status, seat.placing = agent.reward, agent.status.value, placing
    return seats


def _row(ladder: LadderFolder, row: Any, refs: dict[int, tuple[str, int]], seats: list[ScrimmageSeat]) -> ScrimmageRow:
    name, version = refs[row.version_id]
    opponent, opponent_version = refs[row.opponent_id]
    replay = replay_path(ladder, row.id)
    return ScrimmageRow(
        id=row.id,
        state=row.state,
        requested_at=row.requested_at,
        played_at=row.played_at,
        name=name,
        version=version,
        opponent=opponent,
        opponent_version=opponent_version,
        outcome=next((seat.placing for seat in seats if seat.name == name), None),
        steps=(row.result or {}).get("steps"),
        reason=None if row.reason is None else own_code.relative(row.reason),
        replay_file=replay.name if replay.is_file() else None,
    )
