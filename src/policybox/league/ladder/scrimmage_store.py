"""A ladder's scrimmages: every write of the ``scrimmages`` table, and what ``ladder run`` and a
team's requests read of it (``policybox.league.ladder.scrimmage`` decides what a team may ask for; the
views' reads are ``policybox.league.ladder.reads``). A scrimmage is a team's unrated match, never in
``matches``: storing one changes no rating, counter or streak.
"""

from __future__ import annotations

from collections.abc import Iterable

from sqlalchemy import Connection, select

from policybox.league.ladder.database import new_id
from policybox.league.ladder.schema import MatchState, now, scrimmages
from policybox.results import EpisodeResult


def scrimmages_since(connection: Connection, team_id: int, since: str) -> list[str]:
    """When each scrimmage ``team_id`` asked for at ``since`` (ISO UTC) or after was asked for, oldest first."""
    rows = connection.execute(
        select(scrimmages.c.requested_at)
        .where(scrimmages.c.team_id == team_id, scrimmages.c.requested_at >= since)
        .order_by(scrimmages.c.requested_at)
    )
    return list(rows.scalars())


def add_scrimmages(
    connection: Connection, team_id: int, version_id: int, opponent_id: int, plays: list[tuple[int, list[int]]]
) -> list[int]:
    """Store the scrimmages a team asked for, each (seed, the version in each seat) to be played: their ids."""
    asked = now()
    return [
        new_id(
            connection.execute(
                scrimmages.insert().values(
                    team_id=team_id,
                    version_id=version_id,
                    opponent_id=opponent_id,
                    requested_at=asked,
                    seed=seed,
                    seats=seats,
                    state=MatchState.SCHEDULED,
                )
            )
        )
        for seed, seats in plays
    ]


def next_scrimmage(connection: Connection, besides: Iterable[int]) -> tuple[int, int, list[int]] | None:
    """The oldest scrimmage still to play but those ``besides`` (in flight): (id, seed, its seats)."""
    row = connection.execute(
        select(scrimmages.c.id, scrimmages.c.seed, scrimmages.c.seats)
        .where(scrimmages.c.state == MatchState.SCHEDULED, scrimmages.c.id.not_in(list(besides)))
        .order_by(scrimmages.c.id)
        .limit(1)
    ).first()
    return None if row is None else (row.id, row.seed, list(row.seats))


def scrimmages_to_play(connection: Connection) -> set[int]:
    """The scrimmages still to play (their files are never pruned)."""
    return set(connection.execute(select(scrimmages.c.id).where(scrimmages.c.state == MatchState.SCHEDULED)).scalars())


def record_scrimmage(connection: Connection, scrimmage_id: int, result: EpisodeResult) -> None:
    """Store a played scrimmage's result: nothing else changes (no rating, no counter, no streak)."""
    connection.execute(
        scrimmages.update()
        .where(scrimmages.c.id == scrimmage_id)
        .values(state=MatchState.PLAYED, played_at=now(), result=result.model_dump(mode="json"))
    )


def void_scrimmage(connection: Connection, scrimmage_id: int, reason: str) -> None:
    connection.execute(
        scrimmages.update().where(scrimmages.c.id == scrimmage_id).values(state=MatchState.VOID, reason=reason[:2000])
    )
