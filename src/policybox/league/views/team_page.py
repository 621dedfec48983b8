"""A team's page as data: every name it owns with every version and each version's rating history,
its place on the board, the submissions it has left this hour and, for the team itself, its
scrimmages and the scrimmages it has left (``scrimmage_page``).

What a policy wrote follows the rule of every view (``visibility.public``, ``visibility.own``): whole for the
team's own viewer, its first line for anyone else.
"""

from __future__ import annotations

from datetime import UTC, datetime

from pydantic import BaseModel, Field
from sqlalchemy import Connection

from policybox.errors import NotFound
from policybox.files.version_files import NAME_PATTERN
from policybox.league.ladder import reads
from policybox.league.ladder.database import reading
from policybox.league.ladder.folder import HOUR, LadderFolder
from policybox.league.views.name_page import RatingPoint, VersionInfo, rating_points, version_info
from policybox.league.views.scrimmage_page import ScrimmageRow, rows
from policybox.league.views.standings import Standing, standings

SCRIMMAGES_SHOWN = 50


class TeamVersion(VersionInfo):
    history: list[RatingPoint] = Field(description="Its rating after each match that rated it")


class TeamName(BaseModel):
    name: str
    standing: Standing = Field(description="Its row of the board")
    versions: list[TeamVersion]


class Quota(BaseModel):
    """How much of an hourly limit the team has used in the last hour."""

    per_hour: int
    used: int = Field(description="In the last hour")
    left: int
    frees_at: str | None = Field(default=None, description="When the next one frees up, when none is left (UTC)")


class TeamPage(BaseModel):
    team: str
    own: bool = Field(description="Whether the viewer is this team (then it sees its scrimmages and whole texts)")
    place: int | None = Field(
        description="Its place on the board: the best rank of its names (None: none of them is ranked)"
    )
    one_per_team: bool = Field(description="Whether the board ranks each team's best name only (--one-per-team)")
    names: list[TeamName]
    submissions: Quota = Field(description="Its submissions in the last hour, against submissions_per_hour")
    scrimmage_quota: Quota | None = Field(default=None, description="Its scrimmages asked for: its own team's only")
    scrimmages: list[ScrimmageRow] = Field(
        default_factory=list, description="Its latest scrimmages, newest first: its own team's only"
    )


def team_page(ladder: LadderFolder, team: str, own: bool = False) -> TeamPage:
    """Everything about ``team`` (``own``: as the team itself sees it)."""
    if not NAME_PATTERN.fullmatch(team):  # none was made (and a NUL is no text to PostgreSQL)
        raise NotFound(f"this ladder has no team called {team[:100]!r}")
    board_rows = standings(ladder, None if own else set()).rows  # before this connection, as name_page's
    with reading(ladder.engine) as connection:
        team_id = reads.team_id(connection, team)
        if team_id is None:
            raise NotFound(f"this ladder has no team called {team!r}")
        standing = {row.name: row for row in board_rows}
        names = [
            TeamName(name=row.name, standing=standing[row.name], versions=_versions(connection, row.id, own))
            for row in reads.team_names(connection, team_id)
        ]
        since = (datetime.now(UTC) - HOUR).isoformat(timespec="seconds")
        settings = ladder.settings
        submissions = _quota(reads.submissions_since(connection, team_id, since), settings.submissions_per_hour)
        scrimmages = reads.scrimmages_since(connection, team_id, since)
        shown = rows(ladder, connection, team_id, SCRIMMAGES_SHOWN) if own else []
    ranks = [n.standing.rank for n in names if n.standing.rank is not None]
    return TeamPage(
        team=team,
        own=own,
        place=min(ranks, default=None),
        one_per_team=settings.one_per_team,
        names=names,
        submissions=submissions,
        scrimmage_quota=_quota(scrimmages, settings.scrimmages_per_hour) if own else None,
        scrimmages=shown,
    )


def _versions(connection: Connection, name_id: int, own: bool) -> list[TeamVersion]:
    """A name's versions, oldest first, each with its rating history."""
    found = reads.versions_of(connection, name_id)
    history = rating_points(connection, {v.id: v.number for v in found})
    return [
        TeamVersion(**version_info(v, own).model_dump(), history=[p for p in history if p.version == v.number])
        for v in found
    ]


def _quota(times: list[str], per_hour: int) -> Quota:
    """An hourly limit's use, from when each use in the last hour was (oldest first)."""
    left = max(0, per_hour - len(times))
    frees = None
    if not left and 0 < per_hour <= len(times):
        frees = (datetime.fromisoformat(times[len(times) - per_hour]) + HOUR).isoformat(timespec="seconds")
    return Quota(per_hour=per_hour, used=len(times), left=left, frees_at=frees)
