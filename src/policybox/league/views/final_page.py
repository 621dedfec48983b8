"""The ladder's latest final (``ladder final``) as the ``/final`` page and its JSON show it, and each of
its matches (``/final/matches/N``): its seats, how each agent ended, and its replay, played in the page."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

from policybox.errors import NotFound
from policybox.league.ladder.final import FinalState, latest_final, latest_final_match, replay_name
from policybox.league.ladder.folder import REPLAYS, LadderFolder
from policybox.league.ladder.schema import MatchState
from policybox.league.views import replays
from policybox.league.views.visibility import public
from policybox.results import EpisodeResult


class FinalPage(BaseModel):
    """The ``/final`` page: the latest final, or none when the ladder has had none yet."""

    final: FinalState | None = Field(description="The latest final, open or done, with its ranking so far")


def final_page(ladder: LadderFolder) -> FinalPage:
    return FinalPage(final=latest_final(ladder))


def has_final(ladder: LadderFolder) -> bool:
    """Whether the ladder has had a final (the pages' navigation links to it then)."""
    return latest_final(ladder) is not None


class FinalSeat(BaseModel):
    """One seat of a final's match: who played it and how its agent ended (a message's first line only:
    a final's page is the same for everyone)."""

    seat: int
    name: str
    version: int
    reward: float
    status: str
    cause: str | None = None
    step: int | None = Field(default=None, description="The step index its failure happened at, from 0")
    message: str | None = None


class FinalMatchPage(BaseModel):
    """A match of the latest final (``/final/matches/N``)."""

    final: int
    number: int = Field(description="Its place in the final's schedule, from 0 (the page numbers it from 1)")
    state: MatchState = Field(description="scheduled, played or void")
    played_at: str | None
    seed: int
    steps: int | None
    family: str | None = Field(description="The game's family: mettagrid, pettingzoo, ...")
    placing: list[list[str]] | None = Field(description="Groups of names, best first")
    reason: str | None = Field(description="Why it is void")
    seats: list[FinalSeat]
    replay_file: str | None = Field(description="Its replay's file name, when the ladder kept one")


def final_match(ladder: LadderFolder, number: int) -> FinalMatchPage:
    """Match ``number`` of the latest final (NotFound: none such)."""
    stored = latest_final_match(ladder, number)
    if stored is None:
        raise NotFound(f"the latest final has no match numbered {number}")
    row = stored.row
    result = EpisodeResult.model_validate(row.result) if row.result else None
    replay = replay_name(stored.final_id, number)
    return FinalMatchPage(
        final=stored.final_id,
        number=number,
        state=row.state,
        played_at=row.played_at,
        seed=row.seed,
        steps=result.steps if result else None,
        family=result.env.get("family") if result else None,
        placing=row.placing,
        reason=row.reason,
        seats=_seats(stored.seats, result),
        replay_file=replay if (ladder.folder / REPLAYS / replay).is_file() else None,
    )


def _seats(seats: list[tuple[str, int]], result: EpisodeResult | None) -> list[FinalSeat]:
    if result is None:
        return []
    found = []
    for agent in result.agents:
        name, version = seats[agent.agent_id]
        failure = agent.failure
        found.append(
            FinalSeat(
                seat=agent.agent_id,
                name=name,
                version=version,
                reward=agent.reward,
                status=agent.status.value,
                cause=public(failure.kind, private=False) if failure else None,
                step=failure.step if failure else None,
                message=public(failure.message, private=False) if failure else None,
            )
        )
    return found


def final_match_replay(ladder: LadderFolder, number: int) -> dict[str, Any]:
    """A final's MettaGrid match's kept replay, as its page's player draws it (``replays``)."""
    page = final_match(ladder, number)
    if page.replay_file is None or page.family != "mettagrid" or page.steps is None:
        raise NotFound(f"the final's match numbered {number} has no MettaGrid replay to play")
    try:
        names = [seat.name for seat in page.seats]
        return replays.mettagrid(ladder.folder / REPLAYS / page.replay_file, names, page.steps)
    except replays.Unreadable as exc:
        raise NotFound(f"the final's match numbered {number}: {exc}") from None
