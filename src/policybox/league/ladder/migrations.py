"""A ladder's database's schema version: the migrations that bring a database to it, and making or
opening a ladder's schema (``create``, ``open_schema``).

**Versions.** The schema's version is a row of ``meta``. Opening a database applies the migrations it
lacks, in one transaction, so a database of an older policybox is brought up to date, never misread;
one from a newer policybox is refused, naming both versions. A migration is a plain function here
rather than an Alembic script: the schema is small and made by code, a ladder's database is embedded
in its folder, and a list of functions keyed by version is what Alembic's runtime would reduce to,
without its ini file, environment script and revision files to ship and keep apart from the code.

**Whose database.** ``meta`` also holds the ladder's id; a folder's ``ladder.json`` names the id it
expects, so a folder pointed at another ladder's database is refused.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from sqlalchemy import JSON, Connection, Engine, inspect, select

from policybox.league.ladder.database import LadderError, shown, transaction
from policybox.league.ladder.schema import (
    FINALS_TABLES,
    V1_TABLES,
    V2_TABLES,
    V3_TABLES,
    meta,
    metadata,
    scrimmages,
    versions,
)

SCHEMA_VERSION_KEY = "schema_version"
LADDER_ID_KEY = "ladder_id"


def _create_v1(connection: Connection) -> None:
    metadata.create_all(connection, tables=V1_TABLES)


def _add_teams_v2(connection: Connection) -> None:
    metadata.create_all(connection, tables=V2_TABLES)


def _add_sessions_v3(connection: Connection) -> None:
    metadata.create_all(connection, tables=V3_TABLES)


def _supersede_v4(connection: Connection) -> None:
    """Schema version 4: a version replaced by a newer qualified version of its name is ``superseded``
    (before, it stayed ``active`` or ``suspended``, though only the newest played)."""
    later = versions.alias("later")
    newer = (
        select(later.c.id)
        .where(
            later.c.name_id == versions.c.name_id,
            later.c.number > versions.c.number,
            later.c.state.in_(["active", "suspended"]),
        )
        .exists()
    )
    connection.execute(
        versions.update().where(versions.c.state.in_(["active", "suspended"]), newer).values(state="superseded")
    )


def _add_stamp_v5(connection: Connection) -> None:
    """Schema version 5: each match's ``stamp``. A database made since has it from ``_create_v1``
    (which makes ``matches`` as it is now); an older one gets the column, its matches none."""
    if "stamp" not in {column["name"] for column in inspect(connection).get_columns("matches")}:
        kind = JSON().compile(dialect=connection.dialect)
        connection.exec_driver_sql(f"ALTER TABLE matches ADD COLUMN stamp {kind}")


def _add_finals_v6(connection: Connection) -> None:
    """Schema version 6: the finals (``ladder final``) and their matches, never rated."""
    metadata.create_all(connection, tables=FINALS_TABLES)


def _add_streaks_v7(connection: Connection) -> None:
    """Schema version 7: each version's ``void_streak`` (a version whose matches keep voiding is
    suspended) and ``played_digest`` (what a stamp compares). A database made since has them from
    ``_create_v1``; an older one gets them, every version's void streak 0 and no played digest (its
    stamps fall back to the submitted digest)."""
    have = {column["name"] for column in inspect(connection).get_columns("versions")}
    if "void_streak" not in have:
        connection.exec_driver_sql("ALTER TABLE versions ADD COLUMN void_streak INTEGER NOT NULL DEFAULT 0")
    if "played_digest" not in have:
        connection.exec_driver_sql("ALTER TABLE versions ADD COLUMN played_digest VARCHAR(64)")


def _add_scrimmages_v8(connection: Connection) -> None:
    """Schema version 8: scrimmages, a team's unrated matches against a name it chooses."""
    metadata.create_all(connection, tables=[scrimmages])


# MIGRATIONS[n] brings a database from schema version n to n + 1. A migration never changes: a new
# schema is a new function appended here (and a test that opens a database of the version before).
MIGRATIONS: list[Callable[[Connection], None]] = [
    _create_v1,
    _add_teams_v2,
    _add_sessions_v3,
    _supersede_v4,
    _add_stamp_v5,
    _add_finals_v6,
    _add_streaks_v7,
    _add_scrimmages_v8,
]
SCHEMA_VERSION = len(MIGRATIONS)


def create(engine: Engine, ladder_id: str, settings: dict[str, Any]) -> None:
    """Make a new ladder's schema in an empty database, with its id and settings."""
    with transaction(engine) as connection:
        if _tables(connection):
            raise LadderError(f"{shown(engine)} is not empty: a new ladder needs an empty database")
        for migrate in MIGRATIONS:
            migrate(connection)
        connection.execute(
            meta.insert(),
            [
                {"key": SCHEMA_VERSION_KEY, "value": str(SCHEMA_VERSION)},
                {"key": LADDER_ID_KEY, "value": ladder_id},
                {"key": "settings", "value": json.dumps(settings)},
            ],
        )


def schema_version(engine: Engine) -> int:
    """The schema version a ladder's database holds (0: no ladder's)."""
    with transaction(engine) as connection:
        if "meta" not in _tables(connection):
            return 0
        found = connection.execute(select(meta.c.value).where(meta.c.key == SCHEMA_VERSION_KEY)).scalar()
        return int(found or 0)


def open_schema(engine: Engine, ladder_id: str) -> dict[str, Any]:
    """Check that the database is this ladder's and bring its schema up to date; the ladder's settings."""
    with transaction(engine) as connection:
        if "meta" not in _tables(connection):
            raise LadderError(f"{shown(engine)} holds no ladder")
        values = dict(connection.execute(select(meta.c.key, meta.c.value)).all())
        if values.get(LADDER_ID_KEY) != ladder_id:
            raise LadderError(f"{shown(engine)} is the database of another ladder (id {values.get(LADDER_ID_KEY)})")
        found = int(values.get(SCHEMA_VERSION_KEY, "0"))
        if found > SCHEMA_VERSION:
            raise LadderError(
                f"{shown(engine)} has schema version {found}, made by a newer policybox; this one knows "
                f"versions up to {SCHEMA_VERSION}: upgrade policybox to use it"
            )
        for migrate in MIGRATIONS[found:]:
            migrate(connection)
        if found < SCHEMA_VERSION:
            connection.execute(meta.update().where(meta.c.key == SCHEMA_VERSION_KEY).values(value=str(SCHEMA_VERSION)))
        settings: dict[str, Any] = json.loads(values["settings"])
        return settings


def _tables(connection: Connection) -> set[str]:
    return set(inspect(connection).get_table_names())
