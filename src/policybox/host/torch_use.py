"""Which policies import torch, so that their cells fork from a zygote that has it loaded already.

Importing torch takes a second or more of a cell's start-up; a cell forked from a zygote that
preloaded it has it at once. ``--preload torch`` asks for that for every cell. Without it, policybox
finds the policies that need torch itself, and only their cells fork from a second zygote, with torch
(``Zygote.with_torch``: started on first use, once per zygote). A run whose policies never import
torch never starts it: it pays a look at each distinct policy's source, once per episode for an entrant's
module (a read of at most ``MAX_SOURCE_BYTES`` and a scan of them: about 0.3 ms for a small one), once
per process for one of the host's own.

A policy needs torch when

* the module its class is defined in imports it -- as far as a scan of the module's first
  ``MAX_SOURCE_BYTES`` for an ``import torch`` or ``from torch`` line tells (``IMPORTS_TORCH``, a regular
  expression that takes time linear in those bytes). The module is an entrant's: the host never imports
  it, nor parses it (``ast.parse`` takes time quadratic in some files, and holds the GIL all along). A
  line the scan misreads (in a string, say) costs a fork from the torch zygote; an import it misses
  (past the bytes scanned, in a helper module, through ``importlib``) is learned from the first cell.
  The module is found where the cell will import it from: a file-path class's file; a dotted class's (or
  a shorthand's) module in the spec's own import roots (its ``python_path``), where it must lie, after
  symlinks, inside the root it is found in -- a symlink out of it (to ``/proc/kmsg``, to the organiser's
  files) is refused, ``SpecError``, and never opened -- or else on the host's own ``sys.path``, the
  host's files (an installed package's, a shorthand's), read as they are. Every read is
  ``policybox.untrusted_files``'s: never blocking, regular files only. (Its requirements cannot tell: the
  host has torch, so an environment never holds it, and a built spec's requirements are gone.)
* or a cell of the same spec imported torch before, in this process: its READY says so
  (``remember``). A worker that plays many episodes learns this in its first one.

Either way, forking from the torch zygote changes nothing a policy computes: its cell seeds torch
and sets its threads the moment it sees torch loaded (``policybox.cell.agent_state``), before any
policy code runs, as it does after a policy imports torch itself.
"""

from __future__ import annotations

import functools
import hashlib
import re
import sys
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

from policybox import untrusted_files
from policybox.spec import PolicySpec
from policybox.untrusted_files import Folder

TORCH = "torch"
MAX_SOURCE_BYTES = 1 << 20  # of a module, scanned: an import past them is learned from its first cell
MAX_REMEMBERED = 4096
# An import statement at the start of a line that names torch: `import torch`, `import os, torch.nn as
# nn`, `from torch import nn`. Linear: one try per line, each going to the line's end at most once. A
# line starts after "\n" (the scan puts one before the first): a literal first character, which the
# regex engine finds at C speed -- "^" with MULTILINE is tried at every byte, ten times slower.
IMPORTS_TORCH = re.compile(rb"\n[ \t]*(?:import[ \t][^\n#;]*?|from[ \t]+)\btorch\b")

_learned: dict[str, None] = {}  # spec digests, oldest first


def needs_torch(spec: PolicySpec, resolve_shorthand: Callable[[str], str]) -> bool:
    """Whether ``spec``'s policy imports torch, as far as its module or an earlier cell tells;
    ``SpecError`` if its module may not be read (a symlink out of its folder, not a regular file)."""
    return _digest(spec) in _learned or _module_imports_torch(spec, resolve_shorthand)


def remember(spec: PolicySpec) -> None:
    """A cell of ``spec`` imported torch: its next cells in this process fork from the torch zygote."""
    _learned[_digest(spec)] = None
    while len(_learned) > MAX_REMEMBERED:
        del _learned[next(iter(_learned))]


def _digest(spec: PolicySpec) -> str:
    return hashlib.sha256(spec.model_dump_json().encode()).hexdigest()


def _module_imports_torch(spec: PolicySpec, resolve_shorthand: Callable[[str], str]) -> bool:
    """Whether the module of ``spec``'s class imports torch, looked for where its cell would import it
    from, in the order it would look: a file-path class's file; else the spec's own import roots, then
    the host's. Not found anywhere: False (its cell will say why)."""
    file_class = spec.file_and_class
    if file_class:
        path = Path(file_class[0])
        inside = Folder.at(path.parent, f"its folder {path.parent.name}")
        return bool(_first_scanned([(path, f"{path.name} (the module of {file_class[1] or 'its agent'})", inside)]))
    try:
        class_path = resolve_shorthand(spec.class_path) if spec.is_shorthand else spec.class_path
    except LookupError:
        return False  # a misspelt shorthand: refused elsewhere
    parts = tuple(class_path.rpartition(".")[0].split("."))
    own = (
        (path, f"{path.relative_to(inside.root)} (the module of {class_path})", inside)
        for inside in (Folder.at(root, f"its import root {Path(root).name}") for root in spec.python_path)
        for path in _candidates(inside.root, parts)
    )
    found = _first_scanned(own)
    return _host_module_imports_torch(parts, tuple(sys.path)) if found is None else found


@functools.lru_cache(maxsize=MAX_REMEMBERED)
def _host_module_imports_torch(parts: tuple[str, ...], roots: tuple[str, ...]) -> bool:
    """The same for a module of the host's own (an installed package's), read as it is, once per process."""
    return bool(_first_scanned((path, str(path), None) for root in roots for path in _candidates(Path(root), parts)))


def _first_scanned(places: Iterable[tuple[Path, str, Folder | None]]) -> bool | None:
    """Whether the first module of ``places`` that is there imports torch; None if none is."""
    for path, shown, inside in places:
        try:
            return _imports_torch(path, shown, inside)
        except untrusted_files.Missing:
            continue  # not there: the next place, as the import system would look
    return None


def _candidates(root: Path, parts: tuple[str, ...]) -> Iterator[Path]:
    """The module named by ``parts`` in ``root``: a package first, then a file, as the import system
    looks (else a ``pkg.py`` beside ``pkg/`` would be read for a module the cell never imports)."""
    yield Path(root, *parts, "__init__.py")
    yield Path(root, *parts).with_suffix(".py")


def _imports_torch(path: Path, shown: str, inside: Folder | None) -> bool:
    """Whether the module at ``path`` has an import of torch in its first MAX_SOURCE_BYTES."""
    with untrusted_files.opened(path, shown, inside) as (file, info):  # read(size): no 1 MiB buffer for 2 KB
        return IMPORTS_TORCH.search(b"\n" + file.read(min(info.st_size, MAX_SOURCE_BYTES))) is not None
