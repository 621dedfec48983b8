"""What a team takes home, as the tests see it: a ladder of three matches whose teams' bots log a
secret and keep files in their zips, with planted links in one version's files, and its app. Pytest
fixtures, loaded by conftest.py as a plugin; the ladder is built once per test module that reads it."""

from __future__ import annotations

import json
import os
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from conftest import POLICIES
from starlette.testclient import TestClient

from helpers.ladders import WANDERER, activate, api_ladder
from policybox.league.web.app import make_app

TEAMS = ("alpha", "beta")
BOT = (POLICIES / "take_home_bots.py").read_text()
NOTES = "notes kept with the bot\n"
DEEP = "d/" * 40 + "deep.txt"


@dataclass
class Cup:
    """The take-home ladder: its folder, and each team's token."""

    folder: Path
    tokens: dict[str, str]


def secret(team: str) -> str:
    """The first line each of a team's agents logs: in its whole log, never in a page's tail."""
    return f"{team.upper()}-WHOLE-LOG-SECRET FIRST-LINE"


def diarist_zip(path: Path, team: str) -> Path:
    """A submission zip: bot.py (``Diarist``, logging its team's secret first), its spec, and a file in a folder."""
    with zipfile.ZipFile(path, "w") as archive:
        spec = {"class_path": "bot.py:Diarist", "init_kwargs": {"team": team}}
        archive.writestr("policy_spec.json", json.dumps(spec))
        archive.writestr("bot.py", BOT)
        archive.writestr("notes/readme.txt", NOTES)
    return path


@pytest.fixture(scope="module")
def take_home_cup(tmp_path_factory) -> Iterator[Cup]:
    """A ladder writing replays that has played 3 matches: the organiser's walker and noop, team alpha's
    alphabot and team beta's betabot, each submitted as a zip. Then, in alphabot's kept files, what an
    entrant might have planted there: a symlink to a host file, one to the root folder, a FIFO, and a
    file 40 folders deep."""
    root = tmp_path_factory.mktemp("take-home")
    folder = root / "cup"
    with api_ladder(folder, replays=True) as ladder:
        tokens = {team: ladder.token(team) for team in TEAMS}
        ladder.submit("walker", WANDERER)
        ladder.submit("noop", "noop")
        for team in TEAMS:
            ladder.submit(f"{team}bot", str(diarist_zip(root / f"{team}.zip", team)), team=team)
        for name in ("walker", "noop", "alphabot", "betabot"):
            activate(ladder, name)
        assert ladder.run(matches=3, workers=2).played == 3
        copy = ladder.stored(1 + 2).files  # alphabot's version: the third submitted
    assert copy is not None
    (submitted,) = (copy / "0").iterdir()
    (submitted / "evil").symlink_to("/etc/passwd")
    (submitted / "up").symlink_to("/")
    os.mkfifo(submitted / "pipe")
    (submitted / DEEP).parent.mkdir(parents=True)
    (submitted / DEEP).write_text("at the bottom")
    yield Cup(folder, tokens)


@pytest.fixture
def take_home_client(take_home_cup: Cup) -> Iterator[TestClient]:
    """The app of ``take_home_cup``'s ladder, through Starlette's TestClient."""
    with TestClient(make_app(take_home_cup.folder)) as test_client:
        yield test_client
