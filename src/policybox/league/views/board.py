"""What a ladder shows -- its standings, one name's page, its matches, one match, its queue -- as data.

One function per view, each returning a pydantic model: ``ladder status --json`` prints it, the
terminal tables render it, the web page's JSON API serves it and its HTML pages are rendered from
it. No view computes anything of its own: the ranking rules are ``policybox.league.ranking``'s; nor
runs SQL: its queries are ``policybox.league.ladder.reads``', each opened with ``database.reading``. What is
not there -- a name, a match, a replay -- is a ``NotFound`` (a 404 on the web page).

**What a policy wrote is its team's.** Every text a policy controls reaches a view through one of
two functions here, and nowhere else: ``public`` for a message (a failure's message and cause, a
reason) -- whole for the names a view is asked to show privately (``private=True`` /
``private_for``: the operator's command line sees every name's, the web page a team's own), else
its first line only: the status, the step, the exception's type and the first line of its message;
``own`` for what only the team sees at all (log tails, setup output). A game's fault and an aborted
episode's reason are stored as one line already (``one_line``). Both make every host path in it
relative (``policybox.league.views.own_code``): no view shows where the organiser keeps anything.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from typing import Any

from pydantic import BaseModel, Field
from sqlalchemy import Connection

from policybox.errors import NotFound
from policybox.files.version_files import NAME_PATTERN
from policybox.league import ranking
from policybox.league.choices import RankBy
from policybox.league.ladder import life, reads, rerun, retention
from policybox.league.ladder.database import reading
from policybox.league.ladder.folder import REPLAYS, LadderFolder
from policybox.league.ladder.life import VersionState
from policybox.league.ranking import Rating, Reward
from policybox.league.views import game_facts, own_code, pulse, replays
from policybox.league.views.pulse import Eta, Pulse
from policybox.league.views.summary import FailureCause, LatencySummary, failure_causes, latency
from policybox.lines import FULL_TEXT, first_line
from policybox.results import EpisodeResult, Failure, GameFault
from policybox.settings import REPLAY_SUFFIX

RECENT = 20
ID_MAX = 2**63 - 1  # the largest id SQLite and PostgreSQL can compare: none above it exists
FAILURES_SHOWN = 10  # groups of identical failures a name page lists
FAILURES_READ = 200  # of its latest failed seats, grouped into those
PLACING = (
    "Its policy's place in this match by the ladder's ranking rule (a forfeit below every policy that did "
    "not forfeit): win, draw or loss between two policies, else 1st, 2nd, ... (=2nd: a shared place)"
)


class Latest(BaseModel):
    """A name's newest version when it is not the one that plays (still qualifying, or rejected)."""

    version: int
    state: str
    reason: str | None = None


class Standing(BaseModel):
    rank: int | None = Field(
        default=None,
        description="Its place (equal ratings share one); None: unranked -- its playing version is not active, its "
        "name is retired, or it has not played yet. Unranked rows follow the ranked ones.",
    )
    name: str
    version: int = Field(description="The version that plays: the name's latest qualified one (else its latest)")
    state: str = Field(description="retired (the name's), else its playing version's: " + ", ".join(VersionState))
    rating: Rating | None = Field(
        default=None, description="Its ordinal (mu - 3 sigma) is the number the rows are sorted by; None: not rated"
    )
    matches: int = 0
    reward: Reward | None = None
    versus_next: str | None = Field(default=None, description=ranking.VERSUS_NEXT)
    versus_why: str | None = Field(
        default=None, description="Why vs next says what it says: the two intervals, and their head-to-head"
    )
    statuses: dict[str, int] = Field(default_factory=dict)
    forfeits: int = 0
    forfeit_note: str | None = Field(
        default=None, description="What the forfeit rule did to its ranking, when it forfeited (ranking.forfeit_note)"
    )
    timeouts: int = 0
    invalid_actions: int = 0
    reason: str | None = Field(default=None, description="Why it is not active: rejected, suspended, retired, ...")
    latest: Latest | None = None
    superseded: list[int] = Field(default_factory=list, description="Its versions replaced by a newer qualified one")
    team: str | None = Field(default=None, description="The team that owns it (None: the organiser's)")
    team_best: str | None = Field(
        default=None,
        description="On a ladder made with --one-per-team, its team's best name, ranked in its place (this one "
        "plays on, unranked); None otherwise",
    )

    @property
    def entry(self) -> ranking.Entry:
        """What placing it reads (``ranking.placed``): ranked only in a state ``life.ranked`` allows, and
        only as its team's best name on a ladder that ranks one per team."""
        return ranking.Entry(self.name, self.rating, self.reward, life.ranked(self.state) and self.team_best is None)


class Standings(BaseModel):
    rank_by: str
    rule: str
    matches: int = Field(description="Matches played")
    rows: list[Standing] = Field(description="The ranked rows, best first, then the unranked ones (``ranking.place``)")
    pulse: Pulse = Field(description="Whether ladder run is playing it: playing, idle or stopped since when")


def standings(ladder: LadderFolder, private_for: set[str] | None = None) -> Standings:
    """One row per name: the ranked ones best first, then the others. ``private_for``: the names whose
    reasons are shown whole (None: every name's); the others' reasons are cut to their first line."""
    with reading(ladder.engine) as connection:
        current = reads.current_versions(connection)
        rows = [
            _standing(connection, name, current.get(name), _visible(name, private_for))
            for name in reads.names_in_order(connection)
        ]
        teams = reads.teams_of_names(connection)
        played = reads.played(connection)
        now_playing = pulse.read(connection)
        for row in rows:
            row.team = teams.get(row.name)
        placed = ranking.placed(rows)
        if ladder.settings.one_per_team:
            placed = ranking.placed(_best_of_each_team(placed))
        placed = _explained(connection, placed, current)
    settings = ladder.settings
    return Standings(
        rank_by=settings.rank_by, rule=ranking.RULES[settings.rank_by], matches=played, rows=placed, pulse=now_playing
    )


def _explained(connection: Connection, rows: list[Standing], current: dict[str, Any]) -> list[Standing]:
    """``rows``, placed, each ranked one with what the forfeit rule did to it (``ranking.forfeit_note``),
    and its ``vs next`` read again with the two rows' head-to-head (``ranking.versus_meetings``) -- their
    playing versions' meetings, read only where the intervals overlap."""
    ranked = [row for row in rows if row.rank is not None]
    for at, row in enumerate(ranked):
        above = [other.name for other in ranked[at + 1 :] if not other.forfeits and other.rank != row.rank]
        row.forfeit_note = ranking.forfeit_note(row.forfeits, row.matches, above)
    for upper, lower in zip(ranked, ranked[1:], strict=False):
        tally = None
        if upper.versus_next == ranking.OVERLAPS:
            theirs = current[lower.name].id
            tally = ranking.head_to_head(
                (r.their_version_id, _outcome(r), _their_outcome(r))
                for r in reads.meetings(connection, [current[upper.name].id])
                if r.their_version_id == theirs
            ).get(theirs)
        upper.versus_next, upper.versus_why = ranking.versus_meetings(upper.entry, lower.entry, tally)
    return rows


def _outcome(meeting: Any) -> ranking.Outcome:
    return ranking.Outcome(meeting.score, meeting.forfeited)


def _their_outcome(meeting: Any) -> ranking.Outcome:
    return ranking.Outcome(meeting.their_score, meeting.their_forfeit)


def _best_of_each_team(placed: list[Standing]) -> list[Standing]:
    """``--one-per-team``: in each team, the ranked name placed highest (the ladder's rank order: its
    ordinal, then its mean reward, then its name) stays ranked; every other ranked name of its team is
    marked with it (``team_best``), to be placed unranked. The organiser's names are each their own."""
    best: dict[str, str] = {}
    for row in placed:
        if row.rank is None or row.team is None:
            continue
        if row.team in best:
            row.team_best = best[row.team]
        else:
            best[row.team] = row.name
    return placed


def _visible(name: str, private_for: set[str] | None) -> bool:
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


def _standing(connection: Connection, name: str, current: Any, private: bool) -> Standing:
    latest = reads.latest_version(connection, name)
    assert latest is not None
    retired = reads.name_row(connection, name).retired
    why = life.RETIRED_REASON if retired else None
    if current is None:  # nothing qualified yet: its latest is what there is to show
        return Standing(
            name=name,
            version=latest.number,
            state=life.shown_state(retired, latest.state),
            reason=why or reason(latest.reason, private),
        )
    row = Standing(
        name=name,
        version=current.number,
        state=life.shown_state(retired, current.state),
        rating=ranking.rating(ranking.MODEL.rating(mu=current.mu, sigma=current.sigma)),
        matches=current.matches,
        reward=_reward(connection, current),
        statuses=dict(current.statuses or {}),
        forfeits=current.forfeits,
        timeouts=current.timeouts,
        invalid_actions=current.invalid_actions,
        reason=why or reason(current.reason, private),
    )
    if latest.number != current.number:
        row.latest = Latest(version=latest.number, state=latest.state, reason=reason(latest.reason, private))
    row.superseded = reads.superseded(connection, current.name_id)
    return row


def _reward(connection: Connection, version: Any) -> Reward | None:
    """Its bootstrap interval while it has few matches (its scores fetched), else from its moments."""
    if version.matches <= ranking.BOOTSTRAP_MAX:
        return ranking.reward(reads.scores(connection, version.id))
    return ranking.reward_from_moments(version.matches, version.score_sum, version.score_squares)


class Conduct(BaseModel):
    """How the agents of a name's playing version ran, over all its matches."""

    name: str
    version: int
    latency: LatencySummary = Field(description="The median over its agents of their p50 and p99 step times")
    failures: list[FailureCause] = Field(description="How its agents failed, most often first, with the first example")


def conduct(ladder: LadderFolder) -> list[Conduct]:
    """Step latency and failure causes of each name's playing version (one row per name that has one),
    by the rules of ``evaluate``'s summary. A failure's example is its one line: no log tail."""
    with reading(ladder.engine) as connection:
        current = {row.id: row for row in reads.current_versions(connection).values()}
        seats = reads.played_seats(connection, current)
    by_version: dict[int, list[Any]] = defaultdict(list)
    for seat in seats:
        by_version[seat.version_id].append(seat)
    return [
        Conduct(
            name=version.name,
            version=version.number,
            latency=latency([(seat.p50_ms, seat.p99_ms) for seat in by_version[version_id]]),
            failures=failure_causes(
                (seat.match_id, seat.status, _failure(seat))
                for seat in by_version[version_id]
                if seat.status != "ok" and seat.failure_kind is not None
            ),
        )
        for version_id, version in sorted(current.items())
    ]


def _failure(seat: Any) -> Failure:
    """A stored seat's failure, as much of it as its one line needs."""
    step = seat.failure_step
    phase = "init" if step is None else "step"
    return Failure(step=step, phase=phase, kind=seat.failure_kind, message=seat.failure_message or "")


# ---------------------------------------------------------------------------------------------
# One name


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


class SeatResult(BaseModel):
    seat: int
    name: str
    version: int
    reward: float | None
    status: str | None
    cause: str | None = None
    placing: str | None = Field(default=None, description=PLACING)


class MatchRow(BaseModel):
    id: int
    played_at: str | None
    seed: int
    steps: int | None
    seats: list[SeatResult]
    game_fault: str | None = None


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
    tallies = ranking.head_to_head((r.name, _outcome(r), _their_outcome(r)) for r in meetings)
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


# ---------------------------------------------------------------------------------------------
# Matches


def match_rows(
    connection: Connection,
    rank_by: RankBy,
    version_ids: dict[int, int] | None = None,
    limit: int = 100,
    before: int | None = None,
    also_ids: dict[int, int] | None = None,
) -> list[MatchRow]:
    """Played matches, newest first (only those of ``version_ids`` if given, and of ``also_ids`` too;
    ids below ``before``), each seat placed by ``rank_by``."""
    found = reads.played_matches(connection, version_ids, limit, before, also_ids)
    seats = _seat_results(connection, [m.id for m in found])
    for m in found:
        placed = placings(EpisodeResult.model_validate(m.result), [seat.name for seat in seats[m.id]], rank_by)
        for seat, placing in zip(seats[m.id], placed, strict=True):
            seat.placing = placing
    return [
        MatchRow(
            id=m.id,
            played_at=m.played_at,
            seed=m.seed,
            steps=(m.result or {}).get("steps"),
            seats=seats[m.id],
            game_fault=_fault_line(m.result),
        )
        for m in found
    ]


def placings(result: EpisodeResult, seat_names: list[str], rank_by: RankBy) -> list[str]:
    """Each seat's placing in its match, by the ladder's own order of it (``ranking.places``): the
    seats of one policy share its place."""
    seated = [(seat_names[agent.agent_id], agent) for agent in result.agents]
    places = ranking.places(ranking.episode_outcomes(seated, result.steps, rank_by))
    shared = Counter(places.values())
    return [_placing(places[name], shared[places[name]], len(places)) for name in seat_names]


def _placing(place: int, sharing: int, policies: int) -> str:
    if policies == 2:
        return "draw" if sharing == 2 else ("win", "loss")[place]
    number = place + 1
    suffix = "th" if 10 <= number % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(number % 10, "th")
    return ("=" if sharing > 1 else "") + f"{number}{suffix}"


def _fault_line(result: dict[str, Any] | None) -> str | None:
    fault = (result or {}).get("game_fault")
    return None if fault is None else GameFault.model_validate(fault).one_line()


def _seat_results(connection: Connection, match_ids: list[int]) -> dict[int, list[SeatResult]]:
    found: dict[int, list[SeatResult]] = {match_id: [] for match_id in match_ids}
    for r in reads.seats_of(connection, match_ids):
        found[r.match_id].append(
            SeatResult(
                seat=r.seat,
                name=r.name,
                version=r.number,
                reward=r.reward,
                status=r.status,
                cause=public(r.failure_kind, private=False),  # a list's cell: its one line, for everyone
            )
        )
    return found


class MatchList(BaseModel):
    matches: list[MatchRow]
    name: str | None = Field(default=None, description="Only the matches of this name, when asked")
    opponent: str | None = Field(default=None, description="And of this opponent too, when asked")


def match_list(
    ladder: LadderFolder,
    limit: int = 100,
    before: int | None = None,
    name: str | None = None,
    opponent: str | None = None,
) -> MatchList:
    """The played matches, newest first: of ``name`` only, if given, and of ``opponent`` too (each a
    ``NotFound`` if the ladder has no such name)."""
    with reading(ladder.engine) as connection:
        ids, also = (_version_ids(connection, given) for given in (name, opponent))
        rows = match_rows(connection, ladder.settings.rank_by, ids, limit, before, also)
    return MatchList(matches=rows, name=name, opponent=opponent)


def _version_ids(connection: Connection, name: str | None) -> dict[int, int] | None:
    """A name's versions (id: number); None for no name."""
    if name is None:
        return None
    row = reads.name_row(connection, name) if NAME_PATTERN.fullmatch(name) else None
    if row is None:
        raise NotFound(f"this ladder has no submission called {name[:100]!r}")
    return {v.id: v.number for v in reads.versions_of(connection, row.id)}


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
        seats = _seat_results(connection, [match_id])[match_id]
    result = EpisodeResult.model_validate(row.result)
    placed = placings(result, [seat.name for seat in seats], ladder.settings.rank_by)
    agents = []
    for agent, seat, placing in zip(result.agents, seats, placed, strict=True):
        failure = agent.failure
        visible = _visible(seat.name, private_for)
        agents.append(
            MatchAgent(
                seat=seat.seat,
                name=seat.name,
                version=seat.version,
                agent=agent.agent,
                reward=agent.reward,
                placing=placing,
                status=agent.status.value,
                cause=public(failure.kind, visible) if failure else None,
                step=failure.step if failure else None,
                message=public(failure.message, visible) if failure else None,
                p50_ms=agent.latency.p50_ms,
                p99_ms=agent.latency.p99_ms,
                sandbox={layer: own_code.relative(state) for layer, state in agent.sandbox.items()},
                log_tail=own(agent.log_tail or (failure.log_tail if failure else None), visible),
                traceback=own_code.fold_traceback(failure.traceback) if failure and visible else None,
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


# ---------------------------------------------------------------------------------------------
# The queue


class QueueRow(BaseModel):
    name: str
    version: int
    state: str
    submitted_at: str
    reason: str | None = None
    setup_output: str | None = Field(default=None, description="Only for its own team (private views)")
    eta: Eta | None = Field(
        default=None,
        description="A qualifying version's place in the queue and ETA; None: its name is retired, and it waits "
        "until the name is reinstated",
    )
    under_way: bool = Field(default=False, description="Its qualification (setup, build or episode) is running")


class Queue(BaseModel):
    pulse: Pulse = Field(description="Whether ladder run is playing: with the matches in flight")
    qualifying: list[QueueRow] = Field(description="Oldest first: the order they qualify in")
    rejected: list[QueueRow]


def queue(ladder: LadderFolder, private_for: set[str] | None = None) -> Queue:
    """The versions qualifying and those rejected. ``private_for``: the names whose reasons and setup
    output are shown whole (None: every name's); the others' reasons are cut to their first line."""
    with reading(ladder.engine) as connection:
        rows = reads.queued(connection)
        now_playing = pulse.read(connection)

    def shown(r: Any) -> QueueRow:
        private = _visible(r.name, private_for)
        return QueueRow(
            name=r.name,
            version=r.number,
            state=r.state,
            submitted_at=r.submitted_at,
            reason=reason(r.reason, private),
            setup_output=own(r.setup_output, private),
        )

    qualifying = [shown(r) for r in rows if r.state == VersionState.QUALIFYING]
    retired = {(r.name, r.number) for r in rows if r.retired}
    waiting = [row for row in qualifying if (row.name, row.version) not in retired]  # a retired name's waits
    for place, row in enumerate(waiting, 1):
        row.eta = pulse.eta(place, now_playing, ladder.settings.placement_matches)
        row.under_way = f"{row.name} v{row.version}" in now_playing.qualifying
    return Queue(
        pulse=now_playing,
        qualifying=qualifying,
        rejected=[shown(r) for r in rows if r.state == VersionState.REJECTED],
    )


def has_version(ladder: LadderFolder, name: str, version: int) -> bool:
    with reading(ladder.engine) as connection:
        return reads.version_id(connection, name, version) is not None


def queue_eta(ladder: LadderFolder, name: str, version: int) -> Eta | None:
    """When version ``version`` of ``name`` qualifies, by its place in the queue; None: it is not queued."""
    rows = queue(ladder, set()).qualifying
    return next((row.eta for row in rows if (row.name, row.version) == (name, version)), None)


# ---------------------------------------------------------------------------------------------
# Tokens (the organiser's: ``ladder tokens``)


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
