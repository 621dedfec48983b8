"""What every environment family provides: a host half, a cell half, and how to find them by name.

An episode is played over *seats* 0..n-1: seat i is the i-th of the game's agents (MettaGrid's agent
ids; PettingZoo's ``possible_agents`` order) and ``agent_names[i]`` is its name in the game. The
episode loop, the pools, the evaluator and the zygote know seats only, never a family.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from policybox.errors import PolicyboxError
from policybox.limits import Limits


class ConfigError(PolicyboxError, ValueError):
    """The environment the user asked for does not exist or is not valid; the message says why."""


def not_a_policy(spec: Any, policy: str, expected: str) -> TypeError:
    """The error of a spec that names no ``policy`` ("a MettaGrid policy"); for an agent file (a file
    without a class, the form Kaggle games take), how to name its class."""
    file_class = spec.file_and_class
    if file_class and not file_class[1]:
        file = file_class[0]
        return TypeError(f"{file} is an agent file (Kaggle's form), not {policy}: name its class, as {file}:ClassName")
    return TypeError(f"{spec.class_path} is not {policy}: expected {expected}")


class InvalidAction(ValueError):
    """A policy's action (or a cell's action payload) is not a valid action of this environment.

    Not a PolicyboxError: it is a policy's failure, recorded on its agent, never raised to the user.
    """


@dataclass(frozen=True)
class GameRequest:
    """The game an episode asks a family for: ``target`` is ``--env`` without its family."""

    target: str
    kwargs: dict[str, Any]
    agents: int
    steps: int
    seed: int
    replay: str | None = None
    names: Sequence[str] = field(default=())  # the seats' policies, for the game's own records
    limits: Limits = field(default_factory=Limits)  # the time rules in force, for a game that tells its agents


class ActionSink(Protocol):
    """Where agents' actions go: an environment, or a caller that runs the environment itself."""

    def apply_action(self, agent_id: int, payload: bytes) -> None: ...
    def apply_fallback(self, agent_id: int, late: bool = False) -> None:
        """The family's documented fallback: what an agent without a (valid) action plays. ``late``: it
        had no action because it missed its deadline (a family whose game is told why may say so)."""


class EnvHost(ActionSink, Protocol):
    """Host half: runs the game, hands out observation bytes, takes action bytes."""

    family: str
    agent_names: list[str]

    def cell_setup(self, agent_id: int) -> dict[str, Any]: ...
    def describe(self) -> dict[str, Any]: ...
    def acting(self) -> Sequence[int]:
        """The seats asked to act this step: every live agent, or only the one whose turn it is."""

    def live(self) -> Collection[int]:
        """The seats still in the game; an agent that terminated or was truncated has left it."""

    def observation(self, agent_id: int) -> bytes | memoryview: ...
    def move_checked(self, agent_id: int) -> bool:
        """Whether the host checked the agent's action this step against the game's own legal moves (so
        that a raise on it is the game's bug, not the agent's illegal move)."""

    def took(self, agent_id: int, seconds: float) -> None:
        """How long the agent's reply took this step, before ``step`` (a game that keeps its agents' time
        itself is told: Kaggle's overage time)."""

    def step(self) -> None: ...
    def refused(self, agent_id: int) -> str | None:
        """Why the game itself refused the agent's own action in the step just played -- a rule the host
        could not check before the step -- or None (the game took it)."""

    @property
    def done(self) -> bool: ...
    @property
    def current_step(self) -> int: ...
    @property
    def max_steps(self) -> int:
        """The most steps the episode can last: ``--steps``, or the game's own limit where it is smaller."""

    def rewards(self) -> list[float]: ...
    def episode_stats(self) -> tuple[dict[str, float], list[dict[str, float]]]: ...
    def write_replay(self) -> None: ...
    def close(self) -> None: ...


class EnvCell(Protocol):
    """Cell half: rebuilds the observation objects the family's policies expect, encodes actions."""

    def resolve_shorthand(self, name: str) -> str: ...
    def build_policy(self, policy_class: type, spec: Any) -> Any:
        """The submission's policy, built and loaded once per cell the way its family builds policies
        (a family whose policies are built per seat may return what ``build_agent`` needs for that)."""

    def build_agent(self, policy: Any, spec: Any, agent_id: int) -> tuple[Any, int]:
        """(one seat's act function: observation -> action, the policy's minimum action timeout in ms)."""

    def step_group(self, agent_ids: Sequence[int], payloads: Sequence[bytes | memoryview]) -> list[Any] | None:
        """The actions of several seats of one policy from one call into it, when it can batch them
        (MettaGrid's ``step_group``, ``step_batch``); None: step each seat's act in turn."""

    def decode_observation(self, agent_id: int, payload: bytes | memoryview) -> Any: ...
    def encode_action(self, action: Any) -> bytes: ...


class EnvFamily(Protocol):
    """An adapter module (``policybox.envs.<family>``), found by the family name in ``--env``."""

    ZYGOTE_PRELOAD: tuple[str, ...]  # imported by the zygote, so its cells start warm

    def open_host(self, request: GameRequest) -> EnvHost:
        """The game asked for, started for ``request.agents`` seats."""

    def fixed_agents(self, target: str, kwargs: dict[str, Any]) -> int | None:
        """How many agents the game has, when the game decides it (None: any number)."""

    def resolve_shorthand(self, name: str) -> str: ...
    def cell_half(self, setup: dict[str, Any]) -> EnvCell: ...
    def warm(self) -> None:
        """Work the zygote does once for every cell (e.g. reading a registry)."""
