"""What the terminal shows of an episode and of a leaderboard, readable at 80 columns.

Numbers are never split across lines; a long policy name is shortened in a table and given in full
below it; failure messages are lines of their own under the table, wrapped by the terminal rather
than cut. Every text that a policy, a game or a spec file controls goes through ``policybox.inert``.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from rich import box
from rich.console import Console
from rich.measure import Measurement
from rich.segment import Segments
from rich.table import Table
from rich.text import Text

from policybox.inert import shown
from policybox.lines import first_line
from policybox.results import AgentStatus, EpisodeResult, failure_line
from policybox.sandbox import SandboxLevel

if TYPE_CHECKING:  # a leaderboard's modules (OpenSkill, numpy) are imported by the commands that show one
    from policybox.league.ranking import Rating, Reward
    from policybox.league.stats.plackett_luce import FinalRanking
    from policybox.league.views.match_list import MatchList, MatchRow, SeatResult
    from policybox.league.views.name_page import NamePage
    from policybox.league.views.standings import Standings
    from policybox.league.views.summary import HeadToHead, Summary
    from policybox.league.views.token_list import Tokens

NAME_WIDTH = 16  # of a policy name in a table; the full name is listed below when it is longer
LADDER_NAME_WIDTH = 12  # in the ladder's standings, so that every column fits 80 columns
RATING = "rating\nμ−3σ"  # the ordinal: the number standings are sorted by
VERSUS_NEXT = "vs next\n(rating)"
RATING_NOTE = (
    "rating: μ−3σ, the number the rows are sorted by; vs next: rating intervals μ±2σ, clear (apart, reward agrees; "
    "on a ladder also overlapping, with a one-sided head-to-head), overlaps, or mixed (apart, the next row's reward "
    "higher); unranked rows follow the ranked"
)
WHOLE_REASON = "(full text: policybox ladder status --json)"
SHORT_NAME_WIDTH = 10  # in the columns of the head-to-head and behaviour tables
STAT_WIDTH = 28
LOG_LINES_SHOWN = 10  # of a crashed agent's log
STATS_SHOWN = 5
INCOMPLETE_SHOWN = 5
UNFITTED = 100_000  # columns: a table printed to a file is as wide as its widest row


def _table(title: str | Text | None = None) -> Table:
    # One space between columns and none at the edges: every column's width goes to its content. The
    # title stays one line above a table narrower than it (rich would wrap it to the table's width).
    if title is not None:
        title = Text(title) if isinstance(title, str) else title.copy()
        title.no_wrap, title.overflow = True, "ignore"
    return Table(title=title, box=box.SIMPLE_HEAD, padding=0, show_edge=False, title_justify="left")


def print_table(console: Console, table: Table) -> None:
    """A ladder's table, its title a line of its own above it, never cut: fitted to the terminal's width,
    or to COLUMNS when that is set; printed to a file or a pipe otherwise (where no width applies), at
    the width it needs, so that no heading or cell is cut at an assumed 80 columns."""
    title, table.title = table.title, None
    fitted = console.is_terminal or bool(os.environ.get("COLUMNS"))
    if title is not None:
        console.print(Text(title) if isinstance(title, str) else title, style="italic", soft_wrap=not fitted)
    if fitted:
        for column in table.columns:  # a narrow terminal squeezes a column's cells, never its heading's words
            words = str(column.header).split()
            column.min_width = max([column.min_width or 0, *(len(word) for word in words)])
        console.print(table)
        return
    natural = Measurement.get(console, console.options.update(max_width=UNFITTED), table).maximum
    console.print(Segments(console.render(table, console.options.update(width=natural))), crop=False)


def _number_column(table: Table, header: str) -> None:
    table.add_column(header, justify="right", no_wrap=True)


class _Names:
    """Policy names as table cells: shortened past a width, each shortened one listed in full after."""

    def __init__(self, width: int = NAME_WIDTH) -> None:
        self.width = width
        self.shortened: dict[str, str] = {}

    def cell(self, name: str, width: int | None = None) -> Text:
        width = width or self.width
        if len(name) <= width:
            return shown(name)
        short = name[: width - 1] + "…"
        self.shortened[short] = name
        return shown(short)

    def show_full(self, console: Console) -> None:
        for short, name in self.shortened.items():
            console.print(Text.assemble(shown(short, "dim"), " = ", shown(name)), soft_wrap=True)


def ms(value: float | None) -> str:
    return "—" if value is None else f"{value:.2f}"


# ---------------------------------------------------------------------------------------------
# One episode


def show_episode(console: Console, result: EpisodeResult) -> None:
    """The episode's table, then its warnings, failures and timing."""
    names = _Names()
    cells = {"per-policy": " · a cell per policy", "forked": " · seats forked per policy"}.get(result.cells, "")
    label = shown(
        f"{result.env.get('label', 'episode')} · seed {result.seed} · {result.steps} steps · {result.mode}{cells}"
    )
    table = _table(label)
    _number_column(table, "agent")
    table.add_column("policy", no_wrap=True)
    _number_column(table, "reward")
    table.add_column("status", no_wrap=True)
    for header in ("p50 ms", "p99 ms"):
        _number_column(table, header)
    for agent in result.agents:
        name = agent.agent if agent.agent not in (None, str(agent.agent_id)) else None
        table.add_row(
            names.cell(f"{agent.agent_id} {name}" if name else str(agent.agent_id), SHORT_NAME_WIDTH),
            names.cell(agent.policy),
            f"{agent.reward:g}",
            shown(agent.status.value, "" if agent.status == AgentStatus.OK else "red"),
            ms(agent.latency.p50_ms),
            ms(agent.latency.p99_ms),
        )
    console.print(table)
    names.show_full(console)
    for agent in result.agents:
        if agent.failure is not None:
            console.print(shown(f"agent {agent.agent_id} ({agent.policy}) {agent.status}: {agent.failure.one_line()}"))
    _warnings(console, result)
    _failure_details(console, result)
    rate = result.steps / result.play_s if result.play_s else 0.0
    console.print(
        f"{result.steps} steps in {result.play_s:.2f} s ({rate:,.0f} steps/s), "
        f"after {result.startup_s:.2f} s of start-up"
    )
    if result.agents and result.agents[0].log_path:
        console.print(shown(f"agent logs: {Path(result.agents[0].log_path).parent}"), soft_wrap=True)


def _warnings(console: Console, result: EpisodeResult) -> None:
    for agent in result.agents:
        if agent.minimum_action_timeout_ms > result.limits.act_timeout_ms:
            needs = f"{agent.minimum_action_timeout_ms} ms per step"
            limit = f"--act-timeout-ms is {result.limits.act_timeout_ms:g}"
            console.print(
                shown(f"agent {agent.agent_id} ({agent.policy}) declares it needs {needs}; {limit}", "yellow")
            )
    if result.sandbox == SandboxLevel.OFF:
        why = "inline mode" if result.mode == "inline" else "--sandbox off"
        console.print(f"[bold red]SANDBOX OFF ({why}): policies ran with this process's privileges[/]")
    if result.aborted:
        console.print(Text.assemble(("episode aborted: ", "bold red"), shown(result.aborted)), soft_wrap=True)


def _failure_details(console: Console, result: EpisodeResult) -> None:
    """Each distinct traceback once -- or, for a failure without one (a crash), the tail of the
    agent's log -- headed by the agents it belongs to."""
    by_detail: dict[str, list[str]] = {}
    for agent in result.agents:
        failure = agent.failure
        detail = failure and (failure.traceback or (agent.status.is_terminal and _last_lines(failure.log_tail)))
        if detail:
            by_detail.setdefault(detail, []).append(f"{agent.agent_id} ({agent.policy})")
    for detail, owners in by_detail.items():
        console.print(shown(f"agent {', '.join(owners)}:", "bold"))
        console.print(shown(detail.rstrip()))


def _last_lines(text: str | None, lines: int = LOG_LINES_SHOWN) -> str | None:
    if not text or not text.strip():
        return None
    return "\n".join(["(the end of its log)", *text.rstrip().split("\n")[-lines:]])  # \r stays, shown escaped


# ---------------------------------------------------------------------------------------------
# A leaderboard


def show_summary(console: Console, summary: Summary) -> None:
    """The standings, the failures, head-to-head and what the policies did."""
    names = _Names()
    console.print(_standings(summary, names))
    names.show_full(console)
    console.print(shown(f"ranked by {summary.rank_by}: {summary.rule}", "dim"))
    for line in _notes(summary):
        console.print(shown(line, "yellow"))
    _failures(console, summary, names)
    if len(summary.policies) >= 2:
        console.print(_head_to_head(summary, names))
        for cycle in summary.cycles:
            console.print(shown(cycle_line(cycle), "yellow"))
        behaviour = _behaviour(summary, names)
        if behaviour.row_count:
            console.print(behaviour)


def _standings(summary: Summary, names: _Names) -> Table:
    table = _table(f"leaderboard · {summary.episodes_done}/{summary.episodes_expected} episodes")
    _number_column(table, "#")
    table.add_column("policy", no_wrap=True)
    for header in (RATING, "reward [95% CI]"):
        _number_column(table, header)
    table.add_column(VERSUS_NEXT, no_wrap=True)
    for header in ("eps", "forfeit", "p99 ms"):
        _number_column(table, header)
    for entry in summary.policies:
        table.add_row(
            "—" if entry.rank is None else str(entry.rank),
            names.cell(entry.policy),
            rating(entry.rating if entry.reward else None),
            _reward(entry.reward),
            entry.versus_next or "",
            str(entry.episodes),
            Text(str(entry.forfeits), style="red" if entry.forfeits else ""),
            ms(entry.latency.p99_ms),
        )
    return table


def rating(value: Rating | None) -> str:
    """A rating as every standings table shows it: its ordinal, the number the rows are sorted by."""
    return "—" if value is None else f"{value.ordinal:.2f}"


def number(value: float) -> str:
    """A reward in at most about seven characters, never in exponent form: 3 significant digits below
    100, whole numbers above (with thousands separators)."""
    if abs(value) >= 100:
        return f"{value:,.0f}"
    return f"{value:.3g}" if abs(value) >= 1e-3 or value == 0 else f"{value:.1e}"


def _notes(summary: Summary) -> list[str]:
    """Which episodes could not be completed (the first few, with why), how many were not played,
    and how many the game itself ended."""
    notes = []
    if summary.incomplete:
        first = [f"{episode} ({why})" for episode, why in list(summary.incomplete.items())[:INCOMPLETE_SHOWN]]
        more = len(summary.incomplete) - len(first)
        notes.append(f"incomplete: {', '.join(first)}" + (f" and {more} more" if more else ""))
    not_played = summary.episodes_expected - summary.episodes_done - len(summary.incomplete)
    if not_played > 0:
        notes.append(f"not played: {not_played}")
    if summary.game_faults:
        notes.append(f"{summary.game_faults} episodes were ended by the game itself raising (see game_fault)")
    return notes


def _failures(console: Console, summary: Summary, names: _Names) -> None:
    """Each policy's failure causes: status, cause, count and the first example, one line each."""
    rows = [(entry.policy, cause) for entry in summary.policies for cause in entry.failures]
    if not rows:
        return
    console.print(Text("failures: policy, status, cause × count, and the first one (its episode)", style="bold"))
    for policy, cause in rows:
        head = Text.assemble(
            "  ",
            shown(policy),
            " ",
            shown(cause.status, "red"),
            " ",
            shown(f"{cause.cause} ×{cause.count}"),
            f" (episode {cause.episode}): ",
        )
        console.print(head + shown(cause.example))


def _head_to_head(summary: Summary, names: _Names) -> Table:
    table = _table("head-to-head: row vs column, W-D-L")
    table.add_column("policy", no_wrap=True)
    for key in summary.ranking:
        table.add_column(names.cell(key, SHORT_NAME_WIDTH), justify="right", no_wrap=True)
    for a in summary.ranking:
        row = summary.head_to_head.get(a, {})
        table.add_row(names.cell(a), *(_head_to_head_cell(row.get(b)) for b in summary.ranking))
    return table


def cycle_line(cycle: Sequence[str]) -> str:
    """A rock-paper-scissors cycle in words: ``cycle: a beats b beats c beats a``."""
    return "cycle: " + " beats ".join([*cycle, cycle[0]])


def _head_to_head_cell(record: HeadToHead | None) -> str:
    return "—" if record is None else record.record


def _behaviour(summary: Summary, names: _Names, rows: int = STATS_SHOWN) -> Table:
    """What the policies did differently (``summary.differing_stats``), mean per agent."""
    from policybox.league.views.summary import differing_stats

    table = _table("what they did: the game stats that differ most between them, mean per agent")
    table.add_column("stat", max_width=STAT_WIDTH, overflow="fold")
    for entry in summary.policies:
        table.add_column(names.cell(entry.policy, SHORT_NAME_WIDTH), justify="right", no_wrap=True)
    for name in differing_stats(summary.policies, rows):
        table.add_row(shown(name), *(f"{entry.stats.get(name, 0.0):.4g}" for entry in summary.policies))
    return table


# ---------------------------------------------------------------------------------------------
# A ladder


def show_standings(console: Console, standings: Standings) -> None:
    """The ladder's standings table -- the ranked rows, then the unranked -- then why each row that is
    not active is so, and each name's newer version that does not play."""
    from policybox.league.ladder.life import VersionState
    from policybox.league.ranking import OVERLAPS

    style = {"playing": "", "idle": "yellow", "stopped": "bold red"}[standings.pulse.state]
    console.print(shown(f"ladder {standings.pulse.line}", style))
    names = _Names(LADDER_NAME_WIDTH)
    table = _table(f"ladder · {standings.matches} matches")
    _number_column(table, "#")
    table.add_column("name", no_wrap=True)
    _number_column(table, "v")
    table.add_column("state", no_wrap=True)
    for header in (RATING, "reward [95% CI]"):
        _number_column(table, header)
    table.add_column(VERSUS_NEXT, no_wrap=True)
    for header in ("played", "forfeit"):
        _number_column(table, header)
    for row in standings.rows:
        table.add_row(
            "—" if row.rank is None else str(row.rank),
            names.cell(row.name),
            str(row.version),
            shown(row.state, "" if row.state == VersionState.ACTIVE else "yellow"),
            rating(row.rating),
            _reward(row.reward),
            row.versus_next or "",
            str(row.matches),
            Text(str(row.forfeits), style="red" if row.forfeits else ""),
        )
    print_table(console, table)
    names.show_full(console)
    console.print(shown(f"ranked by {standings.rank_by}: {standings.rule}", "dim"))
    console.print(shown(RATING_NOTE, "dim"))
    for row in standings.rows:  # wrapped at the console's width, as the notes above: 80 columns fit all
        if row.reason:
            why = first_line(row.reason, WHOLE_REASON)
            console.print(shown(f"{row.name} v{row.version} {row.state}: {why}", "yellow"))
        if row.latest is not None:
            why = f": {first_line(row.latest.reason, WHOLE_REASON)}" if row.latest.reason else ""
            console.print(shown(f"{row.name} v{row.latest.version} is {row.latest.state}{why}", "yellow"))
        if row.team_best is not None:  # --one-per-team
            console.print(shown(f"{row.name} is unranked: its team's best name, {row.team_best}, is ranked", "dim"))
        if row.forfeit_note:
            console.print(shown(f"{row.name}: {row.forfeit_note}", "dim"))
        if row.versus_next == OVERLAPS and row.versus_why:  # why the order of two rows is not shown
            console.print(shown(f"{row.name} vs next, overlaps: {row.versus_why}", "dim"))


def _reward(reward: Reward | None) -> str:
    if reward is None:
        return "—"
    low, high = reward.ci95
    return f"{number(reward.mean)} [{number(low)}, {number(high)}]"


def show_name(console: Console, page: NamePage) -> None:
    """One name: its versions, opponents, seats, rating history (the last few), matches and failures."""
    console.print(shown(f"{page.name}", "bold"))
    versions = _table("versions")
    for header in ("v", "state", "matches", RATING, "submitted", "reason"):
        versions.add_column(header, no_wrap=header != "reason")
    for v in page.versions:
        reason = first_line(v.reason, WHOLE_REASON) if v.reason else ""
        cells = (str(v.version), shown(v.state), str(v.matches), rating(v.rating), v.submitted_at, shown(reason))
        versions.add_row(*cells)
    print_table(console, versions)
    names = _Names()
    opponents = _table("head-to-head: W-D-L, score per match and what the ratings expect, mean score margin")
    opponents.add_column("opponent", no_wrap=True)
    for header in ("matches", "W-D-L", "score", "expected", "margin"):
        _number_column(opponents, header)
    for o in page.head_to_head:
        expected = "—" if o.expected is None else f"{o.expected:.2f}" + (" ≠" if o.disagrees else "")
        opponents.add_row(names.cell(o.name), str(o.matches), o.record, f"{o.share:.2f}", expected, f"{o.margin:+.3g}")
    print_table(console, opponents)
    for o in page.head_to_head:
        if o.why:
            console.print(shown(f"{o.record} against {o.name} disagrees with the ratings: {o.why}", "yellow"))
    for cycle in page.cycles:
        console.print(shown(cycle_line(cycle), "yellow"))
    if not page.problems and any(o.expected is not None for o in page.head_to_head):
        console.print(shown(f"problem opponents: none: {page.name} does at least as well as expected against each"))
    if page.problems:
        problems = _table("problem opponents: actual score per match minus what the ratings expect, worst first")
        problems.add_column("opponent", no_wrap=True)
        for header in ("matches", "actual", "expected", "problem"):
            _number_column(problems, header)
        for p in page.problems:
            shares = (str(p.matches), f"{p.actual:.2f}", f"{p.expected:.2f}", f"{p.problem:+.2f}")
            problems.add_row(names.cell(p.name), *shares)
        print_table(console, problems)
    seats = _table("per seat")
    for header in ("seat", "plays", "mean reward"):
        _number_column(seats, header)
    for s in page.seats:
        seats.add_row(str(s.seat), str(s.plays), "—" if s.mean_reward is None else number(s.mean_reward))
    print_table(console, seats)
    if page.history:
        last = page.history[-1]
        console.print(
            f"rating after match {last.match}: {last.rating.mu:.2f} ± {last.rating.sigma:.2f} "
            f"({len(page.history)} points)"
        )
    from policybox.league.views.match_list import MatchList  # only a ladder's pages load the database layer

    show_matches(console, MatchList(matches=page.recent), title="recent matches")
    for failure in page.failures:
        times = f"×{failure.count}, last in " if failure.count > 1 else ""
        head = f"{times}match {failure.match} v{failure.version} seat {failure.seat} {failure.status}"
        console.print(shown(f"{head}: {failure_line(failure.cause, failure.step, failure.message)}", "yellow"))
        if failure.traceback:  # its own frames; policybox's counted
            folded = failure.traceback.folded_frames
            note = f"({folded} frame{'s' if folded != 1 else ''} of policybox folded)"
            console.print(shown(f"{failure.traceback.own.rstrip()}\n{note}", "dim"))
        if failure.log_tail:
            console.print(shown(failure.log_tail.rstrip()[-2000:], "dim"))
    names.show_full(console)


def show_matches(console: Console, found: MatchList, title: str = "matches") -> None:
    """One line per match: each version in it with its mean reward over its seats, its placing and its statuses."""
    names = _Names()
    table = _table(title)
    _number_column(table, "match")
    table.add_column("played", no_wrap=True)
    table.add_column("versions: mean reward, placing, statuses", overflow="fold")
    for match in found.matches:
        table.add_row(str(match.id), (match.played_at or "")[11:19], Text(" · ").join(_seated(match, names)))
    print_table(console, table)
    names.show_full(console)


def _seated(match: MatchRow, names: _Names) -> list[Text]:
    by_version: dict[tuple[str, int], list[SeatResult]] = {}
    for seat in match.seats:
        by_version.setdefault((seat.name, seat.version), []).append(seat)
    shown_versions = []
    for (name, version), seats in by_version.items():
        rewards = [s.reward for s in seats if s.reward is not None]
        mean = number(sum(rewards) / len(rewards)) if rewards else "—"
        statuses = sorted({s.status or "" for s in seats})
        bad = statuses != ["ok"]
        shown_versions.append(
            Text.assemble(
                names.cell(f"{name} v{version}"),
                f" {mean} {seats[0].placing or ''} ",  # a version's seats share its place
                shown("/".join(statuses), "red" if bad else ""),
            )
        )
    return shown_versions


def show_tokens(console: Console, found: Tokens) -> None:
    """The ladder's tokens, by team: never a token itself, which the ladder does not keep."""
    table = _table(f"tokens · {len(found.tokens)}")
    table.add_column("team", no_wrap=True)
    _number_column(table, "token")
    table.add_column("created", no_wrap=True)
    table.add_column("last used", no_wrap=True)
    _number_column(table, "sessions")
    for row in found.tokens:
        table.add_row(shown(row.team), str(row.token), row.created_at, row.last_used or "never", str(row.sessions))
    print_table(console, table)


TOP_PLACES = 3  # the most likely places a final's table shows for each name


def show_final(console: Console, final: FinalRanking) -> None:
    """A final's ranking: place, name, group, strength with its interval, the chance of holding its
    place and its most likely places; then the group rule."""
    names = _Names()
    level = f"{final.level:.0%}"
    table = _table(f"final ranking · Plackett-Luce over {final.matches} matches · {final.resamples} resamples")
    _number_column(table, "#")
    table.add_column("name", no_wrap=True)
    _number_column(table, "group")
    _number_column(table, f"strength [{level}]")
    _number_column(table, "P(#)")
    table.add_column("likely places", no_wrap=True)
    for entry in final.names:
        table.add_row(
            str(entry.rank),
            names.cell(entry.name),
            str(entry.group),
            f"{entry.strength:+.2f} [{entry.low:+.2f}, {entry.high:+.2f}]",
            f"{entry.rank_probabilities[entry.rank - 1]:.0%}",
            likely_places(entry.rank_probabilities),
        )
    print_table(console, table)
    names.show_full(console)
    console.print(shown(f"groups: {final.rule}", "dim"))


def likely_places(probabilities: list[float]) -> str:
    """The most likely places and their chances, e.g. ``1: 62% · 2: 30%`` (places under 1% left out)."""
    top = sorted(range(len(probabilities)), key=lambda place: -probabilities[place])[:TOP_PLACES]
    return " · ".join(f"{place + 1}: {probabilities[place]:.0%}" for place in top if probabilities[place] >= 0.01)
