"""Environment adapters, one module per family; ``cell_half`` picks the cell half by family name."""

from __future__ import annotations

from typing import Any

from policybox.envs.base import ActionSink, ConfigError, EnvCell, EnvHost, InvalidAction

__all__ = ["ActionSink", "ConfigError", "EnvCell", "EnvHost", "InvalidAction", "cell_half"]


def cell_half(setup: dict[str, Any]) -> EnvCell:
    family = setup.get("family")
    if family == "mettagrid":
        from policybox.envs.mettagrid import MettaGridCell

        return MettaGridCell(setup)
    raise ValueError(f"unknown environment family {family!r}")
