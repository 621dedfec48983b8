"""Environment families, one adapter module each, found by the family name that starts ``--env``.

``--env arena``, ``--env navigation`` and ``--env FILE.yaml`` are MettaGrid games (its family name may
be written out: ``mettagrid:FILE.yaml``); ``--env pettingzoo:MODULE:FACTORY`` is a PettingZoo game;
``--env kaggle:GAME`` one of the games of ``kaggle-environments``.
"""

from __future__ import annotations

import importlib
from typing import Any, cast

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
    "split_env",
]

FAMILIES = {
    "mettagrid": "policybox.envs.mettagrid",
    "pettingzoo": "policybox.envs.pettingzoo",
    "kaggle": "policybox.envs.kaggle",
}
DEFAULT_FAMILY = "mettagrid"


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


def cell_half(setup: dict[str, Any]) -> EnvCell:
    """The cell half named by the ``family`` of a SETUP's environment part."""
    return family(str(setup.get("family"))).cell_half(setup)
