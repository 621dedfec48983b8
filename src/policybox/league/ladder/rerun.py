"""A ladder's match played again: the command a match page shows, and what ``policybox run --ladder
DIR`` makes of it.

The command names versions, never files: ``policybox run --ladder DIR --seed S -p walker@v2 -p
chaser@v1 ...``, one ``-p`` a seat in seat order. ``DIR`` is the ladder's folder, which only the
organiser has (a page never shows where it is), and which gives everything else: the game, its
steps and seats, the limits (``episode_settings``), and each version's stored files (``resolve``).
Options given on the command line still override the ladder's.

``policybox run --ladder DIR --match ID`` plays a stored match again -- its seed, its seats'
versions, the ladder's settings (``Replay``) -- and compares: the agents' rewards and statuses with
the stored ones, and the match's stamp (``policybox.league.ladder.stamp``) with the one of now, which
says why they may differ. ``--final F --match N`` does the same for match N of final F (numbered from
0 in schedule order, as its log folder ``final-F-0000N`` is named).
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from policybox.errors import NotFound, SpecError
from policybox.files.version_files import VERSION_REF
from policybox.league.ladder import reads, stamp
from policybox.league.ladder.database import reading
from policybox.league.ladder.folder import LadderFolder
from policybox.results import EpisodeResult
from policybox.settings import EpisodeSettings
from policybox.spec import PolicySpec


def command(seed: int, seats: Sequence[tuple[str, int]]) -> str:
    """The command that plays a match of seed ``seed`` again, its seats' (name, version) in order."""
    words = ["policybox", "run", "--ladder", "DIR", "--seed", str(seed)]
    for name, version in seats:
        words += ["-p", f"{name}@v{version}"]
    return shlex.join(words).replace("'DIR'", "DIR")


def match_command(match_id: int) -> str:
    """The command that plays match ``match_id`` again and says whether it ends as it did."""
    return f"policybox run --ladder DIR --match {match_id}"


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


@dataclass(frozen=True)
class Replay:
    """A stored match, to be played again: its seed, its seats' versions (``NAME@vN``) and specs, its
    result and its stamp (None: stored before stamps were kept)."""

    what: str  # "match 7", "final 1's match 3"
    seed: int
    seats: list[str]
    specs: list[PolicySpec]
    result: EpisodeResult
    stamp: dict[str, Any] | None
    stamp_now: dict[str, Any]


def replay(ladder: LadderFolder, match_id: int, settings: EpisodeSettings, final: int | None = None) -> Replay:
    """Played match ``match_id`` of the ladder -- or, with ``final``, match number ``match_id`` of that
    final -- with the stamp it would get now under ``settings`` (its versions' digests from their files
    as they are on disk); NotFound for one it has not played."""
    with reading(ladder.engine) as connection:
        if final is None:
            what = f"match {match_id}"
            row = reads.played_match(connection, match_id)
            seats = [] if row is None else [seat.version_id for seat in reads.seats_of(connection, [match_id])]
        else:
            what = f"final {final}'s match {match_id}"
            row = reads.played_final_match(connection, final, match_id)
            seats = [] if row is None else list(row.seats)
        if row is None and final is None:
            raise NotFound(f"this ladder has no played match {match_id}: policybox ladder status DIR lists its matches")
        if row is None:
            raise NotFound(
                f"final {final} of this ladder has no played match {match_id}: ladder final DIR --show counts them"
            )
        refs = reads.version_refs(connection, seats)
    labels = [f"{refs[version_id][0]}@v{refs[version_id][1]}" for version_id in seats]
    stored = {label: ladder.stored(version_id) for label, version_id in zip(labels, seats, strict=True)}
    digests = {label: stamp.played_digest(kept.spec, ladder.folder / "versions") for label, kept in stored.items()}
    return Replay(
        what=what,
        seed=row.seed,
        seats=labels,
        specs=[stored[label].spec for label in labels],
        result=EpisodeResult.model_validate(row.result),
        stamp=row.stamp,
        stamp_now=stamp.match_stamp(settings, len(seats), row.seed, digests),
    )


def outcome_changes(seats: Sequence[str], then: EpisodeResult, now: EpisodeResult) -> list[str]:
    """Each seat whose reward or status differs between two plays of a match, one sentence each."""
    found = []
    for label, was, is_ in zip(seats, then.agents, now.agents, strict=True):
        if was.reward != is_.reward:
            found.append(f"seat {was.agent_id} ({label}): reward was {was.reward:g}, is {is_.reward:g}")
        if was.status != is_.status:
            found.append(f"seat {was.agent_id} ({label}): status was {was.status.value}, is {is_.status.value}")
    return found


def stamp_changes(found: Replay) -> list[str]:
    """What changed since the match was played, as its stamp says; for a match without one, that."""
    if found.stamp is None:
        return [f"{found.what} has no stamp (stored before policybox kept them): nothing to compare"]
    return stamp.differences(found.stamp, found.stamp_now)
