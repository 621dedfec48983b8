"""A stored match's replay, read for its page: a PettingZoo game's moves (``policybox.envs.moves``),
or a MettaGrid replay projected to what the page's player draws (``static/replay.js``).

A MettaGrid replay (its format version 4) gives each object's fields either as one value or as
keyframes, ``[[step, value], ...]``, a field's value holding from its step until the next. The
projection keeps that, every field as keyframes: the grid's size, each object's type and location,
and each agent's seat name (the ladder's, never the replay's), location, action, total reward and
inventory. Every value is checked to be the number (or list of numbers) it should be, so what the
page gets is numbers and the names the ladder gave. A file that is not what it should be -- or
unpacks to more than ``UNPACKED_MAX`` -- is ``Unreadable``.
"""

from __future__ import annotations

import json
import zlib
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from policybox.envs.moves import FORMAT

UNPACKED_MAX = 256 * 1024 * 1024  # bytes of JSON a kept replay may unpack to


class Unreadable(ValueError):
    """A replay file that cannot be read as what it should be."""


class Move(BaseModel):
    step: int
    agent: str
    action: Any
    reward: float
    board: str | None = None


def _document(path: Path) -> dict[str, Any]:
    """The file's JSON object, unpacked at most to ``UNPACKED_MAX`` (a zlib stream may be a bomb)."""
    unpack = zlib.decompressobj()
    try:
        data = unpack.decompress(path.read_bytes(), UNPACKED_MAX)
    except zlib.error as exc:
        raise Unreadable(f"its replay file cannot be read ({exc})") from None
    if unpack.unconsumed_tail:
        raise Unreadable(f"its replay file unpacks to more than {UNPACKED_MAX // 2**20} MiB")
    try:
        document = json.loads(data)
    except (ValueError, RecursionError) as exc:  # RecursionError: JSON nested past Python's stack
        raise Unreadable(f"its replay file cannot be read ({type(exc).__name__})") from None
    if not isinstance(document, dict):
        raise Unreadable("its replay file is not a replay")
    return document


def moves(path: Path) -> list[Move]:
    """A PettingZoo match's moves, as its file holds them."""
    document = _document(path)
    if document.get("format") != FORMAT:
        raise Unreadable("its replay file holds no moves")
    try:
        return [Move.model_validate(move) for move in document.get("moves", [])]
    except ValidationError:
        raise Unreadable("its replay file's moves cannot be read") from None


def mettagrid(path: Path, seat_names: list[str], steps: int) -> dict[str, Any]:
    """A MettaGrid replay as the page's player draws it: its seats named ``seat_names``, its ``steps``
    the match's (a game cut short is written as far as it was played)."""
    document = _document(path)
    try:
        return _projection(document, seat_names) | {"steps": steps}
    except (KeyError, IndexError, TypeError, ValueError):
        raise Unreadable("its replay file is not a MettaGrid replay this page can play") from None


def _projection(document: dict[str, Any], seat_names: list[str]) -> dict[str, Any]:
    width, height = (int(n) for n in document["map_size"][:2])
    type_names = [str(name) for name in document["type_names"]]
    objects, agents = [], []
    for thing in document["objects"]:
        location = _keyframes(thing["location"], _point, nested=True)
        if "agent_id" in thing:
            seat = int(thing["agent_id"])
            agents.append(
                {
                    "seat": seat,
                    "name": seat_names[seat],
                    "location": location,
                    "action": _keyframes(thing.get("action_id", 0), int),
                    "reward": _keyframes(thing.get("total_reward", 0.0), float),
                    "inventory": _keyframes(thing.get("inventory", []), _inventory, nested=True),
                }
            )
        else:
            objects.append({"type": str(thing["type_name"]), "location": location})
    return {
        "width": width,
        "height": height,
        "type_names": type_names,
        "action_names": [str(name) for name in document["action_names"]],
        "item_names": [str(name) for name in document["item_names"]],
        "objects": objects,
        "agents": sorted(agents, key=lambda agent: agent["seat"]),
    }


def _keyframes(value: Any, parse: Any, nested: bool = False) -> list[list[Any]]:
    """A field as keyframes ``[[step, value], ...]``. A list-valued field (``nested``) is keyframed
    when its entries are ``[step, list]``; a number-valued one whenever it is a list."""
    keyframed = (
        isinstance(value, list)
        and bool(value)
        and all(isinstance(frame, list) and len(frame) == 2 and isinstance(frame[1], list) for frame in value)
        if nested
        else isinstance(value, list)
    )
    if not keyframed:
        return [[0, parse(value)]]
    return [[int(step), parse(frame)] for step, frame in value]


def _point(value: Any) -> list[int]:
    return [int(value[0]), int(value[1])]


def _inventory(value: Any) -> list[list[int]]:
    return [[int(item), int(count)] for item, count in value]
