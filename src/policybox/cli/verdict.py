"""What the terminal shows of a versus test (``policybox versus``, ``policybox ladder test``): the
live line while pairs are played, then the verdict."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from rich.progress import Progress, TextColumn

from policybox.cli.common import console, say

if TYPE_CHECKING:  # versus's modules (scipy) are imported by versus only
    from policybox.league.evaluate.versus import VersusResult
    from policybox.league.stats.sequential import TestState


@contextlib.contextmanager
def live_line(quiet: bool) -> Iterator[Callable[[TestState], None]]:
    """A line updated with the test's state (none when ``quiet`` or not a terminal): the ``on_state`` it yields."""
    live = Progress(
        TextColumn("{task.description}"), console=console, transient=True, disable=quiet or not console.is_terminal
    )
    with live as line:
        task = line.add_task("pairs 0 · playing the first pair", total=None)
        yield lambda state: line.update(task, description=test_line(state))


def test_line(state: TestState) -> str:
    """The live line: pairs, the estimate of B - A and its interval, the statistic against its bounds."""
    return (
        f"pairs {state.pairs} ({2 * state.pairs} episodes) · B − A {state.estimate:+.4g} "
        f"[{state.low:.4g}, {state.high:.4g}] · "
        f"statistic {state.statistic:.3g} in ({state.lower:.3g}, {state.upper:.3g})"
    )


def show_result(result: VersusResult, out: Path, json: bool) -> None:
    """The result as JSON, or the verdict and where the results are."""
    if json:
        console.print_json(result.model_dump_json())
    else:
        show_verdict(result)
        say(f"results: {out}")


def show_verdict(result: VersusResult) -> None:
    """The verdict, B − A (mean reward per agent) with its anytime-valid interval, what it rests on."""
    level = f"{1 - result.alpha - result.beta:.0%}"
    bounded = result.low is not None and result.high is not None
    interval = f"{level} interval [{result.low:.4g}, {result.high:.4g}]" if bounded else "interval unbounded as yet"
    estimate = "-" if result.estimate is None else f"{result.estimate:+.4g}"
    say(f"{result.verdict}: B − A = {estimate} reward per agent, {interval}", "bold")
    say(
        f"B = {result.b}, A = {result.a}; {result.episodes} episodes ({result.pairs} pairs), "
        f"alpha {result.alpha:g}, beta {result.beta:g}, effect {result.effect:g} sd"
    )
    if result.pairs and result.scored == 0:
        say(
            f"no agent scored: every reward in its {result.episodes} episodes was 0, so B − A says nothing of A "
            "and B. Check that the game rewards something these policies do, within --steps",
            "yellow",
        )
    failed = ", ".join(f"{name} {count}" for name, count in result.failures.items())
    say(f"agents failed: {failed}", "yellow" if any(result.failures.values()) else "dim")
    if result.played > result.episodes:
        say(f"{result.played - result.episodes} episodes in flight at the verdict are kept, not counted", "dim")
    if result.incomplete:
        say(f"{result.incomplete} episodes could not be played: run the same command to play them", "yellow")
