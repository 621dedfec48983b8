"""The checks beside the tests: mypy passes on ``src/`` at the strictness pyproject.toml's ``[tool.mypy]``
sets, and ruff passes on the code (its lint rules and its format).

Each runs as a tool would, in a process of its own from the repository's root. mypy keeps its cache in
``.mypy_cache`` there: a cold run takes a minute or two on two loaded cores, a warm one seconds.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).parents[1]


def run(*command: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", *command], cwd=ROOT, capture_output=True, text=True, timeout=900)


def test_mypy_passes_on_src() -> None:
    done = run("mypy")  # files, flags and overrides: pyproject.toml
    assert done.returncode == 0, f"mypy failed:\n{done.stdout}{done.stderr}"


def test_ruff_passes_on_the_code() -> None:
    for command in (("check",), ("format", "--check")):
        done = run("ruff", *command, "src", "tests", "benchmarks")
        assert done.returncode == 0, f"ruff {' '.join(command)} failed:\n{done.stdout}{done.stderr}"
