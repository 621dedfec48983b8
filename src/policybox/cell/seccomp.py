"""A seccomp-BPF filter for cell processes, built with ctypes only (no libseccomp).

``install_denylist()`` is the last sandbox layer a cell applies before it imports untrusted policy code:
it sets ``no_new_privs`` and loads a classic-BPF filter that

* makes a fixed set of syscalls (ptrace, mount, unshare/setns, kernel modules, bpf, keyrings, userfaultfd,
  io_uring, clock setting, ...) fail with EPERM: ``DENIED`` names them;
* makes ``clone`` fail with EPERM when its flags ask for any new namespace (CLONE_NEWNS, NEWCGROUP, NEWUTS,
  NEWIPC, NEWUSER, NEWPID, NEWNET). A new user namespace hands its creator every capability inside it,
  and with it packet sockets, nf_tables and other kernel code an unprivileged process never reaches;
  plain fork, threads and subprocess (clone without those bits) still work;
* makes ``clone3`` fail with ENOSYS. Its flags sit in a struct in user memory, which a seccomp filter
  cannot read; ENOSYS is what glibc takes for "kernel too old", so it falls back to ``clone``, whose
  flags the filter does see;
* makes ``socket`` and ``socketpair`` fail with EAFNOSUPPORT for any address family other than AF_UNIX,
  AF_INET and AF_INET6: netlink, packet, vsock, bluetooth, ... are kernel surface no policy needs;
* makes ``socket(AF_UNIX, ...)`` and ``socketpair(AF_UNIX, SOCK_DGRAM)`` fail with EPERM. Such a socket
  can connect or send, by path, to any Unix socket file the cell can see -- the host's own services,
  outside both the network namespace and Landlock. A cell keeps connected pairs (``socketpair`` of
  SOCK_STREAM or SOCK_SEQPACKET), which is what multiprocessing uses; such a pair sends to its peer only;
* allows everything else.

The filter is irreversible and inherited by every thread and child process. ``summary()`` says the above
in one line, for the cell's sandbox report.

Syscall numbers are per architecture: x86_64 from arch/x86/entry/syscalls/syscall_64.tbl, aarch64 from
include/uapi/asm-generic/unistd.h. A syscall an architecture lacks is left out of its table.
"""

from __future__ import annotations

import ctypes
import errno
import os
import platform
from typing import NamedTuple

__all__ = ["DENIED", "SeccompUnavailable", "install_denylist", "summary"]


class SeccompUnavailable(Exception):
    """The filter could not be installed (unsupported architecture, kernel without seccomp filters, ...)."""


# name -> syscall number, checked against the kernel tables named in the module docstring.
# Syscalls that always fail with EPERM:
_X86_64: dict[str, int] = {
    "ptrace": 101,
    "process_vm_readv": 310,
    "process_vm_writev": 311,
    "pidfd_getfd": 438,
    "mount": 165,
    "umount2": 166,
    "pivot_root": 155,
    "chroot": 161,
    "unshare": 272,
    "setns": 308,
    "move_mount": 429,
    "open_tree": 428,
    "fsopen": 430,
    "fsconfig": 431,
    "fsmount": 432,
    "fspick": 433,
    "mount_setattr": 442,
    "kexec_load": 246,
    "kexec_file_load": 320,
    "init_module": 175,
    "finit_module": 313,
    "delete_module": 176,
    "bpf": 321,
    "perf_event_open": 298,
    "keyctl": 250,
    "add_key": 248,
    "request_key": 249,
    "userfaultfd": 323,
    "io_uring_setup": 425,
    "io_uring_enter": 426,
    "io_uring_register": 427,
    "reboot": 169,
    "swapon": 167,
    "swapoff": 168,
    "open_by_handle_at": 304,
    "name_to_handle_at": 303,
    "acct": 163,
    "quotactl": 179,
    "quotactl_fd": 443,
    "settimeofday": 164,
    "clock_settime": 227,
    "clock_adjtime": 305,
    "adjtimex": 159,
    "syslog": 103,
    "iopl": 172,
    "ioperm": 173,
    "lookup_dcookie": 212,
    "fanotify_init": 300,
}

_AARCH64: dict[str, int] = {
    "ptrace": 117,
    "process_vm_readv": 270,
    "process_vm_writev": 271,
    "pidfd_getfd": 438,
    "mount": 40,
    "umount2": 39,
    "pivot_root": 41,
    "chroot": 51,
    "unshare": 97,
    "setns": 268,
    "move_mount": 429,
    "open_tree": 428,
    "fsopen": 430,
    "fsconfig": 431,
    "fsmount": 432,
    "fspick": 433,
    "mount_setattr": 442,
    "kexec_load": 104,
    "kexec_file_load": 294,
    "init_module": 105,
    "finit_module": 273,
    "delete_module": 106,
    "bpf": 280,
    "perf_event_open": 241,
    "keyctl": 219,
    "add_key": 217,
    "request_key": 218,
    "userfaultfd": 282,
    "io_uring_setup": 425,
    "io_uring_enter": 426,
    "io_uring_register": 427,
    "reboot": 142,
    "swapon": 224,
    "swapoff": 225,
    "open_by_handle_at": 265,
    "name_to_handle_at": 264,
    "acct": 89,
    "quotactl": 60,
    "quotactl_fd": 443,
    "settimeofday": 170,
    "clock_settime": 112,
    "clock_adjtime": 266,
    "adjtimex": 171,
    "syslog": 116,
    # no iopl/ioperm on aarch64
    "lookup_dcookie": 18,
    "fanotify_init": 262,
}

# Syscalls the filter looks at more closely (their arguments, or a different errno):
_X86_64_CHECKED: dict[str, int] = {"clone": 56, "clone3": 435, "socket": 41, "socketpair": 53}
_AARCH64_CHECKED: dict[str, int] = {"clone": 220, "clone3": 435, "socket": 198, "socketpair": 199}

AUDIT_ARCH_X86_64 = 0xC000003E
AUDIT_ARCH_AARCH64 = 0xC00000B7


class _Arch(NamedTuple):
    audit_arch: int  # AUDIT_ARCH_*: both are little-endian, which the argument offsets below rely on
    denied: dict[str, int]
    seccomp_nr: int  # number of seccomp(2)
    checked: dict[str, int]


_ARCHES: dict[str, _Arch] = {
    "x86_64": _Arch(AUDIT_ARCH_X86_64, _X86_64, 317, _X86_64_CHECKED),
    "aarch64": _Arch(AUDIT_ARCH_AARCH64, _AARCH64, 277, _AARCH64_CHECKED),
}
_MACHINE_ALIASES = {"x86_64": "x86_64", "amd64": "x86_64", "aarch64": "aarch64", "arm64": "aarch64"}

X32_SYSCALL_BIT = 0x40000000

# Classic BPF opcodes (linux/bpf_common.h) and seccomp constants (linux/seccomp.h, linux/prctl.h).
BPF_LD_W_ABS = 0x00 | 0x00 | 0x20  # BPF_LD | BPF_W | BPF_ABS
BPF_JEQ_K = 0x05 | 0x10 | 0x00  # BPF_JMP | BPF_JEQ | BPF_K
BPF_JGE_K = 0x05 | 0x30 | 0x00  # BPF_JMP | BPF_JGE | BPF_K
BPF_JSET_K = 0x05 | 0x40 | 0x00  # BPF_JMP | BPF_JSET | BPF_K: jump if A & k
BPF_RET_K = 0x06 | 0x00  # BPF_RET | BPF_K
SECCOMP_DATA_NR = 0  # offsetof(struct seccomp_data, nr)
SECCOMP_DATA_ARCH = 4  # offsetof(struct seccomp_data, arch)
SECCOMP_DATA_ARG0_LO = 16  # offsetof(struct seccomp_data, args[0]), low 32 bits on a little-endian machine
SECCOMP_DATA_ARG1_LO = 24  # args[1], likewise
BPF_ALU_AND_K = 0x04 | 0x50 | 0x00  # BPF_ALU | BPF_AND | BPF_K: A &= k
SECCOMP_RET_KILL_PROCESS = 0x80000000
SECCOMP_RET_ERRNO = 0x00050000
SECCOMP_RET_ALLOW = 0x7FFF0000
PR_SET_SECCOMP = 22
PR_SET_NO_NEW_PRIVS = 38
SECCOMP_MODE_FILTER = 2
SECCOMP_SET_MODE_FILTER = 1
SECCOMP_FILTER_FLAG_TSYNC = 1

# clone flags (linux/sched.h) that create a namespace. The kernel reads only the low 32 bits of clone's flags.
CLONE_NEWNS = 0x00020000
CLONE_NEWCGROUP = 0x02000000
CLONE_NEWUTS = 0x04000000
CLONE_NEWIPC = 0x08000000
CLONE_NEWUSER = 0x10000000
CLONE_NEWPID = 0x20000000
CLONE_NEWNET = 0x40000000
CLONE_NAMESPACE_FLAGS = (
    CLONE_NEWNS | CLONE_NEWCGROUP | CLONE_NEWUTS | CLONE_NEWIPC | CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWNET
)  # 0x7E020000

# Address families socket(2)/socketpair(2) may use (linux/socket.h); the kernel reads the domain as an int.
AF_UNIX = 1
AF_INET = 2
AF_INET6 = 10
ALLOWED_FAMILIES = (AF_UNIX, AF_INET, AF_INET6)
SOCK_STREAM, SOCK_DGRAM, SOCK_SEQPACKET = 1, 2, 5
SOCK_TYPE_MASK = 0xF  # the rest of socket(2)'s type holds SOCK_NONBLOCK / SOCK_CLOEXEC

Insn = tuple[int, int, int, int]  # (code, jt, jf, k); jump offsets count the instructions skipped, and are u8


class _SockFilter(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint16), ("jt", ctypes.c_uint8), ("jf", ctypes.c_uint8), ("k", ctypes.c_uint32)]


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.POINTER(_SockFilter))]


def _arch() -> str | None:
    return _MACHINE_ALIASES.get(platform.machine().lower())


def _denied_names() -> tuple[str, ...]:
    arch = _arch()
    if arch is not None:
        return tuple(_ARCHES[arch][1])
    return tuple(dict.fromkeys([*_X86_64, *_AARCH64]))  # unsupported machine: document the union


# The syscalls that always fail with EPERM. clone, clone3, socket and socketpair are filtered by their
# arguments on top of these (see summary()).
DENIED: tuple[str, ...] = _denied_names()


def summary() -> str:
    """What the filter does, in one line, for the cell's sandbox status (doctor, results)."""
    return f"{len(DENIED)} syscalls denied, clone namespace flags, socket families, no Unix sockets by path, no clone3"


def _program(audit_arch: int, numbers: list[int], *, x32: bool, checked: dict[str, int] | None = None) -> list[Insn]:
    """The whole filter: arch check, then one self-contained block per rule, each ending in its own
    returns (so no jump has to cross another block and every offset stays far below 255), then the
    plain denylist. A block whose syscall does not match jumps past itself with nr still loaded."""
    prog = [
        (BPF_LD_W_ABS, 0, 0, SECCOMP_DATA_ARCH),
        # A foreign ABI (i386 int 0x80 on x86_64, AArch32 on arm64) has different numbers: kill, don't guess.
        (BPF_JEQ_K, 1, 0, audit_arch),
        (BPF_RET_K, 0, 0, SECCOMP_RET_KILL_PROCESS),
        (BPF_LD_W_ABS, 0, 0, SECCOMP_DATA_NR),
    ]
    if x32:
        prog += _x32_block()
    checked = checked or {}
    if "clone" in checked:
        prog += _when_nr([checked["clone"]], _clone_flags_body())
    if "clone3" in checked:
        prog += _when_nr([checked["clone3"]], [_ret_errno(errno.ENOSYS)])
    if "socket" in checked:
        prog += _when_nr([checked["socket"]], _socket_body())
    if "socketpair" in checked:
        prog += _when_nr([checked["socketpair"]], _socketpair_body())
    return prog + _denylist(numbers)


def _ret_errno(err: int) -> Insn:
    return (BPF_RET_K, 0, 0, SECCOMP_RET_ERRNO | err)


def _x32_block() -> list[Insn]:
    """x32 syscalls arrive with AUDIT_ARCH_X86_64 too, but with bit 30 set in nr: deny that whole range
    (JGE is an unsigned compare, so it also catches nr values with the top bit set)."""
    return [(BPF_JGE_K, 0, 1, X32_SYSCALL_BIT), _ret_errno(errno.EPERM)]


def _when_nr(numbers: list[int], body: list[Insn]) -> list[Insn]:
    """Run ``body`` (which must end in a return) when nr is one of ``numbers``, else skip past it."""
    if len(numbers) + len(body) > 255:
        raise ValueError("block too long for 8-bit BPF jump offsets")
    tests = []
    for i, nr in enumerate(numbers):
        last = i == len(numbers) - 1
        # a match skips the remaining tests into the body; the last test's miss skips the body
        tests.append((BPF_JEQ_K, len(numbers) - 1 - i, len(body) if last else 0, nr))
    return tests + body


def _clone_flags_body() -> list[Insn]:
    """clone(flags, ...): EPERM if the flags' low 32 bits ask for any new namespace, else allow."""
    return [
        (BPF_LD_W_ABS, 0, 0, SECCOMP_DATA_ARG0_LO),
        (BPF_JSET_K, 0, 1, CLONE_NAMESPACE_FLAGS),
        _ret_errno(errno.EPERM),
        (BPF_RET_K, 0, 0, SECCOMP_RET_ALLOW),
    ]


def _socket_body() -> list[Insn]:
    """socket(domain, ...): AF_INET and AF_INET6 allowed; AF_UNIX EPERM (it reaches Unix sockets by
    path); any other family EAFNOSUPPORT (the kernel's own answer for a family it lacks)."""
    return [
        (BPF_LD_W_ABS, 0, 0, SECCOMP_DATA_ARG0_LO),
        (BPF_JEQ_K, 4, 0, AF_INET),  # -> allow
        (BPF_JEQ_K, 3, 0, AF_INET6),  # -> allow
        (BPF_JEQ_K, 1, 0, AF_UNIX),  # -> EPERM
        _ret_errno(errno.EAFNOSUPPORT),
        _ret_errno(errno.EPERM),
        (BPF_RET_K, 0, 0, SECCOMP_RET_ALLOW),
    ]


def _socketpair_body() -> list[Insn]:
    """socketpair(domain, type, ...): only AF_UNIX pairs of SOCK_STREAM or SOCK_SEQPACKET (a datagram
    pair may send to any path); other AF_UNIX types EPERM, other families EAFNOSUPPORT."""
    return [
        (BPF_LD_W_ABS, 0, 0, SECCOMP_DATA_ARG0_LO),
        (BPF_JEQ_K, 0, 5, AF_UNIX),  # else -> EAFNOSUPPORT
        (BPF_LD_W_ABS, 0, 0, SECCOMP_DATA_ARG1_LO),
        (BPF_ALU_AND_K, 0, 0, SOCK_TYPE_MASK),
        (BPF_JEQ_K, 3, 0, SOCK_STREAM),  # -> allow
        (BPF_JEQ_K, 2, 0, SOCK_SEQPACKET),  # -> allow
        _ret_errno(errno.EPERM),
        _ret_errno(errno.EAFNOSUPPORT),
        (BPF_RET_K, 0, 0, SECCOMP_RET_ALLOW),
    ]


def _denylist(numbers: list[int]) -> list[Insn]:
    """Every number jumps forward to the single shared EPERM return at the very end; anything else is allowed."""
    if len(numbers) > 255:
        raise ValueError("too many denied syscalls for 8-bit BPF jump offsets")
    prog = [(BPF_JEQ_K, len(numbers) - i, 0, nr) for i, nr in enumerate(numbers)]  # skip the rest and ALLOW
    return [*prog, (BPF_RET_K, 0, 0, SECCOMP_RET_ALLOW), _ret_errno(errno.EPERM)]


def _fail(what: str) -> SeccompUnavailable:
    err = ctypes.get_errno()
    return SeccompUnavailable(f"{what} failed: {os.strerror(err)} (errno {err})")


def install_denylist() -> None:
    """Set PR_SET_NO_NEW_PRIVS, then load the filter the module docstring describes: DENIED fail with
    EPERM, clone with namespace flags with EPERM, clone3 with ENOSYS, socket/socketpair outside
    AF_UNIX/AF_INET/AF_INET6 with EAFNOSUPPORT, Unix sockets that can reach a path with EPERM;
    everything else is allowed. Kills the process
    (SECCOMP_RET_KILL_PROCESS) if the syscall's architecture (seccomp_data.arch) is not the one the filter
    was built for, so a 32-bit ABI cannot be used to bypass it; on x86_64 also deny syscall numbers with
    the x32 bit (0x40000000) set.

    The filter is applied to every thread of the process (SECCOMP_FILTER_FLAG_TSYNC), not only the caller.
    """
    arch = _arch()
    if arch is None:
        raise SeccompUnavailable(f"unsupported architecture {platform.machine()!r} (supported: x86_64, aarch64)")
    table = _ARCHES[arch]
    program = _program(table.audit_arch, sorted(table.denied.values()), x32=arch == "x86_64", checked=table.checked)
    _load(program, table.seccomp_nr)


def _load(insns: list[Insn], seccomp_nr: int) -> None:
    """Set no_new_privs (required to filter without CAP_SYS_ADMIN) and attach the program to every thread."""
    filters = (_SockFilter * len(insns))(*(_SockFilter(*insn) for insn in insns))
    prog = _SockFprog(len(insns), ctypes.cast(filters, ctypes.POINTER(_SockFilter)))

    libc = ctypes.CDLL(None, use_errno=True)
    ulong, long_ = ctypes.c_ulong, ctypes.c_long
    # prctl/syscall are variadic: pass every argument at full register width (and the unused ones as 0,
    # which PR_SET_NO_NEW_PRIVS requires).
    if libc.prctl(ctypes.c_int(PR_SET_NO_NEW_PRIVS), ulong(1), ulong(0), ulong(0), ulong(0)) != 0:
        raise _fail("prctl(PR_SET_NO_NEW_PRIVS)")
    # seccomp(2) with TSYNC filters all threads at once (prctl would filter only this one); it returns the
    # id of a thread it could not synchronise, or -1 with errno.
    ret = libc.syscall(
        long_(seccomp_nr), long_(SECCOMP_SET_MODE_FILTER), long_(SECCOMP_FILTER_FLAG_TSYNC), ctypes.byref(prog)
    )
    if ret == 0:
        return
    if ret > 0:
        raise SeccompUnavailable(f"seccomp(SECCOMP_FILTER_FLAG_TSYNC) could not synchronise thread {ret}")
    if ctypes.get_errno() != errno.ENOSYS:
        raise _fail("seccomp(SECCOMP_SET_MODE_FILTER)")
    # No seccomp(2) (pre-3.17 kernel, or masked by an outer filter): prctl is only safe when single-threaded.
    if len(os.listdir("/proc/self/task")) != 1:
        raise SeccompUnavailable("seccomp(2) unavailable and the process has several threads; prctl filters one")
    if libc.prctl(ctypes.c_int(PR_SET_SECCOMP), ulong(SECCOMP_MODE_FILTER), ctypes.byref(prog), ulong(0), ulong(0)):
        raise _fail("prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER)")
