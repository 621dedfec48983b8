"""Thread budgets: how many threads each cell's numeric libraries may use.

Every cell's torch, OpenMP and BLAS would otherwise start one thread per core of the machine, so N
cells on C cores run N*C busy threads that spend their time pre-empting each other (MettaGrid's
LSTM policy, 4 agents on 2 cores: 22 steps/s with each cell's default threads, ~650 with one). The
default budget divides the cores this process may run on among the episode's cells, at least one
each; an operator overrides it with ``--threads-per-cell``, a policy with its own ``env.OMP_NUM_THREADS``.

The host owns the number (it is recorded in the result); the cell applies it before any policy code
runs (``policybox.cell.agent_state``).
"""

from __future__ import annotations

import os
from collections.abc import Mapping

# Read by OpenMP, MKL, OpenBLAS, numexpr and Accelerate when they are first loaded.
THREAD_VARIABLES = (
    "OMP_NUM_THREADS",
    "MKL_NUM_THREADS",
    "OPENBLAS_NUM_THREADS",
    "NUMEXPR_NUM_THREADS",
    "VECLIB_MAXIMUM_THREADS",
)
OWN_BUDGET = "OMP_NUM_THREADS"  # the variable a policy's spec sets to ask for its own budget


def cell_threads(spec_env: Mapping[str, str], threads_per_cell: int | None, cells: int) -> int:
    """The thread budget of one cell: the policy's own ``OMP_NUM_THREADS``, else the operator's
    ``threads_per_cell``, else this process's cores divided among ``cells``, at least 1."""
    own = spec_env.get(OWN_BUDGET, "").strip()
    if own.isdigit() and int(own) >= 1:
        return int(own)
    if threads_per_cell is not None:
        return threads_per_cell
    return max(1, len(os.sched_getaffinity(0)) // max(1, cells))


def thread_environment(threads: int) -> dict[str, str]:
    """The environment variables that give libraries not loaded yet a budget of ``threads``."""
    return dict.fromkeys(THREAD_VARIABLES, str(threads))
