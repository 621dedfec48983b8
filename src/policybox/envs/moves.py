"""A PettingZoo or Kaggle episode's moves, as its replay: each step's agent, action and reward, and the board
as text where the game renders ``render_mode="ansi"``.

The file is zlib-compressed JSON (as MettaGrid's replays are, and under the same ``.json.z`` name, so
that a ladder keeps and prunes both alike) in policybox's own format::

    {"format": "policybox-moves", "version": 1, "agents": [...], "truncated": false,
     "moves": [{"step": 0, "agent": "player_0", "action": 3, "reward": 0.0, "board": "..."}, ...]}

A family may keep more beside the moves (``MovesRecorder.extra``): a Kaggle episode keeps itself as Kaggle
does, ``env.toJSON()``, under ``"kaggle"``.

Its size is capped: a board's text at ``BOARD_MAX`` characters and an action's JSON at
``ACTION_MAX`` (each cut with a marker), and the moves at ``MOVES_MAX`` characters of JSON in all --
the moves past it are not kept, and ``truncated`` says so. An action is whatever the policy chose
within the game's action space: data, never markup.
"""

from __future__ import annotations

import json
import zlib
from pathlib import Path
from typing import Any

import numpy as np

from policybox.storage import StorageFull, writing

FORMAT = "policybox-moves"
VERSION = 1
BOARD_MAX = 4096  # characters of one step's board text
ACTION_MAX = 256  # characters of one action's JSON
MOVES_MAX = 4 * 1024 * 1024  # characters of JSON of all the moves: a few MiB before compression
CUT = " [cut]"


class MovesRecorder:
    """The moves of one episode, written to ``path`` when it ends."""

    def __init__(self, path: str, agents: list[str]) -> None:
        self._path = Path(path)
        self._agents = agents
        self._moves: list[dict[str, Any]] = []
        self._size = 0
        self.truncated = False
        self.extra: dict[str, Any] = {}  # what the family keeps beside the moves, by key

    def record(self, step: int, agent: str, action: Any, reward: float, board: Any = None) -> None:
        """One agent's move at ``step`` (``board``: the game's text after it, if it renders as text)."""
        if self.truncated:
            return
        move: dict[str, Any] = {"step": step, "agent": agent, "action": _action(action), "reward": float(reward)}
        if isinstance(board, str):
            move["board"] = _cut(board, BOARD_MAX)
        size = len(json.dumps(move))
        if self._size + size > MOVES_MAX:
            self.truncated = True
            return
        self._size += size
        self._moves.append(move)

    def write(self) -> None:
        """The file, whole; on a full disk StorageFull, and no file left."""
        document = {
            "format": FORMAT,
            "version": VERSION,
            "agents": self._agents,
            "truncated": self.truncated,
            "moves": self._moves,
            **self.extra,
        }
        data = zlib.compress(json.dumps(document).encode())
        try:
            with writing(self._path):
                self._path.write_bytes(data)
        except StorageFull:
            self._path.unlink(missing_ok=True)
            raise


def _action(action: Any) -> Any:
    """The action as JSON data: a number, a list of numbers, or (if it is long) its JSON text, cut."""
    value = action.tolist() if isinstance(action, np.ndarray | np.generic) else action
    text = json.dumps(value, default=str)
    return json.loads(text) if len(text) <= ACTION_MAX else _cut(text, ACTION_MAX)


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - len(CUT)] + CUT
