"""The choices a tournament and a ladder offer, as types: how seats are shared, how a leaderboard
ranks, which runner plays (``Runner``: where and how many at once).

Their own light module (typing and pydantic alone), so that the command line and the settings models
can name them without importing what implements them (numpy, OpenSkill, the workers): ``policybox
--help`` builds every command's options from these.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

MatchSeating = Literal["rotate", "random"]  # a ladder's: how one match's versions share its seats
# A tournament's: a match's, or balanced, a whole schedule (one flat Literal: typer takes no unions).
Seating = Literal["rotate", "random", "balanced"]
Plan = Seating | Literal["paired"]  # paired: policybox versus's, not a choice of evaluate or a ladder
RankBy = Literal["forfeit", "reward"]  # the ranking rule: policybox.league.ranking
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
