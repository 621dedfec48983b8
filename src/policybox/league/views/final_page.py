"""The ladder's latest final (``ladder final``) as the ``/final`` page and its JSON show it."""

from __future__ import annotations

from pydantic import BaseModel, Field

from policybox.league.ladder.final import FinalState, latest_final
from policybox.league.ladder.folder import LadderFolder


class FinalPage(BaseModel):
    """The ``/final`` page: the latest final, or none when the ladder has had none yet."""

    final: FinalState | None = Field(description="The latest final, open or done, with its ranking so far")


def final_page(ladder: LadderFolder) -> FinalPage:
    return FinalPage(final=latest_final(ladder))


def has_final(ladder: LadderFolder) -> bool:
    """Whether the ladder has had a final (the pages' navigation links to it then)."""
    return latest_final(ladder) is not None
