"""A ladder's played matches, newest first, as rows: each seat with its reward, status, cause and
placing (``ladder matches``, the matches page, and a name page's recent matches).

A seat's placing in its match is decided here, for every page that shows one (a match's, a
scrimmage's): ``placings``, by the ladder's ranking rule.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from pydantic import BaseModel, Field
from sqlalchemy import Connection

from policybox.errors import NotFound
from policybox.files.version_files import NAME_PATTERN
from policybox.league import ranking
from policybox.league.choices import RankBy
from policybox.league.ladder import reads
from policybox.league.ladder.database import reading
from policybox.league.ladder.folder import LadderFolder
from policybox.league.views.visibility import public
from policybox.results import EpisodeResult, GameFault

PLACING = (
    "Its policy's place in this match by the ladder's ranking rule (a forfeit below every policy that did "
    "not forfeit): win, draw or loss between two policies, else 1st, 2nd, ... (=2nd: a shared place)"
)


class SeatResult(BaseModel):
    seat: int
    name: str
    version: int
    reward: float | None
    status: str | None
    cause: str | None = None
    placing: str | None = Field(default=None, description=PLACING)


class MatchRow(BaseModel):
    id: int
    played_at: str | None
    seed: int
    steps: int | None
    seats: list[SeatResult]
    game_fault: str | None = None


def match_rows(
    connection: Connection,
    rank_by: RankBy,
    version_ids: dict[int, int] | None = None,
    limit: int = 100,
    before: int | None = None,
    also_ids: dict[int, int] | None = None,
) -> list[MatchRow]:
    """Played matches, newest first (only those of ``version_ids`` if given, and of ``also_ids`` too;
    ids below ``before``), each seat placed by ``rank_by``."""
    found = reads.played_matches(connection, version_ids, limit, before, also_ids)
    seats = seat_results(connection, [m.id for m in found])
    for m in found:
        placed = placings(EpisodeResult.model_validate(m.result), [seat.name for seat in seats[m.id]], rank_by)
        for seat, placing in zip(seats[m.id], placed, strict=True):
            seat.placing = placing
    return [
        MatchRow(
            id=m.id,
            played_at=m.played_at,
            seed=m.seed,
            steps=(m.result or {}).get("steps"),
            seats=seats[m.id],
            game_fault=_fault_line(m.result),
        )
        for m in found
    ]


def placings(result: EpisodeResult, seat_names: list[str], rank_by: RankBy) -> list[str]:
    """Each seat's placing in its match, by the ladder's own order of it (``ranking.places``): the
    seats of one policy share its place."""
    seated = [(seat_names[agent.agent_id], agent) for agent in result.agents]
    places = ranking.places(ranking.episode_outcomes(seated, result.steps, rank_by))
    shared = Counter(places.values())
    return [_placing(places[name], shared[places[name]], len(places)) for name in seat_names]


def _placing(place: int, sharing: int, policies: int) -> str:
    if policies == 2:
        return "draw" if sharing == 2 else ("win", "loss")[place]
    number = place + 1
    suffix = "th" if 10 <= number % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(number % 10, "th")
    return ("=" if sharing > 1 else "") + f"{number}{suffix}"


def _fault_line(result: dict[str, Any] | None) -> str | None:
    fault = (result or {}).get("game_fault")
    return None if fault is None else GameFault.model_validate(fault).one_line()


def seat_results(connection: Connection, match_ids: list[int]) -> dict[int, list[SeatResult]]:
    """The seats of these matches, by match: each with its version, reward, status and cause (not yet placed)."""
    found: dict[int, list[SeatResult]] = {match_id: [] for match_id in match_ids}
    for r in reads.seats_of(connection, match_ids):
        found[r.match_id].append(
            SeatResult(
                seat=r.seat,
                name=r.name,
                version=r.number,
                reward=r.reward,
                status=r.status,
                cause=public(r.failure_kind, private=False),  # a list's cell: its one line, for everyone
            )
        )
    return found


class MatchList(BaseModel):
    matches: list[MatchRow]
    name: str | None = Field(default=None, description="Only the matches of this name, when asked")
    opponent: str | None = Field(default=None, description="And of this opponent too, when asked")


def match_list(
    ladder: LadderFolder,
    limit: int = 100,
    before: int | None = None,
    name: str | None = None,
    opponent: str | None = None,
) -> MatchList:
    """The played matches, newest first: of ``name`` only, if given, and of ``opponent`` too (each a
    ``NotFound`` if the ladder has no such name)."""
    with reading(ladder.engine) as connection:
        ids, also = (_version_ids(connection, given) for given in (name, opponent))
        rows = match_rows(connection, ladder.settings.rank_by, ids, limit, before, also)
    return MatchList(matches=rows, name=name, opponent=opponent)


def _version_ids(connection: Connection, name: str | None) -> dict[int, int] | None:
    """A name's versions (id: number); None for no name."""
    if name is None:
        return None
    row = reads.name_row(connection, name) if NAME_PATTERN.fullmatch(name) else None
    if row is None:
        raise NotFound(f"this ladder has no submission called {name[:100]!r}")
    return {v.id: v.number for v in reads.versions_of(connection, row.id)}
