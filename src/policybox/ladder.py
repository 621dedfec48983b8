"""``policybox.ladder.Ladder``: a continuous leaderboard from Python -- the ``policybox ladder`` commands.

    from policybox import EpisodeSettings, Ladder, LadderSettings

    ladder = Ladder.create("cup", LadderSettings(settings=EpisodeSettings(steps=200), agents=4))
    ladder.submit("greedy", "./bots/greedy.py:Greedy,data=bots/greedy.npy")
    ladder.submit("random", "random")
    ladder.run(matches=20)                      # qualifies both, then plays 20 matches
    ladder.submit("greedy", "./bots/greedy2.py:Greedy")
    ladder.run(matches=20)                      # qualifies greedy v2, which plays from now on
    print(ladder.test("greedy").verdict)        # is greedy v2 better than v1? (B better, ...)
    final = ladder.final(rounds=4)              # the field frozen, a balanced schedule, unrated
    for entry in final.ranking.names:
        print(entry.rank, entry.name, entry.group, entry.low, entry.high)
    for row in ladder.standings().rows:
        print(row.rank, row.name, row.version, row.state, row.rating, row.reward)

A ladder made here is the same as one ``policybox ladder init`` makes: any command works on it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from policybox.league.ladder import retention, run_loop
from policybox.league.ladder.final import ROUNDS, FinalState, latest_final, play_final
from policybox.league.ladder.folder import LadderFolder
from policybox.league.ladder.settings import LadderSettings
from policybox.league.views import match_list, name_page, standings

if TYPE_CHECKING:  # versus's modules (scipy) are imported by a test only
    from policybox.league.evaluate.versus import VersusResult

__all__ = ["Ladder", "LadderSettings"]


class Ladder(LadderFolder):
    """A ladder (``Ladder.create(DIR, settings)`` or ``Ladder.open(DIR)``): submit, retire, reinstate and
    rerate (``policybox.league.ladder.folder``), run it, read it, prune it, test a name's versions and
    play a final (``policybox.league.ladder.run_loop``, ``policybox.league.views``, ``retention``,
    ``ladder_trial``, ``final``)."""

    def run(self, matches: int | None = None, workers: int | None = None, **backend: Any) -> run_loop.Progress:
        """``ladder run``: qualify what is queued and play until stopped, or until ``matches`` are
        stored, played or void (``backend="ray", ray_address=...`` for a cluster); how it went."""
        return run_loop.run(self, matches, workers, **backend)

    def standings(self) -> standings.Standings:
        """``ladder status``: one row per name, best first."""
        return standings.standings(self)

    def show(self, name: str) -> name_page.NamePage:
        """``ladder show NAME``: its versions, rating history, head-to-head, failures (with log tails)."""
        return name_page.name_page(self, name, private=True)

    def matches(self, limit: int = 100) -> match_list.MatchList:
        """``ladder matches``: the matches played, newest first."""
        return match_list.match_list(self, limit)

    def prune(
        self, keep_logs: int | None = None, keep_replays: int | None = None, keep_logs_hours: float | None = None
    ) -> retention.Freed:
        """``ladder prune``: delete the log folders and replays of all but the latest matches, the logs
        younger than ``keep_logs_hours`` kept (the ladder's settings, or these), and the environments no
        version uses; what it freed."""
        return retention.prune(self, keep_logs, keep_replays, environments=True, keep_logs_hours=keep_logs_hours)

    def test(self, name: str, base: str | int | None = None, **options: Any) -> VersusResult:
        """``ladder test``: is ``name``'s playing version better than ``base`` (``"v1"``; None: its
        qualified version before) against the ladder's other playing versions? Not rated; kept in
        ``DIR/tests/NAME-vA-vB`` and resumed there (``alpha``, ``beta``, ``effect``, ``max_episodes``,
        ``workers``, ``out``, ``on_state`` as ``policybox.versus`` takes them)."""
        from policybox.league.evaluate import ladder_trial

        return ladder_trial.test(self, name, base, **options)

    def final(
        self, rounds: int = ROUNDS, until_separated: int = 0, workers: int | None = None, **backend: Any
    ) -> FinalState:
        """``ladder final``: freeze the field, play ``rounds`` cycles of the balanced schedule (unrated),
        then up to ``until_separated`` matches for the pairs still uncertain, and rank by the
        Plackett-Luce fit; the final's state. An open final (one stopped) is continued, not restarted
        (``backend="ray", ray_address=...`` for a cluster)."""
        return play_final(self, rounds, until_separated, workers, **backend)

    def latest_final(self) -> FinalState | None:
        """``ladder final --show``: the latest final's state, open or done; None before the first."""
        return latest_final(self)
