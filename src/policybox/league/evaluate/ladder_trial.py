"""``ladder test DIR NAME``: is a name's playing version better than an earlier one of its own? The
test of ``policybox versus`` (``policybox.league.evaluate.versus``), played inside a ladder.

**Who plays.** B is NAME's playing version -- its current one, the latest that qualified; A is the
version ``base`` names, else the qualified version before B. Both are played from the files the
ladder keeps for them, as their matches' cells get them (``LadderFolder.stored``). The opponents
are the ladder's other names' playing versions: each name's current version, active and not
retired -- those matchmaking may pick -- in name order; a ladder with no other name plays A
against B, swapping seats, as ``versus`` without opponents does (and in a game of one seat, each
plays it alone).

**How.** The game, its steps, the seats and the limits (the ladder's episode limit too) are the
ladder's (``LadderSettings.episode_settings``); its seed is secret (``versus.secret_seed``), as every
seed a ladder plays with is; the seats are dealt as ``versus`` deals
them: the subject takes every seat equally often and meets the opponents as evenly as the seats
allow (``paired`` seating). A ladder's ``versions_per_match`` and ``seating`` are not followed: in
a game of more seats than the subject and the opponents, every test episode holds every opponent.

**Nothing is rated.** The test reads the ladder's database and writes nothing in it: its episodes
are no matches, change no rating and no counter, and may run beside ``ladder run``. They are kept
in a results folder, by default ``DIR/tests/NAME-vA-vB`` (private, as the rest of the ladder's
folder is), which is ``versus``'s: ``tournament.json``, ``results.jsonl``, ``versus.json``, logs.
Running the same test again resumes it there; once a new opponent qualifies (or one leaves), the
tournament is another and the folder refuses it -- give another ``out``.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from policybox.errors import NotFound, SpecError
from policybox.league.evaluate.versus import (
    VersusResult,
    play_versus,
    secret_seed,
    sequential_test,
    versus_tournament,
)
from policybox.league.ladder import life, reads, version_store
from policybox.league.ladder.database import reading
from policybox.league.ladder.folder import LadderFolder
from policybox.league.stats.sequential import TestState
from policybox.spec import PolicySpec

TESTS = "tests"  # the ladder folder's folder of test results, one folder per test
BASE = re.compile(r"v?(?P<number>[0-9]{1,9})")


def test(
    ladder: LadderFolder,
    name: str,
    base: str | int | None = None,
    alpha: float = 0.05,
    beta: float = 0.05,
    effect: float = 0.2,
    max_episodes: int = 2000,
    workers: int | None = None,
    out: str | Path | None = None,
    on_state: Callable[[TestState], None] | None = None,
) -> VersusResult:
    """Is ``name``'s playing version (B) better than its version ``base`` (``"v2"`` or 2; None: the
    qualified version before B) against the ladder's other playing versions? See the module's docstring."""
    sequential = sequential_test(alpha, beta, effect)
    with reading(ladder.engine) as connection:
        a, b = _versions(connection, name, base)
        opponents = _opponents(connection, name) if ladder.settings.agents > 1 else []  # one seat: each alone
    specs = [_spec(ladder, version) for version in (a, b, *opponents)]
    settings = ladder.settings
    tournament = versus_tournament(
        specs[0], specs[1], specs[2:], max_episodes, settings.episode_settings, settings.agents
    )
    folder = Path(out) if out is not None else results_folder(ladder, *tournament.keys[:2])
    if out is None:
        folder.parent.mkdir(mode=0o700, exist_ok=True)  # the ladder's folder is its host's alone
    seeded = tournament.settings.model_copy(update={"seed": secret_seed(folder)})  # as its matches' are: secret
    tournament = tournament.model_copy(update={"settings": seeded})
    return play_versus(tournament, sequential, folder, workers, on_state=on_state)


def results_folder(ladder: LadderFolder, a: str, b: str) -> Path:
    """Where a test of A and B (``NAME@vN`` each) is kept by default: ``DIR/tests/NAME-vA-vB``."""
    return ladder.folder / TESTS / f"{a.replace('@', '-')}-{b.partition('@')[2]}"


def _versions(
    connection: Any, name: str, base: str | int | None
) -> tuple[version_store.Version, version_store.Version]:
    """A and B: the base version (given, or the qualified one before B) and the playing version."""
    row = version_store.name_row(connection, name)
    if row is None:
        raise NotFound(f"this ladder has no submission called {name!r}: policybox ladder status DIR lists them")
    qualified = [v for v in reads.versions_of(connection, row.id) if v.state in life.QUALIFIED]
    if not qualified:
        raise SpecError(f"{name} has no qualified version yet: ladder run qualifies it, then it can be tested")
    b = qualified[-1]
    if base is None:
        if len(qualified) == 1:
            raise SpecError(
                f"{name} has one qualified version (v{b.number}): there is no earlier one to test it against; "
                "give --base vN"
            )
        a = qualified[-2]
    else:
        a = _base(connection, name, row.id, base)
        if a.number == b.number:
            raise SpecError(f"--base v{a.number} is {name}'s playing version itself: give an earlier version")
    return version_store.version_by_id(connection, a.id), version_store.version_by_id(connection, b.id)


def _base(connection: Any, name: str, name_id: int, base: str | int) -> Any:
    found = BASE.fullmatch(str(base))
    if found is None:
        raise SpecError(f"--base {base!r} names no version: give vN, e.g. v1")
    number = int(found["number"])
    version = next((v for v in reads.versions_of(connection, name_id) if v.number == number), None)
    if version is None:
        raise NotFound(f"{name} has no version v{number}: policybox ladder show DIR {name} lists its versions")
    if version.state not in life.QUALIFIED:
        raise SpecError(f"{name} v{number} is {version.state}: only a version that qualified can be tested")
    return version


def _opponents(connection: Any, name: str) -> list[version_store.Version]:
    """The other names' playing versions (active, not retired), in name order."""
    current = version_store.current_versions(connection)
    return [
        version_store.version_by_id(connection, row.id)
        for other, row in sorted(current.items())
        if other != name and row.state in life.PLAYING and not row.retired
    ]


def _spec(ladder: LadderFolder, version: version_store.Version) -> PolicySpec:
    """The version's spec as its cells get it, named ``NAME@vN`` (as a rerun names it)."""
    return ladder.stored(version.id).spec.model_copy(update={"name": f"{version.name}@v{version.number}"})
