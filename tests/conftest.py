"""Shared fixtures: policy file paths, a one-call episode runner, and a no-leftover-process guard."""

from __future__ import annotations

from pathlib import Path

import psutil
import pytest

from policybox.episode import EpisodeSettings, run_episode
from policybox.results import EpisodeResult

POLICIES = Path(__file__).parent / "policies"


def policy(name: str, **extra: str) -> str:
    """A -p string for a test policy: ``policy("faults.py:RaiseInStep")``."""
    return ",".join([str(POLICIES / name), *(f"{key}={value}" for key, value in extra.items())])


@pytest.fixture
def play(tmp_path: Path):
    """Run one episode: ``play(["random", policy("x.py:X")], agents=4, steps=50, mode="inline")``
    (``agents=None``: the game's own number)."""

    def _play(policies: list[str], agents: int | None = 4, **settings) -> EpisodeResult:
        settings.setdefault("steps", 50)
        return run_episode(policies, EpisodeSettings(**settings), tmp_path / "logs", agents=agents)

    return _play


@pytest.fixture(autouse=True)
def no_process_survives():
    """Every test must leave no child process behind (cells are reaped, not orphaned)."""
    yield
    children = descendants()
    assert not children, f"processes left behind: {[(c.pid, c.cmdline()) for c in children]}"


def descendants() -> list[psutil.Process]:
    """This process's children, recursively, but for multiprocessing's resource tracker (started by
    the evaluator's worker pool), which lives as long as this process by design: it is not a cell."""
    return [
        child
        for child in psutil.Process().children(recursive=True)
        if "multiprocessing.resource_tracker" not in " ".join(_cmdline(child))
    ]


def _cmdline(process: psutil.Process) -> list[str]:
    try:
        return process.cmdline()
    except psutil.Error:
        return []
