"""The cell's own view of the filesystem and of processes, built in private namespaces (root only).

A cell drops to an unprivileged uid, but its interpreter may live under a folder only root may
enter (pyenv under /root, for instance), and the folders every user may write to (/tmp, /dev/shm,
/run, ...) are where cells could meet. In the cell's own mount namespace:

* each of those shared folders, and each root-only folder the cell needs something from, is
  covered with an empty tmpfs, and only the paths the cell needs (its Python, site-packages, its
  policy files and checkpoint) are bound back -- read-only;
* its scratch folder is a tmpfs of its own, capped in bytes and in files, owned by its uid, and
  gone with the namespace when the cell ends: nothing it writes reaches the host's disk;
* /proc is a fresh instance with ``hidepid=invisible``: the cell sees only its own processes.

Its own IPC namespace keeps System V and POSIX shared memory, semaphores and message queues
private, and makes them die with it. Nothing here changes anything outside the cell.
"""

from __future__ import annotations

import ctypes
import functools
import os
import stat
from collections.abc import Iterable
from pathlib import Path

CLONE_NEWNS = 0x00020000
CLONE_NEWIPC = 0x08000000
CLONE_NEWNET = 0x40000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 32, 4096, 16384, 1 << 18
# Folders every user may write to: the places cells could meet or leave things. Each becomes an
# empty, read-only (root-owned) folder in the cell.
SHARED_FOLDERS = ("/tmp", "/var/tmp", "/dev/shm", "/dev/mqueue", "/run")

_libc = ctypes.CDLL(None, use_errno=True)


def _encoded(text: str | None) -> bytes | None:
    return None if text is None else text.encode()


def unshare(flags: int) -> None:
    if _libc.unshare(flags) != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"unshare: {os.strerror(errno)}")


def mount(source: str | None, target: str, fstype: str | None, flags: int, data: str | None = None) -> None:
    if _libc.mount(_encoded(source), target.encode(), _encoded(fstype), flags, _encoded(data)) != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"mount {target}: {os.strerror(errno)}")


def closed_ancestor(path: Path) -> Path | None:
    """The outermost folder above ``path`` that other users may not enter, if any."""
    for ancestor in reversed(path.parents):
        if ancestor != Path("/") and not os.stat(ancestor).st_mode & stat.S_IXOTH:
            return ancestor
    return None


def enter_mount_namespace() -> None:
    unshare(CLONE_NEWNS)
    mount(None, "/", None, MS_REC | MS_PRIVATE)  # nothing done here propagates to the host


def private_view(interpreter: tuple[str, ...], needed: Iterable[str], read_only: Iterable[str]) -> list[str]:
    """Mask the shared folders and every closed folder holding a needed path; bind back what is needed.

    ``interpreter`` and ``needed`` paths stay reachable as they are (the interpreter's, planned once
    per process by ``interpreter_masks``; the cell's own, such as its scratch); ``read_only`` paths
    (policy files, checkpoints) are bound back read-only wherever they are. Returns the folders masked.
    """
    masks = {folder: set(inside) for folder, inside in interpreter_masks(interpreter).items()}
    keep = {path for raw in needed if raw and os.path.exists(raw) for path in _both_names(raw)}
    frozen = {Path(raw).resolve() for raw in read_only if raw and os.path.exists(raw)}
    for path in keep | frozen:
        _hold(masks, path)
    bound: set[Path] = set()
    for folder, inside in masks.items():
        bound |= _mask(folder, sorted(inside))
    for path in sorted(frozen):
        if path not in bound:  # a mount point of its own, so that it alone can be made read-only
            _bind(path, path)
        mount(None, str(path), None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV)
    return [str(folder) for folder in masks]


@functools.cache
def interpreter_masks(interpreter: tuple[str, ...]) -> dict[Path, frozenset[Path]]:
    """Each folder to mask (every shared folder, and each closed folder holding an interpreter path),
    with the interpreter paths to bind back into it. The same for every cell of a process, and some
    thousand ``lstat`` calls to work out: the zygote plans it once, before it forks its cells."""
    masks: dict[Path, set[Path]] = {folder: set() for folder in _shared_folders()}
    for path in {path for raw in interpreter if raw and os.path.exists(raw) for path in _both_names(raw)}:
        _hold(masks, path)
    return {folder: frozenset(inside) for folder, inside in masks.items()}


@functools.cache
def _shared_folders() -> tuple[Path, ...]:
    return tuple(Path(folder) for folder in SHARED_FOLDERS if _is_real_folder(folder))


def _hold(masks: dict[Path, set[Path]], path: Path) -> None:
    """Add ``path`` to the folder that will hide it, if one does: a shared folder, or a closed one."""
    holder = next((folder for folder in _shared_folders() if folder in path.parents), None) or closed_ancestor(path)
    if holder is not None:
        masks.setdefault(holder, set()).add(path)


def _both_names(raw: str) -> set[Path]:
    """A needed path as the interpreter names it and where it really is: a virtualenv reached through
    a symlink (``.venv -> /elsewhere/venv``) is imported by the first name, so if a masked folder holds
    that name, the real folder must be bound back there too."""
    named = Path(os.path.abspath(raw))
    return {named, named.resolve()}


def _is_real_folder(path: str) -> bool:
    return os.path.isdir(path) and not os.path.islink(path)


def _mask(folder: Path, inside: list[Path]) -> set[Path]:
    """Cover ``folder`` with an empty tmpfs, then bind each path of ``inside`` back in place (those
    inside another come back with it); the paths bound, each now a mount point."""
    outermost = [p for p in inside if not any(other in p.parents for other in inside)]
    # Hold each path open so it can still be bound after the tmpfs hides it.
    handles = [(path, os.open(path, os.O_PATH | os.O_CLOEXEC)) for path in outermost]
    mount("tmpfs", str(folder), "tmpfs", MS_NOSUID | MS_NODEV, "mode=755,size=1m")
    for path, handle in handles:
        try:
            _make_mount_point(path, os.path.isdir(f"/proc/self/fd/{handle}"), folder)
            _bind(Path(f"/proc/self/fd/{handle}"), path)
        finally:
            os.close(handle)
    return set(outermost)


def _make_mount_point(path: Path, is_dir: bool, under: Path) -> None:
    if is_dir:
        path.mkdir(parents=True, exist_ok=True)
    else:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.touch()
    for parent in path.relative_to(under).parents:
        (under / parent).chmod(0o755)


def _bind(source: Path, target: Path) -> None:
    mount(str(source), str(target), None, MS_BIND | MS_REC)


def private_scratch(scratch: str, uid: int | None, gid: int | None, size_bytes: int, files: int) -> None:
    """Make ``scratch`` a tmpfs of its own: at most ``size_bytes`` and ``files`` files, owned by the cell."""
    Path(scratch).mkdir(parents=True, exist_ok=True)
    owner = "" if uid is None else f",uid={uid},gid={gid}"
    options = f"mode=700,size={size_bytes},nr_inodes={files}{owner}"
    mount("tmpfs", scratch, "tmpfs", MS_NOSUID | MS_NODEV, options)


def private_proc() -> None:
    """A /proc of our own in which processes of other users (every other cell, the host) are invisible."""
    mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, "hidepid=invisible")
