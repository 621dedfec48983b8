"""The board: a ladder's standings, one row per name, ranked by ``policybox.league.ranking``'s rules.

The views of a ladder -- this module, ``name_page``, ``match_list``, ``match_page``, ``queue_page``,
``conduct`` and ``token_list`` -- are one function each, returning a pydantic model: ``ladder ... --json``
prints it, the terminal tables render it, the web page's JSON API serves it and its HTML pages are
rendered from it. No view computes anything of its own: the ranking rules are ``policybox.league.ranking``'s;
nor runs SQL: its queries are ``policybox.league.ladder.reads``', each opened with ``database.reading``.
What is not there -- a name, a match, a replay -- is a ``NotFound`` (a 404 on the web page). What a
viewer sees of a policy's texts is ``visibility``'s rule.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field
from sqlalchemy import Connection

from policybox.league import ranking
from policybox.league.ladder import life, reads
from policybox.league.ladder.database import reading
from policybox.league.ladder.folder import LadderFolder
from policybox.league.ladder.life import VersionState
from policybox.league.ranking import Rating, Reward
from policybox.league.views import pulse
from policybox.league.views.pulse import Pulse
from policybox.league.views.visibility import reason, visible


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
            _standing(connection, name, current.get(name), visible(name, private_for))
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
                (r.their_version_id, outcome(r), their_outcome(r))
                for r in reads.meetings(connection, [current[upper.name].id])
                if r.their_version_id == theirs
            ).get(theirs)
        upper.versus_next, upper.versus_why = ranking.versus_meetings(upper.entry, lower.entry, tally)
    return rows


def outcome(meeting: Any) -> ranking.Outcome:
    """A meeting's (``reads.meetings``) outcome for its own side."""
    return ranking.Outcome(meeting.score, meeting.forfeited)


def their_outcome(meeting: Any) -> ranking.Outcome:
    """A meeting's outcome for the other side."""
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
