"""The results journal: ``results.jsonl``, one finished episode per line, that survives any crash.

Each record is written as one line on a file opened for appending, then fsync'd before the next
episode is counted as done. A run killed mid-write leaves at most a torn last line: on opening,
everything after the last complete, valid line is cut off, so that episode is simply played again.
A line a full disk refused is taken back at once (``StorageFull`` is raised), so every line in the
file stays whole. An episode already in the journal is never written twice.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

from pydantic import ValidationError

from policybox.results import EpisodeRecord
from policybox.storage import write_all, writing

RESULTS = "results.jsonl"


def read_records(path: Path) -> tuple[dict[int, EpisodeRecord], int]:
    """The finished episodes in a journal (the first record of each), and how many bytes of it are
    whole, valid lines: a torn or unreadable tail is left out."""
    records: dict[int, EpisodeRecord] = {}
    good = 0
    data = path.read_bytes() if path.exists() else b""
    for line in data.splitlines(keepends=True):
        if not line.endswith(b"\n"):
            break  # torn: the write that would have ended it never finished
        try:
            record = EpisodeRecord.model_validate_json(line)
        except ValidationError:
            break
        records.setdefault(record.episode, record)
        good += len(line)
    return records, good


class ResultsJournal:
    """Append-only, crash-safe record of an evaluation's finished episodes."""

    def __init__(self, folder: Path) -> None:
        self.path = folder / RESULTS
        self.records, good = read_records(self.path)
        with writing(self.path):  # unbuffered: a failed write leaves nothing behind to flush at close
            self._file = open(self.path, "ab", buffering=0)  # noqa: SIM115 - held open for the evaluation's life
        if self._file.tell() > good:  # cut the torn tail, so the next append starts on a clean line
            self._file.truncate(good)
            os.fsync(self._file.fileno())

    def append(self, record: EpisodeRecord) -> bool:
        """Write one finished episode durably; False (and nothing written) if it is already there.
        StorageFull on a full disk, with the file as it was."""
        if record.episode in self.records:
            return False
        end = self._file.tell()
        try:
            with writing(self.path):
                write_all(self._file.fileno(), record.model_dump_json().encode() + b"\n")
                os.fsync(self._file.fileno())
        except BaseException:
            with contextlib.suppress(OSError):  # if even this fails, opening the journal cuts the torn line
                self._file.truncate(end)
            raise
        self.records[record.episode] = record
        return True

    def close(self) -> None:
        self._file.close()

    def __enter__(self) -> ResultsJournal:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
