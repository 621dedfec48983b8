"""One name's page: its versions, rating history, opponents (and the cycles and problem opponents
among them), seats, recent matches and failures; for its own team, its log tails and setup output
too (``ladder show``, the name page, and each version of a team's page)."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from pydantic import BaseModel, Field
from sqlalchemy import Connection

from policybox.errors import NotFound
from policybox.files.version_files import NAME_PATTERN
from policybox.league import ranking
from policybox.league.ladder import reads
from policybox.league.ladder.database import reading
from policybox.league.ladder.folder import LadderFolder
from policybox.league.ranking import Rating
from policybox.league.views import own_code
from policybox.league.views.match_list import MatchRow, match_rows
from policybox.league.views.standings import Standing, outcome, standings, their_outcome
from policybox.league.views.visibility import own, public, reason

RECENT = 20  # matches, and log tails, a name page lists
FAILURES_SHOWN = 10  # groups of identical failures a name page lists
FAILURES_READ = 200  # of its latest failed seats, grouped into those


class VersionInfo(BaseModel):
    version: int
    state: str
    reason: str | None
    digest: str
    source: str
    submitted_at: str
    qualified_at: str | None
    matches: int
    rating: Rating | None


class RatingPoint(BaseModel):
    match: int
    version: int
    played_at: str | None
    rating: Rating


class Opponent(ranking.Tally):
    """A name's record against another name, over their matches (``ranking.head_to_head``), beside what
    their ratings expect of it."""

    name: str
    matches: int = 0
    expected: float | None = Field(
        default=None,
        description="The score per match (a win 1, a draw ½) the two playing versions' current ratings expect of "
        "it (ranking.expected_share); None unless both are rated",
    )
    disagrees: bool = Field(
        default=False, description="expected lies outside the 95% interval of its record's score share"
    )
    why: str | None = Field(default=None, description="When it disagrees: what the record and the ratings count")


class ProblemOpponent(BaseModel):
    """How a name does against another, against what their ratings expect (RoboRumble's ProblemBot index)."""

    name: str
    matches: int
    actual: float = Field(description="Its score per match against it: a win 1, a draw ½, a loss 0")
    expected: float = Field(description="What their current ratings expect of it (ranking.expected_share)")
    problem: float = Field(description="actual - expected: below 0, it does worse against it than its rating says")


class SeatRecord(BaseModel):
    seat: int
    plays: int
    mean_reward: float | None


class FailureRow(BaseModel):
    match: int = Field(description="The latest match it failed in this way")
    count: int = Field(
        default=1,
        description="How many of its latest failed seats failed this same way: the same version, status, cause, "
        "message and traceback (the step and log tail shown are the latest one's)",
    )
    version: int
    seat: int
    status: str
    step: int | None
    cause: str | None
    message: str | None
    log_tail: str | None = Field(default=None, description="Only for its own team (private views)")
    traceback: own_code.Traceback | None = Field(
        default=None, description="Only for its own team: its own frames first, policybox's folded"
    )


class SeatLog(BaseModel):
    """The end of one of its agents' logs in a match it played, failed or not: its own team's only."""

    match: int
    version: int
    seat: int
    status: str
    log_tail: str | None


class SetupOutput(BaseModel):
    """What a version's setup script printed when it qualified: its own team's only."""

    version: int
    output: str


class NamePage(BaseModel):
    name: str
    standing: Standing
    versions: list[VersionInfo]
    history: list[RatingPoint]
    head_to_head: list[Opponent]
    cycles: list[list[str]] = Field(
        default_factory=list,
        description="The rock-paper-scissors cycles it is in, [a, b, c]: a clearly beats b, b c, and c a "
        "(ranking.cycles), each from this name",
    )
    problems: list[ProblemOpponent] = Field(
        default_factory=list,
        description="The opponents it scores less against than the ratings expect (actual - expected below 0), "
        "worst first: both rated names' only; empty when it does at least as well as expected against each",
    )
    seats: list[SeatRecord]
    recent: list[MatchRow]
    failures: list[FailureRow]
    logs: list[SeatLog] = Field(
        default_factory=list,
        description="Its recent matches' log tails, the empty ones left out: its own team's only",
    )
    setups: list[SetupOutput] = Field(default_factory=list, description="Its setup scripts' output: its team's only")


def name_page(ladder: LadderFolder, name: str, private: bool = False) -> NamePage:
    """Everything about ``name``: its versions, rating history, opponents, seats, matches, failures
    (``private``: with its log tails and whole reasons)."""
    if not NAME_PATTERN.fullmatch(name):  # none was stored (and a NUL is no text to PostgreSQL)
        raise NotFound(f"this ladder has no submission called {name[:100]!r}")
    ranked = standings(ladder, None if private else set())  # before this connection: a writer's holds the lock
    with reading(ladder.engine) as connection:
        row = reads.name_row(connection, name)
        if row is None:
            raise NotFound(f"this ladder has no submission called {name!r}")
        own = reads.versions_of(connection, row.id)
        ids = {v.id: v.number for v in own}
        standing = next(s for s in ranked.rows if s.name == name)
        return NamePage(
            name=name,
            standing=standing,
            versions=[version_info(v, private) for v in own],
            history=rating_points(connection, ids),
            head_to_head=(opponents := _opponents(connection, name, ids, ladder.settings.versions_per_match)),
            problems=_problems(opponents),
            cycles=_cycles_of(connection, name),
            seats=_seat_records(connection, ids),
            recent=match_rows(connection, ladder.settings.rank_by, ids, RECENT),
            failures=_failures(connection, ids, private),
            logs=_logs(connection, ids) if private else [],
            setups=_setups(connection, ids) if private else [],
        )


def version_info(row: Any, private: bool) -> VersionInfo:
    """A version's row (``reads.versions_of``) as a page shows it; ``private``: its reason whole."""
    rated = row.mu is not None
    return VersionInfo(
        version=row.number,
        state=row.state,
        reason=reason(row.reason, private),
        digest=row.digest,
        source=own_code.submitted(row.source),
        submitted_at=row.submitted_at,
        qualified_at=row.qualified_at,
        matches=row.matches,
        rating=ranking.rating(ranking.MODEL.rating(mu=row.mu, sigma=row.sigma)) if rated else None,
    )


def rating_points(connection: Connection, ids: dict[int, int]) -> list[RatingPoint]:
    """The rating of each version of ``ids`` (id: number) after each match that rated it, by match."""
    return [
        RatingPoint(
            match=r.match_id,
            version=ids[r.version_id],
            played_at=r.played_at,
            rating=ranking.rating(ranking.MODEL.rating(mu=r.mu, sigma=r.sigma)),
        )
        for r in reads.rating_history(connection, ids)
    ]


def _opponents(connection: Connection, name: str, ids: dict[int, int], per_match: int) -> list[Opponent]:
    """Its record against each other name it met, by name (``ranking.head_to_head``), each beside what
    the two playing versions' ratings expect of it, and why when the record disagrees (``per_match``:
    the ladder's versions per match)."""
    meetings = reads.meetings(connection, ids)
    tallies = ranking.head_to_head((r.name, outcome(r), their_outcome(r)) for r in meetings)
    current = reads.current_versions(connection)
    mine = current.get(name)
    opponents = []
    for other, tally in sorted(tallies.items()):
        opponent = Opponent(name=other, matches=tally.played, **tally.model_dump())
        theirs = current.get(other)
        if mine is not None and theirs is not None and _rated(mine) and _rated(theirs):
            opponent.expected = ranking.expected_share(_openskill(mine), _openskill(theirs))
            opponent.disagrees = ranking.disagrees(tally, opponent.expected)
            if opponent.disagrees:
                others = sum(
                    r.name == other and (r.version_id != mine.id or r.their_version_id != theirs.id) for r in meetings
                )
                opponent.why = _why_it_disagrees(tally.played, others, mine.matches, per_match)
        opponents.append(opponent)
    return opponents


def _rated(version: Any) -> bool:
    return version.mu is not None


def _openskill(version: Any) -> Any:
    return ranking.MODEL.rating(mu=version.mu, sigma=version.sigma)


def _why_it_disagrees(played: int, others: int, matches: int, per_match: int) -> str:
    """Why a record of ``played`` matches (``others`` of them by versions other than the two playing now)
    disagrees with the ratings, of a version that played ``matches``: what each counts."""
    reasons = [
        f"the ratings come from all {matches} matches of its playing version, against every opponent, and "
        "place the names on one scale: how each of the two does against the others counts as much as their "
        f"{played} meetings"
    ]
    if others:
        reasons.append(
            f"{others} of these {played} matches were played by other versions than the two playing now, whose "
            "ratings the expectation is from"
        )
    if per_match > 2:
        reasons.append(
            f"a match holds {per_match} policies: the ratings count its place among all of them, this record only "
            "which of these two placed higher"
        )
    return "; ".join(reasons)


def _cycles_of(connection: Connection, name: str) -> list[list[str]]:
    """The rock-paper-scissors cycles ``name`` is in, among every pair of names that met, each from it."""
    tallies = ranking.head_to_head(
        (
            (r.name, r.their_name),
            ranking.Outcome(r.score, r.forfeited),
            ranking.Outcome(r.their_score, r.their_forfeit),
        )
        for r in reads.all_meetings(connection)
    )
    found = []
    for cycle in ranking.cycles(tallies):
        if name in cycle:
            at = cycle.index(name)
            found.append([*cycle[at:], *cycle[:at]])
    return found


def _problems(opponents: list[Opponent]) -> list[ProblemOpponent]:
    """The opponents it does worse against than the two names' current ratings expect, worst first."""
    found = [
        ProblemOpponent(
            name=o.name, matches=o.matches, actual=o.share, expected=o.expected, problem=o.share - o.expected
        )
        for o in opponents
        if o.expected is not None and o.played and o.share < o.expected
    ]
    return sorted(found, key=lambda p: (p.problem, p.name))


def _seat_records(connection: Connection, ids: dict[int, int]) -> list[SeatRecord]:
    rewards: dict[int, list[float]] = defaultdict(list)
    for r in reads.seat_rewards(connection, ids):
        rewards[r.seat].append(r.reward)
    return [
        SeatRecord(seat=s, plays=len(v), mean_reward=sum(v) / len(v) if v else None) for s, v in sorted(rewards.items())
    ]


def _failures(connection: Connection, ids: dict[int, int], private: bool) -> list[FailureRow]:
    """Its latest failures, the identical ones grouped and counted (``FailureRow.count``), newest first;
    for its own team with the log tail and the traceback (which the match's stored result holds, up to
    ``Failure``'s 8000 characters)."""
    groups: dict[tuple[Any, ...], FailureRow] = {}
    for r in reads.failed_seats(connection, ids, FAILURES_READ):
        row = FailureRow(
            match=r.match_id,
            version=ids[r.version_id],
            seat=r.seat,
            status=r.status,
            step=r.failure_step,
            cause=public(r.failure_kind, private),
            message=public(r.failure_message, private),
            log_tail=own(r.log_tail, private),
            traceback=_traceback(r.result, r.seat) if private else None,
        )
        key = (row.version, row.status, row.cause, row.message, row.traceback and row.traceback.model_dump_json())
        if key in groups:
            groups[key].count += 1
        elif len(groups) < FAILURES_SHOWN:
            groups[key] = row
    return list(groups.values())


def _traceback(result: dict[str, Any] | None, seat: int) -> own_code.Traceback | None:
    """The traceback of seat ``seat``'s failure in a stored match result, folded for its team."""
    agents = (result or {}).get("agents") or []
    failure = agents[seat].get("failure") if seat < len(agents) else None
    return own_code.fold_traceback((failure or {}).get("traceback"))


def _setups(connection: Connection, ids: dict[int, int]) -> list[SetupOutput]:
    return [
        SetupOutput(version=ids[r.version_id], output=own(r.setup_output, True) or "")
        for r in reads.setup_outputs(connection, ids)
    ]


def _logs(connection: Connection, ids: dict[int, int]) -> list[SeatLog]:
    """Its latest seats' log tails, the empty ones (nothing or white space only) left out."""
    return [
        SeatLog(
            match=r.match_id, version=ids[r.version_id], seat=r.seat, status=r.status, log_tail=own(r.log_tail, True)
        )
        for r in reads.latest_logs(connection, ids, RECENT)
        if r.log_tail.strip()
    ]
