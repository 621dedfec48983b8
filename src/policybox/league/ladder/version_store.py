"""A ladder's names and versions: every write of the ``names``, ``versions`` and ``qualifications``
tables, and what the run loop, submissions and matchmaking read of them. The views' reads are
``policybox.league.ladder.reads``.

The database's other nouns each have one owner of their writes: rated matches, their seats and
ratings ``match_store``; teams, tokens, sessions and which team owns a name ``team_store``;
scrimmages ``scrimmage_store``; finals and their matches ``final_store``; the run's heartbeat
``heartbeat``. Each function takes an open connection, so the caller decides what one transaction
holds.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection, func, select

from policybox.league.ladder import life
from policybox.league.ladder.database import new_id
from policybox.league.ladder.schema import MatchState, matches, names, now, qualifications, versions
from policybox.results import EpisodeResult

PLAYING = life.PLAYING
QUALIFIED = life.QUALIFIED


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


def names_by_id(connection: Connection, version_ids: Iterable[int]) -> dict[int, str]:
    """Each version's name (how a final's placings and ranking name it: one version a name)."""
    rows = connection.execute(
        select(versions.c.id, names.c.name)
        .join(names, names.c.id == versions.c.name_id)
        .where(versions.c.id.in_(list(version_ids)))
    )
    return {row.id: row.name for row in rows}


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


def reward_moments(row: Any) -> tuple[int, float, float]:
    """(episodes, mean, variance) of a version's episode scores, from its stored moments."""
    if not row.matches:
        return 0, math.nan, math.nan
    mean = row.score_sum / row.matches
    variance = max(0.0, row.score_squares / row.matches - mean**2)
    return row.matches, mean, variance


def reset_streak(connection: Connection, version_id: int) -> None:
    connection.execute(versions.update().where(versions.c.id == version_id).values(failing_streak=0, void_streak=0))
