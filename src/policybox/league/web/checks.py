"""What uploads may cost the machine that serves the ladder's web page, and where their work runs.

An upload is saved, unpacked, built in a cell (``policybox.league.ladder.build_check``), hashed and
copied into the ladder: seconds of work, a minute when a build takes its whole start-up deadline. It
all runs off the event loop, in a pool of ``MAX_CHECKS`` threads of its own -- not anyio's threads,
which every page view's database read shares -- so that however long the builds take, pages are
answered. At most ``MAX_CHECKS`` uploads are processed at once, in all: one past them is answered
at once, 503 with Retry-After (``ChecksBusy``), rather than queued. A queued upload would hold its
connection and its spooled body for as long as the builds before it take, past a proxy's or a
browser's patience, with nothing to say how long; a 503 says when to send it again.

A team has one upload processed at a time (another meanwhile: 429), and its uploads that cannot be
built count as its submissions do: ``submissions_per_hour`` refused in any hour, and its next upload
waits (429, Retry-After). A stored submission is counted by the ladder (``Ladder.submit``); a refused
one is never stored, so it is counted here, in the server's memory: a restart of ``ladder serve``
clears that count.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import threading
import time
from collections import defaultdict, deque
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TypeVar

from policybox.errors import PolicyboxError
from policybox.league.ladder.folder import HOUR, TeamLimit
from policybox.startup import PolicyRefused

MAX_CHECKS = 2  # uploads processed at once: each build check is a cell, each unpacking a disk's worth of writes
CHECK_BUSY_RETRY_S = 5  # Retry-After for a team whose previous upload is still being checked
CHECKS_BUSY_RETRY_S = 10  # Retry-After when MAX_CHECKS uploads are being processed

T = TypeVar("T")


class ChecksBusy(PolicyboxError):
    """``MAX_CHECKS`` uploads are being processed: this one is not taken now (HTTP 503)."""

    def __init__(self, message: str, retry_after_s: int) -> None:
        super().__init__(message)
        self.retry_after_s = retry_after_s


class BuildChecks:
    """The uploads being processed, as the module says: each team's one at a time, at most
    ``at_once`` in all, in a pool of as many threads; at most ``per_hour`` refused builds a team."""

    def __init__(self, at_once: int = MAX_CHECKS) -> None:
        self._at_once = at_once
        self._pool = ThreadPoolExecutor(at_once, thread_name_prefix="policybox-upload")
        self._lock = threading.Lock()
        self._running: set[str] = set()
        self._refused: defaultdict[str, deque[float]] = defaultdict(deque)  # monotonic times

    async def run(self, team: str, work: Callable[[], T]) -> T:
        """``work`` (an upload's processing) in the pool, as ``team``'s turn; ``TeamLimit`` (429) or
        ``ChecksBusy`` (503) when it may not run now. The turn ends when ``work`` does, not when the
        request does: an upload whose client left is still counted while it runs."""
        with self._lock:
            if team in self._running:
                raise TeamLimit(
                    f"team {team}'s previous upload is still being checked: send the next once it is answered",
                    CHECK_BUSY_RETRY_S,
                )
            if len(self._running) >= self._at_once:
                raise ChecksBusy(
                    f"the ladder is checking {len(self._running)} other uploads, as many as it takes at once: "
                    f"send this one again in {CHECKS_BUSY_RETRY_S} s",
                    CHECKS_BUSY_RETRY_S,
                )
            self._running.add(team)
        try:
            future: Future[T] = self._pool.submit(work)
        except BaseException:
            self._leave(team)
            raise
        future.add_done_callback(lambda _: self._leave(team))
        return await asyncio.wrap_future(future)

    @contextlib.contextmanager
    def building(self, team: str, per_hour: int) -> Iterator[None]:
        """Inside ``work``: let ``team``'s upload be built (``TeamLimit`` past its refused builds); a
        build refused inside counts against the team."""
        with self._lock:
            refused, now = self._refused[team], time.monotonic()
            while refused and refused[0] <= now - HOUR.total_seconds():
                refused.popleft()
            if len(refused) >= per_hour:
                wait_s = max(1, math.ceil(refused[-per_hour] + HOUR.total_seconds() - now))
                raise TeamLimit(
                    f"team {team} has sent {len(refused)} uploads in the last hour that could not be built, the "
                    f"ladder's limit (submissions_per_hour {per_hour}): the next is checked in {wait_s} s",
                    wait_s,
                )
        try:
            yield
        except PolicyRefused:
            with self._lock:
                self._refused[team].append(time.monotonic())
            raise

    def close(self) -> None:
        """Stop taking uploads; those being processed finish in their threads."""
        self._pool.shutdown(wait=False, cancel_futures=True)

    def _leave(self, team: str) -> None:
        with self._lock:
            self._running.discard(team)
