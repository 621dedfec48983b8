"""Ladders that have played, built once per worker for every test file that reads them: pytest fixtures,
loaded by conftest.py as a plugin."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import policy

from helpers.ladders import WANDERER, activate, api_ladder

PLAYING = {"walker", "random", "idle"}
UNRANKED = {"crasher": "suspended", "retiree": "retired", "broken": "rejected"}


@pytest.fixture(scope="session")
def board(tmp_path_factory) -> Path:
    """A ladder that has every state a name can be in: three names that play (random with a v2 that
    superseded its v1), a suspended one (it segfaults in every match), a retired one (it played first) and
    a rejected one (it raises in its validation episode). A test may play more matches on it (the
    browser's does, live); the states stay."""
    folder = tmp_path_factory.mktemp("board") / "cup"
    with api_ladder(folder) as ladder:
        ladder.submit("walker", WANDERER)
        ladder.submit("random", "random")
        ladder.submit("idle", "noop")
        ladder.submit("retiree", policy("seeded_random.py:SeededRandom"))
        ladder.submit(
            "broken", policy("faults.py:RaiseInInit"), check=False
        )  # stored unchecked: its validation refuses it
        ladder.submit("crasher", policy("faults.py:SegfaultInStep"))  # dies at step 10 of every match
        for name in ("walker", "random", "idle", "retiree", "crasher"):
            activate(ladder, name)  # playing from the first match
        ladder.submit("random", policy("stateful.py:Stateful"))  # v2: qualifies in the run, supersedes v1
        for _ in range(12):
            ladder.run(matches=3, workers=1)
            rows = {row.name: row for row in ladder.standings().rows}
            if rows["crasher"].state == "suspended" and rows["random"].version == 2 and rows["retiree"].matches:
                break
        ladder.retire("retiree")
        ladder.run(matches=3, workers=1)  # the others play on; the retired one no more
    return folder
