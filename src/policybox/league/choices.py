"""The choices a tournament and a ladder offer, as types: how seats are shared, how a leaderboard
ranks, which runner plays (``Runner``: where and how many at once), how ``evaluate`` plays and keeps a
tournament (``Evaluation``, whose episodes and ranking rule the ``Tournament`` takes as typed here).

Their own light module (typing and pydantic alone), so that the command line and the settings models
can name them without importing what implements them (numpy, OpenSkill, the workers): ``policybox
--help`` builds every command's options from these.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

MatchSeating = Literal["rotate", "random"]  # a ladder's: how one match's versions share its seats
# A tournament's: a match's, or balanced, a whole schedule (one flat Literal: typer takes no unions).
Seating = Literal["rotate", "random", "balanced"]
Plan = Seating | Literal["paired"]  # paired: policybox versus's, not a choice of evaluate or a ladder
RankBy = Literal["forfeit", "reward"]  # the ranking rule: policybox.league.ranking
Ranking = Annotated[
    RankBy,
    Field(
        description="forfeit: an agent that ended error, crashed or disabled, or timed out or acted invalidly on "
        "more than 10% of its turns, forfeits its episode (ranked below every policy that did not). reward: the "
        "game's reward alone"
    ),
]
Episodes = Annotated[
    int,
    Field(
        ge=1,
        le=1_000_000,
        description="Number of episodes. More than a folder holds grows its tournament: the first ones are kept",
    ),
]
Backend = Literal["local", "ray"]  # local worker processes, or Ray tasks on a cluster


class Runner(BaseModel):
    """Which runner plays a tournament's episodes or a ladder's matches, and how many at once
    (``policybox.league.play.backends.open_runner``): the command line's and a tournament file's."""

    model_config = ConfigDict(extra="forbid")

    workers: int | None = Field(
        default=None,
        ge=1,
        le=256,
        description="Episodes (a ladder's matches) played at once. Default: one per core (with --backend ray, "
        "one per CPU of the cluster)",
    )
    backend: Backend = Field(
        default="local", description="local: worker processes on this machine. ray: Ray tasks on a cluster"
    )
    ray_address: str | None = Field(
        default=None,
        description="With --backend ray: the cluster (e.g. 10.0.0.1:6379). Default: a Ray started for the run",
    )


class Evaluation(BaseModel):
    """How ``policybox evaluate`` plays a tournament and where it keeps it, beside the policies, the runner
    and the episodes' settings: the command's own options, and a tournament file's keys."""

    model_config = ConfigDict(extra="forbid")

    episodes: Episodes = 12
    out: Path | None = Field(
        default=None, description="Results folder: tournament.json, results.jsonl, summary.json, logs/"
    )
    seating: Seating = Field(
        default="rotate",
        description="rotate: every policy plays every seat equally often. random: seeded shuffles. balanced: "
        "a final's schedule, every pair of policies meeting as evenly as the seats allow",
    )
    replays: bool = Field(
        default=False,
        description="Write each episode's replay (MettaGrid's, or a PettingZoo game's moves) to DIR/replays/",
    )
    rank_by: Ranking = "forfeit"
    final: bool = Field(
        default=False,
        description="A final: balanced seating (every policy equally often, in every seat equally often), episodes "
        "rounded up to whole cycles, and a Plackett-Luce ranking with intervals, groups and rank probabilities",
    )
