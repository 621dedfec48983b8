"""Ladders as the tests make and drive them: the moves game and its walking bot, the tests' other games
(a text Connect Four, rock-paper-scissors), a ladder made with the Python API (and one of
rock-paper-scissors bots that has played), the ``policybox ladder`` command in this process or as a
process of its own, waiting."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import psutil
from conftest import Ran, policy, policybox
from sqlalchemy import func, select

from policybox import EpisodeSettings, LadderSettings
from policybox.ladder import Ladder
from policybox.league.ladder.schema import matches

EXAMPLES = Path(__file__).parents[2] / "examples"
GAME = str(EXAMPLES / "moves.yaml")
WANDERER = f"{EXAMPLES / 'wanderer.py'}:Wanderer"
GAMES = Path(__file__).parents[1] / "games"
TEXT_CONNECT_FOUR = f"pettingzoo:{GAMES / 'text_connect_four.py'}:env"
RPS = "pettingzoo:pettingzoo.classic.rps_v2:parallel_env"
MOVES = ("rock", "paper", "scissors")  # rps_ladder's bots, each always playing its move


def ladder_command(*args: str | Path, columns: int = 200) -> Ran:
    """``policybox ladder ARGS``, run in this process (``conftest.policybox``)."""
    return policybox("ladder", *args, columns=columns)


def ladder_process(*args: str | Path, timeout: float = 600) -> subprocess.CompletedProcess:
    """``policybox ladder ARGS`` as a process of its own: for a command that may end its process at once (a
    database changed under it: ``os._exit``), which must not be this test's."""
    command = [sys.executable, "-m", "policybox", "ladder", *map(str, args)]
    return subprocess.run(
        command, capture_output=True, text=True, timeout=timeout, env={"COLUMNS": "200", "PATH": "/usr/bin:/bin"}
    )


def start_run(folder: Path, *args: str) -> subprocess.Popen:
    """``policybox ladder run`` started as a process of its own, to be stopped or killed by the test."""
    command = [sys.executable, "-m", "policybox", "ladder", "run", str(folder), "--workers", "2", *args]
    return subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)


def played(folder: Path) -> int:
    with Ladder.open(folder, read_only=True) as ladder, ladder.engine.connect() as connection:
        return connection.execute(select(func.count()).where(matches.c.state == "played")).scalar()


def wait_until(condition, timeout: float = 300, what: str = "") -> None:
    give_up = time.monotonic() + timeout
    while time.monotonic() < give_up:
        if condition():
            return
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


def process_tree(pid: int) -> list[psutil.Process]:
    try:
        return psutil.Process(pid).children(recursive=True)
    except psutil.NoSuchProcess:
        return []


def api_ladder(folder: Path, database: str | None = None, **settings) -> Ladder:
    """A ladder made with the Python API; its database SQLite in the folder, or ``database`` (PostgreSQL)."""
    values = {"agents": 4, "placement_matches": 0, "suspend_after": 3} | settings
    made = LadderSettings(settings=EpisodeSettings(env=GAME, steps=30), **values)
    return Ladder.create(folder, made, None if database is None or database.startswith("sqlite") else database)


def activate(ladder: Ladder, name: str) -> None:
    """Let a version play without its qualification (to test what happens to one that fails later)."""
    from policybox.league.ladder import version_store
    from policybox.league.ladder.database import transaction

    with transaction(ladder.engine) as connection:
        version = version_store.latest_version(connection, name)
        version_store.finish_qualification(connection, version, True, None, None, None)


def two_teams(folder: Path, database: str | None = None, **settings) -> dict[str, str]:
    """The moves game's ladder of two teams, each name let in without qualifying: the organiser's
    walker, alpha's alphabot (logs its secret and markup, raises with a payload at step 5) and
    alphawalk, beta's betabot (as alphabot, with beta's secret); the teams' tokens."""
    with api_ladder(folder, database, **settings) as ladder:
        tokens = {team: ladder.token(team) for team in ("alpha", "beta")}
        ladder.submit("walker", WANDERER)
        ladder.submit("alphabot", policy("web_bots.py:LogsThenRaises", **{"kw.team": "alpha"}), team="alpha")
        ladder.submit("alphawalk", WANDERER, team="alpha")
        ladder.submit("betabot", policy("web_bots.py:LogsThenRaises", **{"kw.team": "beta"}), team="beta")
        for name in ("walker", "alphabot", "alphawalk", "betabot"):
            activate(ladder, name)
    return tokens


def rps_ladder(folder: Path, names: tuple[str, ...] = MOVES, matches: int = 6, database: str | None = None) -> Ladder:
    """A rock-paper-scissors ladder of bots that always play one move, its matches played; its database
    SQLite in the folder, or ``database`` (a PostgreSQL URL)."""
    made = LadderSettings(settings=EpisodeSettings(env=RPS, steps=10), agents=2, placement_matches=0)
    ladder = Ladder.create(folder, made, database)
    for name in names:
        ladder.submit(name, policy(f"rps_bots.py:{name.title()}"))
    if matches:
        ladder.run(matches=matches, workers=1)
    return ladder
