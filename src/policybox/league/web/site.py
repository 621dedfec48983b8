"""What the web app holds for its life: the ladder, opened twice -- read-only for every page and
token lookup, writable to store a submission and a login session, and when a token was last used --
the cap on an upload's size, and the uploads being processed, in their own threads (``web.checks``)."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

from sqlalchemy.exc import SQLAlchemyError

from policybox.errors import PolicyboxError
from policybox.league.ladder import team_store
from policybox.league.ladder.database import transaction
from policybox.league.ladder.folder import LadderFolder
from policybox.league.web import UPLOAD_CAP
from policybox.league.web.checks import BuildChecks

USE_NOTED_EVERY_S = 60.0  # a token's last use is written at most once a minute: a page view is a read


@dataclass
class Site:
    reader: LadderFolder
    writer: LadderFolder
    upload_cap: int = UPLOAD_CAP
    _noted: dict[int, float] = field(default_factory=dict)  # token id -> when its use was last written
    build_checks: BuildChecks = field(default_factory=BuildChecks)  # a few at once, each team's one at a time

    @classmethod
    def open(cls, folder: str | Path, upload_cap: int = UPLOAD_CAP) -> Site:
        """The ladder in ``folder``. The writer opens first: it brings an older schema up to date, which
        a read-only engine cannot. (A SQLite reader opens the file read-only: no page can write, and
        in WAL mode no reader waits for ``ladder run``, nor it for them.)"""
        writer = LadderFolder.open(folder)
        try:
            return cls(LadderFolder.open(folder, read_only=True), writer, upload_cap)
        except BaseException:
            writer.close()
            raise

    def note_use(self, token_id: int, session: str | None) -> None:
        """Record that a token (and the session it came in) was used, unless that was written for the
        token in the last minute."""
        when, last = time.monotonic(), self._noted.get(token_id)
        if last is not None and when - last < USE_NOTED_EVERY_S:
            return
        self._noted[token_id] = when
        try:
            with transaction(self.writer.engine) as connection:
                team_store.note_use(connection, token_id, session)
        except (PolicyboxError, SQLAlchemyError):  # not writable now, or the token revoked this moment:
            self._noted.pop(token_id, None)  # a use not noted is no reason to refuse the page

    def close(self) -> None:
        self.build_checks.close()
        self.reader.close()
        self.writer.close()
