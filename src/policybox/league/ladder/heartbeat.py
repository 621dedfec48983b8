"""The ladder's heartbeat: what ``ladder run`` tells everyone else of itself, and how they read it.

A run writes a heartbeat (``Beat``) to the database (``write_beat``: its row of ``meta``, this module's alone, so every
reader -- ``ladder status``, the web page, on this machine or another -- reads it where it reads the
rest): its process, when it started, its last beat (every ``BEAT_S`` while it lives, and whenever a
match is stored or what it plays changes), whether it is **playing** (episodes or setups under way)
or **idle** (nothing to play: what it waits for), the rate it plays at (episodes finished per minute
of playing, over the last ``RATE_WINDOW_S`` of it: time spent idle does not count, so a run that
waited an hour for a submission is not measured as slow), and the matches in flight with their seats.
A run that stops -- its ``--matches`` done, Ctrl-C, SIGTERM, an error it reports -- writes that it
**stopped**, and when. A run that is killed (kill -9, a machine lost) writes nothing more: a reader
calls it stopped since its last beat once that beat is older than ``STALE_S``.

``ladder final`` beats too, from a thread of its own (``beating_alone``: its loop has no turns to beat
at), saying how far the final is, so that a board read while it plays does not say "stopped".
"""

from __future__ import annotations

import contextlib
import os
import socket
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from datetime import datetime
from typing import Literal

from pydantic import BaseModel, Field, ValidationError
from sqlalchemy import Connection, Engine
from sqlalchemy.exc import SQLAlchemyError

from policybox.errors import PolicyboxError
from policybox.league.ladder import schema
from policybox.league.ladder.database import transaction
from policybox.league.ladder.schema import meta, storable

BEAT_S = 5.0  # a live run beats at least this often
CHANGE_S = 1.0  # and at most this often for a change in what it plays (a stored match: at once)
STALE_S = 3 * BEAT_S + 15  # a beat older than this is a dead run's: three beats missed, and slack for a busy machine
RATE_WINDOW_S = 600.0  # the rate is measured over this much of the latest playing time
RATE_AFTER_S = 10.0  # and only once the run has played this long, an episode finished

State = Literal["playing", "idle", "stopped"]
BEAT_KEY = "heartbeat"  # its row of meta: the latest beat, as JSON


class InFlight(BaseModel):
    """A match being played: its id and the version in each seat (by id, as the database holds them)."""

    match: int
    seats: list[int]


class Beat(BaseModel):
    """One heartbeat of a run, as stored."""

    pid: int
    host: str
    command: str = Field(description="What runs: ladder run")
    started_at: str
    beat_at: str
    state: State
    since: str = Field(description="When it began to be in this state")
    note: str = Field(default="", description="What it waits for, if anything")
    rate: float | None = Field(default=None, description="Episodes finished per minute of playing; None: not yet")
    matches: list[InFlight] = Field(default_factory=list)
    qualifying: list[int] = Field(default_factory=list, description="The versions whose qualification is under way")


def read(raw: str | None) -> Beat | None:
    """The beat stored (``reads.beat``), or None: no run has beaten yet (or an older policybox's)."""
    if raw is None:
        return None
    try:
        return Beat.model_validate_json(raw)
    except ValidationError:
        return None


def stopped_at(beat: Beat, now: datetime) -> str | None:
    """When the run stopped: as it said, or at its last beat once that is older than ``STALE_S``
    (it was killed); None while it lives."""
    if beat.state == "stopped":
        return beat.since
    if (now - datetime.fromisoformat(beat.beat_at)).total_seconds() > STALE_S:
        return beat.beat_at
    return None


class Heart:
    """A run's heartbeat: ``beat`` at every turn of its loop writes when one is due."""

    def __init__(self, engine: Engine, command: str) -> None:
        self.engine = engine
        self.pid, self.host, self.command, self.started_at = os.getpid(), socket.gethostname(), command, schema.now()
        self.written = 0.0  # time.monotonic() of the last beat written
        self.shown: tuple[object, ...] = ()  # what it said then, but for the time
        self.since = schema.now()
        self.busy = 0.0  # seconds spent playing
        self.ticked = time.monotonic()
        self.playing = False
        self.finish_times: deque[float] = deque()  # the busy clock when each episode finished

    def finished(self, episodes: int) -> None:
        """``episodes`` episodes (matches or validation episodes) just finished."""
        self._tick(self.playing)
        self.finish_times.extend([self.busy] * episodes)

    def rate(self) -> float | None:
        """Episodes finished per minute of playing, over the last ``RATE_WINDOW_S`` of it (0: none finished
        in that long); None until it has played ``RATE_AFTER_S`` and finished one."""
        while self.finish_times and self.finish_times[0] < self.busy - RATE_WINDOW_S:
            self.finish_times.popleft()
        if self.busy < RATE_AFTER_S or (not self.finish_times and self.busy < RATE_WINDOW_S):
            return None  # too soon to tell
        return len(self.finish_times) * 60 / min(self.busy, RATE_WINDOW_S)

    def beat(
        self, state: State, note: str, matches: list[InFlight], qualifying: list[int], force: bool = False
    ) -> None:
        """Write a beat if one is due: ``force`` (a match was stored), ``BEAT_S`` since the last, or
        ``CHANGE_S`` since the last when what it says changed (a run of quick qualifications writes
        what they are once a second, not at each)."""
        self._tick(state == "playing")
        said = (state, note, matches, qualifying)
        since_written = time.monotonic() - self.written
        if not force and since_written < (BEAT_S if said == self.shown else CHANGE_S):
            return
        if not self.shown or state != self.shown[0]:
            self.since = schema.now()
        self._write(self._beat(state, self.since, note, matches, qualifying))
        self.shown, self.written = said, time.monotonic()

    def stop(self) -> None:
        """Write that the run stopped, now."""
        self._tick(False)
        self._write(self._beat("stopped", schema.now()))

    def _beat(
        self,
        state: State,
        since: str,
        note: str = "",
        matches: list[InFlight] | None = None,
        qualifying: list[int] | None = None,
    ) -> Beat:
        return Beat(
            pid=self.pid,
            host=self.host,
            command=self.command,
            started_at=self.started_at,
            beat_at=schema.now(),
            state=state,
            since=since,
            note=note,
            rate=self.rate(),
            matches=matches or [],
            qualifying=qualifying or [],
        )

    def _tick(self, playing: bool) -> None:
        now = time.monotonic()
        if self.playing:
            self.busy += now - self.ticked
        self.ticked, self.playing = now, playing

    def _write(self, beat: Beat) -> None:
        with transaction(self.engine) as connection:
            write_beat(connection, beat.model_dump_json())


def write_beat(connection: Connection, beat: str) -> None:
    """Store the run's latest beat, in place of the one before."""
    beat = storable(beat)  # its note may quote a worker's error
    updated = connection.execute(meta.update().where(meta.c.key == BEAT_KEY).values(value=beat))
    if not updated.rowcount:
        connection.execute(meta.insert().values(key=BEAT_KEY, value=beat))


@contextlib.contextmanager
def beating(engine: Engine, command: str) -> Iterator[Heart]:
    """A run's heart, from its start (idle, starting) to its stop, which it writes however the run ends
    but killed -- unless the database cannot be written then (what stopped the run, maybe): its last
    beat goes stale instead, and readers call it stopped all the same."""
    heart = Heart(engine, command)
    heart.beat("idle", "starting", [], [])
    try:
        yield heart
    finally:
        with contextlib.suppress(PolicyboxError, SQLAlchemyError):
            heart.stop()


@contextlib.contextmanager
def beating_alone(engine: Engine, command: str, note: Callable[[], str]) -> Iterator[None]:
    """A heart for a command whose loop has no turns of its own to beat at (``ladder final``): a thread
    writes "playing", saying ``note()``, every ``BEAT_S`` until the command ends, then that it stopped."""
    done = threading.Event()
    with beating(engine, command) as heart:

        def beat() -> None:
            while True:
                with contextlib.suppress(PolicyboxError, SQLAlchemyError):  # the next beat may get through
                    heart.beat("playing", note(), [], [], force=True)
                if done.wait(BEAT_S):
                    return

        thread = threading.Thread(target=beat, name="heartbeat", daemon=True)
        thread.start()
        try:
            yield
        finally:
            done.set()
            thread.join()
