"""What a program keeps for every run in a block: ``kept_zygotes`` (a zygote per preload) and
``kept_workers`` (a pool of workers per role, count and budget) are each one ``Keeping``.

Within ``keeping.block()``, ``keeping.current`` is the block's dict of things kept, by key; outside every
block it is None and a run starts and stops its own. Blocks nest: the inner one's things serve, and a
block given ``keep`` (an earlier block's dict) adds to it and leaves it running for its owner to stop.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Hashable, Iterator
from typing import Generic, TypeVar

Key = TypeVar("Key", bound=Hashable)
Thing = TypeVar("Thing")


class Keeping(Generic[Key, Thing]):
    """The things kept by the innermost open block (``current``), under ``lock``; ``stop`` ends one."""

    def __init__(self, stop: Callable[[Thing], None]) -> None:
        self.current: dict[Key, Thing] | None = None
        self.lock = threading.Lock()
        self._stop = stop

    @contextlib.contextmanager
    def block(self, keep: dict[Key, Thing] | None = None) -> Iterator[dict[Key, Thing]]:
        """Keep things for this block (in ``keep``, if given); yields the dict, and stops what is in it
        when the block ends, unless it was given."""
        with self.lock:
            outer, kept = self.current, {} if keep is None else keep
            self.current = kept
        try:
            yield kept
        finally:
            with self.lock:
                self.current = outer
            if keep is None:
                for thing in kept.values():
                    self._stop(thing)
