"""A results folder of ``policybox evaluate``, or a ladder, as one self-contained HTML page.

``report_data(DIR)`` gathers what the page shows -- standings, head-to-head, latency, seats, failures,
and what is left to play or was refused -- as one pydantic model, from the views that already rank:
``load_summary`` for a tournament's folder (it holds ``tournament.json``), ``policybox.league.views``' (its
standings, name pages, conduct and queue) for a ladder's (``ladder.json``). Nothing is ranked here.
``render`` turns it into the page through ``templates/report.html.j2``.

The page is one file that works offline and may be shared: its style is inline, its plots are
``policybox.league.views.plots``' inline SVG, it holds no script at all (and a Content-Security-Policy that
would refuse one), and it fetches nothing. Every text a policy controls -- names, failure messages,
stat names -- is escaped by the template's autoescape; the plots escape their own text and are the
only markup embedded as is. A ladder's rejections show the first line of their reason only: tracebacks
and log tails belong to the teams.
"""

from __future__ import annotations

import stat
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field

import policybox
from policybox.errors import PolicyboxError
from policybox.league import ranking
from policybox.league.evaluate import REPORT_FILE
from policybox.league.evaluate.results_folder import TOURNAMENT_FILE, load_summary, load_tournament
from policybox.league.ladder.final import FinalState, latest_final
from policybox.league.ladder.folder import FOLDER_FILE, LadderFolder
from policybox.league.ranking import Rating, Reward
from policybox.league.stats.plackett_luce import FinalRanking
from policybox.league.views import conduct, name_page, plots, queue_page, standings, visibility
from policybox.league.views.summary import FailureCause, LatencySummary, PolicySummary, differing_stats
from policybox.league.views.templating import environment
from policybox.storage import write_atomically

SHARED_MODE = 0o644
PRIVATE_MODE = 0o600

STATS_SHOWN = 8


class Row(BaseModel):
    """One row of the standings: a tournament's policy or a ladder's name, as its view ranked it."""

    rank: int | None = Field(description="Its place (shared by equal ratings); None: not ranked yet")
    name: str
    version: int | None = Field(default=None, description="A ladder's: the version that plays")
    state: str | None = Field(default=None, description="A ladder's: its name's state (standings.Standing.state)")
    rating: Rating | None
    reward: Reward | None
    versus_next: str | None = Field(description=ranking.VERSUS_NEXT)
    versus_why: str | None = Field(default=None, description="A ladder's: why vs next says what it says")
    played: int = Field(description="Its episodes (a ladder: the matches of the version that plays)")
    forfeits: int
    forfeit_note: str | None = Field(default=None, description="A ladder's: what the forfeit rule did to it")
    statuses: dict[str, int] = Field(description="Its agent results per status")
    latency: LatencySummary | None
    failures: list[FailureCause] = Field(description="How its agents failed; each example is one line")
    seats: list[int] = Field(description="Its plays per seat")
    stats: dict[str, float] = Field(default_factory=dict, description="The game stats that tell the rows apart")
    note: str | None = Field(default=None, description="Why it is rejected or suspended, in one line")


class Meeting(BaseModel):
    """One row's record against another, by the ranking rule (the summary's or the board's)."""

    name: str
    opponent: str
    record: ranking.Tally


class Rejection(BaseModel):
    """A ladder's version that failed its qualification, and why in one line."""

    name: str
    version: int
    reason: str


class History(BaseModel):
    """A ladder name's rating after each of its matches."""

    name: str
    points: list[name_page.RatingPoint]


class ReportData(BaseModel):
    """Everything the report shows, from a tournament's folder or a ladder's."""

    kind: Literal["tournament", "ladder"]
    folder: str = Field(description="The folder's name (not its path: a report may be shared)")
    game: str = Field(description="The game, as the organiser gave it (--env)")
    agents: int
    steps: int
    unit: Literal["episodes", "matches"]
    played: int = Field(description="Episodes finished (a ladder: matches played)")
    expected: int | None = Field(default=None, description="A tournament's episodes in all")
    made_at: str
    rank_by: str
    rule: str = Field(description="The ranking rule in force, in words")
    rows: list[Row]
    head_to_head: list[Meeting]
    cycles: list[list[str]] = Field(
        default_factory=list, description="Rock-paper-scissors cycles among the head-to-head (ranking.cycles)"
    )
    stats: list[str] = Field(default_factory=list, description="The game stats shown, each row's mean per agent")
    incomplete: dict[int, str] = Field(default_factory=dict, description="A tournament's episodes that failed, why")
    not_played: int = Field(default=0, description="A tournament's episodes not played yet (nor failed)")
    game_faults: int = Field(default=0, description="Episodes the game itself ended by raising")
    histories: list[History] = Field(default_factory=list)
    qualifying: int = Field(default=0, description="A ladder's versions waiting for their qualification")
    rejections: list[Rejection] = Field(default_factory=list)
    final: FinalRanking | None = Field(
        default=None, description="The final ranking: a tournament's played as a final, or a ladder's latest final"
    )
    final_note: str | None = Field(default=None, description="What the final played, in words")


def report_data(folder: Path) -> ReportData:
    """What the report of ``folder`` -- a results folder of ``policybox evaluate`` or a ladder's -- shows."""
    if (folder / TOURNAMENT_FILE).is_file():
        return _tournament_data(folder)
    if (folder / FOLDER_FILE).is_file():
        with LadderFolder.open(folder, read_only=True) as ladder:
            return _ladder_data(ladder)
    if not folder.is_dir():
        raise PolicyboxError(f"there is no folder {folder}: give a results folder of policybox evaluate or a ladder's")
    raise PolicyboxError(
        f"{folder} is neither a results folder nor a ladder: it should hold the {TOURNAMENT_FILE} of a "
        f"policybox evaluate --out DIR, or the {FOLDER_FILE} of a policybox ladder init DIR"
    )


def _tournament_data(folder: Path) -> ReportData:
    tournament, summary = load_tournament(folder), load_summary(folder)
    stats = differing_stats(summary.policies, STATS_SHOWN)
    meetings = [
        Meeting(name=a, opponent=b, record=r) for a, row in summary.head_to_head.items() for b, r in row.items()
    ]
    return ReportData(
        kind="tournament",
        folder=folder.resolve().name,
        game=tournament.settings.env,
        agents=tournament.agents,
        steps=tournament.settings.steps,
        unit="episodes",
        played=summary.episodes_done,
        expected=summary.episodes_expected,
        made_at=_now(),
        rank_by=summary.rank_by,
        rule=summary.rule,
        rows=[_policy_row(entry, stats) for entry in summary.policies],
        head_to_head=meetings,
        cycles=_cycles(meetings),
        stats=stats,
        incomplete=summary.incomplete,
        not_played=summary.episodes_expected - summary.episodes_done - len(summary.incomplete),
        game_faults=summary.game_faults,
        final=summary.final,
        final_note=None if summary.final is None else f"the balanced schedule of {summary.episodes_done} episodes",
    )


def _cycles(meetings: list[Meeting]) -> list[list[str]]:
    return [list(cycle) for cycle in ranking.cycles({(m.name, m.opponent): m.record for m in meetings})]


def _policy_row(entry: PolicySummary, stats: list[str]) -> Row:
    return Row(
        rank=entry.rank,
        name=entry.policy,
        rating=entry.rating,
        reward=entry.reward,
        versus_next=entry.versus_next,
        played=entry.episodes,
        forfeits=entry.forfeits,
        statuses=entry.statuses,
        latency=entry.latency,
        failures=entry.failures,
        seats=entry.seats,
        stats={name: entry.stats.get(name, 0.0) for name in stats},
    )


def _ladder_data(ladder: LadderFolder) -> ReportData:
    board = standings.standings(ladder)
    pages = {row.name: name_page.name_page(ladder, row.name) for row in board.rows}  # public: no log tails
    conducts = {entry.name: entry for entry in conduct.conduct(ladder)}
    queue = queue_page.queue(ladder, private_for=set())  # public: each reason's first line
    seats = ladder.settings.agents
    meetings = [Meeting(name=n, opponent=o.name, record=o) for n, page in pages.items() for o in page.head_to_head]
    final = latest_final(ladder)
    return ReportData(
        kind="ladder",
        folder=ladder.folder.name,
        game=ladder.settings.settings.env,
        agents=seats,
        steps=ladder.settings.settings.steps,
        unit="matches",
        played=board.matches,
        made_at=_now(),
        rank_by=board.rank_by,
        rule=board.rule,
        rows=[_standing_row(row, conducts.get(row.name), pages[row.name], seats) for row in board.rows],
        head_to_head=meetings,
        cycles=_cycles(meetings),
        histories=[History(name=name, points=page.history) for name, page in pages.items() if page.history],
        qualifying=len(queue.qualifying),
        rejections=[Rejection(name=r.name, version=r.version, reason=r.reason or "") for r in queue.rejected],
        final=None if final is None else final.ranking,
        final_note=None if final is None else final_note(final),
    )


def final_note(final: FinalState) -> str:
    """A ladder's final in words: which, how far, over which versions, unrated."""
    return (
        f"final {final.id} ({final.state}, opened {final.created_at}): {final.played} of {final.scheduled} matches "
        f"played over {', '.join(final.versions)}; its matches are not rated"
        + (f"; retired since it opened: {', '.join(final.retired)}" if final.retired else "")
    )


def _standing_row(
    row: standings.Standing, conducted: conduct.Conduct | None, page: name_page.NamePage, seats: int
) -> Row:
    plays = {record.seat: record.plays for record in page.seats}
    return Row(
        rank=row.rank,
        name=row.name,
        version=row.version,
        state=row.state,
        rating=row.rating if row.matches else None,
        reward=row.reward,
        versus_next=row.versus_next,
        versus_why=row.versus_why,
        played=row.matches,
        forfeits=row.forfeits,
        forfeit_note=row.forfeit_note,
        statuses=row.statuses,
        latency=conducted.latency if conducted else None,
        failures=conducted.failures if conducted else [],
        seats=[plays.get(seat, 0) for seat in range(seats)],
        note=visibility.reason(row.reason, False),
    )


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")


# ---------------------------------------------------------------------------------------------
# The page


def render(data: ReportData) -> str:
    """The report's HTML page: ``data`` and its plots (``templating``'s environment: autoescape on)."""
    page = environment.get_template("report.html.j2")
    return page.render(data=data, plots=_plots(data), version=policybox.__version__)


@dataclass(frozen=True)
class Plots:
    """The page's SVG plots, each a whole ``<svg>`` element whose text the plot escaped itself."""

    intervals: str
    head_to_head: str
    p50: str
    p99: str
    histories: list[str]


def _plots(data: ReportData) -> Plots:
    intervals = [plots.Interval(row.name, row.reward.mean, *row.reward.ci95) for row in data.rows if row.reward]
    met = {meeting.name for meeting in data.head_to_head}
    cells = {(m.name, m.opponent): (m.record.balance, m.record.record) for m in data.head_to_head if m.record.played}
    timed = [(row.name, row.latency) for row in data.rows if row.latency is not None and row.played]
    return Plots(
        intervals=plots.interval_plot(intervals),
        head_to_head=plots.heat_map(
            [row.name for row in data.rows if row.name in met], cells, "head-to-head: row vs column, W-D-L"
        ),
        p50=plots.bars([(name, latency.p50_ms) for name, latency in timed], "step time, p50 of its agents", " ms"),
        p99=plots.bars([(name, latency.p99_ms) for name, latency in timed], "step time, p99 of its agents", " ms"),
        histories=[
            plots.rating_history(
                [(point.match, point.rating.mu, point.rating.sigma) for point in history.points],
                f"{history.name}: rating, mu and ±sigma, per match",
            )
            for history in data.histories
        ],
    )


def write_report(folder: Path, out: Path | None = None, private: bool = False) -> Path:
    """Write the report of ``folder`` to ``out`` (default ``folder/report.html``); where it went."""
    target = out or folder / REPORT_FILE
    publish(target, render(report_data(folder)), private)
    return target


def publish(target: Path, page: str, private: bool = False) -> None:
    """Write ``page`` to ``target``, readable by others (a report is made to be shared: 0644); with
    ``private``, by its owner alone (0600)."""
    write_atomically(target, page)
    target.chmod(PRIVATE_MODE if private else SHARED_MODE)


def unreachable_folder(target: Path) -> Path | None:
    """The first folder above ``target`` that other users cannot pass through (no ``o+x``: a ladder's
    folder is 0700), if any: a report readable by others is still out of their reach there."""
    for folder in target.absolute().parents:
        if not folder.stat().st_mode & stat.S_IXOTH:
            return folder
    return None
