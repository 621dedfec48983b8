"""What an episode is asked to be: ``EpisodeSettings`` (the game, its length and seed, the mode, the
limits and the sandbox), and the few rules read off them -- the game's adapter, how many agents play,
what a zygote preloads.

Its own module, apart from the episode loop, so that the league, the web page and the CLI can name an
episode's settings without importing ``policybox.episode``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field, ValidationError, field_validator

from policybox.envs import ConfigError, EnvFamily, family, split_env
from policybox.limits import Limits
from policybox.sandbox import SandboxLevel

Mode = Literal["process", "inline"]
OnFailure = Literal["continue", "abort"]
LauncherName = Literal["zygote", "spawn"]
Cells = Literal["per-agent", "per-policy"]
DEFAULT_AGENTS = 4  # for games of any size (arena, navigation) when no number is given
REPLAY_SUFFIX = ".json.z"
ENVIRONMENT_LIMIT_MB = 4096  # the cap on an environment's build (policybox.files.environments)


class EpisodeSettings(BaseModel):
    """What to play, how, and within which limits; the defaults are the CLI's defaults."""

    env: str = Field(
        default="arena",
        description="The game: arena, navigation, a MettaGridConfig JSON/YAML file (or mettagrid:FILE), "
        "or pettingzoo:MODULE:FACTORY for a PettingZoo game (a factory returning a Parallel or AEC env)",
    )
    env_kwargs: dict[str, Any] = Field(
        default_factory=dict, description="Keyword arguments for a PettingZoo game's factory (JSON object)"
    )
    steps: int = Field(default=1000, ge=1, description="Episode length: the game's max_steps, or its step limit")
    seed: int = Field(default=0, ge=0, description="Seeds the game, its map and every agent's RNGs")
    mode: Mode = "process"
    limits: Limits = Field(default_factory=Limits)
    launcher: LauncherName = Field(
        default="zygote", description="zygote: cells forked from a pre-warmed process; spawn: fresh interpreters"
    )
    cells: Cells = Field(
        default="per-agent",
        exclude_if=lambda value: value == "per-agent",  # settings stored before it existed read the same
        description="per-agent: every agent in a cell of its own; per-policy: all the seats one policy holds in "
        "an episode share one cell, stepped as a batch when the policy can (MettaGrid's step_group or "
        "step_batch) -- its agents are no longer isolated from each other, policies still are",
    )
    preload: list[str] = Field(default_factory=list, description="Extra modules the zygote imports (e.g. torch)")
    threads_per_cell: int | None = Field(
        default=None,
        ge=1,
        le=1024,
        description="Threads each cell's torch/OpenMP/BLAS may use; default: this machine's cores divided "
        "among the episode's cells, at least 1 (a policy's own env.OMP_NUM_THREADS wins)",
    )
    sandbox: SandboxLevel = Field(default=SandboxLevel.STANDARD, description="strict, standard or off")
    seccomp: bool = Field(
        default=True, description="The seccomp layer in standard mode (strict always has it); False opts out"
    )
    on_agent_failure: OnFailure = Field(
        default="continue",
        description="continue: a failed agent plays the game's fallback action (MettaGrid: noop) to the end; "
        "abort: the episode ends at the failure",
    )
    replay: str | None = Field(
        default=None,
        description="Write the episode here as a .json.z replay: a MettaGrid game's in MettaGrid's own format "
        "(MettaScope loads it), a PettingZoo game's moves in policybox's (policybox.envs.moves); "
        "an episode cut short is written as far as it was played",
    )
    environments: str | None = Field(
        default=None,
        exclude_if=lambda value: value is None,
        description="Where the environments of specs with requirements are built and kept: default, evaluate's "
        "results folder (environments/) or, for run, ~/.cache/policybox/environments",
    )
    index_url: str | None = Field(
        default=None,
        exclude_if=lambda value: value is None,
        description="The package index requirements come from; default: what the host's pip install reaches",
    )
    find_links: list[str] = Field(
        default_factory=list,
        exclude_if=lambda value: not value,
        description="Folders (or pages) of wheels requirements may come from, beside or instead of an index",
    )
    sdists: bool = Field(
        default=False,
        exclude_if=lambda value: not value,
        description="Allow requirements built from source (sdists) where wheels cannot meet them: the build "
        "runs in a cell, sandboxed like a setup script, offline, from the local find-links folders and file:// "
        "indexes",
    )
    environment_limit_mb: int = Field(
        default=ENVIRONMENT_LIMIT_MB,
        ge=16,
        exclude_if=lambda value: value == ENVIRONMENT_LIMIT_MB,  # settings stored before it existed read the same
        description="The most disk an environment's build may fill, in MiB: its cell's scratch tmpfs, which holds "
        "uv's cache and the environment; the cell's memory limit is --memory-limit-mb on top of it (a tmpfs "
        "counts as memory)",
    )

    @field_validator("env_kwargs", mode="before")
    @classmethod
    def _kwargs_from_json(cls, value: Any) -> Any:
        """``--env-kwargs '{"N": 2}'`` arrives as text: a JSON object."""
        if not isinstance(value, str):
            return value
        try:
            parsed = json.loads(value)
        except json.JSONDecodeError as exc:
            raise ValueError(f"--env-kwargs must be a JSON object: {exc}") from None
        if not isinstance(parsed, dict):
            raise ValueError(f"--env-kwargs must be a JSON object, not {type(parsed).__name__}")
        return parsed

    @field_validator("environments")
    @classmethod
    def _absolute(cls, value: str | None) -> str | None:
        """A folder given relative to where a command runs is kept as the folder it meant."""
        return None if value is None else str(Path(value).expanduser().absolute())

    @classmethod
    def from_options(cls, values: dict[str, Any]) -> EpisodeSettings:
        """Settings from flat option values, as the CLI and tournament files name them: the limits'
        fields (``act_timeout_ms``, ...) beside the settings' own; ``agents`` is ignored here. A value
        that is not valid is a ConfigError naming its option."""
        unknown = set(values) - set(Limits.model_fields) - set(cls.model_fields) - {"agents"}
        if unknown:
            raise ConfigError(f"unknown settings: {', '.join(sorted(unknown))}")
        own = {name: value for name, value in values.items() if name in cls.model_fields and name != "limits"}
        own["preload"] = own.get("preload") or []
        own["env_kwargs"] = own.get("env_kwargs") or {}
        own["find_links"] = own.get("find_links") or []
        try:
            limits = Limits(**{name: values[name] for name in Limits.model_fields if name in values})
            return cls(limits=limits, **own)
        except ValidationError as exc:
            raise ConfigError(option_errors(exc)) from None


def option_errors(exc: ValidationError) -> str:
    """A pydantic error as the options it concerns: ``--steps: Input should be greater than 0``."""
    parts = []
    for error in exc.errors():
        name = str(error["loc"][-1]) if error["loc"] else "settings"
        message = str(error["msg"]).removeprefix("Value error, ")
        parts.append(message if message.startswith("--") else f"--{name.replace('_', '-')}: {message}")
    return "; ".join(parts)


def env_family(settings: EpisodeSettings) -> tuple[EnvFamily, str]:
    """The adapter of the settings' game and what it is asked to open (``--env`` without the family)."""
    name, target = split_env(settings.env)
    return family(name), target


def agent_count(settings: EpisodeSettings, agents: int | None, default: int) -> int:
    """How many agents play: the game's own number when it has one (a PettingZoo game, a MettaGrid
    config file) -- ``agents``, if given, must equal it -- else ``agents`` or ``default``."""
    adapter, target = env_family(settings)
    fixed = adapter.fixed_agents(target, settings.env_kwargs)
    if fixed is None:
        return default if agents is None else agents
    if agents is not None and agents != fixed:
        raise ConfigError(f"{settings.env} is a game for {fixed} agents, not {agents}")
    return fixed


def zygote_preload(settings: EpisodeSettings) -> tuple[str, ...]:
    """What a zygote for these settings imports: the game family's modules, then ``--preload``."""
    adapter, _ = env_family(settings)
    return tuple(dict.fromkeys([*adapter.ZYGOTE_PRELOAD, *settings.preload]))
