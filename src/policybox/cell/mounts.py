"""A private mount namespace in which a cell's uid can still reach the files it needs.

A cell drops to an unprivileged uid, but its interpreter may live under a folder that only root
may enter (pyenv under /root, for instance). In the cell's own mount namespace each such folder is
covered with an empty tmpfs and only the paths the cell needs are bind-mounted back into it: the
cell sees its Python, its site-packages and its policy files, and nothing else of that folder.
Nothing changes outside the cell.
"""

from __future__ import annotations

import ctypes
import os
import stat
from pathlib import Path

CLONE_NEWNS = 0x00020000
CLONE_NEWNET = 0x40000000
MS_NOSUID, MS_NODEV, MS_BIND, MS_REC, MS_PRIVATE = 2, 4, 4096, 16384, 1 << 18

_libc = ctypes.CDLL(None, use_errno=True)


def unshare(flags: int) -> None:
    if _libc.unshare(flags) != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"unshare: {os.strerror(errno)}")


def mount(source: str | None, target: str, fstype: str | None, flags: int, data: str | None = None) -> None:
    encode = lambda text: None if text is None else text.encode()  # noqa: E731
    if _libc.mount(encode(source), encode(target), encode(fstype), flags, encode(data)) != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"mount {target}: {os.strerror(errno)}")


def closed_ancestor(path: Path) -> Path | None:
    """The outermost folder above ``path`` that other users may not enter, if any."""
    for ancestor in reversed(path.parents):
        if ancestor != Path("/") and not os.stat(ancestor).st_mode & stat.S_IXOTH:
            return ancestor
    return None


def expose(paths: list[str]) -> list[str]:
    """Enter a new mount namespace and mask every closed folder except ``paths``; the masked folders."""
    unshare(CLONE_NEWNS)
    mount(None, "/", None, MS_REC | MS_PRIVATE)  # nothing done here propagates to the host
    needed: dict[Path, set[Path]] = {}
    for raw in paths:
        path = Path(raw).resolve()
        if path.exists() and (closed := closed_ancestor(path)) is not None:
            needed.setdefault(closed, set()).add(path)
    for closed, inside in needed.items():
        keep = [p for p in inside if not any(other in p.parents for other in inside)]
        # Hold each path open so it can still be bind-mounted after the tmpfs hides it.
        handles = [(p, os.open(p, os.O_PATH | os.O_CLOEXEC)) for p in keep]
        mount("tmpfs", str(closed), "tmpfs", MS_NOSUID | MS_NODEV, "mode=755,size=1m")
        for path, handle in handles:
            if os.path.isdir(f"/proc/self/fd/{handle}"):
                path.mkdir(parents=True, exist_ok=True)
            else:
                path.parent.mkdir(parents=True, exist_ok=True)
                path.touch()
            for parent in path.relative_to(closed).parents:
                (closed / parent).chmod(0o755)
            mount(f"/proc/self/fd/{handle}", str(path), None, MS_BIND | MS_REC)
            os.close(handle)
    return [str(closed) for closed in needed]
