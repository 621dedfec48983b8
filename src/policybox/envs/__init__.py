"""Environment families, one adapter module each, found by the family name that starts ``--env``.

``--env arena``, ``--env navigation`` and ``--env FILE.yaml`` are MettaGrid games (its family name may
be written out: ``mettagrid:FILE.yaml``); ``--env pettingzoo:MODULE:FACTORY`` is a PettingZoo game;
``--env kaggle:GAME`` one of the games of ``kaggle-environments``.
"""

from __future__ import annotations

import importlib
from typing import Any, Protocol, cast

from policybox.envs.base import ActionSink, ConfigError, EnvCell, EnvFamily, EnvHost, GameRequest, InvalidAction

__all__ = [
    "ActionSink",
    "ConfigError",
    "EnvCell",
    "EnvFamily",
    "EnvHost",
    "FAMILIES",
    "GameRequest",
    "InvalidAction",
    "cell_half",
    "family",
    "game_limits",
    "split_env",
]

FAMILIES = {
    "mettagrid": "policybox.envs.mettagrid",
    "pettingzoo": "policybox.envs.pettingzoo",
    "kaggle": "policybox.envs.kaggle",
}
DEFAULT_FAMILY = "mettagrid"
RULED = {"kaggle"}  # families whose games carry time rules of their own: their adapter's game_limits


class RuledFamily(Protocol):
    def game_limits(self, target: str, kwargs: dict[str, Any]) -> dict[str, Any]:
        """The limits (``policybox.limits.Limits``' fields) the game's own rules set."""


def split_env(env: str) -> tuple[str, str]:
    """(family, target) of an ``--env`` value: ``pettingzoo:mpe2.simple_spread_v3:parallel_env`` is
    ("pettingzoo", "mpe2.simple_spread_v3:parallel_env"); a value without a known family prefix is
    MettaGrid's (``arena``, ``games/my.yaml``)."""
    prefix, sep, rest = env.partition(":")
    if sep and prefix in FAMILIES:
        return prefix, rest
    return DEFAULT_FAMILY, env


def family(name: str) -> EnvFamily:
    """The adapter module of a family; ConfigError for an unknown one."""
    if name not in FAMILIES:
        raise ConfigError(f"unknown environment family {name!r}; known: {', '.join(FAMILIES)}")
    return cast(EnvFamily, importlib.import_module(FAMILIES[name]))


def game_limits(env: str, kwargs: dict[str, Any]) -> dict[str, Any]:
    """The limits the game of ``--env`` sets by its own rules, by field; none for a family without rules of
    its own (asked without importing its adapter, which may import its whole engine)."""
    name, target = split_env(env)
    if name not in RULED:
        return {}
    return cast(RuledFamily, family(name)).game_limits(target, kwargs)


def cell_half(setup: dict[str, Any]) -> EnvCell:
    """The cell half named by the ``family`` of a SETUP's environment part."""
    return family(str(setup.get("family"))).cell_half(setup)
