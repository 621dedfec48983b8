"""A ladder's finals: every write of the ``finals`` and ``final_matches`` tables, and what ``ladder
final`` and ``ladder run`` read of them while a final plays (``policybox.league.ladder.final`` decides
what a final plays; what the views show of one is read through ``policybox.league.ladder.reads``).

A final's matches are its own, never in ``matches``: storing one changes no rating. Each function
takes an open connection, so the caller decides what one transaction holds.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from sqlalchemy import Connection, and_, func, select

from policybox.league.ladder.database import new_id
from policybox.league.ladder.match_store import stamp_of
from policybox.league.ladder.schema import FinalStage, MatchState, final_matches, finals, now
from policybox.league.stats.final_placings import Placing
from policybox.results import EpisodeResult


def open_final(connection: Connection) -> Any:
    """The final that is open (its row), if one is: ``ladder run`` waits while it is."""
    return connection.execute(select(finals).where(finals.c.state == FinalStage.OPEN)).first()


def add_final(connection: Connection, version_ids: list[int], rounds: int, seed: int) -> int:
    """Open a final over the frozen field ``version_ids``: its id."""
    return new_id(
        connection.execute(
            finals.insert().values(
                created_at=now(), state=FinalStage.OPEN, version_ids=version_ids, rounds=rounds, seed=seed
            )
        )
    )


def close_final(connection: Connection, final_id: int) -> None:
    connection.execute(finals.update().where(finals.c.id == final_id).values(state=FinalStage.DONE))


def add_matches(connection: Connection, final_id: int, first: int, seeded: list[tuple[int, list[int]]]) -> None:
    """Store matches to play, numbered from ``first``: each (its seed, the version in each seat)."""
    rows = [
        {"final_id": final_id, "number": number, "seed": seed, "seats": seats, "state": MatchState.SCHEDULED}
        for number, (seed, seats) in enumerate(seeded, start=first)
    ]
    if rows:
        connection.execute(final_matches.insert(), rows)


def waiting(connection: Connection, final_id: int) -> list[Any]:
    """The final's matches still to play, by number: number, seed, seats."""
    return list(
        connection.execute(
            select(final_matches.c.number, final_matches.c.seed, final_matches.c.seats)
            .where(final_matches.c.final_id == final_id, final_matches.c.state == MatchState.SCHEDULED)
            .order_by(final_matches.c.number)
        ).all()
    )


def record_match(connection: Connection, final_id: int, number: int, placing: Placing, result: EpisodeResult) -> None:
    """Store match ``number`` as played, with its placing, its result and its stamp (as a rated match's)."""
    row = connection.execute(select(final_matches.c.seed, final_matches.c.seats).where(_match(final_id, number))).one()
    _finish(
        connection,
        final_id,
        number,
        state=MatchState.PLAYED,
        placing=placing,
        result=result.model_dump(mode="json"),
        stamp=stamp_of(connection, row.seed, list(row.seats)),
    )


def void_match(connection: Connection, final_id: int, number: int, reason: str) -> None:
    """Store match ``number`` as void: the machinery failed it every time."""
    _finish(connection, final_id, number, state=MatchState.VOID, reason=reason)


def _finish(connection: Connection, final_id: int, number: int, **values: Any) -> None:
    connection.execute(final_matches.update().where(_match(final_id, number)).values(played_at=now(), **values))


def _match(final_id: int, number: int) -> Any:
    return and_(final_matches.c.final_id == final_id, final_matches.c.number == number)


def rounds(connection: Connection, final_id: int) -> int:
    """The cycles of the balanced schedule the final was opened with."""
    return int(connection.execute(select(finals.c.rounds).where(finals.c.id == final_id)).scalar_one())


def match_count(connection: Connection, final_id: int) -> int:
    """How many matches the final stored, played or not."""
    query = select(func.count()).select_from(final_matches).where(final_matches.c.final_id == final_id)
    return connection.execute(query).scalar() or 0


def states(connection: Connection, final_id: int) -> Counter[str]:
    """How many of the final's matches are in each state."""
    query = select(final_matches.c.state).where(final_matches.c.final_id == final_id)
    return Counter(connection.execute(query).scalars())


def plays(connection: Connection, final_id: int) -> dict[int, int]:
    """Each version's matches in the final, scheduled or played."""
    counted: dict[int, int] = {}
    query = select(final_matches.c.seats).where(final_matches.c.final_id == final_id)
    for seats in connection.execute(query).scalars():
        for version_id in set(seats):
            counted[version_id] = counted.get(version_id, 0) + 1
    return counted


def placings(connection: Connection, final_id: int) -> list[Placing]:
    """The placing of every played match of the final, by number."""
    played = final_matches.c.state == MatchState.PLAYED
    query = select(final_matches.c.placing).where(final_matches.c.final_id == final_id, played)
    return list(connection.execute(query.order_by(final_matches.c.number)).scalars())
