"""A Kaggle game's built-in agents, as a shorthand names them: ``kaggle:negamax`` resolves to
``policybox.envs.kaggle_builtins.negamax``, the marker of the game's own ``negamax``, found in the cell
in the game it plays (``policybox.envs.kaggle.KaggleCell``)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class BuiltinAgent:
    name: str


def __getattr__(name: str) -> BuiltinAgent:
    if name.startswith("__"):
        raise AttributeError(name)
    return BuiltinAgent(name)
