"""What the terminal shows of a ladder's pages: its standings (``ladder status``), a name's page
(``ladder show``), its matches and its tokens, each the view the web page shows too, in the tables of
``policybox.cli.tables``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.console import Console
from rich.text import Text

from policybox.cli.tables import (
    RATING,
    VERSUS_NEXT,
    Names,
    cycle_line,
    make_table,
    number,
    print_table,
    rating,
    reward,
)
from policybox.inert import shown
from policybox.lines import first_line
from policybox.results import failure_line

if TYPE_CHECKING:  # the database layer is imported by the commands that show a ladder
    from policybox.league.views.match_list import MatchList, MatchRow, SeatResult
    from policybox.league.views.name_page import NamePage
    from policybox.league.views.standings import Standings
    from policybox.league.views.token_list import Tokens

LADDER_NAME_WIDTH = 12  # in the ladder's standings, so that every column fits 80 columns
RATING_NOTE = (
    "rating: μ−3σ, the number the rows are sorted by; vs next: rating intervals μ±2σ, clear (apart, reward agrees; "
    "on a ladder also overlapping, with a one-sided head-to-head), overlaps, or mixed (apart, the next row's reward "
    "higher); unranked rows follow the ranked"
)
WHOLE_REASON = "(full text: policybox ladder status --json)"


def show_standings(console: Console, standings: Standings) -> None:
    """The ladder's standings table -- the ranked rows, then the unranked -- then why each row that is
    not active is so, and each name's newer version that does not play."""
    from policybox.league.ladder.life import VersionState
    from policybox.league.ranking import OVERLAPS

    style = {"playing": "", "idle": "yellow", "stopped": "bold red"}[standings.pulse.state]
    console.print(shown(f"ladder {standings.pulse.line}", style))
    names = Names(LADDER_NAME_WIDTH)
    headers = ("#", "name", "v", "state", RATING, "reward [95% CI]", VERSUS_NEXT, "played", "forfeit")
    table = make_table(f"ladder · {standings.matches} matches", *headers, text={"name", "state", VERSUS_NEXT})
    for row in standings.rows:
        table.add_row(
            "—" if row.rank is None else str(row.rank),
            names.cell(row.name),
            str(row.version),
            shown(row.state, "" if row.state == VersionState.ACTIVE else "yellow"),
            rating(row.rating),
            reward(row.reward),
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


def show_name(console: Console, page: NamePage) -> None:
    """One name: its versions, opponents, seats, rating history (the last few), matches and failures."""
    console.print(shown(f"{page.name}", "bold"))
    headers = ("v", "state", "matches", RATING, "submitted")
    versions = make_table("versions", *headers, text=headers)
    versions.add_column("reason")
    for v in page.versions:
        reason = first_line(v.reason, WHOLE_REASON) if v.reason else ""
        cells = (str(v.version), shown(v.state), str(v.matches), rating(v.rating), v.submitted_at, shown(reason))
        versions.add_row(*cells)
    print_table(console, versions)
    names = Names()
    opponents = make_table(
        "head-to-head: W-D-L, score per match and what the ratings expect, mean score margin",
        *("opponent", "matches", "W-D-L", "score", "expected", "margin"),
        text={"opponent"},
    )
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
        problems = make_table(
            "problem opponents: actual score per match minus what the ratings expect, worst first",
            *("opponent", "matches", "actual", "expected", "problem"),
            text={"opponent"},
        )
        for p in page.problems:
            shares = (str(p.matches), f"{p.actual:.2f}", f"{p.expected:.2f}", f"{p.problem:+.2f}")
            problems.add_row(names.cell(p.name), *shares)
        print_table(console, problems)
    seats = make_table("per seat", "seat", "plays", "mean reward")
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
    names = Names()
    table = make_table(title, "match", "played", text={"played"})
    table.add_column("versions: mean reward, placing, statuses", overflow="fold")
    for match in found.matches:
        table.add_row(str(match.id), (match.played_at or "")[11:19], Text(" · ").join(_seated(match, names)))
    print_table(console, table)
    names.show_full(console)


def _seated(match: MatchRow, names: Names) -> list[Text]:
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
    headers = ("team", "token", "created", "last used", "sessions")
    table = make_table(f"tokens · {len(found.tokens)}", *headers, text={"team", "created", "last used"})
    for row in found.tokens:
        table.add_row(shown(row.team), str(row.token), row.created_at, row.last_used or "never", str(row.sessions))
    print_table(console, table)
