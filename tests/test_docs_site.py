"""The docs build as a site, and the architecture page describes the code as it is."""

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).parents[1]
ARCHITECTURE = ROOT / "docs" / "architecture.md"


def test_the_site_builds_strictly(tmp_path):
    """``mkdocs build --strict``: every page in the nav, every link and anchor found."""
    build = [sys.executable, "-m", "mkdocs", "build", "--strict", "-f", ROOT / "mkdocs.yml", "-d", tmp_path / "site"]
    quiet = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}  # Material's banner about its successor
    run = subprocess.run(build, capture_output=True, text=True, timeout=300, env=quiet)
    assert run.returncode == 0, run.stdout + run.stderr
    assert (tmp_path / "site" / "architecture" / "index.html").exists()


def modules(package: Path) -> set[str]:
    """Every module of a package folder by its dotted name, and every package (a folder of modules,
    with an ``__init__.py`` or without); the starter submissions are files a ladder hands out, not
    modules."""
    names = set()
    for path in package.rglob("*.py"):
        parts = path.relative_to(package.parent).with_suffix("").parts
        if "starters" not in parts:
            names |= {".".join(parts[:end]) for end in range(1, len(parts))}
            names.add(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return names


def rows() -> set[str]:
    """The modules the architecture page's layout tables have a row for (the first column)."""
    return set(re.findall(r"^\| `(policybox[\w.]*)` \|", ARCHITECTURE.read_text(), re.M))


def test_the_architecture_page_has_a_row_for_every_module():
    missing = modules(ROOT / "src" / "policybox") - rows()
    assert not missing, f"modules without a row in docs/architecture.md: {sorted(missing)}"


def test_every_module_the_architecture_page_names_exists():
    gone = rows() - modules(ROOT / "src" / "policybox")
    assert not gone, f"rows of docs/architecture.md for modules that do not exist: {sorted(gone)}"
