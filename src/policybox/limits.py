"""Limits: the host's time and size budgets for every agent, with defaults sized for MettaGrid.

All times are measured by the host on a monotonic clock, from sending a request to receiving the
full reply. A MettaGrid step of a scripted or small neural policy takes well under a millisecond
to a few milliseconds, so the defaults leave a wide margin for a loaded machine while still
bounding a hung policy: it costs at most ``act_timeout_ms + time_bank_ms`` of wall-clock time
before it is disabled, and the other agents keep playing meanwhile.

A game may carry time rules of its own: a Kaggle game's specification says its act timeout, overage
time and run timeout. Those of ``GAME_RULED`` that a user leaves unset then default to the game's
(``policybox.settings.EpisodeSettings``); a value given always wins.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

GAME_RULED = ("act_timeout_ms", "time_bank_ms", "wait_on_bank", "init_timeout_s", "episode_timeout_s")


class Limits(BaseModel):
    model_config = ConfigDict(extra="forbid")

    act_timeout_ms: float = Field(
        default=1000.0,
        gt=0,
        description="Per-step deadline per agent, in ms: a later reply is dropped and that step plays the "
        "fallback action (with --wait-on-bank, once its time bank is spent)",
    )
    time_bank_ms: float = Field(
        default=10_000.0,
        ge=0,
        description="Per-agent budget for time past deadlines, in ms; when it is spent the agent is disabled",
    )
    wait_on_bank: bool = Field(
        default=False,
        description="A reply past its deadline still counts while the agent's time bank lasts: the step waits for "
        "it and the lateness is drawn from the bank (Kaggle's overage time; a Kaggle game's default). Off: a late "
        "reply is dropped and that step plays the fallback",
    )
    init_timeout_s: float = Field(
        default=60.0,
        gt=0,
        description="Start-up deadline, in seconds: a cell's interpreter, its policy's import, its checkpoint's load",
    )
    episode_timeout_s: float | None = Field(
        default=None,
        gt=0,
        description="Wall-clock limit on play, in seconds, after start-up (which --init-timeout-s bounds): the "
        "episode ends then, and each agent whose replies took more than half the time played is disabled",
    )
    play_share: float | None = Field(
        default=None,
        gt=0,
        le=1,
        description="Bound play to this share of every step's deadline: steps x act_timeout_ms x share, with the "
        "game's own step count where it is smaller (a ladder's default: 0.5); with --episode-timeout-s, the smaller",
    )
    log_limit_mb: float = Field(
        default=10.0,
        gt=0,
        description="Cap on each agent's printed output (stdout and stderr), in MiB; the rest is discarded",
    )
    cpu_limit_s: int = Field(default=1800, ge=1, description="CPU seconds a cell may use, over all its processes")
    memory_limit_mb: int = Field(
        default=4096,
        ge=64,
        description="Memory per cell, in MiB, at most the budget: a cgroup's limit, else an address-space limit",
    )
    memory_budget_mb: int | None = Field(
        default=None,
        ge=64,
        description="Memory all cells running at once may use together, in MiB (one cgroup over them; evaluate's "
        "workers share it). Default: 80% of the memory available at start",
    )
    file_size_limit_mb: int = Field(default=256, ge=1, description="Largest file a cell may write, in MiB")
    disk_limit_mb: int = Field(
        default=1024,
        ge=1,
        description="What a cell may keep in its scratch folder, in MiB (a tmpfs: it counts as memory)",
    )
    disk_limit_files: int = Field(
        default=50_000, ge=16, description="Files and folders a cell may keep in its scratch folder"
    )
    max_open_files: int = Field(default=1024, ge=64, description="Open files per cell")
    max_processes: int = Field(default=256, ge=8, description="Processes and threads per cell")

    def with_game_rules(self, rules: dict[str, object]) -> Limits:
        """These limits with ``rules`` (a game's own time rules, by field) in place of the fields left unset."""
        update = {name: value for name, value in rules.items() if name not in self.model_fields_set}
        return self.model_copy(update=update) if update else self

    def play_limit_s(self, steps: int) -> float | None:
        """How long an episode of at most ``steps`` steps may play (``episode_timeout_s``, ``play_share``):
        start-up is not counted, it has its own deadline. None: no limit."""
        limits = [] if self.episode_timeout_s is None else [self.episode_timeout_s]
        if self.play_share is not None:
            limits.append(steps * self.act_timeout_ms / 1000 * self.play_share)
        return min(limits, default=None)

    @property
    def log_limit_bytes(self) -> int:
        return int(self.log_limit_mb * 1024 * 1024)
