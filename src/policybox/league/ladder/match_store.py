"""A ladder's rated matches: every write of the ``matches``, ``match_seats``, ``seat_counts`` and
``ratings`` tables (and of the counters, ratings and streaks a match changes on its versions), and
what the run loop and matchmaking read of them. The views' reads are ``policybox.league.ladder.reads``;
names and versions are ``version_store``'s.

Each function takes an open connection, so the caller decides what one transaction holds: a match
is stored with its seats, every rating it changed and every counter of its versions in one
transaction (``record_match``), so a kill at any moment leaves the ladder as it was before that
match or after it, never between.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from sqlalchemy import Connection, and_, func, select

from policybox.league import ranking
from policybox.league.choices import RankBy
from policybox.league.ladder import life, stamp
from policybox.league.ladder.database import new_id
from policybox.league.ladder.matchmaking import Candidate
from policybox.league.ladder.schema import (
    MatchState,
    match_seats,
    matches,
    meta,
    names,
    now,
    ratings,
    seat_counts,
    versions,
)
from policybox.league.ladder.version_store import PLAYING, SUMMARY, current_versions
from policybox.results import EpisodeResult
from policybox.settings import EpisodeSettings

# ---------------------------------------------------------------------------------------------
# Matchmaking's view


def candidates(connection: Connection, seats: int) -> list[Candidate]:
    """The versions that may play now -- each name's current version, active, the name not retired --
    with their matches and plays per seat counting the matches scheduled but not yet played."""
    playing = [row for row in current_versions(connection).values() if row.state in PLAYING and not row.retired]
    ids = [row.id for row in playing]
    # From the few scheduled matches to their seats: joined the other way, SQLite (which has no
    # statistics) walks every seat the versions ever played.
    in_flight, last_in_flight = {}, {}
    for version_id, count, last in connection.execute(
        select(
            match_seats.c.version_id,
            func.count(func.distinct(match_seats.c.match_id)),
            func.max(match_seats.c.match_id),
        )
        .where(
            match_seats.c.match_id.in_(select(matches.c.id).where(matches.c.state == MatchState.SCHEDULED)),
            match_seats.c.version_id.in_(ids),
        )
        .group_by(match_seats.c.version_id)
    ):
        in_flight[version_id], last_in_flight[version_id] = count, last
    plays: dict[int, list[int]] = {i: [0] * seats for i in ids}
    for version_id, seat, count in connection.execute(
        select(seat_counts.c.version_id, seat_counts.c.seat, seat_counts.c.plays).where(
            seat_counts.c.version_id.in_(ids)
        )
    ):
        if seat < seats:
            plays[version_id][seat] = count
    return [
        Candidate(
            version_id=row.id,
            mu=row.mu,
            sigma=row.sigma,
            matches=row.matches + in_flight.get(row.id, 0),
            last_match=max((m for m in (row.last_match, last_in_flight.get(row.id)) if m is not None), default=None),
            seat_plays=tuple(plays[row.id]),
        )
        for row in playing
    ]


def matches_scheduled(connection: Connection) -> int:
    """How many matches were ever scheduled: the index of the next one."""
    return connection.execute(select(func.count()).select_from(matches)).scalar() or 0


def scheduled_since(connection: Connection, since: str) -> list[str]:
    """When each match scheduled at ``since`` (ISO UTC) or after was scheduled, oldest first."""
    rows = connection.execute(
        select(matches.c.scheduled_at).where(matches.c.scheduled_at >= since).order_by(matches.c.scheduled_at)
    )
    return list(rows.scalars())


def schedule(connection: Connection, seed: int, seats: list[int]) -> int:
    """Store a match before it is played (so a killed run plays it again, with the same seed and
    seats); its seats count for the seat balance at once."""
    match_id = new_id(
        connection.execute(matches.insert().values(seed=seed, state=MatchState.SCHEDULED, scheduled_at=now()))
    )
    connection.execute(
        match_seats.insert(), [{"match_id": match_id, "seat": s, "version_id": v} for s, v in enumerate(seats)]
    )
    _count_seats(connection, seats, +1)
    return match_id


def _count_seats(connection: Connection, seats: list[int], change: int) -> None:
    for seat, version_id in enumerate(seats):
        updated = connection.execute(
            seat_counts.update()
            .where(and_(seat_counts.c.version_id == version_id, seat_counts.c.seat == seat))
            .values(plays=seat_counts.c.plays + change)
        )
        if updated.rowcount == 0:
            connection.execute(seat_counts.insert().values(version_id=version_id, seat=seat, plays=max(0, change)))


def scheduled(connection: Connection) -> list[tuple[int, int, list[int]]]:
    """The matches scheduled but not yet played, oldest first: (id, seed, the version in each seat)."""
    found = []
    for match_id, seed in connection.execute(
        select(matches.c.id, matches.c.seed).where(matches.c.state == MatchState.SCHEDULED).order_by(matches.c.id)
    ):
        rows = connection.execute(
            select(match_seats.c.version_id).where(match_seats.c.match_id == match_id).order_by(match_seats.c.seat)
        )
        found.append((match_id, seed, [row.version_id for row in rows]))
    return found


def void(connection: Connection, match_id: int, reason: str, suspend_after: int | None = None) -> list[tuple[int, str]]:
    """A match that could not be played or stored: not counted for anyone, its seats given back. With
    ``suspend_after`` (a void for a reason that may be a version's doing, not a retired name), each of
    its versions' void streak grows, and one with ``suspend_after`` void matches in a row, more than
    any other of the match's, is suspended (``life.void_suspension``). The versions suspended, with why."""
    seats = [
        row.version_id
        for row in connection.execute(
            select(match_seats.c.version_id).where(match_seats.c.match_id == match_id).order_by(match_seats.c.seat)
        )
    ]
    _count_seats(connection, seats, -1)
    connection.execute(
        matches.update().where(matches.c.id == match_id).values(state=MatchState.VOID, reason=reason[:2000])
    )
    if suspend_after is None:
        return []
    rows = connection.execute(
        select(versions.c.id, versions.c.state, versions.c.void_streak).where(versions.c.id.in_(seats))
    ).all()
    streaks = {row.id: row.void_streak + 1 for row in rows}
    suspended = []
    for row in rows:
        values: dict[str, Any] = {"void_streak": streaks[row.id]}
        others = max((streak for version_id, streak in streaks.items() if version_id != row.id), default=0)
        if why := life.void_suspension(row.state, streaks[row.id], others, suspend_after, reason):
            values.update(state=life.VersionState.SUSPENDED, reason=why)
            suspended.append((row.id, why))
        connection.execute(versions.update().where(versions.c.id == row.id).values(**values))
    return suspended


def oldest_kept(connection: Connection, keep: int) -> int:
    """The id from which stored matches keep their files (``retention``): the lowest of the ``keep``
    latest stored (played or void) matches' -- 0 when fewer are stored; past the latest when ``keep``
    is 0."""
    stored = matches.c.state != MatchState.SCHEDULED
    if keep == 0:
        return (connection.execute(select(func.max(matches.c.id)).where(stored)).scalar() or 0) + 1
    query = select(matches.c.id).where(stored).order_by(matches.c.id.desc()).offset(keep - 1).limit(1)
    return connection.execute(query).scalar() or 0


# ---------------------------------------------------------------------------------------------
# A played match, in one transaction


def ratings_of(connection: Connection, version_ids: Iterable[int]) -> dict[int, Any]:
    rows = connection.execute(
        select(versions.c.id, versions.c.mu, versions.c.sigma).where(versions.c.id.in_(list(version_ids)))
    )
    return {row.id: ranking.MODEL.rating(mu=row.mu, sigma=row.sigma) for row in rows}


def record_match(
    connection: Connection,
    match_id: int,
    seats: list[int],
    result: EpisodeResult,
    outcomes: dict[int, ranking.Outcome],
    rated: dict[int, Any],
    suspend_after: int,
) -> list[tuple[int, str]]:
    """Store a played match: its result and seats, every rating it changed (and each one's history
    row), its versions' counters; suspend a version whose agents failed in ``suspend_after`` matches
    in a row. The versions suspended, with why."""
    connection.execute(
        matches.update()
        .where(matches.c.id == match_id)
        .values(
            state=MatchState.PLAYED,
            played_at=now(),
            result=result.model_dump(mode="json"),
            stamp=stamp_of(connection, _seed(connection, match_id), seats),
        )
    )
    for agent in result.agents:
        failure = agent.failure
        connection.execute(
            match_seats.update()
            .where(and_(match_seats.c.match_id == match_id, match_seats.c.seat == agent.agent_id))
            .values(
                reward=agent.reward,
                status=agent.status.value,
                failure_kind=failure.kind if failure else None,
                failure_step=failure.step if failure else None,
                failure_message=failure.message if failure else None,
                log_tail=agent.log_tail or (failure.log_tail if failure else None),  # ok seats' too
                timeouts=agent.timeouts,
                invalid_actions=agent.invalid_actions,
                p50_ms=agent.latency.p50_ms,
                p99_ms=agent.latency.p99_ms,
            )
        )
    for version_id, rating in rated.items():
        outcome = outcomes[version_id]
        connection.execute(
            ratings.insert().values(
                match_id=match_id,
                version_id=version_id,
                mu=rating.mu,
                sigma=rating.sigma,
                score=outcome.score,
                forfeited=outcome.forfeited,
            )
        )
    return [
        suspended
        for version_id in outcomes
        if (
            suspended := _count_match(
                connection,
                version_id,
                match_id,
                seats,
                result,
                outcomes[version_id],
                rated.get(version_id),
                suspend_after,
            )
        )
    ]


def _seed(connection: Connection, match_id: int) -> int:
    return int(connection.execute(select(matches.c.seed).where(matches.c.id == match_id)).scalar_one())


def stamp_of(connection: Connection, seed: int, seats: list[int]) -> dict[str, Any]:
    """The stamp (``policybox.league.ladder.stamp``) of a match -- rated or a final's -- of ``seed``
    seating the versions ``seats``: the ladder's game as its settings say, and the versions' digests."""
    ladder = json.loads(connection.execute(select(meta.c.value).where(meta.c.key == "settings")).scalar_one())
    query = select(names.c.name, versions.c.number, versions.c.digest, versions.c.played_digest).join(
        names, names.c.id == versions.c.name_id
    )
    digests = {  # what each plays with (stamp.played_digest); a version qualified before it was kept: as submitted
        f"{row.name}@v{row.number}": row.played_digest or row.digest
        for row in connection.execute(query.where(versions.c.id.in_(seats)))
    }
    return stamp.match_stamp(EpisodeSettings.model_validate(ladder["settings"]), ladder["agents"], seed, digests)


def _count_match(
    connection: Connection,
    version_id: int,
    match_id: int,
    seats: list[int],
    result: EpisodeResult,
    outcome: ranking.Outcome,
    rating: Any,
    suspend_after: int,
) -> tuple[int, str] | None:
    agents = [agent for agent in result.agents if seats[agent.agent_id] == version_id]
    row = connection.execute(select(*SUMMARY).where(versions.c.id == version_id)).one()
    statuses = dict(row.statuses or {})
    for agent in agents:
        statuses[agent.status.value] = statuses.get(agent.status.value, 0) + 1
    failed = next((agent for agent in agents if agent.status.is_terminal), None)
    streak = row.failing_streak + 1 if failed else 0
    values: dict[str, Any] = dict(
        matches=row.matches + 1,
        last_match=match_id,
        failing_streak=streak,
        void_streak=0,
        forfeits=row.forfeits + int(outcome.forfeited),
        score_sum=row.score_sum + outcome.score,
        score_squares=row.score_squares + outcome.score**2,
        statuses=statuses,
        timeouts=row.timeouts + sum(agent.timeouts for agent in agents),
        invalid_actions=row.invalid_actions + sum(agent.invalid_actions for agent in agents),
    )
    if rating is not None:
        values.update(mu=rating.mu, sigma=rating.sigma)
    reason = life.suspension(row.state, streak, suspend_after, failed)
    if reason is not None:
        values.update(state=life.VersionState.SUSPENDED, reason=reason)
    connection.execute(versions.update().where(versions.c.id == version_id).values(**values))
    return None if reason is None else (version_id, reason)


# ---------------------------------------------------------------------------------------------
# Rerate: every rating again from the stored matches


def replayed_ratings(connection: Connection, rank_by: RankBy) -> dict[int, tuple[float, float]]:
    """Every version's rating recomputed from scratch: the played matches in id order, each placed by
    the ranking rules from its stored result, and each version started as it was when it qualified
    (from its name's latest earlier qualified version's mu at that moment, sigma reset)."""
    qualified = connection.execute(
        select(versions.c.id, versions.c.activated_after, versions.c.number, names.c.name)
        .join(names, names.c.id == versions.c.name_id)
        .where(versions.c.activated_after.is_not(None))
        .order_by(versions.c.activated_after, versions.c.id)
    ).all()
    activations: dict[int, list[Any]] = {}
    for row in qualified:
        activations.setdefault(row.activated_after, []).append(row)
    number = {row.id: row.number for row in qualified}
    name = {row.id: row.name for row in qualified}
    current: dict[int, Any] = {}

    def activate(after: int) -> None:
        for row in activations.get(after, []):
            earlier = [v for v in current if name[v] == row.name and number[v] < row.number]
            previous = max(earlier, key=number.__getitem__, default=None)
            current[row.id] = life.start_rating(None if previous is None else current[previous].mu)

    activate(0)
    for match_id, stored in connection.execute(
        select(matches.c.id, matches.c.result).where(matches.c.state == MatchState.PLAYED).order_by(matches.c.id)
    ):
        seats = [
            row.version_id
            for row in connection.execute(
                select(match_seats.c.version_id).where(match_seats.c.match_id == match_id).order_by(match_seats.c.seat)
            )
        ]
        result = EpisodeResult.model_validate(stored)
        outcomes = ranking.episode_outcomes(((seats[a.agent_id], a) for a in result.agents), result.steps, rank_by)
        current.update(ranking.rate(current, outcomes))
        activate(match_id)
    return {version_id: (rating.mu, rating.sigma) for version_id, rating in current.items()}


def live_ratings(connection: Connection) -> dict[int, tuple[float, float]]:
    rows = connection.execute(select(versions.c.id, versions.c.mu, versions.c.sigma).where(versions.c.mu.is_not(None)))
    return {row.id: (row.mu, row.sigma) for row in rows}
