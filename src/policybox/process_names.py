"""What ``top`` and ``ps -o comm`` call policybox's own processes: a pool's worker, a zygote, a cell.

A worker and a cell forked from a zygote keep the zygote's command line (``python -m
policybox.cell.zygote ...``), so their name is what tells them apart. A cell names itself before its
policy is imported; a policy may rename its own process, which changes only what ``ps`` shows.
"""

from __future__ import annotations

import ctypes

PR_SET_NAME = 15
WORKER = "pb-worker"
ZYGOTE = "pb-zygote"
CELL = "pb-cell"


def name_process(name: str) -> None:
    """Set this process's name (``/proc/self/comm``; at most 15 bytes)."""
    ctypes.CDLL(None).prctl(PR_SET_NAME, ctypes.c_char_p(name.encode()[:15]), 0, 0, 0)
