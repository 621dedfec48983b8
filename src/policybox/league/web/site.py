"""What the web app holds for its life: the ladder, opened twice -- read-only for every page and
token lookup, writable only to store a submission -- and the cap on an upload's size."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from policybox.league.ladder import Ladder
from policybox.league.web import UPLOAD_CAP


@dataclass
class Site:
    reader: Ladder
    writer: Ladder
    upload_cap: int = UPLOAD_CAP

    @classmethod
    def open(cls, folder: str | Path, upload_cap: int = UPLOAD_CAP) -> Site:
        """The ladder in ``folder``. The writer opens first: it brings an older schema up to date, which
        a read-only engine cannot. (A SQLite reader opens the file read-only: no page can write, and
        in WAL mode no reader waits for ``ladder run``, nor it for them.)"""
        writer = Ladder.open(folder)
        try:
            return cls(Ladder.open(folder, read_only=True), writer, upload_cap)
        except BaseException:
            writer.close()
            raise

    def close(self) -> None:
        self.reader.close()
        self.writer.close()
