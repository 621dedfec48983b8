"""What the terminal shows of results: an episode (``run``), a leaderboard (``evaluate``) and a final's
ranking (``evaluate --final``, ``ladder final``), in the tables of ``policybox.cli.tables``.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from rich.console import Console
from rich.table import Table
from rich.text import Text

from policybox.cli.tables import (
    RATING,
    SHORT_NAME_WIDTH,
    VERSUS_NEXT,
    Names,
    cycle_line,
    make_table,
    ms,
    print_table,
    rating,
    reward,
)
from policybox.inert import shown
from policybox.results import AgentStatus, EpisodeResult
from policybox.sandbox import SandboxLevel

if TYPE_CHECKING:  # a leaderboard's modules (OpenSkill, numpy) are imported by the commands that show one
    from policybox.league.stats.plackett_luce import FinalRanking
    from policybox.league.views.summary import HeadToHead, Summary

STAT_WIDTH = 28
LOG_LINES_SHOWN = 10  # of a crashed agent's log
STATS_SHOWN = 5
INCOMPLETE_SHOWN = 5
TOP_PLACES = 3  # the most likely places a final's table shows for each name


# ---------------------------------------------------------------------------------------------
# One episode


def show_episode(console: Console, result: EpisodeResult) -> None:
    """The episode's table, then its warnings, failures and timing."""
    names = Names()
    cells = {"per-policy": " · a cell per policy", "forked": " · seats forked per policy"}.get(result.cells, "")
    label = shown(
        f"{result.env.get('label', 'episode')} · seed {result.seed} · {result.steps} steps · {result.mode}{cells}"
    )
    table = make_table(label, "agent", "policy", "reward", "status", "p50 ms", "p99 ms", text={"policy", "status"})
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
    names = Names()
    console.print(_standings(summary, names))
    names.show_full(console)
    console.print(shown(f"ranked by {summary.rank_by}: {summary.rule}", "dim"))
    for line in _notes(summary):
        console.print(shown(line, "yellow"))
    _failures(console, summary)
    if len(summary.policies) >= 2:
        console.print(_head_to_head(summary, names))
        for cycle in summary.cycles:
            console.print(shown(cycle_line(cycle), "yellow"))
        behaviour = _behaviour(summary, names)
        if behaviour.row_count:
            console.print(behaviour)


def _standings(summary: Summary, names: Names) -> Table:
    title = f"leaderboard · {summary.episodes_done}/{summary.episodes_expected} episodes"
    headers = ("#", "policy", RATING, "reward [95% CI]", VERSUS_NEXT, "eps", "forfeit", "p99 ms")
    table = make_table(title, *headers, text={"policy", VERSUS_NEXT})
    for entry in summary.policies:
        table.add_row(
            "—" if entry.rank is None else str(entry.rank),
            names.cell(entry.policy),
            rating(entry.rating if entry.reward else None),
            reward(entry.reward),
            entry.versus_next or "",
            str(entry.episodes),
            Text(str(entry.forfeits), style="red" if entry.forfeits else ""),
            ms(entry.latency.p99_ms),
        )
    return table


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


def _failures(console: Console, summary: Summary) -> None:
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


def _head_to_head(summary: Summary, names: Names) -> Table:
    columns = (names.cell(key, SHORT_NAME_WIDTH) for key in summary.ranking)
    table = make_table("head-to-head: row vs column, W-D-L", "policy", *columns, text={"policy"})
    for a in summary.ranking:
        row = summary.head_to_head.get(a, {})
        table.add_row(names.cell(a), *(_head_to_head_cell(row.get(b)) for b in summary.ranking))
    return table


def _head_to_head_cell(record: HeadToHead | None) -> str:
    return "—" if record is None else record.record


def _behaviour(summary: Summary, names: Names, rows: int = STATS_SHOWN) -> Table:
    """What the policies did differently (``summary.differing_stats``), mean per agent."""
    from policybox.league.views.summary import differing_stats

    table = make_table("what they did: the game stats that differ most between them, mean per agent")
    table.add_column("stat", max_width=STAT_WIDTH, overflow="fold")
    for entry in summary.policies:
        table.add_column(names.cell(entry.policy, SHORT_NAME_WIDTH), justify="right", no_wrap=True)
    for name in differing_stats(summary.policies, rows):
        table.add_row(shown(name), *(f"{entry.stats.get(name, 0.0):.4g}" for entry in summary.policies))
    return table


# ---------------------------------------------------------------------------------------------
# A final


def show_final(console: Console, final: FinalRanking) -> None:
    """A final's ranking: place, name, group, strength with its interval, the chance of holding its
    place and its most likely places; then the group rule."""
    names = Names()
    level = f"{final.level:.0%}"
    title = f"final ranking · Plackett-Luce over {final.matches} matches · {final.resamples} resamples"
    headers = ("#", "name", "group", f"strength [{level}]", "P(#)", "likely places")
    table = make_table(title, *headers, text={"name", "likely places"})
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
