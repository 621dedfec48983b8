"""Scrimmages: a team asks for N unrated matches of one of its names against a name it chooses (as
Battlecode's teams do), within ``scrimmages_per_hour``.

Each is stored when asked for (``scrimmage_store.add_scrimmages``) with a seed drawn as every ladder episode's
(``draw_seed``: no policy can tell a scrimmage from a rated match) and its seats: the two names' playing
versions, dealt over the game's seats by the ladder's own ``seating`` (``seating.seat_maps``: with
``rotate``, the N scrimmages take turns in every seat). ``ladder run`` plays them beside the rated
matches (``run_loop``: one at a time, in a slot the rated matches leave free) and stores each result
alone: a scrimmage never changes a rating, a counter, a streak or the board.

What a team may get wrong is one ``ScrimmageRefused`` naming what to fix, with its HTTP status: a
name it does not own (403), a name that is unknown, retired or not playing, itself as the opponent, a
count below 1 or above the hourly cap (400), or the cap already used this hour (429, with when it
frees: ``retry_after_s``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Connection

from policybox.errors import PolicyboxError
from policybox.league.ladder import scrimmage_store, team_store, version_store
from policybox.league.ladder.database import transaction
from policybox.league.ladder.folder import HOUR, LadderFolder
from policybox.league.play.seating import seat_maps
from policybox.league.play.tournament import draw_seed


class ScrimmageRefused(PolicyboxError):
    """A request for scrimmages the ladder does not take: the message says why, ``status`` as HTTP
    answers it, ``retry_after_s`` when waiting frees the cap."""

    def __init__(self, message: str, status: int = 400, retry_after_s: int | None = None) -> None:
        super().__init__(message)
        self.status, self.retry_after_s = status, retry_after_s


def episode_name(scrimmage_id: int) -> str:
    """What a scrimmage's episode is called: its log folder's and its replay's name."""
    return f"scrimmage-{scrimmage_id:06d}"


@dataclass(frozen=True)
class Asked:
    """Scrimmages stored: their ids, who plays, and how many more the team may ask for this hour."""

    ids: list[int]
    name: str
    version: int
    opponent: str
    opponent_version: int
    left: int


def ask(ladder: LadderFolder, team: str, name: str, opponent: str, count: int) -> Asked:
    """Store ``count`` scrimmages of ``team``'s ``name`` against ``opponent``, or refuse (``ScrimmageRefused``)."""
    most = ladder.settings.scrimmages_per_hour
    if most == 0:
        raise ScrimmageRefused("this ladder takes no scrimmages (its organiser made it with --scrimmages-per-hour 0)")
    if not 1 <= count <= most:
        raise ScrimmageRefused(f"count {count}: ask for 1 to {most} scrimmages (scrimmages_per_hour {most})")
    if opponent == name:
        raise ScrimmageRefused(f"{name} cannot scrimmage against itself: choose another name as the opponent")
    with transaction(ladder.engine) as connection:
        team_id = team_store.lock_team(connection, team)  # one team's requests counted and stored one at a time
        if team_id is None:
            raise ScrimmageRefused(f"this ladder has no team {team!r}", 403)
        if version_store.name_row(connection, name) is not None and team_store.owner_of(connection, name) != team:
            raise ScrimmageRefused(
                f"{name} is not a name of team {team}: ask for scrimmages of one of yours "
                f"({', '.join(sorted(team_store.names_of(connection, team))) or 'none yet'})",
                403,
            )
        current = version_store.current_versions(connection)
        mine, theirs = _playing(current, name), _playing(current, opponent)
        left = _room(connection, team_id, team, most, count)
        seeds = [draw_seed() for _ in range(count)]
        maps = seat_maps(ladder.settings.seating, 2, ladder.settings.agents, count, seeds.__getitem__)
        pair = [mine.id, theirs.id]
        plays = [(seed, [pair[index] for index in seat_map]) for seed, seat_map in zip(seeds, maps, strict=True)]
        ids = scrimmage_store.add_scrimmages(connection, team_id, mine.id, theirs.id, plays)
    return Asked(ids, name, mine.number, opponent, theirs.number, left - count)


def _playing(current: dict[str, Any], name: str) -> Any:
    """``name``'s playing version, if it may play now: active, its name not retired."""
    row = current.get(name)
    if row is None or row.retired or row.state not in version_store.PLAYING:
        why = "has no name" if row is None else ("retired" if row.retired else f"{row.state}, not active")
        shown = f"this ladder {why} {name!r}" if row is None else f"{name} is {why}"
        raise ScrimmageRefused(f"{shown}: choose a name on the board whose playing version is active")
    return row


def _room(connection: Connection, team_id: int, team: str, most: int, count: int) -> int:
    """How many scrimmages ``team`` may still ask for this hour; ``count`` more than that is a 429."""
    now = datetime.now(UTC)
    recent = scrimmage_store.scrimmages_since(connection, team_id, (now - HOUR).isoformat(timespec="seconds"))
    left = most - len(recent)
    if count <= left:
        return left
    frees = datetime.fromisoformat(recent[count - left - 1]) + HOUR  # when enough of them are an hour old
    wait_s = max(1, math.ceil((frees - now).total_seconds()))
    raise ScrimmageRefused(
        f"team {team} asked for {len(recent)} scrimmages in the last hour; the ladder's cap is {most} an hour "
        f"(scrimmages_per_hour, set by ladder init --scrimmages-per-hour), so {left} more now; {count} can be "
        f"asked for from {frees:%H:%M:%S} UTC, in {wait_s} s",
        429,
        wait_s,
    )
