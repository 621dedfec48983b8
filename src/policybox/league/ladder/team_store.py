"""A ladder's teams: who may submit over the web page, and which names each owns. Every write of the
``teams``, ``tokens``, ``token_uses``, ``sessions`` and ``owners`` tables, and what submissions, the
web page's logins and ``ladder tokens`` read of them (the views' reads are ``policybox.league.ladder.reads``).

A token and a login session are kept only as their sha256 (``_digest``): the database never holds
what would let anyone submit as a team.
"""

from __future__ import annotations

import hashlib
import secrets
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import Connection, func, select

from policybox.league.ladder.database import new_id
from policybox.league.ladder.schema import names, now, owners, sessions, teams, token_uses, tokens, versions

SESSION_IDLE = timedelta(days=30)  # a login session unused this long is over (its cookie nobody's)


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


def _digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()
