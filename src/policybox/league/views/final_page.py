"""The ladder's latest final (``ladder final``) as the ``/final`` page, its JSON and the report show it."""

from __future__ import annotations

from policybox.errors import NotFound
from policybox.league.ladder.final import FinalState, latest_final
from policybox.league.ladder.folder import LadderFolder


def final_page(ladder: LadderFolder) -> FinalState:
    """The latest final, open or done, with its ranking so far; NotFound (a 404) when there has been none."""
    final = latest_final(ladder)
    if final is None:
        raise NotFound("this ladder has had no final: ladder final DIR plays one")
    return final


def has_final(ladder: LadderFolder) -> bool:
    """Whether the ladder has had a final (the pages' navigation links to it then)."""
    return latest_final(ladder) is not None
