"""What a team takes home from a ladder, for its own seats only: an agent's whole log from a match
(the pages show only its tail), and a version's files as a zip (as the ladder keeps them).

Both are a team's own: asked for by anyone else -- another team, or nobody logged in -- they are
``NotYours`` (the web answers 403), checked before any file is looked at. A match's replay is not
here: it shows every seat's moves as the match page does, to everyone (``/matches/ID/replay``).

The files are an entrant's, so the host reads them as ``policybox.untrusted_files`` reads one:
opened part by part from their folder with ``O_NOFOLLOW``, and only a regular file. Walking a
version's copy, anything that is not a plain folder or a regular file -- a symlink, a FIFO -- is
left out, never followed. (The copy holds only plain files and folders -- ``policybox.files.packing``
writes nothing else, within its size cap -- so this is the second line, not the first.)
"""

from __future__ import annotations

import os
import shutil
import tempfile
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import BinaryIO

from policybox import untrusted_files
from policybox.errors import NotFound, PolicyboxError
from policybox.files.version_files import NAME_PATTERN
from policybox.league.ladder import reads, retention
from policybox.league.ladder.database import reading
from policybox.league.ladder.folder import LOGS, LadderFolder
from policybox.league.views.visibility import ID_MAX
from policybox.untrusted_files import Folder

ZIP_TIME = (1980, 1, 1, 0, 0, 0)  # every entry's: the same files give the same zip


class NotYours(PolicyboxError):
    """A download of another team's seat or version (HTTP 403)."""


@dataclass(frozen=True)
class Download:
    """A file to hand over: its name for the receiver, its type, and the file, open at its start (whoever
    takes it closes it)."""

    filename: str
    media_type: str
    file: BinaryIO


def seat_log(ladder: LadderFolder, match_id: int, seat: int, owned: set[str]) -> Download:
    """The whole log of ``seat``'s agent in played match ``match_id``, if ``owned`` holds its name."""
    with reading(ladder.engine) as connection:
        played = _storable(match_id) and reads.played_match(connection, match_id) is not None
        seats = reads.seats_of(connection, [match_id]) if played else []
    if not played:
        raise NotFound(f"this ladder has no played match {match_id}")
    found = next((row for row in seats if row.seat == seat), None)
    if found is None:
        raise NotFound(f"match {match_id} has no seat {seat}: its seats are 0 to {len(seats) - 1}")
    shown = f"the log of seat {seat} in match {match_id}"
    _check_own(found.name, owned, shown)
    folder = ladder.folder / LOGS / f"match-{match_id:06d}"
    try:
        file, _ = untrusted_files.open_regular(folder / f"agent-{seat}.log", shown, Folder.at(folder, "its folder"))
    except untrusted_files.Missing:
        _, why = retention.missing(ladder, match_id)
        raise NotFound(f"{shown} is {why or 'not there: its agent wrote none'}") from None
    name = f"match-{match_id}-seat-{seat}-{found.name}-v{found.number}.log"
    return Download(name, "text/plain; charset=utf-8", file)


def version_files(ladder: LadderFolder, name: str, number: int, owned: set[str]) -> Download:
    """The files of ``name``'s version ``number`` as the ladder keeps them, as a zip, if ``owned``
    holds ``name``: a submission's files at the zip's top, as it was sent (several roots -- a class's
    folder and a checkpoint elsewhere -- each in a folder numbered from 0)."""
    with reading(ladder.engine) as connection:
        # Nothing else was stored, nor can be asked for (a NUL is no text to PostgreSQL).
        known = NAME_PATTERN.fullmatch(name) and _storable(number)
        version_id = reads.version_id(connection, name, number) if known else None
    if version_id is None:
        raise NotFound(f"this ladder has no version {name[:100]}@v{number}")
    _check_own(name, owned, f"the files of {name}@v{number}")
    copy = ladder.stored(version_id).files
    if copy is None:
        raise NotFound(f"{name}@v{number} has no files: it is a policy policybox itself provides")
    # Unnamed, on disk (a version's files may be hundreds of MiB), and handed on open, as Download says.
    archive = tempfile.TemporaryFile()  # noqa: SIM115
    try:
        _zip(copy, archive)
    except BaseException:
        archive.close()
        raise
    archive.seek(0)
    return Download(f"{name}-v{number}.zip", "application/zip", archive)


def _storable(number: int) -> bool:
    """Whether a database could hold ``number`` at all (one past that cannot even be compared)."""
    return 0 <= number <= ID_MAX


def _check_own(name: str, owned: set[str], what: str) -> None:
    if name not in owned:
        raise NotYours(f"{what} is its team's only: log in with that team's token (or send it as a Bearer token)")


def _zip(copy: Path, archive: BinaryIO) -> None:
    inside = Folder.at(copy, "the version's files")
    files = sorted(_regular_files(copy))
    several = len({path.parts[0] for path in files}) > 1
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as zipped:
        for path in files:
            file, _ = untrusted_files.open_regular(copy / path, f"{path}", inside)
            entry = zipfile.ZipInfo(_entry_name(path, several), ZIP_TIME)
            entry.external_attr = 0o644 << 16  # unzipped readable, as any file: never the entrant's mode bits
            entry.compress_type = zipfile.ZIP_DEFLATED
            with file, zipped.open(entry, "w") as written:
                shutil.copyfileobj(file, written)


def _entry_name(path: PurePosixPath, several: bool) -> str:
    """A file's name in the zip: its path below its root (root i is kept as ``i/<its name>``, a name of
    the ladder's own), under the root's number when there are several roots."""
    index, *below = path.parts
    within = below[1:] if len(below) > 1 else below  # a root that is a file (a checkpoint) keeps its name
    return "/".join([index, *within] if several else within)


def _regular_files(folder: Path) -> Iterator[PurePosixPath]:
    """The regular files under ``folder``, relative to it: symlinks and other kinds are left out, folders
    entered only when they are plain folders (never a symlink's target). A loop, not a recursion: an
    entrant's folders may nest deeper than Python's stack."""
    todo = [PurePosixPath()]
    while todo:
        below = todo.pop()
        with os.scandir(folder / below) as entries:
            for entry in entries:
                if entry.is_dir(follow_symlinks=False):
                    todo.append(below / entry.name)
                elif entry.is_file(follow_symlinks=False):
                    yield below / entry.name
