"""The terminal's tables, readable at 80 columns: how one is built and printed, and how its policy
names and numbers are written. What each table shows is ``policybox.cli.result_tables``' (an episode,
a leaderboard, a final) and ``policybox.cli.ladder_tables``' (a ladder's pages).

Numbers are never split across lines; a long policy name is shortened in a table and given in full
below it; failure messages are lines of their own under the table, wrapped by the terminal rather
than cut. Every text that a policy, a game or a spec file controls goes through ``policybox.inert``.
"""

from __future__ import annotations

import os
from collections.abc import Collection, Sequence
from typing import TYPE_CHECKING

from rich import box
from rich.console import Console
from rich.measure import Measurement
from rich.segment import Segments
from rich.table import Table
from rich.text import Text

from policybox.inert import shown

if TYPE_CHECKING:  # a leaderboard's modules (OpenSkill, numpy) are imported by the commands that show one
    from policybox.league.ranking import Rating, Reward

NAME_WIDTH = 16  # of a policy name in a table; the full name is listed below when it is longer
SHORT_NAME_WIDTH = 10  # in the columns of the head-to-head and behaviour tables
RATING = "rating\nμ−3σ"  # the ordinal: the number standings are sorted by
VERSUS_NEXT = "vs next\n(rating)"
UNFITTED = 100_000  # columns: a table printed to a file is as wide as its widest row


def make_table(title: str | Text | None, *headers: str | Text, text: Collection[str] = ()) -> Table:
    """A table with a column for each of ``headers``, never wrapped: a number's, right-justified, but
    those in ``text``. One space between columns and none at the edges: every column's width goes to
    its content. The title stays one line above a table narrower than it (rich would wrap it to the
    table's width)."""
    if title is not None:
        title = Text(title) if isinstance(title, str) else title.copy()
        title.no_wrap, title.overflow = True, "ignore"
    table = Table(title=title, box=box.SIMPLE_HEAD, padding=0, show_edge=False, title_justify="left")
    for header in headers:
        textual = isinstance(header, str) and header in text
        table.add_column(header, justify="left" if textual else "right", no_wrap=True)
    return table


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


class Names:
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


def rating(value: Rating | None) -> str:
    """A rating as every standings table shows it: its ordinal, the number the rows are sorted by."""
    return "—" if value is None else f"{value.ordinal:.2f}"


def number(value: float) -> str:
    """A reward in at most about seven characters, never in exponent form: 3 significant digits below
    100, whole numbers above (with thousands separators)."""
    if abs(value) >= 100:
        return f"{value:,.0f}"
    return f"{value:.3g}" if abs(value) >= 1e-3 or value == 0 else f"{value:.1e}"


def cycle_line(cycle: Sequence[str]) -> str:
    """A rock-paper-scissors cycle in words: ``cycle: a beats b beats c beats a``."""
    return "cycle: " + " beats ".join([*cycle, cycle[0]])


def reward(value: Reward | None) -> str:
    """A mean reward and its 95% interval, each as ``number`` writes it."""
    if value is None:
        return "—"
    low, high = value.ci95
    return f"{number(value.mean)} [{number(low)}, {number(high)}]"
