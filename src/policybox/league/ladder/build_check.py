"""The check every submission passes before a ladder stores it: its policy is built in a cell.

It is the check ``policybox evaluate`` and ``ladder run`` make before any episode
(``policybox.startup.check_policies``): the policy imported, built and loaded in its own cell, under
the ladder's sandbox and start-up deadline, in a game opened for the ladder's seats -- never in the
process that asks (always ``--mode process``, even on a ladder that plays inline: ``ladder serve``
must not import an upload). No step is played, and nothing is stored: a misspelt class is refused
with the cell's own reason ("no class 'Zigzog' in bot.py; it defines Zigzag") at submit, not found at
qualification.

A spec with a ``setup_script`` or ``requirements`` is not built here: what it needs may only exist
once its script has run, or its environment is built, and both happen at qualification (in the
ladder's setup workers, ``policybox.files.setup_scripts``; by ``policybox.files.environments``); its
build is checked there. Nor is a bare shorthand (``random``, ``noop``: no checkpoint, no
keyword arguments), which is the game family's own policy -- ``check_shorthands`` has found it.
"""

from __future__ import annotations

import re
from pathlib import Path

from policybox.settings import EpisodeSettings
from policybox.spec import PolicySpec
from policybox.startup import check_policies


def check_builds(spec: PolicySpec, settings: EpisodeSettings, agents: int, files: Path | None = None) -> None:
    """Raise ``PolicyRefused`` (one line per reason) if ``spec`` cannot be built in a cell under
    ``settings``; nothing if it can, or if it has a setup script still to run or requirements to build.
    ``files``: the folder the spec's files were unpacked to (each submission a folder in it), left out of
    the paths the refusal names, before it is cut to a line (a team is shown ``bot.py``, not the
    organiser's folders)."""
    if (
        spec.setup_script
        or spec.requirements
        or (spec.is_shorthand and spec.data_path is None and not spec.init_kwargs)
    ):
        return  # a bare shorthand is the game family's own policy: nothing of the entrant's to build
    checked = settings.model_copy(update={"mode": "process", "replay": None})
    unpacked = None if files is None else re.compile(re.escape(f"{files}/") + r"[^/\s]+/?")
    check_policies([spec], checked, agents, tidy=None if unpacked is None else lambda text: unpacked.sub("", text))
