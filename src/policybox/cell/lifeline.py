"""A cell's tie to the process that started it: killed when that one dies.

Armed by every process of the cell side as it starts -- a cell, a zygote and what it forks, a forked
seat -- and again after a change of credentials, which clears it (``policybox.cell.sandbox``).
"""

from __future__ import annotations

import ctypes
import os
import signal

PR_SET_PDEATHSIG = 1


def die_with_parent(parent_pid: int) -> None:
    """Get SIGKILLed when the host dies; exit now if it already has (the race prctl cannot close)."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != parent_pid:
        os._exit(1)
