"""An upload the host would take seconds to parse (a policy module CPython 3.11 parses in quadratic time),
and the empty ladder whose cells give up starting it after ``INIT_TIMEOUT_S``."""

from __future__ import annotations

from pathlib import Path

from helpers.ladders import EXAMPLES, GAME
from policybox import EpisodeSettings, LadderSettings
from policybox.ladder import Ladder
from policybox.limits import Limits

INIT_TIMEOUT_S = 3  # a cell still compiling the slow module is stopped here (its CPU until then)
BOT = (EXAMPLES / "wanderer.py").read_text().replace("class Wanderer(", "class Bot(")


def slow_to_parse(size: int) -> str:
    """A policy module of ``size`` bytes, nearly all one f-string of ``{x}`` fields: CPython 3.11 counts
    the lines before each field from the start of the string, so its parse takes time quadratic in the
    string's length (11 s for 256 KiB here; the host used to spend it holding the GIL)."""
    head = BOT + '\n\nSLOW = f"'
    return head + "{x}" * ((size - len(head) - 2) // 3) + '"\n'


def ladder(folder: Path) -> Path:
    """An empty ladder of the moves game whose cells have INIT_TIMEOUT_S to start."""
    limits = Limits(init_timeout_s=INIT_TIMEOUT_S)
    settings = LadderSettings(settings=EpisodeSettings(env=GAME, steps=10, limits=limits), agents=4)
    with Ladder.create(folder, settings):
        return folder
