"""Cell uids that never collide: leased machine-wide, one lock file per uid, for the cell's whole life.

A uid is ``UID_BASE + n`` for n in ``range(UID_COUNT)``: far above real users and system accounts.
Leasing one means holding ``flock(LOCK_EX | LOCK_NB)`` on ``<tmp>/policybox-uids/<uid>.lock`` (a
folder only root may enter) for as long as the cell lives. So no two live cells anywhere on the
machine share a uid -- not two agents of one host, not two hosts, not two threads of one host
(flock locks belong to an open file description, and each lease opens its own) -- and a host that
is SIGKILLed leaks nothing: the kernel drops its locks with its file descriptors. A uid that some
running process still has (an orphan of a killed host, or anything else) is skipped too, and so
is every uid that ``/etc/subuid`` or ``/etc/subgid`` hands to a user for rootless containers (a
process in such a container could otherwise run as a cell's uid later).

Lock files are removed on release, under the lock; a leaser checks after locking that the file it
locked is still the one at that path (else someone released and removed it meanwhile, and it tries
again), the usual way to make lock-file removal safe.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import random
import stat
import tempfile
import threading
from pathlib import Path

from policybox.errors import PolicyboxError

UID_BASE = 1_000_000
UID_COUNT = 2**20  # uids 1,000,000 .. 2,048,575
LOCK_DIR_NAME = "policybox-uids"


class UidError(PolicyboxError, RuntimeError):
    """No uid can be leased: the lock folder is unsafe, or every uid of the range is taken."""


class UidLease:
    """One leased uid; ``release()`` (or leaving its ``with`` block) gives it back. Idempotent."""

    def __init__(self, uid: int, fd: int, folder: int) -> None:
        self.uid = uid
        self._fd: int | None = fd
        self._folder = folder
        self._lock = threading.Lock()

    def __enter__(self) -> UidLease:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()

    def __repr__(self) -> str:
        return f"UidLease({self.uid}{'' if self._fd is not None else ', released'})"

    def release(self) -> None:
        with self._lock:
            if self._fd is None:
                return
            with contextlib.suppress(OSError):
                os.unlink(f"{self.uid}.lock", dir_fd=self._folder)  # still locked: no one else holds it
            os.close(self._fd)
            self._fd = None

    def __del__(self) -> None:
        with contextlib.suppress(Exception):
            self.release()


def lease_uid(start: int | None = None) -> UidLease:
    """A uid no live cell on this machine has and no running process uses (see the module docs)."""
    return lease_uids(1, start)[0]


def lease_uids(count: int, start: int | None = None) -> list[UidLease]:
    """``count`` distinct uids at once (one scan of the running processes for all of them). They are
    tried from ``UID_BASE + start`` upward (wrapping round the range); ``start`` is random unless
    given, so hosts rarely even try the same lock files."""
    folder = _lock_folder()
    offset = random.randrange(UID_COUNT) if start is None else start % UID_COUNT
    leases: list[UidLease] = []
    tried = 0
    try:
        while len(leases) < count:
            batch: list[UidLease] = []
            reserved = subordinate_ids()
            while len(leases) + len(batch) < count and tried < UID_COUNT:
                uid = UID_BASE + (offset + tried) % UID_COUNT
                tried += 1
                lease = None if any(uid in ids for ids in reserved) else _try_lock(uid, folder)
                if lease is not None:
                    batch.append(lease)
            if not batch:
                raise UidError(f"no free uid in {UID_BASE}..{UID_BASE + UID_COUNT - 1}")
            in_use = running_uids()  # after locking: any later process with such a uid is our own cell
            for lease in batch:
                if lease.uid in in_use:
                    lease.release()
                else:
                    leases.append(lease)
    except BaseException:
        for lease in leases:
            lease.release()
        raise
    return leases


def subordinate_ids(files: tuple[str, ...] = ("/etc/subuid", "/etc/subgid")) -> list[range]:
    """The id ranges handed to users for their containers (``user:start:count`` lines)."""
    ranges = []
    for name in files:
        try:
            lines = Path(name).read_text().splitlines()
        except OSError:
            continue
        for line in lines:
            fields = line.strip().split(":")
            if len(fields) == 3 and fields[1].isdigit() and fields[2].isdigit():
                ranges.append(range(int(fields[1]), int(fields[1]) + int(fields[2])))
    return ranges


def running_uids() -> set[int]:
    """Every real, effective, saved and file-system uid of every running process (from /proc)."""
    uids: set[int] = set()
    try:
        pids = [entry.name for entry in os.scandir("/proc") if entry.name.isdigit()]
    except OSError:
        return uids
    for pid in pids:
        try:
            with open(f"/proc/{pid}/status", "rb") as status:
                for line in status:
                    if line.startswith(b"Uid:"):
                        uids.update(int(uid) for uid in line.split()[1:])
                        break
        except (OSError, ValueError):
            continue  # it ended meanwhile
    return uids


def _try_lock(uid: int, folder: int) -> UidLease | None:
    """The lease of ``uid`` if its lock is free, else None."""
    name = f"{uid}.lock"
    while True:
        fd = os.open(name, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600, dir_fd=folder)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            os.close(fd)
            if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN):
                return None
            raise
        try:
            same = os.stat(name, dir_fd=folder, follow_symlinks=False).st_ino == os.fstat(fd).st_ino
        except FileNotFoundError:
            same = False
        if same:
            return UidLease(uid, fd, folder)
        os.close(fd)  # released and removed by its holder between our open and our lock: again


_folder: tuple[int, int, int] | None = None  # fd, st_dev, st_ino of the lock folder
_folder_lock = threading.Lock()


def _lock_folder() -> int:
    """An fd of the lock folder, refused unless only we may write in it. Opened once per process, and
    again if the folder was replaced meanwhile (its old fd stays open for the leases that use it)."""
    global _folder
    path = Path(tempfile.gettempdir()) / LOCK_DIR_NAME
    with _folder_lock:
        if _folder is not None:
            with contextlib.suppress(OSError):
                info = os.stat(path, follow_symlinks=False)
                if (info.st_dev, info.st_ino) == _folder[1:]:
                    return _folder[0]
        with contextlib.suppress(FileExistsError):
            os.mkdir(path, 0o700)
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
        info = os.fstat(fd)
        if info.st_uid != os.geteuid() or stat.S_IMODE(info.st_mode) & 0o077:
            os.close(fd)
            raise UidError(f"{path} must be a folder owned by uid {os.geteuid()} with mode 0700")
        _folder = (fd, info.st_dev, info.st_ino)
        return fd
