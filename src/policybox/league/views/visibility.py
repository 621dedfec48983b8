"""What a viewer may see of what a policy wrote, for every view (the ladder's pages, the terminal's
tables, the JSON): the one owner of that rule.

**What a policy wrote is its team's.** Every text a policy controls reaches a view through one of
two functions here, and nowhere else: ``public`` for a message (a failure's message and cause, a
reason) -- whole for the names a view is asked to show privately (``private=True`` /
``private_for``: the operator's command line sees every name's, the web page a team's own), else
its first line only: the status, the step, the exception's type and the first line of its message;
``own`` for what only the team sees at all (log tails, setup output). A game's fault and an aborted
episode's reason are stored as one line already (``one_line``). Both make every host path in it
relative (``policybox.league.views.own_code``): no view shows where the organiser keeps anything.

And which ids there can be: none above ``ID_MAX``, so a page asked for one is not found, unread.
"""

from __future__ import annotations

from policybox.league.views import own_code
from policybox.lines import FULL_TEXT, first_line

ID_MAX = 2**63 - 1  # the largest id SQLite and PostgreSQL can compare: none above it exists


def visible(name: str, private_for: set[str] | None) -> bool:
    """Whether ``name``'s texts are shown whole: it is among ``private_for`` (None: every name's are)."""
    return private_for is None or name in private_for


def public(text: str | None, private: bool, where: str | None = None) -> str | None:
    """A policy's message (a failure's message or cause, a reason) as a viewer may see it: whole for
    its own team, else its first line (the status, step and cause; never the traceback that follows);
    ``where``: what that line says, when more follows, of where the full text is (a reason's). Either
    way with the ladder's own paths made relative (``own_code.relative``)."""
    if text is None:
        return None
    return own_code.relative(text if private else first_line(text, where))


def reason(text: str | None, private: bool) -> str | None:
    """A version's reason as a viewer may see it (``public``): its first line says where the rest is."""
    return public(text, private, FULL_TEXT)


def own(text: str | None, private: bool) -> str | None:
    """What only a policy's own team sees at all -- a log tail, a setup's output: None for anyone else."""
    return own_code.relative(text) if private and text is not None else None
