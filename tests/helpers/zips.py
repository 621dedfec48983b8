"""Submission zips the tests upload: ``bot.py`` and a ``policy_spec.json`` naming its class, and the bots
they hold (the examples' wanderer, as itself or renamed)."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

from helpers.ladders import EXAMPLES

WANDERER_SOURCE = (EXAMPLES / "wanderer.py").read_text()
ZIGZAG = WANDERER_SOURCE.replace("class Wanderer(", "class Zigzag(")
SLOW_BOT = ZIGZAG + (
    "\n\nclass Slow(Zigzag):\n    def __init__(self, *args, **kwargs):\n        import time\n\n"
    "        time.sleep(12)\n        super().__init__(*args, **kwargs)\n"
)


def bot_zip(path: Path, class_name: str = "Wanderer", source: str = WANDERER_SOURCE) -> Path:
    """A submission zip at ``path``: ``bot.py`` (``source``) and a policy_spec.json naming ``bot.py:class_name``."""
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("policy_spec.json", json.dumps({"class_path": f"bot.py:{class_name}"}))
        archive.writestr("bot.py", source)
    return path
