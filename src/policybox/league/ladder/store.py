"""Every write of a ladder's database, and what the run loop, submissions and tokens read: names,
versions, qualification, matches, ratings, teams. What the views read is ``policybox.league.ladder.reads``.

Each function takes an open connection, so the caller decides what one transaction holds: a match
is stored with its seats, every rating it changed and every counter of its versions in one
transaction (``record_match``), so a kill at any moment leaves the ladder as it was before that
match or after it, never between.
"""

from __future__ import annotations

import hashlib
import json
import math
import secrets
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import Connection, CursorResult, and_, func, select

from policybox.league import ranking
from policybox.league.choices import RankBy
from policybox.league.ladder import life, stamp
from policybox.league.ladder.database import (
    MatchState,
    finals,
    match_seats,
    matches,
    meta,
    names,
    owners,
    qualifications,
    ratings,
    scrimmages,
    seat_counts,
    sessions,
    storable,
    teams,
    token_uses,
    tokens,
    versions,
)
from policybox.league.ladder.matchmaking import Candidate
from policybox.results import EpisodeResult
from policybox.settings import EpisodeSettings

PLAYING = life.PLAYING
QUALIFIED = life.QUALIFIED
SESSION_IDLE = timedelta(days=30)  # a login session unused this long is over (its cookie nobody's)


def now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def new_id(inserted: CursorResult[Any]) -> int:
    """The id of the row an insert made."""
    key = inserted.inserted_primary_key
    assert key is not None  # every table's insert here has an integer primary key
    return int(key[0])


@dataclass(frozen=True)
class Version:
    """A version as the ladder holds it."""

    id: int
    name: str
    number: int
    state: str
    digest: str
    reason: str | None
    retired: bool

    @property
    def label(self) -> str:
        return f"{self.name} v{self.number}"


def _version(row: Any) -> Version:
    return Version(row.id, row.name, row.number, row.state, row.digest, row.reason, row.retired)


# A version's columns but its spec and its source: what pages and matchmaking read. The spec (up to
# 128 KiB of init_kwargs and env) is read by nothing that shows a page (cells get versions/specs/ID.json),
# the source only by its name's page; every open tab polls the standings.
SUMMARY = [column for column in versions.c if column.name not in ("spec", "source")]


def _versions_query() -> Any:
    return select(
        versions.c.id,
        names.c.name,
        versions.c.number,
        versions.c.state,
        versions.c.digest,
        versions.c.reason,
        names.c.retired,
    ).join(names, names.c.id == versions.c.name_id)


# ---------------------------------------------------------------------------------------------
# Names and versions


def name_row(connection: Connection, name: str) -> Any:
    return connection.execute(select(names).where(names.c.name == name)).first()


def latest_version(connection: Connection, name: str) -> Version | None:
    row = connection.execute(_versions_query().where(names.c.name == name).order_by(versions.c.number.desc())).first()
    return None if row is None else _version(row)


def add_version(connection: Connection, name: str, digest: str, spec: dict[str, Any], source: str) -> Version:
    """The name's next version, queued for qualification (the name is made on its first submission)."""
    row = name_row(connection, name)
    if row is None:
        name_id = new_id(connection.execute(names.insert().values(name=name, retired=False, created_at=now())))
        number = 1
    else:
        name_id = row.id
        number = (
            connection.execute(select(func.max(versions.c.number)).where(versions.c.name_id == name_id)).scalar() or 0
        ) + 1
    values = dict(
        name_id=name_id, number=number, digest=digest, spec=spec, source=source, state=life.VersionState.QUALIFYING
    )
    connection.execute(versions.insert().values(**values, submitted_at=now(), statuses={}))
    version = latest_version(connection, name)
    assert version is not None
    return version


def set_retired(connection: Connection, name: str, retired: bool) -> None:
    connection.execute(names.update().where(names.c.name == name).values(retired=retired))


def version_by_id(connection: Connection, version_id: int) -> Version:
    return _version(connection.execute(_versions_query().where(versions.c.id == version_id)).one())


def qualifying(connection: Connection) -> list[Version]:
    """The versions waiting for qualification, oldest first; a retired name's wait until it is back."""
    rows = connection.execute(
        _versions_query()
        .where(versions.c.state == life.VersionState.QUALIFYING, names.c.retired.is_(False))
        .order_by(versions.c.id)
    )
    return [_version(row) for row in rows]


def retired_among(connection: Connection, version_ids: Iterable[int]) -> list[str]:
    """The retired names among these versions', sorted."""
    rows = connection.execute(
        select(names.c.name)
        .distinct()
        .join(versions, versions.c.name_id == names.c.id)
        .where(versions.c.id.in_(list(version_ids)), names.c.retired.is_(True))
        .order_by(names.c.name)
    )
    return list(rows.scalars())


def finish_qualification(
    connection: Connection,
    version: Version,
    qualified: bool,
    reason: str | None,
    setup_output: str | None,
    result: EpisodeResult | None,
    spec: dict[str, Any] | None = None,
    played_digest: str | None = None,
) -> None:
    """Record a version's qualification; a qualified one becomes active from its start rating
    (``life.start_rating``), superseding its name's earlier playing version (``life.superseded``),
    with the digest of what it plays with (``played_digest``: ``stamp.played_digest``)."""
    connection.execute(
        qualifications.insert().values(
            version_id=version.id,
            outcome="qualified" if qualified else "rejected",
            reason=reason,
            setup_output=setup_output,
            result=None if result is None else result.model_dump(mode="json"),
            finished_at=now(),
        )
    )
    if not qualified:
        set_state(connection, version.id, life.VersionState.REJECTED, reason)
        return
    start = life.start_rating(previous_rating(connection, version))
    watermark = (
        connection.execute(select(func.max(matches.c.id)).where(matches.c.state == MatchState.PLAYED)).scalar() or 0
    )
    values: dict[str, Any] = dict(
        state=life.VersionState.ACTIVE,
        reason=None,
        qualified_at=now(),
        activated_after=watermark,
        played_digest=played_digest,
    )
    if spec is not None:  # where its setup script's output is
        values["spec"] = spec
    connection.execute(
        versions.update().where(versions.c.id == version.id).values(**values, mu=start.mu, sigma=start.sigma)
    )
    earlier = connection.execute(
        select(versions.c.id, versions.c.state)
        .join(names, names.c.id == versions.c.name_id)
        .where(names.c.name == version.name, versions.c.number < version.number)
    ).all()
    for version_id in life.superseded((row.id, row.state) for row in earlier):
        set_state(connection, version_id, life.VersionState.SUPERSEDED, f"superseded by v{version.number}")


def previous_rating(connection: Connection, version: Version) -> float | None:
    """The mu of the name's latest earlier version that qualified, if any."""
    row = connection.execute(
        select(versions.c.mu)
        .join(names, names.c.id == versions.c.name_id)
        .where(names.c.name == version.name, versions.c.number < version.number, versions.c.state.in_(QUALIFIED))
        .order_by(versions.c.number.desc())
    ).first()
    return None if row is None else row.mu


def set_state(connection: Connection, version_id: int, state: str, reason: str | None) -> None:
    connection.execute(versions.update().where(versions.c.id == version_id).values(state=state, reason=reason))


def current_versions(connection: Connection) -> dict[str, Any]:
    """Each name's current version -- its latest qualified one -- as a row of the versions table."""
    ranked = (
        select(
            *SUMMARY,
            func.row_number().over(partition_by=versions.c.name_id, order_by=versions.c.number.desc()).label("rank"),
        )
        .where(versions.c.state.in_(QUALIFIED))
        .subquery()
    )
    rows = connection.execute(
        select(ranked, names.c.name, names.c.retired)
        .join(names, names.c.id == ranked.c.name_id)
        .where(ranked.c.rank == 1)
    )
    return {row.name: row for row in rows}


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


def open_final(connection: Connection) -> int | None:
    """The id of the final that is open, if one is (``ladder run`` waits while it is)."""
    return connection.execute(select(finals.c.id).where(finals.c.state == "open")).scalar()


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


def reward_moments(row: Any) -> tuple[int, float, float]:
    """(episodes, mean, variance) of a version's episode scores, from its stored moments."""
    if not row.matches:
        return 0, math.nan, math.nan
    mean = row.score_sum / row.matches
    variance = max(0.0, row.score_squares / row.matches - mean**2)
    return row.matches, mean, variance


def reset_streak(connection: Connection, version_id: int) -> None:
    connection.execute(versions.update().where(versions.c.id == version_id).values(failing_streak=0, void_streak=0))


# ---------------------------------------------------------------------------------------------
# Teams: who may submit over the web page, and which names each owns


def new_token(connection: Connection, team: str) -> str:
    """A new token for ``team`` (made on first use); only its sha256 is kept."""
    row = connection.execute(select(teams.c.id).where(teams.c.name == team)).first()
    team_id = row.id if row else new_id(connection.execute(teams.insert().values(name=team, created_at=now())))
    token = secrets.token_urlsafe(32)
    connection.execute(tokens.insert().values(team_id=team_id, digest=_digest(token), created_at=now()))
    return token


def team_of(connection: Connection, token: str) -> str | None:
    """The team a token belongs to, or None for a token that is not one of the ladder's."""
    found = credential(connection, token)
    return None if found is None else found.team


@dataclass(frozen=True)
class Credential:
    """Who a token or a login session is: the token's id, and its team."""

    token_id: int
    team: str


def credential(connection: Connection, token: str) -> Credential | None:
    """The token, if it is one of the ladder's (and not revoked)."""
    row = connection.execute(
        select(tokens.c.id, teams.c.name)
        .join(teams, teams.c.id == tokens.c.team_id)
        .where(tokens.c.digest == _digest(token))
    ).first()
    return None if row is None else Credential(row.id, row.name)


def session_credential(connection: Connection, session: str) -> Credential | None:
    """The token a login session was made with, if the session was not ended, nor idle for longer
    than ``SESSION_IDLE``."""
    idle_since = (datetime.now(UTC) - SESSION_IDLE).isoformat(timespec="seconds")
    row = connection.execute(
        select(tokens.c.id, teams.c.name)
        .select_from(sessions)
        .join(tokens, tokens.c.id == sessions.c.token_id)
        .join(teams, teams.c.id == tokens.c.team_id)
        .where(sessions.c.digest == _digest(session), sessions.c.last_seen >= idle_since)
    ).first()
    return None if row is None else Credential(row.id, row.name)


def new_session(connection: Connection, token_id: int) -> str:
    """A login session for a token: its random id (the cookie's value); only its sha256 is kept."""
    session = secrets.token_urlsafe(32)
    stamp = now()
    connection.execute(
        sessions.insert().values(digest=_digest(session), token_id=token_id, created_at=stamp, last_seen=stamp)
    )
    return session


def end_session(connection: Connection, session: str) -> None:
    connection.execute(sessions.delete().where(sessions.c.digest == _digest(session)))


def note_use(connection: Connection, token_id: int, session: str | None) -> None:
    """The token (and the session it came in) used now."""
    stamp = now()
    used = connection.execute(token_uses.update().where(token_uses.c.token_id == token_id).values(last_used=stamp))
    if used.rowcount == 0:
        connection.execute(token_uses.insert().values(token_id=token_id, last_used=stamp))
    if session is not None:
        connection.execute(sessions.update().where(sessions.c.digest == _digest(session)).values(last_seen=stamp))


def revoke(connection: Connection, team: str) -> tuple[int, int]:
    """Delete every token of ``team`` and end every session made with one: (tokens, sessions)."""
    team_id = select(teams.c.id).where(teams.c.name == team).scalar_subquery()
    ids = select(tokens.c.id).where(tokens.c.team_id == team_id).scalar_subquery()
    ended = connection.execute(sessions.delete().where(sessions.c.token_id.in_(ids))).rowcount
    connection.execute(token_uses.delete().where(token_uses.c.token_id.in_(ids)))
    revoked = connection.execute(tokens.delete().where(tokens.c.team_id == team_id)).rowcount
    return revoked, ended


def is_team(connection: Connection, team: str) -> bool:
    return connection.execute(select(teams.c.id).where(teams.c.name == team)).first() is not None


def token_rows(connection: Connection) -> Sequence[Any]:
    """Every token (never its digest): its id, team, when made and last used, its open sessions."""
    open_sessions = select(sessions.c.token_id, func.count().label("sessions")).group_by(sessions.c.token_id).subquery()
    return connection.execute(
        select(
            tokens.c.id,
            teams.c.name.label("team"),
            tokens.c.created_at,
            token_uses.c.last_used,
            func.coalesce(open_sessions.c.sessions, 0).label("sessions"),
        )
        .join(teams, teams.c.id == tokens.c.team_id)
        .outerjoin(token_uses, token_uses.c.token_id == tokens.c.id)
        .outerjoin(open_sessions, open_sessions.c.token_id == tokens.c.id)
        .order_by(teams.c.name, tokens.c.id)
    ).all()


def owner_of(connection: Connection, name: str) -> str | None:
    row = connection.execute(
        select(teams.c.name)
        .join(owners, owners.c.team_id == teams.c.id)
        .join(names, names.c.id == owners.c.name_id)
        .where(names.c.name == name)
    ).first()
    return None if row is None else row.name


def names_of(connection: Connection, team: str) -> set[str]:
    """The names ``team`` owns."""
    rows = connection.execute(
        select(names.c.name)
        .join(owners, owners.c.name_id == names.c.id)
        .join(teams, teams.c.id == owners.c.team_id)
        .where(teams.c.name == team)
    )
    return set(rows.scalars())


def claim(connection: Connection, name: str, team: str) -> None:
    """Make ``team`` the owner of ``name`` (its first submission)."""
    name_id = connection.execute(select(names.c.id).where(names.c.name == name)).scalar_one()
    team_id = connection.execute(select(teams.c.id).where(teams.c.name == team)).scalar_one()
    connection.execute(owners.insert().values(name_id=name_id, team_id=team_id))


def lock_team(connection: Connection, team: str) -> int | None:
    """The team's id (None: no such team), its row locked until the transaction ends (PostgreSQL's
    FOR UPDATE; a SQLite writer holds the whole database already): one team's submissions are
    counted and stored one at a time, so that parallel ones cannot pass a limit together."""
    return connection.execute(select(teams.c.id).where(teams.c.name == team).with_for_update()).scalar()


def submissions_since(connection: Connection, team_id: int, since: str) -> list[str]:
    """When each version of a name ``team_id`` owns was submitted, at ``since`` (ISO UTC) or after, oldest first."""
    rows = connection.execute(
        select(versions.c.submitted_at)
        .join(owners, owners.c.name_id == versions.c.name_id)
        .where(owners.c.team_id == team_id, versions.c.submitted_at >= since)
        .order_by(versions.c.submitted_at)
    )
    return list(rows.scalars())


def names_owned(connection: Connection, team_id: int) -> int:
    """How many names ``team_id`` owns that are not retired."""
    return (
        connection.execute(
            select(func.count())
            .select_from(owners)
            .join(names, names.c.id == owners.c.name_id)
            .where(owners.c.team_id == team_id, names.c.retired.is_(False))
        ).scalar()
        or 0
    )


# ---------------------------------------------------------------------------------------------
# Scrimmages: a team's unrated matches (``policybox.league.ladder.scrimmage``), never in ``matches``


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


def _digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


# ---------------------------------------------------------------------------------------------
# The run's heartbeat (``policybox.league.ladder.heartbeat``)

BEAT_KEY = "heartbeat"  # its row of meta: the latest beat, as JSON


def write_beat(connection: Connection, beat: str) -> None:
    """Store the run's latest beat, in place of the one before."""
    beat = storable(beat)  # its note may quote a worker's error
    updated = connection.execute(meta.update().where(meta.c.key == BEAT_KEY).values(value=beat))
    if not updated.rowcount:
        connection.execute(meta.insert().values(key=BEAT_KEY, value=beat))
