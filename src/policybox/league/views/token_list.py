"""The tokens a ladder holds, by team, as the organiser lists them (``ladder tokens``): never a token
itself, which is not kept."""

from __future__ import annotations

from pydantic import BaseModel, Field

from policybox.league.ladder import reads
from policybox.league.ladder.database import reading
from policybox.league.ladder.folder import LadderFolder


class TokenRow(BaseModel):
    team: str
    token: int = Field(description="The token's number: the token itself is never kept, nor shown")
    created_at: str
    last_used: str | None = Field(description="When the web page last saw it (to the minute), if ever")
    sessions: int = Field(description="Its login sessions not ended")


class Tokens(BaseModel):
    tokens: list[TokenRow]


def tokens(ladder: LadderFolder) -> Tokens:
    """Every token the ladder holds, by team."""
    with reading(ladder.engine) as connection:
        rows = reads.token_rows(connection)
    return Tokens(
        tokens=[
            TokenRow(team=r.team, token=r.id, created_at=r.created_at, last_used=r.last_used, sessions=r.sessions)
            for r in rows
        ]
    )
