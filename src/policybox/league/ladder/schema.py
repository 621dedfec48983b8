"""A ladder's database's schema: its tables, one SQLAlchemy Core schema for SQLite and PostgreSQL,
the states stored in them (``MatchState``, ``FinalStage``) and the column types that make a policy's
text storable. How a database reaches this schema is ``migrations``; opening one and its transactions,
``database``.

**Who writes what.** Each table has one module that writes it (and holds the reads the run loop,
submissions and tokens make of it): ``names``, ``versions`` and ``qualifications``
``version_store``; ``matches``, ``match_seats``, ``seat_counts`` and ``ratings`` ``match_store``;
``teams``, ``tokens``, ``token_uses``, ``sessions`` and ``owners`` ``team_store``; ``scrimmages``
``scrimmage_store``; ``finals`` and ``final_matches`` ``final_store``; ``meta`` ``migrations`` (its
schema version, the ladder's id and settings) but for the run's heartbeat (``heartbeat``).
``migrations`` also makes every table, and once brought old rows up to date (schema version 4). What
the views read is ``reads``.

**Text a policy controls** -- its exception messages, tracebacks, log tails, setup output, the
rejection and suspension reasons quoting them, results, specs -- goes through ``PolicyText`` and
``PolicyJSON`` columns, which make every string storable on both databases (``storable``).
"""

from __future__ import annotations

from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

from sqlalchemy import (
    JSON,
    Boolean,
    Column,
    Float,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    TypeDecorator,
    UniqueConstraint,
)

MAX_TEXT = 1 << 20  # characters of one stored string: what policybox writes is far shorter; a policy's is cut


class MatchState(StrEnum):
    """A match's state: a rated one's (``matches.state``), a final's (``final_matches.state``) or a
    scrimmage's (``scrimmages.state``)."""

    SCHEDULED = "scheduled"  # stored with its seed and seats, not played yet: a killed run plays it again
    PLAYED = "played"
    VOID = "void"  # the machinery failed it every time: it counts for nobody


class FinalStage(StrEnum):
    """A final's life (``finals.state``): ``ladder run`` waits while one is open."""

    OPEN = "open"  # being played, or stopped before its end: ``ladder final`` continues it
    DONE = "done"


def now() -> str:
    """The time now as every table stores it: ISO UTC, to the second."""
    return datetime.now(UTC).isoformat(timespec="seconds")


def storable(text: str, limit: int = MAX_TEXT) -> str:
    """``text`` as every database can store it: a NUL (which PostgreSQL's text cannot hold) becomes the
    visible escape ``\\x00``, a lone surrogate (which no UTF-8 encoder writes) its escape ``\\udcff``,
    and text past ``limit`` characters is cut, saying so. Any other text is stored exactly."""
    text = text.replace("\x00", "\\x00").encode("utf-8", "backslashreplace").decode("utf-8")
    return text if len(text) <= limit else text[: limit - len(_CUT)] + _CUT


_CUT = " [cut: too long to store]"


def _storable_json(value: Any) -> Any:
    if isinstance(value, str):
        return storable(value)
    if isinstance(value, dict):
        return {storable(str(key)): _storable_json(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_storable_json(item) for item in value]
    return value


class PolicyText(TypeDecorator[str]):
    """A text column that may hold what a policy controls: each value made ``storable`` on its way in
    (its length kept within the column's, when it has one)."""

    impl = Text
    cache_ok = True

    def __init__(self, length: int | None = None) -> None:
        super().__init__()
        self.length = length
        self.impl = String(length) if length else Text()  # type: ignore[assignment]  # the stub types impl as the class, Text; SQLAlchemy takes an instance of any String

    def process_bind_param(self, value: str | None, dialect: Any) -> str | None:
        return None if value is None else storable(value, self.length or MAX_TEXT)


class PolicyJSON(TypeDecorator[Any]):
    """A JSON column that may hold what a policy controls: every string in it (keys too) ``storable``."""

    impl = JSON
    cache_ok = True

    def process_bind_param(self, value: Any, dialect: Any) -> Any:
        return _storable_json(value)


metadata = MetaData()

meta = Table("meta", metadata, Column("key", String(64), primary_key=True), Column("value", Text, nullable=False))

names = Table(
    "names",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("name", String(40), nullable=False, unique=True),
    Column("retired", Boolean, nullable=False, default=False),
    Column("created_at", String(32), nullable=False),
)

versions = Table(
    "versions",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("name_id", ForeignKey("names.id"), nullable=False),
    Column("number", Integer, nullable=False),
    Column("digest", String(64), nullable=False),  # of what was submitted (policybox.files.version_files)
    # Of what it plays with, once qualified: its files, its setup script's output, its environment's lock.
    Column("played_digest", String(64)),
    Column("spec", PolicyJSON, nullable=False),  # its PolicySpec, env values masked (cells get versions/specs/ID.json)
    Column("source", PolicyText, nullable=False),  # what was submitted, as given (env values masked)
    Column("state", String(16), nullable=False),  # policybox.league.ladder.life.VersionState
    Column("reason", PolicyText),  # why it is rejected or suspended
    Column("submitted_at", String(32), nullable=False),
    Column("qualified_at", String(32)),
    Column("activated_after", Integer),  # the last match stored before it became active (rerate replays it there)
    Column("mu", Float),
    Column("sigma", Float),
    Column("matches", Integer, nullable=False, default=0),
    Column("last_match", Integer),  # the id of the last match it played
    Column("failing_streak", Integer, nullable=False, default=0),  # consecutive matches with a terminal failure
    Column("void_streak", Integer, nullable=False, default=0),  # consecutive matches of it that were void
    Column("forfeits", Integer, nullable=False, default=0),
    Column("score_sum", Float, nullable=False, default=0.0),  # of its episode scores: the reward's moments
    Column("score_squares", Float, nullable=False, default=0.0),
    Column("statuses", JSON, nullable=False, default=dict),  # its agent results per status
    Column("timeouts", Integer, nullable=False, default=0),
    Column("invalid_actions", Integer, nullable=False, default=0),
    UniqueConstraint("name_id", "number"),
)

qualifications = Table(
    "qualifications",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("version_id", ForeignKey("versions.id"), nullable=False),
    Column("outcome", String(16), nullable=False),  # qualified | rejected
    Column("reason", PolicyText),
    Column("setup_output", PolicyText),
    Column("result", PolicyJSON),  # its validation episode's EpisodeResult, if it got that far
    Column("finished_at", String(32), nullable=False),
)

matches = Table(
    "matches",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("seed", Integer, nullable=False),
    Column("state", String(16), nullable=False),  # MatchState
    Column("scheduled_at", String(32), nullable=False),
    Column("played_at", String(32)),
    Column("reason", PolicyText),  # why a match is void (the machinery failed it every time)
    Column("result", PolicyJSON),  # its EpisodeResult (secrets masked)
    Column("stamp", JSON),  # what it was played with (policybox.league.ladder.stamp); None before schema version 5
)

match_seats = Table(
    "match_seats",
    metadata,
    Column("match_id", ForeignKey("matches.id"), primary_key=True),
    Column("seat", Integer, primary_key=True),
    Column("version_id", ForeignKey("versions.id"), nullable=False),
    Column("reward", Float),
    Column("status", String(16)),
    Column("failure_kind", PolicyText(200)),
    Column("failure_step", Integer),
    Column("failure_message", PolicyText),
    Column("log_tail", PolicyText),  # the team's own: never shown to another
    Column("timeouts", Integer),
    Column("invalid_actions", Integer),
    Column("p50_ms", Float),
    Column("p99_ms", Float),
)

ratings = Table(
    "ratings",
    metadata,
    Column("match_id", ForeignKey("matches.id"), primary_key=True),
    Column("version_id", ForeignKey("versions.id"), primary_key=True),
    Column("mu", Float, nullable=False),
    Column("sigma", Float, nullable=False),
    Column("score", Float, nullable=False),  # its episode score in that match
    Column("forfeited", Boolean, nullable=False),
)

seat_counts = Table(
    "seat_counts",
    metadata,
    Column("version_id", ForeignKey("versions.id"), primary_key=True),
    Column("seat", Integer, primary_key=True),
    Column("plays", Integer, nullable=False),
)

Index("match_seats_by_version", match_seats.c.version_id, match_seats.c.match_id)
Index("matches_by_state", matches.c.state, matches.c.id)
Index("ratings_by_version", ratings.c.version_id, ratings.c.match_id)
V1_TABLES = [meta, names, versions, qualifications, matches, match_seats, ratings, seat_counts]

# Schema version 2: teams, which submit over the web page with a token, and own the names they submit.
teams = Table(
    "teams",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("name", String(40), nullable=False, unique=True),
    Column("created_at", String(32), nullable=False),
)

tokens = Table(
    "tokens",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("team_id", ForeignKey("teams.id"), nullable=False),
    Column("digest", String(64), nullable=False, unique=True),  # sha256 of the token: the token itself is never kept
    Column("created_at", String(32), nullable=False),
)

owners = Table(
    "owners",
    metadata,
    Column("name_id", ForeignKey("names.id"), primary_key=True),
    Column("team_id", ForeignKey("teams.id"), nullable=False),
)
V2_TABLES = [teams, tokens, owners]


# Schema version 3: tokens that can be revoked. A login cookie names a session (made at login, ended
# at logout or when its token is revoked), never the token; ``ladder serve`` notes when each token and
# session was last used. Both tables are the web page's to write; ``tokens`` stays the organiser's.
token_uses = Table(
    "token_uses",
    metadata,
    Column("token_id", ForeignKey("tokens.id"), primary_key=True),
    Column("last_used", String(32), nullable=False),
)

sessions = Table(
    "sessions",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("digest", String(64), nullable=False, unique=True),  # sha256 of the cookie's session id, never the id
    Column("token_id", ForeignKey("tokens.id"), nullable=False),  # the token it logged in with
    Column("created_at", String(32), nullable=False),
    Column("last_seen", String(32), nullable=False),
)
V3_TABLES = [token_uses, sessions]


# Schema version 6: finals (``ladder final``). A final freezes the field -- the playing version of
# every ranked name when it opens -- and plays the balanced schedule over it; its matches are its
# own (never rated, never in ``matches``), each stored before it is played (so a killed final plays
# it again) with its placing once played. While a final is ``open``, ``ladder run`` waits.
finals = Table(
    "finals",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("created_at", String(32), nullable=False),
    Column("state", String(16), nullable=False),  # FinalStage
    Column("version_ids", JSON, nullable=False),  # the frozen field
    Column("rounds", Integer, nullable=False),  # whole cycles of the balanced schedule (seating.cycle)
    Column("seed", Integer, nullable=False),
)

final_matches = Table(
    "final_matches",
    metadata,
    Column("final_id", ForeignKey("finals.id"), primary_key=True),
    Column("number", Integer, primary_key=True),  # its place in the final's schedule, then the separating matches
    Column("seed", Integer, nullable=False),
    Column("seats", JSON, nullable=False),  # the version id in each seat
    Column("state", String(16), nullable=False),  # MatchState
    Column("reason", PolicyText),  # why it is void
    Column("placing", JSON),  # groups of names, best first (a group: a shared place)
    Column("result", PolicyJSON),  # its EpisodeResult (secrets masked)
    Column("played_at", String(32)),
    Column("stamp", JSON),  # what it was played with (policybox.league.ladder.stamp), as a rated match's
)
FINALS_TABLES = [finals, final_matches]

# Schema version 8: scrimmages. A team asks for unrated matches of one of its names against a name it
# chooses (``policybox.league.ladder.scrimmage``); each is stored when asked for, with its seed and
# seats (so a killed run plays it again), then played by ``ladder run`` beside the rated matches. It
# is never rated and never counted on the board: its own table, apart from ``matches``.
scrimmages = Table(
    "scrimmages",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("team_id", ForeignKey("teams.id"), nullable=False),  # who asked (its hourly cap counts these)
    Column("version_id", ForeignKey("versions.id"), nullable=False),  # the asking team's version
    Column("opponent_id", ForeignKey("versions.id"), nullable=False),  # the version it chose to meet
    Column("requested_at", String(32), nullable=False),
    Column("seed", Integer, nullable=False),
    Column("seats", JSON, nullable=False),  # the version id in each seat
    Column("state", String(16), nullable=False),  # MatchState
    Column("reason", PolicyText),  # why it is void
    Column("result", PolicyJSON),  # its EpisodeResult (secrets masked)
    Column("played_at", String(32)),
)
Index("scrimmages_by_team", scrimmages.c.team_id, scrimmages.c.requested_at)
Index("scrimmages_by_state", scrimmages.c.state, scrimmages.c.id)
