"""One played match's page: its seats with their placings, statuses and failures (each team's own
log tails and tracebacks for it alone), its stamp, the commands that play it again, and its replay
or moves when kept; and a MettaGrid match's replay as the page's player draws it."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

from policybox.errors import NotFound
from policybox.league.ladder import reads, rerun, retention
from policybox.league.ladder.database import reading
from policybox.league.ladder.folder import REPLAYS, LadderFolder
from policybox.league.views import game_facts, own_code, replays
from policybox.league.views.match_list import PLACING, placings, seat_results
from policybox.league.views.visibility import ID_MAX, own, public, visible
from policybox.results import EpisodeResult
from policybox.settings import REPLAY_SUFFIX


class MatchAgent(BaseModel):
    seat: int
    name: str
    version: int
    agent: str | None
    reward: float
    placing: str = Field(description=PLACING)
    status: str
    cause: str | None
    step: int | None
    message: str | None
    p50_ms: float | None
    p99_ms: float | None
    sandbox: dict[str, str]
    log_tail: str | None = Field(default=None, description="The end of its log, failed or not: its own team's only")
    traceback: own_code.Traceback | None = Field(default=None, description="Its failure's: its own team's only")


class MatchPage(BaseModel):
    id: int
    played_at: str | None
    seed: int
    steps: int
    env: dict[str, Any]
    aborted: str | None
    game_fault: str | None
    sandbox: str
    agents: list[MatchAgent]
    replay_command: str = Field(
        description="The policybox run command that plays this match again: DIR is the ladder's folder (rerun)"
    )
    check_command: str = Field(
        description="The policybox run command that plays this match again and says whether it ends the same, "
        "and what changed since it was played (its stamp)"
    )
    stamp: dict[str, Any] | None = Field(
        default=None,
        description="What it was played with (policybox.league.ladder.stamp): policybox's and the game's package "
        "versions, the game config's sha256, the seed, each version's digest; None: stored before stamps were kept",
    )
    replay_file: str | None = Field(
        default=None,
        description="Its replay's file name in the ladder's replays folder (MettaGrid's, or a PettingZoo game's "
        "moves), when the ladder kept one",
    )
    replay_note: str | None = Field(
        default=None, description="Why it has no replay (or no moves): not written, not kept, or unreadable"
    )
    moves: list[replays.Move] | None = Field(
        default=None, description="A PettingZoo match's moves (step, agent, action, reward, board), when kept"
    )
    logs_note: str | None = Field(
        default=None, description="When its agents' log folders are no longer kept (its log tails are)"
    )


def match_page(ladder: LadderFolder, match_id: int, private_for: set[str] | None = None) -> MatchPage:
    """One played match. ``private_for``: the names whose log tails and tracebacks may be shown (None:
    every name's)."""
    if not 0 <= match_id <= ID_MAX:
        raise NotFound(f"this ladder has no played match {match_id}")
    with reading(ladder.engine) as connection:
        row = reads.played_match(connection, match_id)
        if row is None:
            raise NotFound(f"this ladder has no played match {match_id}")
        seats = seat_results(connection, [match_id])[match_id]
    result = EpisodeResult.model_validate(row.result)
    placed = placings(result, [seat.name for seat in seats], ladder.settings.rank_by)
    agents = []
    for agent, seat, placing in zip(result.agents, seats, placed, strict=True):
        failure = agent.failure
        private = visible(seat.name, private_for)
        agents.append(
            MatchAgent(
                seat=seat.seat,
                name=seat.name,
                version=seat.version,
                agent=agent.agent,
                reward=agent.reward,
                placing=placing,
                status=agent.status.value,
                cause=public(failure.kind, private) if failure else None,
                step=failure.step if failure else None,
                message=public(failure.message, private) if failure else None,
                p50_ms=agent.latency.p50_ms,
                p99_ms=agent.latency.p99_ms,
                sandbox={layer: own_code.relative(state) for layer, state in agent.sandbox.items()},
                log_tail=own(agent.log_tail or (failure.log_tail if failure else None), private),
                traceback=own_code.fold_traceback(failure.traceback) if failure and private else None,
            )
        )
    replay = ladder.folder / REPLAYS / f"match-{match_id:06d}{REPLAY_SUFFIX}"
    replay_note, logs_note = retention.missing(ladder, match_id)
    moves = None
    if replay.is_file() and result.env.get("family") == "pettingzoo":
        try:
            moves = replays.moves(replay)
        except replays.Unreadable as exc:
            replay_note = str(exc)
    return MatchPage(
        id=row.id,
        played_at=row.played_at,
        seed=row.seed,
        steps=result.steps,
        env=game_facts.public_env(result.env),
        aborted=result.aborted,
        game_fault=result.game_fault.one_line() if result.game_fault else None,
        sandbox=result.sandbox,
        agents=agents,
        replay_command=rerun.command(result.seed, [(seat.name, seat.version) for seat in seats]),
        check_command=rerun.match_command(row.id),
        stamp=row.stamp,
        replay_file=replay.name if replay.is_file() else None,
        replay_note=replay_note,
        moves=moves,
        logs_note=logs_note,
    )


def match_replay(ladder: LadderFolder, match_id: int) -> dict[str, Any]:
    """A played MettaGrid match's kept replay, as the match page's player draws it (``replays``)."""
    page = match_page(ladder, match_id, private_for=set())
    if page.replay_file is None or page.env.get("family") != "mettagrid":
        why = page.replay_note or "a PettingZoo match's moves are in its page's data"
        raise NotFound(f"match {match_id} has no MettaGrid replay to play: {why}")
    try:
        return replays.mettagrid(ladder.folder / REPLAYS / page.replay_file, [a.name for a in page.agents], page.steps)
    except replays.Unreadable as exc:
        raise NotFound(f"match {match_id}: {exc}") from None
