"""The choices a tournament and a ladder offer, as types: how seats are shared, how a leaderboard
ranks, which runner plays.

Their own light module (typing alone), so that the command line and the settings models can name
them without importing what implements them (numpy, OpenSkill, the workers): ``policybox --help``
builds every command's options from these.
"""

from __future__ import annotations

from typing import Literal

MatchSeating = Literal["rotate", "random"]  # a ladder's: how one match's versions share its seats
# A tournament's: a match's, or balanced, a whole schedule (one flat Literal: typer takes no unions).
Seating = Literal["rotate", "random", "balanced"]
Plan = Seating | Literal["paired"]  # paired: policybox versus's, not a choice of evaluate or a ladder
RankBy = Literal["forfeit", "reward"]  # the ranking rule: policybox.league.ranking
Backend = Literal["local", "ray"]  # local worker processes, or Ray tasks on a cluster
