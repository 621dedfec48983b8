"""The shorthand policies of PettingZoo games: ``random`` and ``noop``.

A policy for a PettingZoo game is a class built as ``Cls(observation_space, action_space, **kwargs)``
with ``act(observation) -> action`` -- or ``act(observation, info)``, where ``info`` holds the game's
``action_mask`` when the game keeps it in the agent's info -- and optionally ``reset()`` and ``load(path)``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from gymnasium import spaces

from policybox.envs.spaces import fallback_action


def legal_moves(observation: Any, info: dict[str, Any] | None) -> Any:
    """The game's ``action_mask``, wherever it puts it: the observation dict, else the info; or None."""
    if isinstance(observation, dict) and "action_mask" in observation:
        return observation["action_mask"]
    return (info or {}).get("action_mask")


class RandomPolicy:
    """Samples its action space -- seeded per agent by policybox, so an episode replays exactly --
    and only legal moves when the game gives an ``action_mask`` (in the observation or the info)."""

    def __init__(self, observation_space: spaces.Space[Any], action_space: spaces.Space[Any], **kwargs: Any) -> None:
        self.action_space = action_space

    def act(self, observation: Any, info: dict[str, Any] | None = None) -> Any:
        mask = legal_moves(observation, info)
        if mask is not None and isinstance(self.action_space, spaces.Discrete):
            return self.action_space.sample(mask=np.asarray(mask, dtype=np.int8))
        return self.action_space.sample()


class FallbackPolicy:
    """Plays the PettingZoo family's fallback action every step: the first legal action under an
    ``action_mask``, else the action space's zero (e.g. MPE's "no action")."""

    def __init__(self, observation_space: spaces.Space[Any], action_space: spaces.Space[Any], **kwargs: Any) -> None:
        self.action_space = action_space

    def act(self, observation: Any, info: dict[str, Any] | None = None) -> Any:
        mask = legal_moves(observation, info)
        return fallback_action(self.action_space, None if mask is None else {"action_mask": mask})
