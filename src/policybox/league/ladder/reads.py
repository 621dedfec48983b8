"""The queries the views run: what ``policybox.league.views`` (and a ``NAME@vN`` rerun) read of a ladder's
database, each a function of an open connection that returns rows.

Each noun's writes, and what the run loop, submissions and tokens read, are its own module's
(``version_store``, ``match_store``, ``team_store``, ``scrimmage_store``, ``final_store``, the
heartbeat's row ``heartbeat``); this module holds the views' reads (a final's too; the few those
modules run too are reached from here, at its end), so that no view runs SQL of its own nor imports
a store (``tests/test_architecture.py`` checks it). Each is opened with ``database.reading``, whose
errors are translated as a write's are (``database.transaction``): a database that cannot be used is
one ``LadderError``, wherever it is met.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from sqlalchemy import Connection, and_, func, select

from policybox.league.ladder import heartbeat, life, scrimmage_store, team_store, version_store
from policybox.league.ladder.life import VersionState
from policybox.league.ladder.schema import (
    MatchState,
    final_matches,
    finals,
    match_seats,
    matches,
    meta,
    names,
    owners,
    qualifications,
    ratings,
    scrimmages,
    teams,
    versions,
)
from policybox.league.ladder.version_store import SUMMARY


def names_in_order(connection: Connection) -> list[str]:
    """Every name, in the order they first arrived."""
    return list(connection.execute(select(names.c.name).order_by(names.c.id)).scalars())


def played(connection: Connection) -> int:
    """How many matches were played."""
    return connection.execute(select(func.count()).where(matches.c.state == MatchState.PLAYED)).scalar_one()


def superseded(connection: Connection, name_id: int) -> list[int]:
    """The numbers of a name's versions replaced by a newer qualified one."""
    return list(
        connection.execute(
            select(versions.c.number)
            .where(versions.c.name_id == name_id, versions.c.state == VersionState.SUPERSEDED)
            .order_by(versions.c.number)
        ).scalars()
    )


def scores(connection: Connection, version_id: int) -> list[float]:
    """A version's episode score in each match that rated it."""
    return list(connection.execute(select(ratings.c.score).where(ratings.c.version_id == version_id)).scalars())


def played_seats(connection: Connection, version_ids: Iterable[int]) -> Sequence[Any]:
    """Every seat these versions played in a played match, by match and seat."""
    return connection.execute(
        select(match_seats)
        .join(matches, matches.c.id == match_seats.c.match_id)
        .where(match_seats.c.version_id.in_(list(version_ids)), matches.c.state == MatchState.PLAYED)
        .order_by(match_seats.c.match_id, match_seats.c.seat)
    ).all()


def versions_of(connection: Connection, name_id: int) -> Sequence[Any]:
    """A name's versions, oldest first: ``SUMMARY``'s columns and the source."""
    return connection.execute(
        select(*SUMMARY, versions.c.source).where(versions.c.name_id == name_id).order_by(versions.c.number)
    ).all()


def playing_specs(connection: Connection) -> Sequence[Any]:
    """The name and stored spec of every version that plays now (active, its name not retired), by name."""
    return connection.execute(
        select(names.c.name, versions.c.spec)
        .join(names, names.c.id == versions.c.name_id)
        .where(versions.c.state.in_(life.PLAYING), names.c.retired.is_(False))
        .order_by(names.c.name)
    ).all()


def rating_history(connection: Connection, version_ids: Iterable[int]) -> Sequence[Any]:
    """These versions' rating after each match that rated them, with when it was played, by match."""
    return connection.execute(
        select(ratings.c.match_id, ratings.c.version_id, ratings.c.mu, ratings.c.sigma, matches.c.played_at)
        .join(matches, matches.c.id == ratings.c.match_id)
        .where(ratings.c.version_id.in_(list(version_ids)))
        .order_by(ratings.c.match_id)
    ).all()


def meetings(connection: Connection, version_ids: Iterable[int]) -> Sequence[Any]:
    """Each rated meeting of these versions with another name's: the outcomes (``score``, ``forfeited``)
    of both sides (``their_score``, ``their_forfeit``), the other side's ``name``, and both versions
    (``version_id``, ``their_version_id``)."""
    ids = list(version_ids)
    mine = ratings.alias("mine")
    theirs = ratings.alias("theirs")
    return connection.execute(
        select(
            mine.c.score,
            mine.c.forfeited,
            theirs.c.score.label("their_score"),
            theirs.c.forfeited.label("their_forfeit"),
            names.c.name,
            mine.c.version_id,
            theirs.c.version_id.label("their_version_id"),
        )
        .join(theirs, and_(theirs.c.match_id == mine.c.match_id, theirs.c.version_id != mine.c.version_id))
        .join(versions, versions.c.id == theirs.c.version_id)
        .join(names, names.c.id == versions.c.name_id)
        .where(mine.c.version_id.in_(ids), theirs.c.version_id.not_in(ids))
    ).all()


def all_meetings(connection: Connection) -> list[Any]:
    """Every rated meeting of two names (each once from either side): ``name``, its ``score`` and
    ``forfeited``, the other's ``their_name``, ``their_score`` and ``their_forfeit``."""
    mine, theirs = ratings.alias("mine"), ratings.alias("theirs")
    my_version, their_version = versions.alias("my_version"), versions.alias("their_version")
    my_name, their_name = names.alias("my_name"), names.alias("their_name")
    rows = connection.execute(
        select(
            my_name.c.name,
            mine.c.score,
            mine.c.forfeited,
            their_name.c.name.label("their_name"),
            theirs.c.score.label("their_score"),
            theirs.c.forfeited.label("their_forfeit"),
        )
        .join(theirs, and_(theirs.c.match_id == mine.c.match_id, theirs.c.version_id != mine.c.version_id))
        .join(my_version, my_version.c.id == mine.c.version_id)
        .join(their_version, their_version.c.id == theirs.c.version_id)
        .join(my_name, my_name.c.id == my_version.c.name_id)
        .join(their_name, their_name.c.id == their_version.c.name_id)
        .where(my_name.c.id != their_name.c.id)
        .order_by(mine.c.match_id)
    )
    return list(rows)


def seat_rewards(connection: Connection, version_ids: Iterable[int]) -> Sequence[Any]:
    """The seat and reward of each of these versions' plays in a played match."""
    return connection.execute(
        select(match_seats.c.seat, match_seats.c.reward)
        .join(matches, matches.c.id == match_seats.c.match_id)
        .where(match_seats.c.version_id.in_(list(version_ids)), matches.c.state == MatchState.PLAYED)
    ).all()


def failed_seats(connection: Connection, version_ids: Iterable[int], limit: int) -> Sequence[Any]:
    """These versions' latest ``limit`` seats that did not end ok, each with its match's stored result."""
    return connection.execute(
        select(match_seats, matches.c.result)
        .join(matches, matches.c.id == match_seats.c.match_id)
        .where(
            match_seats.c.version_id.in_(list(version_ids)),
            matches.c.state == MatchState.PLAYED,
            match_seats.c.status != "ok",
        )
        .order_by(match_seats.c.match_id.desc())
        .limit(limit)
    ).all()


def setup_outputs(connection: Connection, version_ids: Iterable[int]) -> Sequence[Any]:
    """What these versions' setup scripts printed, newest qualification first."""
    return connection.execute(
        select(qualifications.c.version_id, qualifications.c.setup_output)
        .where(qualifications.c.version_id.in_(list(version_ids)), qualifications.c.setup_output.is_not(None))
        .order_by(qualifications.c.id.desc())
    ).all()


def latest_logs(connection: Connection, version_ids: Iterable[int], limit: int) -> Sequence[Any]:
    """These versions' latest ``limit`` seats in played matches whose log tail is not empty, newest match first."""
    return connection.execute(
        select(match_seats)
        .join(matches, matches.c.id == match_seats.c.match_id)
        .where(
            match_seats.c.version_id.in_(list(version_ids)),
            matches.c.state == MatchState.PLAYED,
            func.length(match_seats.c.log_tail) > 0,
        )
        .order_by(match_seats.c.match_id.desc(), match_seats.c.seat)
        .limit(limit)
    ).all()


def played_matches(
    connection: Connection,
    version_ids: Iterable[int] | None,
    limit: int,
    before: int | None,
    also_ids: Iterable[int] | None = None,
) -> Sequence[Any]:
    """Played matches, newest first: only those of ``version_ids`` if given (and of ``also_ids`` too, if
    given: an opponent's), ids below ``before``."""
    query = select(matches.c.id, matches.c.played_at, matches.c.seed, matches.c.result).where(
        matches.c.state == MatchState.PLAYED
    )
    for among in (version_ids, also_ids):
        if among is not None:
            query = query.where(
                matches.c.id.in_(select(match_seats.c.match_id).where(match_seats.c.version_id.in_(list(among))))
            )
    if before is not None:
        query = query.where(matches.c.id < before)
    return connection.execute(query.order_by(matches.c.id.desc()).limit(limit)).all()


def seats_of(connection: Connection, match_ids: Iterable[int]) -> Sequence[Any]:
    """The seats of these matches, each with its version's number and name, by match and seat."""
    return connection.execute(
        select(match_seats, versions.c.number, names.c.name)
        .join(versions, versions.c.id == match_seats.c.version_id)
        .join(names, names.c.id == versions.c.name_id)
        .where(match_seats.c.match_id.in_(list(match_ids)))
        .order_by(match_seats.c.match_id, match_seats.c.seat)
    ).all()


def played_match(connection: Connection, match_id: int) -> Any:
    """A played match's row, or None."""
    return connection.execute(
        select(matches).where(and_(matches.c.id == match_id, matches.c.state == MatchState.PLAYED))
    ).first()


def played_final_match(connection: Connection, final_id: int, number: int) -> Any:
    """Match ``number`` of final ``final_id`` (numbered from 0 in schedule order), if played; or None."""
    return connection.execute(
        select(final_matches).where(
            final_matches.c.final_id == final_id,
            final_matches.c.number == number,
            final_matches.c.state == MatchState.PLAYED,
        )
    ).first()


def latest_final(connection: Connection) -> Any:
    """The latest final's row (open or done), or None: the ladder has had none."""
    return connection.execute(select(finals).order_by(finals.c.id.desc())).first()


def final_field(connection: Connection, version_ids: Iterable[int]) -> Sequence[Any]:
    """A final's frozen field, by name: each version's id, name, number, and whether its name is retired."""
    return connection.execute(
        select(versions.c.id, names.c.name, names.c.retired, versions.c.number)
        .join(names, names.c.id == versions.c.name_id)
        .where(versions.c.id.in_(list(version_ids)))
        .order_by(names.c.name)
    ).all()


def final_matches_of(connection: Connection, final_id: int) -> Sequence[Any]:
    """Every stored match of final ``final_id``, played or not, in schedule order (every column)."""
    query = select(final_matches).where(final_matches.c.final_id == final_id)
    return connection.execute(query.order_by(final_matches.c.number)).all()


def final_match(connection: Connection, final_id: int, number: int) -> Any:
    """Match ``number`` of final ``final_id``, played or not; or None."""
    return connection.execute(
        select(final_matches).where(final_matches.c.final_id == final_id, final_matches.c.number == number)
    ).first()


def version_refs(connection: Connection, version_ids: Iterable[int]) -> dict[int, tuple[str, int]]:
    """Each version's (name, number)."""
    query = select(versions.c.id, names.c.name, versions.c.number).join(names, names.c.id == versions.c.name_id)
    return {
        row.id: (row.name, row.number) for row in connection.execute(query.where(versions.c.id.in_(list(version_ids))))
    }


def queued(connection: Connection) -> Sequence[Any]:
    """The versions qualifying or rejected, oldest first, each with its name (and whether it is retired)
    and its setup's output."""
    return connection.execute(
        select(*SUMMARY, names.c.name, names.c.retired, qualifications.c.setup_output)
        .join(names, names.c.id == versions.c.name_id)
        .outerjoin(qualifications, qualifications.c.version_id == versions.c.id)
        .where(versions.c.state.in_([VersionState.QUALIFYING, VersionState.REJECTED]))
        .order_by(versions.c.id)
    ).all()


def version_id(connection: Connection, name: str, number: int) -> int | None:
    """The id of version ``number`` of ``name``, or None."""
    return connection.execute(
        select(versions.c.id)
        .join(names, names.c.id == versions.c.name_id)
        .where(and_(names.c.name == name, versions.c.number == number))
    ).scalar()


# ---------------------------------------------------------------------------------------------
# Teams and their scrimmages (``policybox.league.views.team_page``)


def teams_of_names(connection: Connection) -> dict[str, str]:
    """Each name a team owns, with its team (the organiser's names are in none)."""
    query = select(names.c.name, teams.c.name.label("team")).join(owners, owners.c.name_id == names.c.id)
    return {row.name: row.team for row in connection.execute(query.join(teams, teams.c.id == owners.c.team_id))}


def team_id(connection: Connection, team: str) -> int | None:
    return connection.execute(select(teams.c.id).where(teams.c.name == team)).scalar()


def team_names(connection: Connection, team_id: int) -> Sequence[Any]:
    """The names ``team_id`` owns, in the order they first arrived: id, name, retired."""
    return connection.execute(
        select(names.c.id, names.c.name, names.c.retired)
        .join(owners, owners.c.name_id == names.c.id)
        .where(owners.c.team_id == team_id)
        .order_by(names.c.id)
    ).all()


def team_scrimmages(connection: Connection, team_id: int, limit: int) -> Sequence[Any]:
    """The latest scrimmages ``team_id`` asked for, newest first (every column)."""
    query = select(scrimmages).where(scrimmages.c.team_id == team_id)
    return connection.execute(query.order_by(scrimmages.c.id.desc()).limit(limit)).all()


def scrimmage(connection: Connection, scrimmage_id: int) -> Any:
    """A scrimmage's row with the team that asked for it, or None."""
    return connection.execute(
        select(scrimmages, teams.c.name.label("team"))
        .join(teams, teams.c.id == scrimmages.c.team_id)
        .where(scrimmages.c.id == scrimmage_id)
    ).first()


def beat(connection: Connection) -> str | None:
    """The run's latest heartbeat as stored (``heartbeat.read`` parses it), or None: no run has beaten."""
    found: str | None = connection.execute(select(meta.c.value).where(meta.c.key == heartbeat.BEAT_KEY)).scalar()
    return found


# ---------------------------------------------------------------------------------------------
# What the views read that the stores read too (the run loop, submissions, tokens): the stores'
# queries, reached from here, so that a view reads only through this module


def current_versions(connection: Connection) -> dict[str, Any]:
    """Each name's playing version -- its latest qualified one -- by name (``version_store.current_versions``)."""
    return version_store.current_versions(connection)


def latest_version(connection: Connection, name: str) -> version_store.Version | None:
    """A name's newest version, whatever its state; None: no such name."""
    return version_store.latest_version(connection, name)


def name_row(connection: Connection, name: str) -> Any:
    """A name's row (its id, and whether it is retired), or None."""
    return version_store.name_row(connection, name)


def token_rows(connection: Connection) -> Sequence[Any]:
    """Every token (never its digest), by team (``team_store.token_rows``)."""
    return team_store.token_rows(connection)


def submissions_since(connection: Connection, team_id: int, since: str) -> list[str]:
    """When each version of a name ``team_id`` owns was submitted, at ``since`` (ISO UTC) or after, oldest first."""
    return team_store.submissions_since(connection, team_id, since)


def scrimmages_since(connection: Connection, team_id: int, since: str) -> list[str]:
    """When each scrimmage ``team_id`` asked for at ``since`` (ISO UTC) or after was asked for, oldest first."""
    return scrimmage_store.scrimmages_since(connection, team_id, since)
