"""What a ladder keeps of its matches' files, and the deleting of the rest.

The rule: the latest ``keep_logs`` stored matches keep their agents' log folders
(``DIR/logs/match-NNNNNN/``) and the latest ``keep_replays`` stored matches their replays
(``DIR/replays/match-NNNNNN.json.z``); the files of older matches are deleted. Qualification log
folders (``DIR/logs/qualify-NAME-vN-ATTEMPT/``) follow the same count: the newest ``keep_logs`` of
them are kept; so do scrimmages' (``DIR/logs/scrimmage-NNNNNN/``, and the newest ``keep_replays`` of their
replays, ``DIR/replays/scrimmage-NNNNNN.json.z``), by counts of their own, so that scrimmages never
push a rated match's files out. Logs are also kept by age: a log folder modified less than ``keep_logs_hours`` ago (a
day by default) is kept past the count, so a fast ladder does not delete a match's logs minutes
after it was played. A match that is scheduled but not stored yet, a version still qualifying or a
scrimmage still to play is never touched. The database keeps what the pages show whatever is deleted:
every match's result, each failed agent's log tail (its last 4 KiB).

``ladder run`` applies the rule as it stores matches; ``ladder prune`` applies it on demand (with
counts of its own, if asked) and says what it freed. ``ladder prune`` also deletes the environments
(``policybox.files.environments``) that no version uses: neither one kept to play, whose spec imports
from it, nor one still qualifying, whose requirements it was built for.
"""

from __future__ import annotations

import os
import re
import time
from dataclasses import dataclass
from pathlib import Path

from policybox.files import environments as layers
from policybox.files.package_source import package_source
from policybox.host.remove import remove_tree
from policybox.layers import environment_of
from policybox.league.ladder import match_store, scrimmage_store, version_store
from policybox.league.ladder.database import transaction
from policybox.league.ladder.folder import REPLAYS, LadderFolder
from policybox.settings import REPLAY_SUFFIX

LOGS = "logs"
MATCH_FILE = re.compile(r"match-(\d+)(?:" + re.escape(REPLAY_SUFFIX) + ")?")
QUALIFY_FOLDER = re.compile(r"qualify-(.+)-v(\d+)-\d+")
SCRIMMAGE_FILE = re.compile(r"scrimmage-(\d+)(?:" + re.escape(REPLAY_SUFFIX) + ")?")


@dataclass
class Freed:
    """What a prune deleted."""

    logs: int = 0  # log folders (of matches and qualifications)
    replays: int = 0
    bytes: int = 0
    problems: int = 0  # files that could not be deleted (left as they were)
    environments: int = 0  # environments no version uses

    def __str__(self) -> str:
        mib = self.bytes / (1024 * 1024)
        kept = f"; {self.problems} could not be deleted" if self.problems else ""
        plural = "s" if self.environments != 1 else ""
        unused = f", {self.environments} unused environment{plural}" if self.environments else ""
        return f"{self.logs} log folders{unused} and {self.replays} replays deleted, {mib:.1f} MiB freed{kept}"


def prune(
    ladder: LadderFolder,
    keep_logs: int | None = None,
    keep_replays: int | None = None,
    environments: bool = False,
    keep_logs_hours: float | None = None,
) -> Freed:
    """Delete what the rule does not keep: the files of all but the latest ``keep_logs`` /
    ``keep_replays`` stored matches, the log folders younger than ``keep_logs_hours`` kept too (default:
    the ladder's settings); with ``environments``, also the environments no version uses (``ladder
    prune``, not ``ladder run``'s pruning as it plays)."""
    keep_logs = ladder.settings.keep_logs if keep_logs is None else keep_logs
    hours = ladder.settings.keep_logs_hours if keep_logs_hours is None else keep_logs_hours
    young = time.time() - hours * 3600  # a log folder modified after this is kept
    keep_replays = ladder.settings.keep_replays if keep_replays is None else keep_replays
    with transaction(ladder.engine) as connection:
        logs_from, replays_from = (
            match_store.oldest_kept(connection, keep_logs),
            match_store.oldest_kept(connection, keep_replays),
        )
        playing = {match_id for match_id, _, _ in match_store.scheduled(connection)}
        qualifying = {(version.name, version.number) for version in version_store.qualifying(connection)}
        unplayed = scrimmage_store.scrimmages_to_play(connection)
    freed = Freed()
    qualifications = []
    for path in _entries(ladder.folder / LOGS):
        if (match := MATCH_FILE.fullmatch(path.name)) and path.is_dir():
            match_id = int(match[1])
            if match_id < logs_from and match_id not in playing and _modified(path) < young:
                _delete(path, freed, "logs")
        elif (found := QUALIFY_FOLDER.fullmatch(path.name)) and (found[1], int(found[2])) not in qualifying:
            qualifications.append(path)
    qualifications.sort(key=_modified, reverse=True)
    for path in qualifications[keep_logs:]:
        if _modified(path) < young:
            _delete(path, freed, "logs")
    for path in _entries(ladder.folder / REPLAYS):
        if (match := MATCH_FILE.fullmatch(path.name)) and int(match[1]) < replays_from and int(match[1]) not in playing:
            _delete(path, freed, "replays")
    for kind, keep in (("logs", keep_logs), ("replays", keep_replays)):
        for path in _scrimmages(ladder.folder / (LOGS if kind == "logs" else REPLAYS), unplayed)[keep:]:
            if kind == "replays" or _modified(path) < young:
                _delete(path, freed, kind)
    if environments:
        _prune_environments(ladder, freed)
    return freed


def _scrimmages(folder: Path, unplayed: set[int]) -> list[Path]:
    """The scrimmages' files in ``folder``, newest first, but those still to play."""
    found = [(int(m[1]), path) for path in _entries(folder) if (m := SCRIMMAGE_FILE.fullmatch(path.name))]
    return [path for number, path in sorted(found, reverse=True) if number not in unplayed]


def _prune_environments(ladder: LadderFolder, freed: Freed) -> None:
    """Delete the environments no version uses: not one kept to play (its spec imports from it), nor
    one still qualifying (its requirements were built into it, or are being built)."""
    settings = ladder.settings.settings
    with transaction(ladder.engine) as connection:
        qualifying = [ladder.stored(version.id).spec for version in version_store.qualifying(connection)]
    folder = ladder.environments.absolute()
    used = {Path(site).parent for spec in ladder.kept_specs() if (site := environment_of(spec))}
    if asking := [spec.requirements for spec in qualifying if spec.requirements]:
        source = package_source(settings)
        used |= {found for wanted in asking if (found := layers.built_before(wanted, folder, source))}
    for path in layers.unused(folder, used):
        _delete(path, freed, "environments")
    layers.forget_removed(folder)


def missing(ladder: LadderFolder, match_id: int) -> tuple[str | None, str | None]:
    """What a stored match's page says of its replay and of its log folder when it has none: (why
    no replay, why no logs), each None when the file is there."""
    settings = ladder.settings
    replay = None
    if not (ladder.folder / REPLAYS / f"match-{match_id:06d}{REPLAY_SUFFIX}").is_file():
        replay = "not written for this match"
        if settings.writes_replays:
            replay = f"no longer kept: this ladder keeps the latest {settings.keep_replays} matches' replays"
    logs = None
    if not (ladder.folder / LOGS / f"match-{match_id:06d}").is_dir():
        logs = (
            f"no longer kept: this ladder keeps the latest {settings.keep_logs} matches' logs, and those of the last "
            f"{settings.keep_logs_hours:g} hours (the tails shown stay)"
        )
    return replay, logs


def _entries(folder: Path) -> list[Path]:
    try:
        return [Path(entry.path) for entry in os.scandir(folder)]
    except FileNotFoundError:
        return []


def _modified(path: Path) -> float:
    try:
        return path.lstat().st_mtime
    except FileNotFoundError:
        return 0.0


def _delete(path: Path, freed: Freed, kind: str) -> None:
    size = _size(path)
    if remove_tree(path):
        freed.problems += 1
        return
    freed.bytes += size
    setattr(freed, kind, getattr(freed, kind) + 1)


def _size(path: Path) -> int:
    """The bytes of ``path``'s files (symlinks not followed)."""
    if not path.is_dir() or path.is_symlink():
        try:
            return path.lstat().st_size
        except FileNotFoundError:
            return 0
    total = 0
    for folder, _, files in os.walk(path):
        for name in files:
            try:
                total += os.lstat(os.path.join(folder, name)).st_size
            except FileNotFoundError:
                continue
    return total
