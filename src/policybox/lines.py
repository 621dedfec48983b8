"""Long text in one line: cut at a word boundary with a visible marker, never mid-word in silence.

Every view that shows a message or a reason in one line -- a failure's ``one_line``, a reason's first
line on a public page, a table's note -- goes through these two functions, so a shortened text says
that it is shortened (and, for a reason, where the whole of it is).
"""

from __future__ import annotations

MARKER = "…"
FULL_TEXT = "(full text: its name page, for its own team)"


def clip(text: str, limit: int) -> str:
    """``text`` if it fits in ``limit`` characters, else cut at the last word boundary before the limit
    (mid-word only for a word longer than the whole limit) and ended with ``MARKER``."""
    if len(text) <= limit:
        return text
    head = text[: limit - len(MARKER)]
    if text[len(head)] != " " and " " in head.strip():  # the cut falls inside a word: drop that word
        head = head.rsplit(" ", 1)[0]
    return head.rstrip(" ,;:") + MARKER


def first_line(text: str, where: str | None = None) -> str:
    """Up to the first line break of any kind (``str.splitlines``'s: \\r, \\x1c, \\u2028 too). With
    ``where``, when more follows, the line ends with ``MARKER`` and says where the full text is."""
    lines = text.splitlines() or [""]
    if where is None or not any(line.strip() for line in lines[1:]):
        return lines[0]
    return f"{lines[0].rstrip(MARKER).rstrip()} {MARKER} {where}"
