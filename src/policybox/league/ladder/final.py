"""``ladder final``: a final ranking of the ladder's field, with its uncertainty.

**The field is frozen** when a final opens: the playing version of every ranked name (its current
version, active, the name not retired, with a match played) -- the ids are stored with the final. A
version submitted or activated later does not play in it; and while a final is open, ``ladder run``
plays no rated match and activates nothing (``run_loop``'s rule: it waits), so new submissions wait.

**The schedule** is ``balanced`` seating's (``policybox.league.play.seating``) over the frozen
versions, ``rounds`` whole cycles (``seating.cycle``), in the ladder's format: a match holds the
ladder's ``versions_per_match`` versions (``places``), each in every ``places``-th seat
(``final_schedule``). Every version plays equally often, in every seat equally often. All of it
is stored when the final opens, each match with its seed and seats, so a final that is killed
continues where it was, run again: the matches stored as played are kept, the others played. Each
match's seed is drawn as a rated match's is (``draw_seed``): nothing a policy sees tells a final's
match from a rated one.

**Matches are played** as the ladder plays one -- its game, seats, limits, logs and replays
(``run_loop.episode_job``), on the same runners, the machinery's failures retried and a match they
fail every time void -- and stored with their placing (by the ladder's ranking rule) in the final's
own table, never in ``matches``: they are not rated. OpenSkill stays the online rating.

**The ranking** is ``policybox.league.stats.final_placings.rank_placings`` over every played match of the
final (Plackett-Luce, bootstrap intervals, rank probabilities, groups). With ``until_separated`` N,
up to N more matches go to the adjacent pairs still uncertain (``uncertain_pairs``): one match per
such pair a batch, the pair seated together and the other seats given to the versions that played
the fewest of the final's matches, rotated so the pair changes seats; the ranking is refitted after
each batch, and it stops early once no pair is uncertain. The final is then ``done``
(``FinalStage``).

This module decides; it runs no SQL. A final's rows are ``final_store``'s to write (and to read
while it plays); what a view shows of one (``latest_final``) is read through ``reads``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, Field
from sqlalchemy import Connection

from policybox.league import ranking
from policybox.league.choices import Backend
from policybox.league.ladder import final_store, heartbeat, reads, version_store
from policybox.league.ladder.database import LadderError, reading, transaction
from policybox.league.ladder.folder import REPLAYS, LadderFolder
from policybox.league.ladder.run_loop import episode_job
from policybox.league.ladder.schema import FinalStage, MatchState
from policybox.league.play.backends import open_runner
from policybox.league.play.runner import EpisodeRunner, play_all
from policybox.league.play.seating import balanced_seats, cycle
from policybox.league.play.tournament import draw_seed
from policybox.league.stats.final_placings import Placing, placing, rank_placings
from policybox.league.stats.plackett_luce import FinalRanking, uncertain_pairs
from policybox.results import EpisodeResult
from policybox.settings import REPLAY_SUFFIX

COMMAND = "ladder final"  # what its lock and its heartbeat say runs
ROUNDS = 2  # cycles of the balanced schedule a final plays by default
SEPARATING_PER_PAIR = 20  # matches ``separate`` suggests for each adjacent pair a final could not order


class FinalMatch(BaseModel):
    """One match of a final: its place in the schedule, and how it ended."""

    number: int = Field(description="Its place in the final's schedule, from 0; the separating matches follow")
    state: MatchState = Field(description="scheduled, played or void")
    placing: list[list[str]] | None = Field(default=None, description="Groups of names, best first (played only)")
    reason: str | None = Field(default=None, description="Why it is void")
    played_at: str | None = None
    replay: str | None = Field(default=None, description="Its replay's file name, when the ladder kept one")


class FinalState(BaseModel):
    """A final as every view shows it: what it froze, how far it is, and its ranking so far."""

    id: int
    state: FinalStage = Field(description="open (being played, or stopped before its end) or done")
    created_at: str
    rounds: int = Field(description="Cycles of the balanced schedule")
    versions: list[str] = Field(description="The frozen field: name vN of each version")
    retired: list[str] = Field(
        description="Names of the field retired since it opened: still in its ranking (the field is frozen), "
        "not on the standings"
    )
    scheduled: int = Field(description="Matches stored, played or not")
    played: int
    void: int = Field(description="Matches the machinery failed every time: they count for nobody")
    ranking: FinalRanking
    separate: str | None = Field(
        default=None,
        description="When a group holds several names: the --until-separated N that a final played with would "
        "spend on the pairs it could not order, in words",
    )
    until_separated: int | None = Field(default=None, description="That N (SEPARATING_PER_PAIR for each pair)")
    matches: list[FinalMatch] = Field(default_factory=list, description="Its matches, in schedule order")


@dataclass(frozen=True)
class _Final:
    id: int
    version_ids: list[int]
    seed: int


def play_final(
    ladder: LadderFolder,
    rounds: int = ROUNDS,
    until_separated: int = 0,
    workers: int | None = None,
    backend: Backend = "local",
    ray_address: str | None = None,
    on_match: Callable[[int], None] | None = None,
) -> FinalState:
    """Open a final (or continue the open one), play it to its end and close it; its state.
    ``on_match(n)`` is told how many of its matches are stored, after each."""
    with ladder.running(COMMAND):
        final = _open(ladder, rounds)
        with (
            heartbeat.beating_alone(ladder.engine, COMMAND, lambda: _progress(ladder, final.id)),
            open_runner(backend, workers, ray_address, ladder.settings.settings) as runner,
        ):
            _play_scheduled(ladder, runner, final, on_match)
            _separate(ladder, runner, final, until_separated, on_match)
        with transaction(ladder.engine) as connection:
            final_store.close_final(connection, final.id)
    state = latest_final(ladder)
    assert state is not None
    return state


def _open(ladder: LadderFolder, rounds: int) -> _Final:
    """The open final, or a new one over the frozen field with its schedule stored."""
    with transaction(ladder.engine) as connection:
        row = final_store.open_final(connection)
        if row is not None:
            return _Final(row.id, list(row.version_ids), row.seed)
        field = frozen_field(connection)
        if len(field) < 2:
            raise LadderError("a final needs at least two ranked names (active, not retired, with a match played)")
        seed = draw_seed()  # its schedule's
        final_id = final_store.add_final(connection, field, rounds, seed)
        schedule = final_schedule(len(field), ladder.settings.agents, places(ladder), rounds, seed)
        _schedule(connection, _Final(final_id, field, seed), 0, [[field[i] for i in row] for row in schedule])
        return _Final(final_id, field, seed)


def places(ladder: LadderFolder) -> int:
    """Different versions in a final's match: the ladder's ``versions_per_match``, at most its seats --
    a final plays the format its ladder plays."""
    return min(ladder.settings.versions_per_match, ladder.settings.agents)


def final_schedule(versions: int, seats: int, places: int, rounds: int, seed: int) -> list[list[int]]:
    """The version (an index of the field) in each seat of every scheduled match: ``balanced`` seating
    over ``places`` places a match, ``rounds`` whole cycles of it, place p holding the seats s with
    s mod ``places`` = p. Every version takes every place equally often, so every seat too; in a match
    of two places, every pair meets equally often."""
    groups = balanced_seats(versions, places, rounds * cycle(versions, places), seed)
    return [[group[seat % places] for seat in range(seats)] for group in groups]


def frozen_field(connection: Connection) -> list[int]:
    """The playing version of every ranked name, by name: what a final opened now would play."""
    current = version_store.current_versions(connection)
    return [
        row.id
        for name, row in sorted(current.items())
        if row.state in version_store.PLAYING and not row.retired and row.matches > 0
    ]


def _schedule(connection: Connection, final: _Final, first: int, seat_maps: list[list[int]]) -> None:
    # each match's seed its own, drawn as a rated match's is: a policy cannot tell them apart
    final_store.add_matches(connection, final.id, first, [(draw_seed(), seats) for seats in seat_maps])


def _play_scheduled(
    ladder: LadderFolder, runner: EpisodeRunner, final: _Final, on_match: Callable[[int], None] | None
) -> None:
    """Play every match of the final stored as scheduled, storing each as it ends (void if the
    machinery fails it every time)."""
    with transaction(ladder.engine) as connection:
        waiting = final_store.waiting(connection, final.id)
        labels = version_store.names_by_id(connection, final.version_ids)
    jobs = {
        row.number: episode_job(
            ladder,
            _job_name(final.id, row.number),
            row.seed,
            [(version_id, ladder.stored(version_id).spec) for version_id in row.seats],
            replay=True,
        )
        for row in waiting
    }
    seats_of = {row.number: list(row.seats) for row in waiting}

    def finished(number: Hashable, result: EpisodeResult) -> None:
        assert isinstance(number, int)
        seated = ((labels[seats_of[number][agent.agent_id]], agent) for agent in result.agents)
        order = placing(ranking.episode_outcomes(seated, result.steps, ladder.settings.rank_by))
        with transaction(ladder.engine) as connection:
            final_store.record_match(connection, final.id, number, order, result)
        if on_match:
            on_match(number + 1)

    for number, why in play_all(runner, dict(jobs), finished).items():
        assert isinstance(number, int)
        with transaction(ladder.engine) as connection:
            final_store.void_match(connection, final.id, number, why)


def _separate(
    ladder: LadderFolder,
    runner: EpisodeRunner,
    final: _Final,
    budget: int,
    on_match: Callable[[int], None] | None,
) -> None:
    """Spend up to ``budget`` matches (counting those a killed run already spent) on the uncertain pairs."""
    with transaction(ladder.engine) as connection:
        scheduled = final_store.rounds(connection, final.id) * cycle(len(final.version_ids), places(ladder))
    while True:
        with transaction(ladder.engine) as connection:
            total = final_store.match_count(connection, final.id)
            if total - scheduled >= budget:
                return
            pairs = uncertain_pairs(rank_placings(final_store.placings(connection, final.id)))
            if not pairs:
                return
            labels = version_store.names_by_id(connection, final.version_ids)
            by_label = {label: version_id for version_id, label in labels.items()}
            plays = final_store.plays(connection, final.id)
            batch = [
                separating_match(
                    (by_label[a], by_label[b]), final.version_ids, plays, ladder.settings.agents, places(ladder), turn
                )
                for turn, (a, b) in enumerate(pairs[: budget - (total - scheduled)], start=total)
            ]
            _schedule(connection, final, total, batch)
        _play_scheduled(ladder, runner, final, on_match)


def separating_match(
    pair: tuple[int, int], field: list[int], plays: dict[int, int], seats: int, places: int, turn: int
) -> list[int]:
    """A match for an uncertain pair: the two, and in the other ``places`` the versions of ``field``
    that played the fewest matches (``plays``; then by place in the field), every seat rotated by
    ``turn`` so the pair takes every seat in turn. With as many places as the field or more, every
    version plays, rotated the same way; with two places, the pair alone, each in every other seat."""
    others = sorted((v for v in field if v not in pair), key=lambda v: (plays.get(v, 0), field.index(v)))
    members = [*pair, *others][: min(places, len(field))]
    return [members[(turn + seat) % len(members)] for seat in range(seats)]


def _progress(ladder: LadderFolder, final_id: int) -> str:
    """How far the final is, as its heartbeat says it: ``3 of 12 matches played``."""
    with reading(ladder.engine) as connection:
        counted = final_store.states(connection, final_id)
    return f"{sum(counted.values()) - counted[MatchState.SCHEDULED]} of {sum(counted.values())} matches played"


def latest_final(ladder: LadderFolder) -> FinalState | None:
    """The latest final, open or done, with its ranking so far; None when the ladder has had none."""
    with reading(ladder.engine) as connection:
        row = reads.latest_final(connection)
        if row is None:
            return None
        labels = reads.final_field(connection, row.version_ids)
        stored = reads.final_matches_of(connection, row.id)
    states = Counter(match.state for match in stored)
    placings: list[Placing] = [match.placing for match in stored if match.state == MatchState.PLAYED]
    ranked = rank_placings(placings)
    return FinalState(
        id=row.id,
        state=row.state,
        created_at=row.created_at,
        rounds=row.rounds,
        versions=[f"{label.name} v{label.number}" for label in labels],
        retired=[label.name for label in labels if label.retired],
        scheduled=len(stored),
        played=states[MatchState.PLAYED],
        void=states[MatchState.VOID],
        ranking=ranked,
        separate=separate(ranked),
        until_separated=separating_budget(ranked) or None,
        matches=[_final_match(ladder, row.id, match) for match in stored],
    )


def replay_name(final_id: int, number: int) -> str:
    """The file name of a final match's replay in the ladder's replays folder (``episode_job``'s)."""
    return f"{_job_name(final_id, number)}{REPLAY_SUFFIX}"


def _job_name(final_id: int, number: int) -> str:
    return f"final-{final_id}-{number:05d}"


def _final_match(ladder: LadderFolder, final_id: int, row: Any) -> FinalMatch:
    replay = replay_name(final_id, row.number)
    return FinalMatch(
        number=row.number,
        state=row.state,
        placing=row.placing,
        reason=row.reason,
        played_at=row.played_at,
        replay=replay if (ladder.folder / REPLAYS / replay).is_file() else None,
    )


def separating_budget(ranking: FinalRanking) -> int:
    """The ``--until-separated`` N to suggest: ``SEPARATING_PER_PAIR`` for each pair the ranking could not order."""
    return SEPARATING_PER_PAIR * len(uncertain_pairs(ranking))


def separate(ranking: FinalRanking) -> str | None:
    """What to do when a group of the ranking holds several names: ``--until-separated N``,
    ``SEPARATING_PER_PAIR`` matches for each adjacent pair it could not order; None when every name
    is a group of its own."""
    pairs = uncertain_pairs(ranking)
    if not pairs:
        return None
    budget = separating_budget(ranking)
    shared = sorted({entry.group for entry in ranking.names if any(entry.name in pair for pair in pairs)})
    groups = ", ".join(str(group) for group in shared)
    plural = "s" if len(shared) != 1 else ""
    return (
        f"group{plural} {groups} hold{'' if plural else 's'} several names, whose order these matches do not settle: "
        f"a final played with --until-separated {budget} spends up to {budget} more matches on the "
        f"{len(pairs)} pair{'s' if len(pairs) != 1 else ''} next to each other in one group "
        "(it stops once none is uncertain)"
    )


@dataclass(frozen=True)
class StoredFinalMatch:
    """One stored match of the latest final: its row, and each seat's name and version number."""

    final_id: int
    row: Any
    seats: list[tuple[str, int]]


def latest_final_match(ladder: LadderFolder, number: int) -> StoredFinalMatch | None:
    """Match ``number`` of the latest final, as stored; None when there is no such match."""
    with reading(ladder.engine) as connection:
        final = reads.latest_final(connection)
        if final is None:
            return None
        row = reads.final_match(connection, final.id, number)
        if row is None:
            return None
        labels = reads.version_refs(connection, row.seats)
    return StoredFinalMatch(final.id, row, [labels[version_id] for version_id in row.seats])
