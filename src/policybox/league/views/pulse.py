"""Whether the ladder is alive, as every view says it: playing, idle or stopped since when (read from
``ladder run``'s heartbeat, ``policybox.league.ladder.heartbeat``), the matches in flight, and when a
queued version will qualify (``Eta``: its place in the queue over the rate the run plays at).

Never the run's pid or host: those are the organiser's (the lock file names them to its commands).
"""

from __future__ import annotations

import math
from datetime import UTC, datetime
from typing import Literal

from pydantic import BaseModel, Field
from sqlalchemy import Connection

from policybox.league.ladder import final, heartbeat, reads

STOPPED_ETA = "no ETA while the ladder is stopped: it qualifies when the ladder runs again"
FINAL_ETA = "no ETA while the final plays: it qualifies when ladder run plays again, after it"


class InFlightMatch(BaseModel):
    match: int
    seats: list[str] = Field(description="The version in each seat, as name vN")


class Pulse(BaseModel):
    """Whether ``ladder run`` is playing the ladder."""

    state: Literal["playing", "idle", "stopped"] = Field(
        description="playing: matches or qualifications under way; idle: running, with nothing to play (note says "
        "what it waits for); stopped: no ladder run is playing it (stopped cleanly, killed, or never started)"
    )
    line: str = Field(description="The state in words, with since when, as the pages say it")
    since: str | None = Field(default=None, description="When it began to be in this state (None: never ran)")
    last_beat: str | None = Field(default=None, description="The run's latest heartbeat")
    note: str = Field(default="", description="What an idle run waits for")
    rate: float | None = Field(
        default=None,
        description="Matches and validation episodes it finishes per minute of playing, over its last 10 minutes "
        "of play; None: not measured yet",
    )
    in_flight: list[InFlightMatch] = Field(default_factory=list)
    qualifying: list[str] = Field(default_factory=list, description="The versions whose qualification is under way")
    final: bool = Field(default=False, description="Whether what plays is a final (ladder final), not ladder run")


def read(connection: Connection) -> Pulse:
    """The ladder's pulse now."""
    now = datetime.now(UTC)
    beat = heartbeat.read(reads.beat(connection))
    if beat is None:
        return Pulse(state="stopped", line="stopped: no ladder run is playing it")
    stopped = heartbeat.stopped_at(beat, now)
    if stopped is not None:
        killed = "" if beat.state == "stopped" else "; it did not say it was stopping: killed, or its machine lost"
        line = f"stopped {ago(stopped, now)} (since {clock(stopped)}{killed})"
        return Pulse(state="stopped", line=line, since=stopped, last_beat=beat.beat_at, rate=beat.rate)
    labels = reads.version_refs(connection, {v for m in beat.matches for v in m.seats} | set(beat.qualifying))
    label = {version_id: f"{name} v{number}" for version_id, (name, number) in labels.items()}
    return Pulse(
        state=beat.state,
        line=_live_line(beat, now),
        since=beat.since,
        last_beat=beat.beat_at,
        note=beat.note,
        rate=beat.rate,
        in_flight=[InFlightMatch(match=m.match, seats=[label.get(v, "?") for v in m.seats]) for m in beat.matches],
        qualifying=[label.get(v, "?") for v in beat.qualifying],
        final=beat.command == final.COMMAND,
    )


def _live_line(beat: heartbeat.Beat, now: datetime) -> str:
    """What a live run does, in words: what it plays and how fast, or for how long it has waited, and why;
    a final, how far it is."""
    if beat.command == final.COMMAND:
        return f"playing the final: {beat.note}"
    if beat.state == "idle":
        return (
            f"idle for {ago(beat.since, now, suffix='')}: {beat.note}"
            if beat.note
            else f"idle since {clock(beat.since)}"
        )
    doing = [f"{_count(len(beat.matches), 'match')} in flight"]
    doing += [f"{len(beat.qualifying)} qualifying"] if beat.qualifying else []
    doing += [f"{beat.rate:.1f} matches a minute"] if beat.rate is not None else []
    return "playing: " + ", ".join(doing)


class Eta(BaseModel):
    """When a queued version qualifies, as the queue and the submit answer say it."""

    place: int = Field(description="Its place among the versions waiting to qualify, from 1 (the next)")
    minutes: float | None = Field(
        default=None, description="About how many minutes until it has qualified (None: no rate to tell it by)"
    )
    line: str


def eta(place: int, now_playing: Pulse, placement: int) -> Eta:
    """When the version at ``place`` in the queue qualifies: the validation episodes of it and of those
    before it (one each), at the rate the run plays -- qualifications go first at every turn -- then its
    ``placement`` placement matches, which it plays before the others pick."""
    if now_playing.state == "stopped" or now_playing.final:
        return Eta(place=place, line=f"place {place} in the queue; {FINAL_ETA if now_playing.final else STOPPED_ETA}")
    placed = f"; then it plays its {_count(placement, 'placement match')} first" if placement else ""
    if not now_playing.rate:
        why = "it has not played long enough to measure its rate"
        why = "no match finished in its last 10 minutes of play" if now_playing.rate == 0 else why
        why = why if now_playing.state == "playing" else f"the ladder is idle ({now_playing.note})"
        return Eta(place=place, line=f"place {place} in the queue; no ETA yet: {why}{placed}")
    minutes = place / now_playing.rate
    ranked = ""
    if placement:
        ranked = f", placed in about {_minutes((place + placement) / now_playing.rate)}"
    return Eta(
        place=place,
        minutes=minutes,
        line=f"place {place} in the queue: qualifies in about {_minutes(minutes)}{ranked} "
        f"(at {now_playing.rate:.1f} matches a minute)",
    )


# ---------------------------------------------------------------------------------------------
# Times as people read them


def clock(iso: str) -> str:
    """``2026-12-06 09:01 UTC``."""
    return datetime.fromisoformat(iso).astimezone(UTC).strftime("%Y-%m-%d %H:%M UTC")


def ago(iso: str, now: datetime, suffix: str = " ago") -> str:
    """How long before ``now``: ``12 seconds ago``, ``12 minutes ago``, ``3 hours ago``, ``2 days ago``."""
    seconds = max(0.0, (now - datetime.fromisoformat(iso)).total_seconds())
    for unit, size in (("day", 86400), ("hour", 3600), ("minute", 60)):
        if seconds >= size:
            return _count(int(seconds // size), unit) + suffix
    return _count(int(seconds), "second") + suffix


def _minutes(minutes: float) -> str:
    if minutes < 1:
        return "a minute"
    if minutes < 90:
        return _count(math.ceil(minutes), "minute")
    return _count(math.ceil(minutes / 60), "hour")


def _count(n: int, thing: str) -> str:
    plural = thing + ("es" if thing.endswith("ch") else "s")
    return f"{n} {thing if n == 1 else plural}"
