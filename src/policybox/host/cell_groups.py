"""Which seats share a cell: one seat a cell (``--cells per-agent``), or every seat that one submission
holds in the episode (``--cells per-policy``; ``--cells forked``: a loader and its forked seats, a
process each), and the SETUP each cell is sent.

A per-policy cell builds its submission's policy once and steps its seats together -- batched, when
the policy can batch them (``policybox.cell.runtime``). Seats are grouped by their *entrant* (the
submission they play for: a ladder's version, a tournament's entrant, a ``-p`` of ``policybox run``),
never by their spec: two teams that upload the same bytes have equal specs, and are still two
teams, in two cells with two uids. Seats of one entrant share a cell only when their game gives
their cells the same setup (a PettingZoo game whose seats have different spaces gives them cells
of their own). Its output goes to its first seat's log, which every seat of the cell names (a forked seat's
to its own log: it is a process of its own).

Forked seats (``policybox.cell.seats``) are grouped exactly so: a loader never serves another entrant
(and forks at most MAX_FORKED_SEATS: a submission with more seats has more loaders).
Each seat then runs concurrently in a process of its own, so for its thread budget each counts as a
cell (``cell_count``), while the group shares one sandbox: one uid, one memory and CPU limit.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from policybox.host.record import AgentRecord
from policybox.settings import Cells
from policybox.wire import PROTOCOL_VERSION

MAX_FORKED_SEATS = 100  # seats a loader forks; a submission with more has several loaders


@dataclass(frozen=True)
class CellGroup:
    """The seats one cell plays (in agent order) and the game's setup of its cell half."""

    records: list[AgentRecord]
    env: dict[str, Any]
    forked: bool = False  # its seats are forked from one loader, a process each (--cells forked)

    @property
    def forks(self) -> bool:
        """Whether its cell is a loader that forks its seats: forked, with more than one seat (a submission
        with one seat plays in a cell of its own, as with --cells per-agent)."""
        return self.forked and len(self.records) > 1

    @property
    def first(self) -> AgentRecord:
        """The seat that names the cell: its sandbox's scratch folder and its log are this seat's."""
        return self.records[0]

    def setup_message(self, seed: int, log_limit_bytes: int) -> dict[str, Any]:
        """The SETUP its cell is sent (see ``policybox.wire``), but for the sandbox plan the pool adds."""
        return {
            "protocol": PROTOCOL_VERSION,
            "agents": [record.agent_id for record in self.records],
            "seed": seed,
            "threads": self.first.threads,
            "log_limit_bytes": log_limit_bytes,
            "spec": self.first.spec.model_dump(mode="json"),
            "env": self.env,
        }


def shared_cells(entrants: Sequence[str], envs: Sequence[dict[str, Any]], cells: Cells) -> list[list[int]]:
    """Which seats share a cell, as the seats' indices, a list a cell (a forked group whole, before it is
    split into loaders): one seat a cell with ``per-agent``; else the seats of one entrant whose game gives
    their cells the same setup (``envs[i]``: seat i's). The one rule for the cells started and their
    thread budget (``cell_count``)."""
    if cells == "per-agent":
        return [[seat] for seat in range(len(entrants))]
    shared: dict[tuple[str, str], list[int]] = {}
    for seat, (entrant, env) in enumerate(zip(entrants, envs, strict=True)):
        shared.setdefault((entrant, json.dumps(env, sort_keys=True)), []).append(seat)
    return list(shared.values())


def cell_groups(records: Sequence[AgentRecord], envs: Sequence[dict[str, Any]], cells: Cells) -> list[CellGroup]:
    """The cells that play ``records`` (``envs[i]``: the game's setup of record i's cell half)."""
    groups = []
    for seats in shared_cells([record.entrant for record in records], envs, cells):
        group = CellGroup([records[seat] for seat in seats], envs[seats[0]], forked=cells == "forked")
        if cells == "per-policy":  # its seats write to its first's log; a forked seat writes to its own
            for record in group.records[1:]:
                record.log_path = group.first.log_path
        groups.extend(_loaders(group))
    return groups


def _loaders(group: CellGroup) -> list[CellGroup]:
    """A forked group as loaders of at most MAX_FORKED_SEATS seats each (a loader gets a socket and an
    output per seat in one message of the zygote's, which holds at most 253 fds); any other group whole."""
    if not group.forked:
        return [group]
    records = group.records
    return [
        CellGroup(records[at : at + MAX_FORKED_SEATS], group.env, True)
        for at in range(0, len(records), MAX_FORKED_SEATS)
    ]


def cell_count(entrants: Sequence[str], envs: Sequence[dict[str, Any]], cells: Cells) -> int:
    """How many cells play seats of these ``entrants`` (``envs[i]``: seat i's cell setup), as
    ``shared_cells`` groups them: what each cell's thread budget is divided by (``policybox.threads``).
    A forked seat counts as a cell: it runs concurrently with its group's others."""
    return len(entrants) if cells == "forked" else len(shared_cells(entrants, envs, cells))
