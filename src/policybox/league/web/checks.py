"""What a team's uploads may cost the machine that serves the ladder's web page.

Each upload's build check (``policybox.league.ladder.build_check``) starts a cell. So that a team cannot
keep the machine busy with them, a team has one check at a time (another upload meanwhile: 429), and
its uploads that cannot be built count as its submissions do: ``submissions_per_hour`` refused in any
hour, and its next upload waits (429, Retry-After). A stored submission is counted by the ladder
(``Ladder.submit``); a refused one is never stored, so it is counted here, in the server's memory: a
restart of ``ladder serve`` clears that count.
"""

from __future__ import annotations

import contextlib
import math
import threading
import time
from collections import defaultdict, deque
from collections.abc import Iterator

from policybox.episode import PolicyRefused
from policybox.league.ladder.folder import HOUR, TeamLimit

CHECK_BUSY_RETRY_S = 5  # Retry-After for a team whose previous upload is still being checked


class BuildChecks:
    """Each team's build checks, as the module says: one at a time, and at most ``per_hour`` refused
    in any hour. A lock of its own: the checks run in the server's threads."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._running: set[str] = set()
        self._refused: defaultdict[str, deque[float]] = defaultdict(deque)  # monotonic times

    @contextlib.contextmanager
    def turn(self, team: str, per_hour: int) -> Iterator[None]:
        """Let ``team``'s upload be checked (``TeamLimit``, a 429, when it may not be now); a build
        refused inside counts against the team."""
        with self._lock:
            refused, now = self._refused[team], time.monotonic()
            while refused and refused[0] <= now - HOUR.total_seconds():
                refused.popleft()
            if team in self._running:
                raise TeamLimit(
                    f"team {team}'s previous upload is still being checked: send the next once it is answered",
                    CHECK_BUSY_RETRY_S,
                )
            if len(refused) >= per_hour:
                wait_s = max(1, math.ceil(refused[-per_hour] + HOUR.total_seconds() - now))
                raise TeamLimit(
                    f"team {team} has sent {len(refused)} uploads in the last hour that could not be built, the "
                    f"ladder's limit (submissions_per_hour {per_hour}): the next is checked in {wait_s} s",
                    wait_s,
                )
            self._running.add(team)
        try:
            yield
        except PolicyRefused:
            with self._lock:
                self._refused[team].append(time.monotonic())
            raise
        finally:
            with self._lock:
                self._running.discard(team)
