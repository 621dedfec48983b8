"""What an episode is asked to be: ``EpisodeSettings`` (the game, its length and seed, the mode, the
limits and the sandbox), and the few rules read off them -- the game's adapter (``Game``, looked up here
once for all of them), how many agents play, what a zygote preloads.

Its own module, apart from the episode loop, so that the league, the web page and the CLI can name an
episode's settings without importing ``policybox.episode``.
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal, TypeVar

from pydantic import BaseModel, Field, ValidationError, field_validator, model_validator

from policybox.envs import ConfigError, EnvFamily, family, game_limits, split_env
from policybox.limits import GAME_RULED, Limits
from policybox.sandbox import SandboxLevel

Mode = Literal["process", "inline"]
OnFailure = Literal["continue", "abort"]
LauncherName = Literal["zygote", "spawn"]
Cells = Literal["per-agent", "per-policy", "forked"]
DEFAULT_AGENTS = 4  # for games of any size (arena, navigation) when no number is given
REPLAY_SUFFIX = ".json.z"
ENVIRONMENT_LIMIT_MB = 4096  # the cap on an environment's build (policybox.files.environments)
Agents = Annotated[int, Field(ge=1, le=1024)]  # how many agents an episode seats: a tournament's, a ladder's, -n
Model = TypeVar("Model", bound=BaseModel)


class EpisodeSettings(BaseModel):
    """What to play, how, and within which limits; the defaults are the CLI's defaults."""

    env: str = Field(
        default="arena",
        description="The game: arena, navigation, a MettaGridConfig JSON/YAML file (or mettagrid:FILE), or "
        "pettingzoo:MODULE:FACTORY for a PettingZoo game (e.g. pettingzoo:mpe2.simple_spread_v3:parallel_env)",
    )
    env_kwargs: dict[str, Any] = Field(
        default_factory=dict,
        description="Keyword arguments for a PettingZoo game's factory, or a Kaggle game's configuration: a JSON "
        "object ('{\"N\": 4}'), or @FILE, a YAML or JSON file's mapping",
    )
    steps: int = Field(default=1000, ge=1, description="Episode length: the game's max_steps, or its step limit")
    seed: int = Field(default=0, ge=0, description="Seeds the game, its map and every agent's RNGs")
    mode: Mode = Field(
        default="process", description="process: each agent in its own process. inline: all in this one (debug)"
    )
    limits: Limits = Field(default_factory=Limits)
    launcher: LauncherName = Field(
        default="zygote",
        description="zygote: fork cells from a pre-warmed process (fast). spawn: a fresh interpreter each",
    )
    cells: Cells | None = Field(
        default=None,
        exclude_if=lambda value: value is None,  # settings stored before it existed read as their game's default
        description="per-agent: every agent in a cell of its own. forked: every agent in a process of its own, "
        "forked from one loader of its policy, so its seats share one copy of its network, its uid and its "
        "sandbox, and can reach each other. per-policy: all the seats one policy holds in an episode share one "
        "cell, stepped as a batch when the policy can (MettaGrid's step_group or step_batch). Policies are "
        "isolated from each other in all three. Default: the game's -- forked for MettaGrid (whose own "
        "runners give all of a policy's agents one object), per-agent for PettingZoo and Kaggle games (a "
        "game may give its agents private information)",
    )
    preload: list[str] = Field(
        default_factory=list,
        description="Modules the zygote imports before forking cells. Torch needs no asking: a policy that "
        "imports it forks from a zygote with torch",
    )
    threads_per_cell: int | None = Field(
        default=None,
        ge=1,
        le=1024,
        description="Threads each cell's torch/OpenMP/BLAS may use. Default: this machine's cores divided "
        "among the episode's cells, at least 1 (a policy's own env.OMP_NUM_THREADS wins)",
    )
    sandbox: SandboxLevel = Field(
        default=SandboxLevel.STANDARD,
        description="standard: every layer this machine supports. strict: refuse to run unless all work. "
        "off: no protection (debugging)",
    )
    seccomp: bool = Field(
        default=True, description="The seccomp syscall filter at the standard level (strict always has it)"
    )
    on_agent_failure: OnFailure = Field(
        default="continue",
        description="continue: a failed agent plays the game's fallback action (MettaGrid: noop) to the end. "
        "abort: the episode ends at the failure",
    )
    replay: str | None = Field(
        default=None,
        description="Write the episode here as a .json.z replay: a MettaGrid game's in MettaGrid's own format "
        "(MettaScope loads it), a PettingZoo or Kaggle game's moves in policybox's (policybox.envs.moves; a Kaggle "
        "game's with its env.toJSON() beside them); "
        "an episode cut short is written as far as it was played",
    )
    environments: str | None = Field(
        default=None,
        exclude_if=lambda value: value is None,
        description="Folder where policies' environments (their requirements) are built once and kept. Default: "
        "evaluate's results folder, or ~/.cache/policybox/environments for run",
    )
    index_url: str | None = Field(
        default=None,
        exclude_if=lambda value: value is None,
        description="Package index for policies' requirements (uv's --index-url). Default: what this machine's "
        "pip install reaches (pip's index, extra indexes and find-links)",
    )
    find_links: list[str] = Field(
        default_factory=list,
        exclude_if=lambda value: not value,
        description="A folder of wheels for policies' requirements, beside the index or, with no --index-url, "
        "instead of it (offline)",
    )
    sdists: bool = Field(
        default=False,
        exclude_if=lambda value: not value,
        description="Allow requirements built from source (sdists) where no wheel meets them: the build runs "
        "sandboxed, like a setup script, offline, from the find-links folders and file:// indexes",
    )
    environment_limit_mb: int = Field(
        default=ENVIRONMENT_LIMIT_MB,
        ge=16,
        exclude_if=lambda value: value == ENVIRONMENT_LIMIT_MB,  # settings stored before it existed read the same
        description="The most disk a policy's environment may take to build, in MiB (uv's cache and the "
        "environment, in its cell's tmpfs); the build's cell may use --memory-limit-mb on top of it",
    )

    @property
    def game(self) -> Game:
        """The game's family adapter and what it is asked to open: every rule read off the game (how many
        agents play, its shorthands, what a zygote preloads, which policies need torch) asks it here."""
        return game_of(self.env)

    @property
    def cells_applied(self) -> Cells:
        """How agents are seated in cells: ``cells`` if given, else the game's default (``default_cells``).
        Settings stored before ``cells`` existed, or without it, read so too."""
        return self.cells or default_cells(self.env)

    @field_validator("env_kwargs", mode="before")
    @classmethod
    def _kwargs_from_json(cls, value: Any) -> Any:
        """``--env-kwargs '{"N": 2}'`` arrives as text: a JSON object; ``@FILE`` is a YAML or JSON file's
        mapping, read here, so that settings kept (a ladder's, a results folder's) hold it whole."""
        if not isinstance(value, str):
            return value
        if value.startswith("@"):
            return read_mapping(Path(value[1:]).expanduser(), "--env-kwargs")
        try:
            parsed = json.loads(value)
        except json.JSONDecodeError as exc:
            raise ValueError(f"--env-kwargs must be a JSON object or @FILE: {exc}") from None
        if not isinstance(parsed, dict):
            raise ValueError(f"--env-kwargs must be a JSON object, not {type(parsed).__name__}")
        return parsed

    @field_validator("replay")
    @classmethod
    def _replay_name(cls, value: str | None) -> str | None:
        """A replay file is named as MettaGrid names them, which is how MettaScope tells how to read it."""
        if value is not None and not value.endswith(REPLAY_SUFFIX):
            raise ValueError(f"{value} does not end in {REPLAY_SUFFIX}")
        return value

    @field_validator("environments")
    @classmethod
    def _absolute(cls, value: str | None) -> str | None:
        """A folder given relative to where a command runs is kept as the folder it meant."""
        return None if value is None else str(Path(value).expanduser().absolute())

    @model_validator(mode="after")
    def _game_rules(self) -> EpisodeSettings:
        """The limits a user left unset that the game rules itself (a Kaggle game's time rules) are the game's;
        settings read back from a file have all their limits set, and never ask the game again."""
        if not set(GAME_RULED) <= self.limits.model_fields_set:
            try:
                rules = game_limits(self.env, self.env_kwargs)
            except ConfigError:  # a game that cannot be made is reported where the episode opens it
                rules = {}
            if rules:
                self.limits = self.limits.with_game_rules(rules)
        return self

    @classmethod
    def from_options(cls, values: dict[str, Any]) -> EpisodeSettings:
        """Settings from flat option values, as the CLI and tournament files name them: the limits'
        fields (``act_timeout_ms``, ...) beside the settings' own; ``agents`` is ignored here. A limit of None
        is one not given: its default, or the game's own rule. A value that is not valid is a ConfigError naming
        its option."""
        unknown = set(values) - set(Limits.model_fields) - set(cls.model_fields) - {"agents"}
        if unknown:
            raise ConfigError(f"unknown settings: {', '.join(sorted(unknown))}")
        own = {name: value for name, value in values.items() if name in cls.model_fields and name != "limits"}
        own["preload"] = own.get("preload") or []
        own["env_kwargs"] = own.get("env_kwargs") or {}
        own["find_links"] = own.get("find_links") or []
        limits = validated(Limits, {name: values[name] for name in Limits.model_fields if values.get(name) is not None})
        return validated(cls, {"limits": limits, **own})


def read_mapping(path: Path, what: str) -> dict[str, Any]:
    """The mapping a YAML (or JSON) file of the user's holds, text keys only (``what`` names the file in an
    error): ``--env-kwargs @FILE``, a tournament file."""
    import yaml

    try:
        parsed = yaml.safe_load(path.read_text())
    except OSError as exc:
        raise ConfigError(f"{what} {path}: {exc.strerror}") from None
    except (yaml.YAMLError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{what} {path} is not valid YAML/JSON: {str(exc).splitlines()[0]}") from None
    if not isinstance(parsed, dict):
        raise ConfigError(f"{what} {path} must hold a mapping, not {type(parsed).__name__}")
    if keys := sorted(repr(key) for key in parsed if not isinstance(key, str)):
        raise ConfigError(f"{what} {path}: its keys must be text, not {', '.join(keys)[:200]}")
    return parsed


def validated(model: type[Model], values: dict[str, Any]) -> Model:
    """``model`` made of ``values``, named as the command line and a tournament file name them; a value that
    is not valid is a ConfigError naming its option (``option_errors``)."""
    try:
        return model(**values)
    except ValidationError as exc:
        raise ConfigError(option_errors(exc)) from None


def option_errors(exc: ValidationError) -> str:
    """A pydantic error as the options it concerns: ``--steps: Input should be greater than 0`` (a field's
    first error only: a value that fits no member of a union is one error, not one per member)."""
    parts: dict[str, str] = {}
    for error in exc.errors():
        name = next((str(part) for part in error["loc"] if isinstance(part, str)), "settings")
        message = str(error["msg"]).removeprefix("Value error, ")
        parts.setdefault(name, message if message.startswith("--") else f"--{name.replace('_', '-')}: {message}")
    return "; ".join(parts.values())


def default_cells(env: str) -> Cells:
    """A game's default ``--cells``: forked for MettaGrid, whose own runners hand all of a policy's agents
    one Python object; per-agent elsewhere, since a PettingZoo or Kaggle game may give each agent private
    information (a card game's hand) that its policy's other seats must not reach."""
    return "forked" if split_env(env)[0] == "mettagrid" else "per-agent"


@dataclass(frozen=True)
class Game:
    """An ``--env``'s game as its family sees it: the family's adapter, and what it is asked to open."""

    adapter: EnvFamily
    target: str  # ``--env`` without the family


@functools.cache
def game_of(env: str) -> Game:
    """The game of an ``--env`` value: its family looked up once a run (``EpisodeSettings.game``)."""
    name, target = split_env(env)
    return Game(family(name), target)


def agent_count(settings: EpisodeSettings, agents: int | None, default: int) -> int:
    """How many agents play: the game's own number when it has one (a PettingZoo game, a MettaGrid
    config file) -- ``agents``, if given, must equal it -- else ``agents`` or ``default``."""
    game = settings.game
    fixed = game.adapter.fixed_agents(game.target, settings.env_kwargs)
    if fixed is None:
        return default if agents is None else agents
    if agents is not None and agents != fixed:
        raise ConfigError(f"{settings.env} is a game for {fixed} agents, not {agents}")
    return fixed


def zygote_preload(settings: EpisodeSettings) -> tuple[str, ...]:
    """What a zygote for these settings imports: the game family's modules, then ``--preload``."""
    return tuple(dict.fromkeys([*settings.game.adapter.ZYGOTE_PRELOAD, *settings.preload]))
