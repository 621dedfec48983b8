"""The checks beside the tests, as the architecture page gives them: ruff passes on the code (its lint
rules and its format), and mypy passes on ``src/`` at the strictness pyproject.toml's ``[tool.mypy]``
sets.

The page's block runs as written, from the repository's root. mypy keeps its cache in ``.mypy_cache``
there: a cold run takes 15 CPU-seconds (torch, scipy and Ray are not followed), a warm one 2.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from helpers.docs import CHECKS, block

ROOT = Path(__file__).parents[1]


def test_the_checks_pass() -> None:
    command = block(*CHECKS).strip().replace(".venv/bin", str(Path(sys.executable).parent))
    run = subprocess.run(["bash", "-c", command], cwd=ROOT, capture_output=True, text=True, timeout=900)
    assert run.returncode == 0, f"{command}\n{run.stdout}{run.stderr}"
