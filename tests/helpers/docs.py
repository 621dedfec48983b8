"""The documentation's code blocks, found by page, heading, language and place: the blocks the tests run
or check (``tests/test_docs.py`` judges them all; other test files run a few)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import NamedTuple

ROOT = Path(__file__).parents[2]
FENCE = re.compile(r"^( *)```(\w*)\s*$")


class Block(NamedTuple):
    page: str  # README.md, or a file of docs/
    heading: str  # the heading the block is under
    language: str
    index: int  # its place among that heading's blocks of that language, from 0


def page_path(page: str) -> Path:
    return ROOT / page if page == "README.md" else ROOT / "docs" / page


def parse_blocks(text: str) -> dict[tuple[str, str, int], str]:
    """Every fenced block of a Markdown text, by (heading, language, index), its code unindented."""
    found: dict[tuple[str, str, int], str] = {}
    heading, lines, i = "", text.splitlines(), 0
    while i < len(lines):
        fence = FENCE.match(lines[i])
        if fence:
            indent, language = fence.groups()
            body, i = [], i + 1
            while lines[i].rstrip() != f"{indent}```":
                body.append(lines[i][len(indent) :])
                i += 1
            index = sum(1 for key in found if key[:2] == (heading, language))
            found[(heading, language, index)] = "\n".join(body) + "\n"
        elif lines[i].startswith("#"):
            heading = lines[i].lstrip("#").strip()
        i += 1
    return found


def block(page: str, heading: str, language: str, index: int = 0) -> str:
    return parse_blocks(page_path(page).read_text())[(heading, language, index)]


PLANNER = Block("environments.md", "A submission's requirements", "python", 0)
WHEELHOUSE = Block("environments.md", "An offline competition: a wheelhouse", "bash", 0)
CHECKS = Block("architecture.md", "Checks", "bash", 0)
