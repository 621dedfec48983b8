"""MettaGrid replays as MettaScope reads them, and the digest of an agent's actions an episode's result
records."""

from __future__ import annotations

import hashlib
import json
import zlib

from mettagrid.util.file import read

from policybox.envs.mettagrid import ACTION, NO_VIBE

# What MettaScope's loader (mettascope/replays.nim, validation.nim) requires of a replay it plays.
FORMAT_VERSION = 4
REQUIRED_KEYS = {
    "version",
    "num_agents",
    "max_steps",
    "map_size",
    "action_names",
    "item_names",
    "type_names",
    "objects",
}


def load_replay(path) -> dict:
    """Read a replay as MettaScope does: zlib, as its ``.json.z`` name says, then JSON of its format version."""
    replay = json.loads(zlib.decompress(read(str(path))))
    assert replay["version"] == FORMAT_VERSION
    assert replay.keys() >= REQUIRED_KEYS
    return replay


def digest_of(action_ids: list[int]) -> str:
    return hashlib.sha256(b"".join(ACTION.pack(a, NO_VIBE) for a in action_ids)).hexdigest()
