"""Confine the calling process with Linux Landlock (ctypes over the raw syscalls, no dependencies).

A cell calls :func:`restrict` before it imports untrusted policy code: afterwards the process and every
child it starts can only touch the filesystem the way the rules allow, cannot bind or connect TCP sockets,
and cannot signal or reach (abstract unix sockets) processes outside its Landlock domain.
Constants and struct layouts follow the kernel's ``include/uapi/linux/landlock.h``.
"""

from __future__ import annotations

import ctypes
import errno
import os
import stat

# Syscall numbers from the unified table: the same on x86_64 and aarch64.
_SYS_CREATE_RULESET = 444
_SYS_ADD_RULE = 445
_SYS_RESTRICT_SELF = 446
_CREATE_RULESET_VERSION = 1 << 0
_RULE_PATH_BENEATH = 1
_PR_SET_NO_NEW_PRIVS = 38

_FS_EXECUTE = 1 << 0
_FS_WRITE_FILE = 1 << 1
_FS_READ_FILE = 1 << 2
_FS_READ_DIR = 1 << 3
_FS_V1 = (1 << 13) - 1  # EXECUTE .. MAKE_SYM (bits 0-12): everything ABI 1 knows
_FS_REFER = 1 << 13  # ABI 2
_FS_TRUNCATE = 1 << 14  # ABI 3
_FS_IOCTL_DEV = 1 << 15  # ABI 5
_NET_BIND_TCP = 1 << 0  # ABI 4
_NET_CONNECT_TCP = 1 << 1  # ABI 4
_SCOPE_ABSTRACT_UNIX_SOCKET = 1 << 0  # ABI 6
_SCOPE_SIGNAL = 1 << 1  # ABI 6

# The only rights the kernel accepts in a rule whose fd is not a directory (anything more: EINVAL).
_FS_FILE = _FS_EXECUTE | _FS_WRITE_FILE | _FS_READ_FILE | _FS_TRUNCATE | _FS_IOCTL_DEV
_FS_READ = _FS_EXECUTE | _FS_READ_FILE | _FS_READ_DIR

_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long


class LandlockUnavailable(Exception):
    """This kernel cannot enforce Landlock; the message says why."""


class _RulesetAttr(ctypes.Structure):
    _fields_ = [
        ("handled_access_fs", ctypes.c_uint64),  # ABI 1: size 8
        ("handled_access_net", ctypes.c_uint64),  # ABI 4: size 16
        ("scoped", ctypes.c_uint64),  # ABI 6: size 24
    ]


class _PathBeneathAttr(ctypes.Structure):
    _pack_ = 1  # __attribute__((packed)): 12 bytes, no tail padding
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


def _check(result: int) -> int:
    if result < 0:
        code = ctypes.get_errno()
        raise OSError(code, os.strerror(code))
    return result


def _syscall(number: int, *args: object) -> int:
    """syscall(2); it is variadic, so every argument must be passed as an explicit ctypes type."""
    return _check(_libc.syscall(ctypes.c_long(number), *args))


def abi_version() -> int:
    """The Landlock ABI version the running kernel provides (>= 1)."""
    try:
        return _syscall(_SYS_CREATE_RULESET, None, ctypes.c_size_t(0), ctypes.c_uint32(_CREATE_RULESET_VERSION))
    except OSError as exc:
        if exc.errno == errno.ENOSYS:
            raise LandlockUnavailable("kernel has no Landlock (ENOSYS)") from exc
        if exc.errno == errno.EOPNOTSUPP:
            raise LandlockUnavailable("Landlock disabled at boot (EOPNOTSUPP)") from exc
        name = errno.errorcode.get(exc.errno or 0, str(exc.errno))
        raise LandlockUnavailable(f"Landlock version query failed ({name})") from exc


def _handled_fs(abi: int) -> int:
    # On ABI 1, REFER is not handleable yet is always denied: no rename/link across directories at all.
    rights = _FS_V1
    if abi >= 2:
        rights |= _FS_REFER
    if abi >= 3:
        rights |= _FS_TRUNCATE
    if abi >= 5:
        rights |= _FS_IOCTL_DEV
    return rights


def _add_path_rule(ruleset_fd: int, path: str, access: int) -> None:
    try:
        fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
    except (FileNotFoundError, NotADirectoryError):
        return  # nothing there to allow
    try:
        if not stat.S_ISDIR(os.fstat(fd).st_mode):
            access &= _FS_FILE
        rule = _PathBeneathAttr(allowed_access=access, parent_fd=fd)
        _syscall(
            _SYS_ADD_RULE,
            ctypes.c_int(ruleset_fd),
            ctypes.c_int(_RULE_PATH_BENEATH),
            ctypes.byref(rule),
            ctypes.c_uint32(0),
        )
    finally:
        os.close(fd)


def restrict(read_only: list[str], read_write: list[str], *, block_tcp: bool = True, scope: bool = True) -> int:
    """Confine the calling process and all its future children; return the ABI version used.

    ``read_only`` trees can be read, executed and listed; ``read_write`` trees allow every filesystem right
    the ABI handles; everything else gets none of them. Rules add up along a path, so a read_write tree
    inside a read_only one is writable. With ``block_tcp`` (ABI >= 4) every TCP bind and connect is denied;
    with ``scope`` (ABI >= 6) signals and abstract-unix connections to processes outside the domain are.
    Missing paths are skipped. Raises LandlockUnavailable if the kernel lacks Landlock, OSError otherwise.

    Landlock confines the calling thread and the threads and processes it creates afterwards, not threads
    that already run: call this while the process is single-threaded.
    """
    abi = abi_version()
    handled_fs = _handled_fs(abi)
    attr = _RulesetAttr(handled_access_fs=handled_fs)
    size = 8  # the size tells the kernel which fields we pass: only those this ABI knows
    if abi >= 4:
        attr.handled_access_net = _NET_BIND_TCP | _NET_CONNECT_TCP if block_tcp else 0  # handled, no rule: denied
        size = 16
    if abi >= 6:
        attr.scoped = _SCOPE_SIGNAL | _SCOPE_ABSTRACT_UNIX_SOCKET if scope else 0
        size = 24
    # Without CAP_SYS_ADMIN, restrict_self demands no_new_privs (so a setuid exec cannot escape the domain).
    one, zero = ctypes.c_ulong(1), ctypes.c_ulong(0)
    _check(_libc.prctl(ctypes.c_int(_PR_SET_NO_NEW_PRIVS), one, zero, zero, zero))
    ruleset_fd = _syscall(_SYS_CREATE_RULESET, ctypes.byref(attr), ctypes.c_size_t(size), ctypes.c_uint32(0))
    try:
        # A rule may only allow rights the ruleset handles (else EINVAL); _FS_READ is in every ABI.
        for path in read_only:
            _add_path_rule(ruleset_fd, path, _FS_READ)
        for path in read_write:
            _add_path_rule(ruleset_fd, path, handled_fs)
        _syscall(_SYS_RESTRICT_SELF, ctypes.c_int(ruleset_fd), ctypes.c_uint32(0))
    finally:
        os.close(ruleset_fd)
    return abi
