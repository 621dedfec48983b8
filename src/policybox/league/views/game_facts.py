"""A ladder's game as a participant needs it to play at home: what it is (never where the organiser keeps
its file), the file to download that reproduces it, the packages and versions it runs on, its reward, and
its observation and action spaces -- each taken from the game itself, opened once and cached, so that
``/rules`` stays fast and cannot say other than what the game is.

The download (``/rules/game``) is what ``policybox run --env`` takes: a MettaGrid ladder's config file
as it is (``game.yaml``; for ``arena`` or ``navigation``, the config MettaGrid builds for them); a
PettingZoo game in a file of its own, that file (``game.py``); any other game, its keyword arguments
(``env_kwargs.json``, given as ``--env-kwargs @env_kwargs.json``).
"""

from __future__ import annotations

import functools
import importlib.metadata
import json
from pathlib import Path, PurePath
from typing import Any

import yaml
from pydantic import BaseModel, Field

from policybox.envs import split_env
from policybox.errors import PolicyboxError

POLICYBOX = "policybox"
FAMILY_PACKAGES = {"mettagrid": "mettagrid", "pettingzoo": "pettingzoo", "kaggle": "kaggle-environments"}
KWARGS_FILE = "env_kwargs.json"
GAME_FILE = "game.py"  # a PettingZoo game in a file of the organiser's, as /rules/game serves it
SCORE = "a version's episode score is the mean of its agents' rewards"


class GameUnreadable(PolicyboxError):
    """The ladder's game cannot be opened now (its file removed or broken under the ladder): the message
    names it, for the organiser; a page says only that the game cannot be read."""


class Seats(BaseModel):
    """The spaces of some of the game's seats (all of them, where every seat has the same)."""

    seats: str = Field(description="Which seats: every agent, or the game's names for them")
    observation: str = Field(description="The observation space, as the game defines it")
    action: str = Field(description="The action space, as the game defines it")


class Download(BaseModel):
    name: str = Field(description="The file's name, as the commands use it")
    body: bytes = Field(exclude=True)


class GameFacts(BaseModel):
    name: str = Field(description="What the game is: family, its own name, seats")
    env: str = Field(description="What policybox run --env takes, beside the downloaded file")
    env_kwargs_option: str | None = Field(description="The --env-kwargs it also takes, if any")
    download: Download = Field(description="The file /rules/game serves")
    packages: dict[str, str] = Field(description="The packages it runs on, by name, at their versions here")
    reward: list[str] = Field(description="How the game gives reward, as it defines it")
    spaces: list[Seats]
    action_names: list[str] = Field(description="A MettaGrid game's actions, by name, in the game's order")


def game_facts(env: str, kwargs: dict[str, Any], agents: int, steps: int) -> GameFacts:
    """The facts of a ladder's game (its settings' env, env_kwargs, agents and steps), made once per process
    and again when its file changes (the ladder plays the file as it is at each match)."""
    try:
        return _cached(env, json.dumps(kwargs, sort_keys=True), agents, steps, _stamp(env))
    except Exception as exc:  # the organiser's game file gone, unreadable or broken: whatever it raised
        raise GameUnreadable(f"the ladder's game {env} cannot be opened: {type(exc).__name__}: {exc}") from exc


def _stamp(env: str) -> tuple[int, int] | None:
    """When the game's file was changed, and its size; None for a game without a file."""
    family, target = split_env(env)
    path = target.rpartition(":")[0] if family == "pettingzoo" else target if family == "mettagrid" else ""
    try:
        info = Path(path).stat() if path else None
    except OSError:
        return None
    return None if info is None else (info.st_mtime_ns, info.st_size)


@functools.lru_cache(maxsize=8)
def _cached(env: str, kwargs_json: str, agents: int, steps: int, stamp: tuple[int, int] | None) -> GameFacts:
    family, target = split_env(env)
    kwargs = json.loads(kwargs_json)
    if family == "mettagrid":
        return _mettagrid(target, agents, steps)
    if family == "pettingzoo":
        return _pettingzoo(target, kwargs, agents)
    return _kaggle(target, kwargs, agents)


def packages(*names: str) -> dict[str, str]:
    """Each installed distribution's version, policybox's first."""
    return {name: importlib.metadata.version(name) for name in (POLICYBOX, *names)}


# ---------------------------------------------------------------------------------------------
# MettaGrid


def _mettagrid(target: str, agents: int, steps: int) -> GameFacts:
    from mettagrid.map_builder.map_builder import HasSeed
    from mettagrid.policy.policy_env_interface import PolicyEnvInterface

    from policybox.envs.mettagrid import ARENA_MAPS, make_config

    config = make_config(target, agents, steps, 0)
    if target in ARENA_MAPS:  # no file of the organiser's: the config MettaGrid builds, its map unseeded
        if isinstance(config.game.map_builder, HasSeed):
            config.game.map_builder.seed = None
        download = Download(
            name="game.yaml", body=yaml.safe_dump(config.model_dump(mode="json"), sort_keys=False).encode()
        )
        env, what = target, f"MettaGrid's {target}"
    else:
        suffix = PurePath(target).suffix
        download = Download(name=f"game{suffix}", body=Path(target).read_bytes())
        env, what = download.name, f"the MettaGrid game {config.label or 'of the config file'}"
    interface = PolicyEnvInterface.from_mg_cfg(config)
    shape = " x ".join(str(n) for n in interface.observation_shape)
    features = ", ".join(feature.name for feature in interface.obs_features)
    observation = (
        f"{interface.observation_kind} observation: a {interface.observation_dtype} array of {shape} (up to "
        f"{interface.observation_shape[0]} tokens of location, feature id, value; empty rows are 255), values "
        f"{interface.observation_low:g} to {interface.observation_high:g}; its features: {features}"
    )
    vibes = len(interface.vibe_action_names)
    action = f"one of its {len(interface.action_names)} actions, by name (below)" + (
        f", or one of {vibes} vibe actions ({interface.vibe_action_names[0]}, ...)" if vibes else ""
    )
    rewards = config.game.agent.rewards
    reward = [
        f"{name}: {json.dumps(value.model_dump(mode='json', exclude_defaults=True))}" for name, value in rewards.items()
    ] or ["this game gives no reward"]
    return GameFacts(
        name=f"{what}, {agents} agents, {steps} steps",
        env=env,
        env_kwargs_option=None,
        download=download,
        packages=packages("mettagrid"),
        reward=[*reward, f"each agent's reward is summed over the episode; {SCORE}"],
        spaces=[Seats(seats="every agent", observation=observation, action=action)],
        action_names=list(interface.action_names),
    )


# ---------------------------------------------------------------------------------------------
# PettingZoo and Kaggle


def _pettingzoo(target: str, kwargs: dict[str, Any], agents: int) -> GameFacts:
    from policybox.envs.pettingzoo import make_env

    module, _, factory = target.rpartition(":")
    if module.endswith(".py"):  # a game file of the organiser's: downloaded as game.py
        download = Download(name=GAME_FILE, body=Path(module).read_bytes())
        env = f"pettingzoo:{public_target(target)}"
        option = f"--env-kwargs {_quoted(kwargs)}" if kwargs else None
        extra: tuple[str, ...] = ()
    else:
        download = _kwargs_download(kwargs)
        env, option = f"pettingzoo:{target}", f"--env-kwargs @{KWARGS_FILE}"
        extra = _distributions(module.partition(".")[0])
    game = make_env(target, kwargs)
    try:
        spaces: dict[tuple[str, str], list[str]] = {}
        for agent in game.possible_agents:
            spaces.setdefault((str(game.observation_space(agent)), str(game.action_space(agent))), []).append(
                str(agent)
            )
    finally:
        game.close()
    every = len(spaces) == 1
    return GameFacts(
        name=f"the PettingZoo game {env.removeprefix('pettingzoo:')}, {agents} agents",
        env=env,
        env_kwargs_option=option,
        download=download,
        packages=packages("pettingzoo", *(name for name in extra if name != "pettingzoo")),
        reward=[f"the reward the game's step gives each agent, summed over the episode; {SCORE}"],
        spaces=[
            Seats(seats="every agent" if every else ", ".join(seats), observation=observation, action=action)
            for (observation, action), seats in spaces.items()
        ],
        action_names=[],
    )


def public_target(target: str) -> str:
    """A PettingZoo game's target as pages show it: one in a file of the organiser's by the name
    ``/rules/game`` downloads it under (``game.py:env``), never the organiser's path; a module's as it is."""
    module, _, factory = target.rpartition(":")
    return f"{GAME_FILE}:{factory}" if module.endswith(".py") else target


def public_env(described: dict[str, Any]) -> dict[str, Any]:
    """A played game's description (an episode result's ``env``) as a match page shows it: a PettingZoo
    game's file named as ``/rules/game`` names it."""
    if described.get("family") != "pettingzoo" or not isinstance(described.get("label"), str):
        return described
    return described | {"label": public_target(described["label"])}


def _kaggle(target: str, kwargs: dict[str, Any], agents: int) -> GameFacts:
    from policybox.envs.kaggle import make_env

    game = make_env(target, kwargs)
    specification = game.specification
    observation = "; ".join(
        f"{key}: {_schema(dict(value))}" for key, value in specification.observation.items() if key != "reward"
    )
    observation += f"; and the configuration, the agent's second argument: {json.dumps(dict(game.configuration))}"
    return GameFacts(
        name=f"the Kaggle game {game.name} (kaggle-environments), {agents} agents",
        env=f"kaggle:{target}",
        env_kwargs_option=f"--env-kwargs @{KWARGS_FILE}",
        download=_kwargs_download(kwargs),
        packages=packages("kaggle-environments"),
        reward=[f"the game's reward at the end: {_schema(dict(specification.reward))}; {SCORE}"],
        spaces=[Seats(seats="every agent", observation=observation, action=_schema(dict(specification.action)))],
        action_names=[],
    )


def _schema(value: dict[str, Any]) -> str:
    """A field of a Kaggle game's specification as it defines it (JSON schema), its description first."""
    description = value.pop("description", "")
    return f"{description} {json.dumps(value, default=str)}".strip()


def _kwargs_download(kwargs: dict[str, Any]) -> Download:
    return Download(name=KWARGS_FILE, body=(json.dumps(kwargs, indent=2) + "\n").encode())


def _quoted(kwargs: dict[str, Any]) -> str:
    import shlex

    return shlex.quote(json.dumps(kwargs))


def _distributions(top_level: str) -> tuple[str, ...]:
    """The installed distributions that provide a top-level package (``mpe2``: ``mpe2``)."""
    return tuple(importlib.metadata.packages_distributions().get(top_level, ()))
