"""What a team is shown of its own code: paths on the organiser's machine made relative, and a
traceback with the frames in its own files first and policybox's (and any library's) folded.

**No host path.** A version's files live at ``DIR/versions/files/<sha256>/<root>/...`` on the
organiser's machine, and a message or traceback a policy raised names them. ``relative`` cuts that
prefix (``policies/bot.py``) -- and, for a zip's, the folder it was unpacked to, named by the zip's
content hash (``policybox.submission``): ``224c2f2ac3fdeb36/bot.py`` is ``bot.py``, as the zip holds
it -- and the folders of policybox and of this Python's libraries (``policybox/cell/runtime.py``,
``mettagrid/...``), so that no view shows where the organiser keeps anything. ``visibility.public``
and ``visibility.own`` apply it to every text a policy controls, for every view.

**Own frames first.** A traceback's frames in files of the version (under ``versions/files/``) are
the team's; the others -- policybox's cell, the game, the standard library -- are folded: their text
is kept in ``folded`` (the page shows it in a ``<details>``) and counted in ``folded_frames``.
"""

from __future__ import annotations

import re
import sysconfig
from pathlib import Path

from pydantic import BaseModel, Field

import policybox
from policybox.host.sandbox import SCRATCH_PREFIX
from policybox.submission import DIGEST_HEX

# A version's copy (``versions.keep``): the 64-hex digest of its bundle, then the root's index; then, for
# a zip, the folder it was unpacked to (``submission.unpack_submission``: its content hash's first digits).
VERSION_FILES = re.compile(
    r"""[^\s"'<>]*/versions/files/[0-9a-f]{64}/[0-9]+/(?:[0-9a-f]{""" + str(DIGEST_HEX) + r"""}/)?"""
)
# Where policybox and this Python's libraries are installed: frames there are named from inside.
INSTALLED = sorted(
    {str(Path(policybox.__file__).parent.parent)}
    | {sysconfig.get_paths()[key] for key in ("purelib", "platlib", "stdlib", "platstdlib")},
    key=len,
    reverse=True,  # a longer prefix (site-packages) before the one it is inside (the stdlib's)
)
FRAME = re.compile(r'  File "(?P<path>[^"]*)", line \d+')
# A cell's scratch folder (``host.sandbox``: in the host's temporary folder): cut, as a version's files are.
SCRATCH = re.compile(r"""[^\s"'<>]*/""" + re.escape(SCRATCH_PREFIX) + r"""[^/\s"'<>]*/""")


def relative(text: str) -> str:
    """``text`` with every host path cut to its relative form: a version's files to the path inside
    the submission, a cell's scratch folder to the path inside it, policybox's and the libraries' to the
    package's."""
    text = SCRATCH.sub("", VERSION_FILES.sub("", text))
    for prefix in INSTALLED:
        text = text.replace(prefix + "/", "")
    return text


class Traceback(BaseModel):
    """A traceback as its team reads it."""

    own: str = Field(description="The traceback with the frames in the team's own files only, then the exception")
    folded_frames: int = Field(description="How many other frames (policybox's, the game's, libraries') were folded")
    folded: str = Field(description="Those frames' text, in their order")


def fold_traceback(text: str | None) -> Traceback | None:
    """A stored traceback (host paths in it) split into its own frames and the folded rest, then made
    ``relative``. None for no traceback."""
    if not text:
        return None
    own: list[str] = []
    folded: list[str] = []
    frames = 0
    into = own
    for line in text.splitlines(keepends=True):
        frame = FRAME.match(line)
        if frame:
            is_own = VERSION_FILES.match(frame["path"]) is not None
            into = own if is_own else folded
            frames += not is_own
        elif not line.startswith("    "):  # neither a frame nor its source line: the exception's text
            into = own
        into.append(line)
    return Traceback(own=relative("".join(own)), folded_frames=frames, folded=relative("".join(folded)))


ABSOLUTE_FOLDERS = re.compile(r"(?<![\w.~-])/(?:[^/\s,:=]+/)+")


def submitted(source: str) -> str:
    """A version's source as a page shows it: what the organiser submitted from their own folders
    (``/home/org/bots/walker.py:Walker``) by its file's name (``walker.py:Walker``)."""
    return ABSOLUTE_FOLDERS.sub("", source)
