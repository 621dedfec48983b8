"""How a ladder plays: ``LadderSettings``, stored in its database when it is made, the same for every match.

Its own light module (pydantic and the episode's settings), apart from the folder and its database,
so that ``policybox ladder init --help`` builds its options from these fields without SQLAlchemy: each
field's description is its option's help, its bounds the option's (``policybox.cli.options``).
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

from policybox.envs import split_env
from policybox.league.choices import MatchSeating, RankBy
from policybox.settings import Agents, EpisodeSettings, validated
from policybox.submission import MiB, ZipLimits

DEADLINE_SHARE = 0.5  # of every step's deadline, on average, that a ladder's episode limit allows
EPISODE_LIMIT_FORMULA = (
    f"steps x act_timeout_ms / 1000 x {DEADLINE_SHARE:g} of play (the game's own steps if fewer), "
    "after a start-up of at most init_timeout_s"
)


class LadderSettings(BaseModel):
    """How a ladder plays: stored in its database when it is made, the same for every match."""

    model_config = ConfigDict(extra="forbid")

    settings: EpisodeSettings = Field(
        description="How every match is played; its seed seeds matchmaking, while every episode's own seed is "
        "drawn at random (policybox.league.play.tournament.draw_seed) and kept with its match"
    )
    agents: Agents = Field(description="Seats of every match")
    seating: MatchSeating = Field(
        default="rotate", description="How a match's versions share the seats: rotate (balanced) or random"
    )
    versions_per_match: int = Field(default=2, ge=2, description="Different versions in a match, at most the seats")
    placement_matches: int = Field(default=5, ge=0, description="Matches a new version plays before the others pick")
    suspend_after: int = Field(
        default=5,
        ge=1,
        description="Matches in a row with a failed agent (error, crashed, disabled), or void, that suspend a version",
    )
    setup_timeout_s: float = Field(default=300.0, gt=0, description="How long a version's setup script may run")
    rank_by: RankBy = Field(
        default="forfeit", description="forfeit: a failed agent forfeits its match. reward: the game's reward alone"
    )
    replays: bool | None = Field(
        default=None,
        description="Write each match's replay to DIR/replays/ (the match page plays it): a MettaGrid game's "
        "replay, a PettingZoo or Kaggle game's moves. Default: a PettingZoo or Kaggle game's only",
    )
    max_unpacked_mb: int = Field(default=512, ge=1, description="The most a submission zip may unpack to, in MiB")
    max_file_mb: int = Field(
        default=256, ge=1, description="The most one file of a submission zip may unpack to, in MiB"
    )
    max_entries: int = Field(default=10_000, ge=1, description="The most files and folders a submission zip may hold")
    setup_workers: int = Field(
        default=2,
        ge=1,
        le=64,
        description="Setup scripts and environment builds run at once, beside the matches; a team has one at a "
        "time, so one team's slow builds leave the others room",
    )
    submissions_per_hour: int = Field(
        default=10,
        ge=1,
        description="Submissions a team may make in any hour (over it: HTTP 429); the organiser's are not limited",
    )
    names_per_team: int = Field(default=5, ge=1, description="Names a team may own, retired ones not counted")
    scrimmages_per_hour: int = Field(
        default=20,
        ge=0,
        description="Unrated matches (scrimmages) a team may ask for in any hour, against a name it chooses "
        "(over it: HTTP 429); 0: none",
    )
    one_per_team: bool = Field(
        default=False,
        description="Rank each team's best name only, as Kaggle does (best: highest by the ladder's rank order); "
        "its other names still play and have pages, unranked",
    )
    max_matches_per_hour: int | None = Field(
        default=None,
        ge=1,
        description="The most matches ladder run plays in any hour (it waits, and says so). Default: no limit",
    )
    keep_logs: int = Field(  # at most N x seats x log_limit_mb on disk: a log is the entrant's to fill
        default=100,
        ge=0,
        description="Keep the latest N matches' log folders (older ones are deleted; their log tails stay)",
    )
    keep_logs_hours: float = Field(
        default=24.0,
        ge=0,
        description="Also keep every log folder younger than this many hours, past --keep-logs (a day by default: "
        "a match's logs stay at least that long however fast the ladder plays)",
    )
    keep_replays: int = Field(
        default=1000, ge=0, description="Keep the latest N matches' replays (older ones are deleted)"
    )

    @classmethod
    def from_options(cls, settings: EpisodeSettings, agents: int, values: dict[str, Any]) -> LadderSettings:
        """A ladder's settings from its options, as the command line and ``ladder init`` name them; a value
        that is not valid is a ConfigError naming its option."""
        return validated(cls, {"settings": settings, "agents": agents, **values})

    @model_validator(mode="after")
    def _versions_fit_the_seats(self) -> LadderSettings:
        if self.versions_per_match > self.agents:
            raise ValueError(
                f"--versions-per-match: {self.versions_per_match} versions cannot share a match of "
                f"{self.agents} seats; give at most {self.agents}"
            )
        return self

    @property
    def writes_replays(self) -> bool:
        """Whether each match's replay is written (``replays``, or the game's default)."""
        if self.replays is not None:
            return self.replays
        # Moves: a few KiB a match (Halite's 400 steps: 150).
        return split_env(self.settings.env)[0] in ("pettingzoo", "kaggle")

    def zip_limits(self) -> ZipLimits:
        """What a submission zip may unpack to (``policybox.submission``)."""
        return ZipLimits(self.max_unpacked_mb * MiB, self.max_file_mb * MiB, self.max_entries)

    @property
    def episode_limit_s(self) -> float:
        """Every match's limit on play, after start-up, for a game that lasts its ``steps``: the
        settings' ``episode_timeout_s`` if it is set, else derived (``EPISODE_LIMIT_FORMULA``) -- so that
        a bot that thinks for most of its deadline at every step forfeits its match at the limit instead
        of holding a worker for the whole of it. Start-up is not in it: the time it may take
        (``init_timeout_s``) would otherwise pay for slow steps."""
        limit = self.episode_settings.limits.play_limit_s(self.settings.steps)
        assert limit is not None  # episode_settings sets one
        return limit

    @property
    def episode_settings(self) -> EpisodeSettings:
        """How each match and validation episode is played: the settings, with the episode limit
        (``play_share`` of every step's deadline, unless ``episode_timeout_s`` is set)."""
        limits = self.settings.limits
        if limits.episode_timeout_s is None and limits.play_share is None:
            limits = limits.model_copy(update={"play_share": DEADLINE_SHARE})
        return self.settings.model_copy(update={"limits": limits})
