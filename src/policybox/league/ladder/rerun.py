"""A ladder's match played again: the command a match page shows, and what ``policybox run --ladder
DIR`` makes of it.

The command names versions, never files: ``policybox run --ladder DIR --seed S -p walker@v2 -p
chaser@v1 ...``, one ``-p`` a seat in seat order. ``DIR`` is the ladder's folder, which only the
organiser has (a page never shows where it is), and which gives everything else: the game, its
steps and seats, the limits (``episode_settings``), and each version's stored files (``resolve``).
Options given on the command line still override the ladder's.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Sequence
from typing import Any

from policybox.errors import NotFound, SpecError
from policybox.league.ladder import reads
from policybox.league.ladder.database import reading
from policybox.league.ladder.folder import LadderFolder
from policybox.settings import EpisodeSettings
from policybox.spec import PolicySpec

VERSION_REF = re.compile(r"(?P<name>[a-z0-9][a-z0-9_-]{0,39})@v(?P<number>[0-9]{1,9})")


def command(seed: int, seats: Sequence[tuple[str, int]]) -> str:
    """The command that plays a match of seed ``seed`` again, its seats' (name, version) in order."""
    words = ["policybox", "run", "--ladder", "DIR", "--seed", str(seed)]
    for name, version in seats:
        words += ["-p", f"{name}@v{version}"]
    return shlex.join(words).replace("'DIR'", "DIR")


def is_version(text: str) -> bool:
    return VERSION_REF.fullmatch(text) is not None


def resolve(ladder: LadderFolder, text: str) -> PolicySpec:
    """The spec of version ``NAME@vN`` as its matches' cells get it (its stored files, its secrets)."""
    found = VERSION_REF.fullmatch(text)
    if found is None:
        raise SpecError(f"{text!r} names no version: give NAME@vN, e.g. walker@v1")
    with reading(ladder.engine) as connection:
        version_id = reads.version_id(connection, found["name"], int(found["number"]))
    if version_id is None:
        raise NotFound(f"this ladder has no version {text}: policybox ladder status DIR lists its names")
    return ladder.stored(version_id).spec


def episode_settings(ladder: LadderFolder, given: dict[str, Any]) -> EpisodeSettings:
    """How the ladder plays a match (its episode limit too), with the options in ``given`` (flat, as
    the command line names them) in place of its own."""
    settings = ladder.settings.episode_settings
    flat = {**settings.model_dump(exclude={"limits"}), **settings.limits.model_dump(), **given}
    return EpisodeSettings.from_options(flat)
