"""Which policies import torch, so that their cells fork from a zygote that has it loaded already.

Importing torch takes a second or more of a cell's start-up; a cell forked from a zygote that
preloaded it has it at once. ``--preload torch`` asks for that for every cell. Without it, policybox
finds the policies that need torch itself, and only their cells fork from a second zygote, with torch
(``Zygote.with_torch``: started on first use, once per zygote). A run whose policies never import
torch never starts it: it pays a look at each distinct policy's source, once per process.

A policy needs torch when

* the module its class is defined in imports it -- read from the module's source, never imported (a
  file-path class's file; a dotted class's or a shorthand's module, found in the spec's import roots
  or the host's). (Its requirements cannot tell: the host has torch, so an environment never holds it,
  and a built spec's requirements are gone.)
* or a cell of the same spec imported torch before, in this process: its READY says so
  (``remember``). A worker that plays many episodes learns this in its first one; a policy whose
  torch comes in through a helper module is found that way.

Either way, forking from the torch zygote changes nothing a policy computes: its cell seeds torch
and sets its threads the moment it sees torch loaded (``policybox.cell.agent_state``), before any
policy code runs, as it does after a policy imports torch itself.
"""

from __future__ import annotations

import ast
import functools
import hashlib
import stat
import sys
from collections.abc import Callable
from pathlib import Path

from policybox.spec import PolicySpec

TORCH = "torch"
MAX_SOURCE_BYTES = 1 << 20  # a module larger than this is not read: learned from its first cell instead
MAX_REMEMBERED = 4096

_learned: dict[str, None] = {}  # spec digests, oldest first


def needs_torch(spec: PolicySpec, resolve_shorthand: Callable[[str], str]) -> bool:
    """Whether ``spec``'s policy imports torch, as far as its spec or an earlier cell tells."""
    return _digest(spec) in _learned or _module_imports_torch(spec, resolve_shorthand)


def remember(spec: PolicySpec) -> None:
    """A cell of ``spec`` imported torch: its next cells in this process fork from the torch zygote."""
    _learned[_digest(spec)] = None
    while len(_learned) > MAX_REMEMBERED:
        del _learned[next(iter(_learned))]


def _digest(spec: PolicySpec) -> str:
    return hashlib.sha256(spec.model_dump_json().encode()).hexdigest()


def _module_imports_torch(spec: PolicySpec, resolve_shorthand: Callable[[str], str]) -> bool:
    file_class = spec.file_and_class
    if file_class:
        source: Path | None = Path(file_class[0])
    else:
        try:
            class_path = resolve_shorthand(spec.class_path) if spec.is_shorthand else spec.class_path
        except LookupError:
            return False  # a misspelt shorthand: refused elsewhere
        source = _module_file(class_path.rpartition(".")[0], (*spec.python_path, *sys.path))
    return source is not None and _imports_torch(source)


@functools.lru_cache(maxsize=MAX_REMEMBERED)
def _module_file(module: str, roots: tuple[str, ...]) -> Path | None:
    """The source of ``module`` in the first of ``roots`` that has it -- found on disk, not imported
    (importing a package to find a module would run its ``__init__``: an entrant's code, on the host).
    Remembered: a version's files never change, and a new one is a new root."""
    parts = module.split(".")
    for root in roots:
        for candidate in (Path(root, *parts).with_suffix(".py"), Path(root, *parts, "__init__.py")):
            if candidate.is_file():
                return candidate
    return None


def _imports_torch(source: Path) -> bool:
    """Whether the module at ``source`` imports torch anywhere in it (each version of a file read once)."""
    try:
        info = source.stat()
    except OSError:
        return False
    if not stat.S_ISREG(info.st_mode) or info.st_size > MAX_SOURCE_BYTES:
        return False  # a FIFO would block the read
    return _source_imports_torch(source, info.st_mtime_ns, info.st_size)


@functools.lru_cache(maxsize=MAX_REMEMBERED)
def _source_imports_torch(source: Path, mtime_ns: int, size: int) -> bool:
    try:
        tree = ast.parse(source.read_bytes())
    except (OSError, SyntaxError, ValueError, RecursionError, MemoryError):
        return False  # an entrant's file that cannot be read or parsed: its cell will say why
    for node in ast.walk(tree):
        if isinstance(node, ast.Import) and any(_is_torch(alias.name) for alias in node.names):
            return True
        if isinstance(node, ast.ImportFrom) and node.level == 0 and _is_torch(node.module or ""):
            return True
    return False


def _is_torch(module: str) -> bool:
    return module == TORCH or module.startswith(f"{TORCH}.")
