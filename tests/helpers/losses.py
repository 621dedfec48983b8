"""Why a name lost, as the tests see it: a ladder whose team alpha's crasher (a zip) raises with a
``<script>`` in its message at every match, beside a walker and beta's silent noop, having played
rated matches and a final."""

from __future__ import annotations

import hashlib
import json
import zipfile
from dataclasses import dataclass
from pathlib import Path

from conftest import POLICIES, policy

from helpers.ladders import GAME, WANDERER, activate
from policybox import EpisodeSettings, LadderSettings
from policybox.ladder import Ladder
from policybox.submission import DIGEST_HEX

SCRIPT = "<script>window.pwned=1</script>"
MATCHES = 9


@dataclass
class Cup:
    folder: Path
    tokens: dict[str, str]
    zip_digest: str  # the first DIGEST_HEX hex digits of crasher's zip: its unpacked folder's name


def crasher_zip(path: Path) -> Path:
    """Team alpha's submission: ``bot.py`` (tests/policies/losses.py) and its spec, as a zip."""
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("policy_spec.json", json.dumps({"class_path": "bot.py:ScriptRaise"}))
        archive.writestr("bot.py", (POLICIES / "losses.py").read_text())
    return path


def make_cup(root: Path) -> Cup:
    """The losses ladder, in ``root/cup``, having played ``MATCHES`` rated matches and a final of one round."""
    folder = root / "cup"
    bot = crasher_zip(root / "crasher.zip")
    episodes = EpisodeSettings(env=GAME, steps=30)
    made = LadderSettings(settings=episodes, agents=4, placement_matches=0, suspend_after=100, replays=True)
    with Ladder.create(folder, made) as ladder:
        tokens = {team: ladder.token(team) for team in ("alpha", "beta")}
        ladder.submit("walker", WANDERER)
        ladder.submit("crasher", str(bot), team="alpha")
        ladder.submit("silent", policy("losses.py:Silent"), team="beta")
        for name in ("walker", "crasher", "silent"):
            activate(ladder, name)
        assert ladder.run(matches=MATCHES, workers=2).played == MATCHES
        ladder.final(rounds=1, workers=2)
    return Cup(folder, tokens, hashlib.sha256(bot.read_bytes()).hexdigest()[:DIGEST_HEX])
