"""The two halves every environment adapter provides, and the error they share."""

from __future__ import annotations

from typing import Any, Protocol


class ConfigError(ValueError):
    """The environment the user asked for does not exist or is not valid; the message says why."""


class InvalidAction(ValueError):
    """A policy's action (or a cell's action payload) is not a valid action of this environment."""


class ActionSink(Protocol):
    """Where agents' actions go: an environment, or a caller that runs the environment itself."""

    def apply_action(self, agent_id: int, payload: bytes) -> None: ...
    def apply_noop(self, agent_id: int) -> None: ...


class EnvHost(ActionSink, Protocol):
    """Host half: runs the environment, hands out observation bytes, takes action bytes."""

    family: str
    num_agents: int

    def cell_setup(self) -> dict[str, Any]: ...
    def describe(self) -> dict[str, Any]: ...
    def observation(self, agent_id: int) -> bytes | memoryview: ...
    def step(self) -> None: ...
    @property
    def done(self) -> bool: ...
    @property
    def current_step(self) -> int: ...
    def rewards(self) -> list[float]: ...
    def episode_stats(self) -> tuple[dict[str, float], list[dict[str, float]]]: ...
    def close(self) -> None: ...


class EnvCell(Protocol):
    """Cell half: rebuilds the observation objects the family's policies expect, encodes actions."""

    policy_env_info: Any

    def resolve_shorthand(self, name: str) -> str: ...
    def build_agent(self, policy_class: type, spec: Any, agent_id: int) -> tuple[Any, int]: ...
    def decode_observation(self, agent_id: int, payload: bytes) -> Any: ...
    def encode_action(self, action: Any) -> bytes: ...
