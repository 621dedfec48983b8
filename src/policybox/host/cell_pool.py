"""CellPool: what an episode asks of the cells that play it, whether they run as processes
(``policybox.host.process_pool``) or inline in the host (``policybox.host.inline_pool``).

One protocol for both, as Gymnasium's synchronous and asynchronous vector environments share one
base: the episode loop, a cell job and the MettaGrid wrapper hold a ``CellPool`` and never ask which
kind it is.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, Protocol

from policybox.results import MemoryBudget
from policybox.wire import Reply


class CellPool(Protocol):
    """An episode's cells: started together, stepped together, stopped when the context ends."""

    def __enter__(self) -> CellPool: ...

    def __exit__(self, *exc: object) -> None:
        """Stop every cell (kill and reap its processes, remove its cgroup and scratch)."""

    def start(self, setups: list[dict[str, Any]]) -> None:
        """Start every cell with its SETUP (``setups[i]``: the i-th group's) and wait until each is ready
        or has failed."""

    def act(self, step: int, observations: Mapping[int, bytes | memoryview]) -> dict[int, Reply]:
        """Ask the seats in ``observations`` (by agent id) for this step's actions; the replies by agent
        id (none: not asked, failed or late)."""
        ...

    def retire_stopped(self) -> None:
        """Stop the cells none of whose seats still play: failed for good, or left the game."""

    @property
    def cleanup(self) -> str:
        """How its cells were stopped, for the episode's result ("inline": there was nothing to stop)."""
        ...

    @property
    def memory_budget(self) -> MemoryBudget | None:
        """The memory budget its cells shared (None: they had no memory limit)."""
        ...

    def scratch_view(self, agent_id: int) -> Path | None:
        """Agent ``agent_id``'s scratch folder as the host can read it while its cell runs (None: it has
        none, or its cell has stopped)."""
        ...
