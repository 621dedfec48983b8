"""Removing a folder a hostile cell has filled: any depth, any number of files, any modes, no symlinks.

Why not ``shutil.rmtree``: in Python 3.11 (which we support) it recurses once per folder level, so a
policy that makes a chain of ~1,000 nested folders turns the host's cleanup into a RecursionError;
it also opens folders by path, which fails past PATH_MAX, and ``ignore_errors`` hides what was left.

``remove_tree`` walks the tree with an explicit stack and one open folder at a time: it goes down by
opening a child relative to the current folder (``O_NOFOLLOW``: never through a symlink) and back up
by opening ``..`` relative to it, checking that ``..`` is the very folder (device, inode) it came
from. So it needs neither recursion nor an fd per level nor a path string per level, and a folder
moved during the walk is left alone rather than followed. It never crosses into another file system
mounted inside the tree, and it never raises: every problem becomes one line of its answer.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from dataclasses import dataclass, field

MAX_PROBLEM_LINES = 5
_GONE = -1  # _enter's answer for a folder that no longer exists: nothing to do
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def remove_tree(path: str | os.PathLike[str]) -> list[str]:
    """Remove ``path`` and everything in it (a symlink or file at ``path`` is removed itself, never
    followed). Returns what could not be removed, as a few lines plus a count; [] when all is gone."""
    walk = _Walk(os.path.abspath(os.fspath(path)))
    try:
        walk.run()
    except Exception as exc:  # a bug or an unforeseen error must not break the host's cleanup
        walk.problem(f"{walk.root}: removal stopped ({exc!r})")
    finally:
        walk.close_fds()
    return walk.report()


@dataclass
class _Folder:
    """One level of the walk: a folder's name in its parent, its identity, and what is left to do."""

    name: str
    dev: int
    ino: int
    pending: list[str] = field(default_factory=list)  # sub-folders still to descend into
    left: set[str] = field(default_factory=set)  # entries that could not be removed: not retried


class _Walk:
    def __init__(self, root: str) -> None:
        self.root = root
        self.problems: list[str] = []
        self.problem_count = 0
        self.fds: list[int] = []  # at most two: the root's parent and the current folder
        self.fix_modes = os.geteuid() != 0

    def problem(self, line: str) -> None:
        self.problem_count += 1
        if len(self.problems) < MAX_PROBLEM_LINES:
            self.problems.append(line)

    def report(self) -> list[str]:
        more = self.problem_count - len(self.problems)
        return self.problems + ([f"... and {more} more problems"] if more else [])

    def close_fds(self) -> None:
        for fd in self.fds:
            with contextlib.suppress(OSError):
                os.close(fd)
        self.fds.clear()

    def where(self, stack: list[_Folder], name: str | None = None) -> str:
        """A readable path for a problem line: ``name`` in the top folder of the stack, else that
        folder itself (an empty stack: the root). Shortened in deep trees; built only for the few
        lines kept, since it costs a walk of the stack."""
        if self.problem_count >= MAX_PROBLEM_LINES:
            return name or "?"
        if not stack:
            return self.root
        names = [folder.name for folder in stack[1:]] + ([name] if name else [])
        if len(names) > 4:
            names = [names[0], f"...({len(names) - 3} levels)...", *names[-2:]]
        return os.path.join(self.root, *names)

    def run(self) -> None:
        head, name = os.path.split(self.root)
        if not name or name in (".", ".."):
            self.problem(f"{self.root}: refusing to remove it")
            return
        try:
            top = self._open(head, None, follow=True)
            info = os.stat(name, dir_fd=top, follow_symlinks=False)
        except FileNotFoundError:
            return
        if not stat.S_ISDIR(info.st_mode):
            self._unlink(top, name, [])
            return
        stack: list[_Folder] = []
        current = self._enter(top, name, info.st_dev, stack)
        if current is None or current == _GONE:
            return
        fstat = os.fstat(current)
        stack.append(_Folder(name, fstat.st_dev, fstat.st_ino))
        while stack:
            folder = stack[-1]
            if not folder.pending:
                folder.pending = self._clear(current, stack)
            if folder.pending:
                child_name = folder.pending.pop()
                child = self._enter(current, child_name, stack[0].dev, stack)
                if child is None:  # cannot go in (reported): it stays, and so does this folder
                    folder.left.add(child_name)
                elif child != _GONE:
                    self._close(current)
                    current = child
                    fstat = os.fstat(current)
                    stack.append(_Folder(child_name, fstat.st_dev, fstat.st_ino))
                continue
            # This folder is as empty as it can be made: go back up and remove it.
            done = stack.pop()
            parent = self._up(current, stack) if stack else top
            self._close(current)
            if parent is None:  # it is not where we found it (moved, or removed by someone else)
                current = self._resume(stack)
                continue
            current = parent
            if done.left:  # something inside stays, so this folder stays (already reported)
                if stack:
                    stack[-1].left.add(done.name)
                continue
            try:
                os.rmdir(done.name, dir_fd=current)
            except FileNotFoundError:
                pass
            except OSError as exc:
                self.problem(f"{self.where(stack, done.name)}: {exc.strerror}")
                if stack:
                    stack[-1].left.add(done.name)

    def _open(self, name: str, dir_fd: int | None, follow: bool = False) -> int:
        flags = _DIR_FLAGS & ~os.O_NOFOLLOW if follow else _DIR_FLAGS
        fd = os.open(name, flags, dir_fd=dir_fd)
        self.fds.append(fd)
        return fd

    def _close(self, fd: int) -> None:
        self.fds.remove(fd)
        os.close(fd)

    def _enter(self, parent: int, name: str, dev: int, stack: list[_Folder]) -> int | None:
        """Open sub-folder ``name`` of ``parent`` (never through a symlink), able to list and empty it;
        None (reported) if it cannot be, or if it is another file system mounted here; _GONE if it
        no longer exists."""
        try:
            try:
                fd = self._open(name, parent)
            except PermissionError:
                if not self._fix_mode(parent, name):
                    raise
                fd = self._open(name, parent)
        except FileNotFoundError:
            return _GONE
        except OSError as exc:
            reason = "not a folder any more" if exc.errno in (errno.ENOTDIR, errno.ELOOP) else exc.strerror
            self.problem(f"{self.where(stack, name)}: {reason}")
            return None
        info = os.fstat(fd)
        if info.st_dev != dev:
            self._close(fd)
            self.problem(f"{self.where(stack, name)}: another file system is mounted here; left alone")
            return None
        if self.fix_modes and stat.S_IMODE(info.st_mode) & 0o700 != 0o700:
            try:
                os.fchmod(fd, stat.S_IMODE(info.st_mode) | 0o700)
            except OSError as exc:
                self.problem(f"{self.where(stack, name)}: cannot make it writable ({exc.strerror})")
        return fd

    def _fix_mode(self, parent: int, name: str) -> bool:
        """Give the owner rwx on a folder it may not open (e.g. chmod 000), without following a
        symlink: through an O_PATH descriptor of the folder itself."""
        if not self.fix_modes:
            return False
        try:
            fd = os.open(name, os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=parent)
        except OSError:
            return False
        try:
            mode = stat.S_IMODE(os.fstat(fd).st_mode)
            os.chmod(f"/proc/self/fd/{fd}", mode | 0o700)
            return True
        except OSError:
            return False
        finally:
            os.close(fd)

    def _clear(self, current: int, stack: list[_Folder]) -> list[str]:
        """Remove every non-folder in the current folder; the sub-folders left to descend into."""
        folder = stack[-1]
        subfolders = []
        try:
            with os.scandir(current) as entries:
                for entry in entries:
                    if entry.name in folder.left:
                        continue
                    try:
                        is_folder = entry.is_dir(follow_symlinks=False)
                    except OSError:
                        is_folder = False
                    if is_folder:
                        subfolders.append(entry.name)
                    elif not self._unlink(current, entry.name, stack):
                        folder.left.add(entry.name)
        except OSError as exc:
            self.problem(f"{self.where(stack)}: cannot list it ({exc.strerror})")
            folder.left.add("")  # marks the folder as not emptied
        return subfolders

    def _unlink(self, parent: int, name: str, stack: list[_Folder]) -> bool:
        try:
            os.unlink(name, dir_fd=parent)
        except FileNotFoundError:
            pass
        except OSError as exc:
            self.problem(f"{self.where(stack, name)}: {exc.strerror}")
            return False
        return True

    def _up(self, current: int, stack: list[_Folder]) -> int | None:
        """The parent of the current folder, opened through ``..`` and checked to be the folder we
        came down from (the top of ``stack``); None if it is not, or if the current folder is gone."""
        try:
            fd = self._open("..", current)
        except FileNotFoundError:  # removed meanwhile by someone else (e.g. a second sweep)
            return None
        except OSError as exc:
            self.problem(f"{self.where(stack)}: cannot go back up ({exc.strerror})")
            return None
        info = os.fstat(fd)
        if (info.st_dev, info.st_ino) == (stack[-1].dev, stack[-1].ino):
            return fd
        self._close(fd)
        self.problem(f"{self.where(stack)}: a folder in it was moved away during removal; left alone")
        return None

    def _resume(self, stack: list[_Folder]) -> int:
        """Find the way back after losing it: walk down by name from the root's parent, checking each
        level against the stack, and cut the stack at the first level that is gone or is another
        folder now (left alone). The deepest folder still in place, opened; the root's parent if none."""
        top = fd = self.fds[0]
        for depth, folder in enumerate(stack):
            try:
                child = self._open(folder.name, fd)
                info = os.fstat(child)
            except OSError:
                child, info = None, None
            if child is not None and info is not None and (info.st_dev, info.st_ino) != (folder.dev, folder.ino):
                self.problem(f"{self.where(stack[:depth], folder.name)}: replaced during removal; left alone")
                if depth:
                    stack[depth - 1].left.add(folder.name)
                self._close(child)
                child = None
            if child is None:
                del stack[depth:]
                return fd
            if fd != top:
                self._close(fd)
            fd = child
        return fd
