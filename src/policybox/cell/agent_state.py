"""The process-wide state a policy sees besides its own objects: its random streams and its threads.

Random streams: Python's ``random``, ``numpy.random`` and torch's CPU generator, each seeded from
the episode seed and the agent's id, so that the same seed gives the same actions on every run and
no two agents share a stream. Threads: the budget the host gave the agent (``policybox.threads``).

A cell owns its process: ``apply()`` sets the state once, after the fork and before any policy code
runs. Inline mode runs every agent in the host, so ``active()`` swaps an agent's state in around
each call into its policy and the host's back after -- which is what makes inline and process mode
give a policy the same numbers.

Torch is seeded only once it is imported -- by the zygote's preload, or by the policy itself (the
cell checks after each call into policy code, so a policy that imports torch is seeded before its
next call); a ``-p random`` cell never imports it.
"""

from __future__ import annotations

import functools
import random
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np


def agent_seed(seed: int, agent_id: int) -> int:
    """A per-agent seed for the global RNGs, independent of how many agents there are."""
    return int(np.random.SeedSequence([seed, agent_id]).generate_state(1)[0])


def _torch() -> Any:
    """The torch module if something has imported it; never imports it."""
    return sys.modules.get("torch")


@functools.cache
def thread_pools() -> Any:
    """threadpoolctl's handle on the native thread pools loaded so far. Finding them resolves the path
    of every loaded library (about 70 with numpy), so the zygote finds them once, after its preload,
    and its cells -- which limit their threads before anything else loads -- inherit the answer."""
    from threadpoolctl import ThreadpoolController

    return ThreadpoolController()


class AgentState:
    def __init__(self, seed: int, agent_id: int, threads: int | None) -> None:
        self._seed = agent_seed(seed, agent_id)
        self._threads = threads
        self._python = random.Random(self._seed).getstate()
        self._numpy = np.random.RandomState(self._seed).get_state()
        self._torch_state: Any = None  # the agent's torch generator state, once torch is loaded
        self._torch_seen = False

    def apply(self) -> None:
        """Give this whole process (a cell) the agent's streams and thread budget."""
        random.setstate(self._python)
        np.random.set_state(self._numpy)
        if self._threads is not None:
            # Libraries already loaded (numpy's OpenBLAS, preloaded in the zygote) read no variables now.
            thread_pools().limit(limits=self._threads)
        self.notice_torch()

    def notice_torch(self) -> None:
        """Seed torch (and set its threads) the first time it is found loaded; cheap after that."""
        if self._torch_seen:
            return
        torch = _torch()
        if torch is None or not hasattr(torch, "manual_seed"):  # absent, or still being imported
            return
        self._torch_seen = True
        torch.manual_seed(self._seed)
        if self._threads is not None:
            torch.set_num_threads(self._threads)

    @contextmanager
    def active(self) -> Iterator[None]:
        """Inline mode: the agent's state for the block, the host's restored after."""
        host = (random.getstate(), np.random.get_state(), _torch_snapshot())
        random.setstate(self._python)
        np.random.set_state(self._numpy)
        if host[2] is not None:
            self._swap_torch_in()
        try:
            yield
            self.notice_torch()  # torch imported during the call: seeded before the agent's next one
        finally:
            self._python, self._numpy = random.getstate(), np.random.get_state()
            random.setstate(host[0])
            np.random.set_state(host[1])
            if _torch() is not None and self._torch_seen:
                torch = _torch()
                self._torch_state = torch.get_rng_state()
                if host[2] is not None:
                    torch.set_rng_state(host[2][0])
                    torch.set_num_threads(host[2][1])

    def _swap_torch_in(self) -> None:
        torch = _torch()
        if self._torch_state is None:
            self.notice_torch()
            return
        torch.set_rng_state(self._torch_state)
        if self._threads is not None:
            torch.set_num_threads(self._threads)


def _torch_snapshot() -> tuple[Any, int] | None:
    torch = _torch()
    if torch is None or not hasattr(torch, "get_rng_state"):
        return None
    return torch.get_rng_state(), torch.get_num_threads()
