"""Text that a policy controls, made inert before a person reads it in a terminal.

A policy controls much of what policybox shows: its exception messages and tracebacks, its log
output, the invalid actions it describes, labels its submission declares -- and a game or a spec
file controls agent names, stat names and error messages. Any of it may hold terminal control
sequences: ``ESC[2J`` clears the screen, ``ESC]0;...BEL`` sets the window title, OSC 8 plants a
hyperlink, ``ESC[1A ESC[2K`` moves up and erases a line (enough to rewrite a table the operator
reads). Every terminal view shows such text through ``inert``: each control character (C0 but
newline and tab, DEL, C1) and each bidirectional override (which reorders what the eye sees) is
replaced by its visible escape (``\\x1b[2J``), so a sequence is shown, never obeyed.

Result files keep the exact text (JSON escapes it); web pages escape it for HTML in their templates.
"""

from __future__ import annotations

import re

from rich.text import Text

# C0 controls but \t and \n, DEL and C1; Unicode's bidirectional marks, embeddings, overrides and
# isolates; and lone surrogates, which no terminal encoding can write.
_UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069\ud800-\udfff]")


def inert(text: str) -> str:
    """``text`` with every control character shown as its escape: ``"\\x1b[2J"`` for ESC [ 2 J."""
    return _UNSAFE.sub(_escape, text)


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def shown(text: object, style: str = "") -> Text:
    """``text`` as a rich Text for a table cell or a line: inert, and never read as rich markup
    (a ``[red]`` in a policy's message is shown as written)."""
    return Text(inert(str(text)), style=style)
