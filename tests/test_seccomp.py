"""The seccomp denylist: every filter is loaded in a child interpreter, never in the pytest process."""

from __future__ import annotations

import errno
import re
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from policybox.cell import seccomp

ARCH = seccomp._arch()
needs_arch = pytest.mark.skipif(ARCH is None, reason=f"seccomp filter not supported on {seccomp.platform.machine()}")

# Shared preamble of every child: ctypes helpers, then the filter (unless a test loads its own).
PRELUDE = """
import ctypes, errno, os, re, socket, subprocess, sys, threading
from policybox.cell import seccomp

libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
ARCH = seccomp._ARCHES[seccomp._arch()]
TABLE, CHECKED = ARCH.denied, ARCH.checked
NONEXISTENT = b"/nonexistent-policybox-seccomp-test"

def eperm(ret):
    '''A libc call's result: True iff it failed with EPERM.'''
    return ret == -1 and ctypes.get_errno() == errno.EPERM

def outcome(ret):
    '''A libc call's result as "ok" or its errno name.'''
    return errno.errorcode[ctypes.get_errno()] if ret == -1 else "ok"

def raw(name, *args):
    '''A raw syscall by this architecture's number (from the filter's tables), every argument a full long.'''
    nr = TABLE.get(name, CHECKED.get(name))
    return libc.syscall(ctypes.c_long(nr), *(ctypes.c_long(a) for a in args))

def seccomp_mode(tid=None):
    path = "/proc/self/status" if tid is None else f"/proc/self/task/{tid}/status"
    with open(path) as f:
        return re.search(r"^Seccomp:\\s*(\\d+)", f.read(), re.M).group(1)
"""


def run_child(body: str, tmp_path: Path, *, install: bool = True) -> subprocess.CompletedProcess[str]:
    code = PRELUDE + ("seccomp.install_denylist()\n" if install else "") + textwrap.dedent(body)
    return subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=120, check=False
    )


def assert_ok(proc: subprocess.CompletedProcess[str], marker: str) -> None:
    assert proc.returncode == 0, f"child exited {proc.returncode}\nstdout:\n{proc.stdout}\nstderr:\n{proc.stderr}"
    assert marker in proc.stdout.splitlines(), proc.stdout


@needs_arch
def test_denied_syscalls_fail_with_eperm_and_ordinary_work_succeeds(tmp_path: Path) -> None:
    (tmp_path / "data.txt").write_text("hello")
    proc = run_child(
        """
        # unshare: os.unshare on 3.12+, libc otherwise (the real syscall number, not our table's)
        if hasattr(os, "unshare"):
            try:
                os.unshare(os.CLONE_NEWNS)
                raise AssertionError("unshare succeeded")
            except PermissionError:
                pass
        else:
            assert eperm(libc.unshare(ctypes.c_int(0x00020000))), "unshare(CLONE_NEWNS)"
        # ptrace: PEEKDATA on a process we do not trace would be ESRCH without the filter (and is harmless)
        assert eperm(libc.ptrace(ctypes.c_long(2), ctypes.c_int(os.getppid()), None, None)), "libc ptrace"
        nr = ctypes.c_long(TABLE["ptrace"])
        assert eperm(libc.syscall(nr, ctypes.c_long(2), ctypes.c_long(os.getppid()), None, None)), "syscall ptrace"
        # mount onto a path that does not exist: ENOENT without the filter, EPERM with it
        assert eperm(libc.mount(b"none", NONEXISTENT, b"tmpfs", ctypes.c_ulong(0), None)), "mount"

        # ordinary work in the same process
        with open("data.txt") as f:
            assert f.read() == "hello"
        import json
        assert json.loads("[1]") == [1]
        assert subprocess.run(["true"]).returncode == 0
        pid = os.fork()
        if pid == 0:
            os._exit(7)
        assert os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) == 7
        a, b = socket.socketpair()
        a.sendall(b"x")
        assert b.recv(1) == b"x"
        a.close(); b.close()
        print("ALL-OK")
        """,
        tmp_path,
    )
    assert_ok(proc, "ALL-OK")


@needs_arch
def test_filter_really_loaded(tmp_path: Path) -> None:
    proc = run_child(
        """
        assert seccomp_mode() == "2", seccomp_mode()
        print("SECCOMP-MODE-2")
        """,
        tmp_path,
    )
    assert_ok(proc, "SECCOMP-MODE-2")


@needs_arch
def test_every_table_entry_is_denied(tmp_path: Path) -> None:
    # All-ones arguments make each of these syscalls fail harmlessly (EINVAL/EFAULT/EBADF/...) if it ever ran.
    proc = run_child(
        """
        ones = [ctypes.c_long(-1)] * 6
        wrong = {}
        for name, nr in TABLE.items():
            if not eperm(libc.syscall(ctypes.c_long(nr), *ones)):
                wrong[name] = ctypes.get_errno()
        assert not wrong, wrong
        # some of the same syscalls through glibc wrappers (glibc's own numbers), with arguments that fail
        # harmlessly without the filter; wrappers that dereference pointers in user space are left out
        zero = ctypes.c_ulong(0)
        checks = {
            "umount2": lambda: libc.umount2(NONEXISTENT, 0),
            "chroot": lambda: libc.chroot(NONEXISTENT),
            "setns": lambda: libc.setns(-1, 0),
            "swapon": lambda: libc.swapon(NONEXISTENT, 0),
            "swapoff": lambda: libc.swapoff(NONEXISTENT),
            "acct": lambda: libc.acct(NONEXISTENT),
            "process_vm_readv": lambda: libc.process_vm_readv(os.getppid(), None, zero, None, zero, zero),
            "delete_module": lambda: libc.delete_module(b"policybox_no_such_module", 0),
            "fanotify_init": lambda: libc.fanotify_init(0, 0),
            "quotactl": lambda: libc.quotactl(0, None, 0, None),
            "syslog": lambda: libc.klogctl(10, None, 0),  # SYSLOG_ACTION_SIZE_BUFFER: read-only
            "fsopen": lambda: libc.fsopen(b"policybox-no-such-fs", 0),
            "open_tree": lambda: libc.open_tree(-100, NONEXISTENT, 0),
            "pidfd_getfd": lambda: libc.pidfd_getfd(-1, 0, 0),
        }
        if "iopl" in TABLE:
            checks["iopl"] = lambda: libc.iopl(0)
            checks["ioperm"] = lambda: libc.ioperm(ctypes.c_ulong(0), ctypes.c_ulong(0), 0)
        failed = {}
        for name, call in checks.items():
            try:
                ret = call()
            except AttributeError:  # this glibc has no wrapper
                continue
            if not eperm(ret):
                failed[name] = (ret, ctypes.get_errno())
        assert not failed, failed
        if "iopl" in TABLE:  # x86_64: x32 numbers (bit 30 set) are denied wholesale
            assert eperm(libc.syscall(ctypes.c_long(0x40000000 | 39))), "x32 getpid"
        print("TABLE-OK")
        """,
        tmp_path,
    )
    assert_ok(proc, "TABLE-OK")


@needs_arch
def test_filter_covers_threads_started_before_install(tmp_path: Path) -> None:
    proc = run_child(
        """
        go, done = threading.Event(), threading.Event()
        result = {}
        def worker():
            go.wait()
            result["mode"] = seccomp_mode(threading.get_native_id())
            result["eperm"] = eperm(libc.mount(b"none", NONEXISTENT, b"tmpfs", ctypes.c_ulong(0), None))
            done.set()
        t = threading.Thread(target=worker)
        t.start()
        seccomp.install_denylist()
        go.set()
        t.join()
        assert result == {"mode": "2", "eperm": True}, result
        print("THREADS-OK")
        """,
        tmp_path,
        install=False,
    )
    assert_ok(proc, "THREADS-OK")


@needs_arch
def test_foreign_architecture_kills_the_process(tmp_path: Path) -> None:
    # A filter built for another AUDIT_ARCH sees every syscall as foreign: the next one kills with SIGSYS.
    proc = run_child(
        """
        import resource
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        libc.prctl(4, ctypes.c_ulong(0), ctypes.c_ulong(0), ctypes.c_ulong(0), ctypes.c_ulong(0))  # PR_SET_DUMPABLE
        print("LOADING", flush=True)
        seccomp._load(seccomp._program(0x12345678, [], x32=False), ARCH.seccomp_nr)
        print("SURVIVED", flush=True)
        """,
        tmp_path,
        install=False,
    )
    assert proc.returncode == -signal.SIGSYS, (proc.returncode, proc.stdout, proc.stderr)
    assert proc.stdout.splitlines() == ["LOADING"]


def test_denied_names_and_summary() -> None:
    assert "ptrace" in seccomp.DENIED
    assert "bpf" in seccomp.DENIED
    assert len(set(seccomp.DENIED)) == len(seccomp.DENIED)
    assert seccomp.summary().startswith(f"{len(seccomp.DENIED)} syscalls denied, clone namespace flags, socket")
    for arch in seccomp._ARCHES.values():  # argument-checked syscalls are not also denied outright
        assert not set(arch.denied) & set(arch.checked)


def test_tables_match_installed_kernel_headers() -> None:
    """Cross-check the numbers against this machine's linux-libc-dev headers, when they are installed."""
    headers = {
        "x86_64": ["/usr/include/x86_64-linux-gnu/asm/unistd_64.h", "/usr/include/asm/unistd_64.h"],
        "aarch64": ["/usr/include/asm-generic/unistd.h"],
    }
    checked = 0
    for arch, paths in headers.items():  # asm-generic/unistd.h is the same file on every architecture
        path = next((Path(p) for p in paths if Path(p).is_file()), None)
        if path is None:
            continue
        defined = {m[1]: int(m[2]) for m in re.finditer(r"^#define __NR_(\w+)\s+(\d+)\s*$", path.read_text(), re.M)}
        table = {**seccomp._ARCHES[arch].denied, **seccomp._ARCHES[arch].checked}
        wrong = {name: (nr, defined[name]) for name, nr in table.items() if name in defined and defined[name] != nr}
        assert not wrong, f"{path}: {wrong}"
        assert "ptrace" in defined and "clone3" in defined
        checked += 1
    if not checked:
        pytest.skip("no kernel headers installed (linux-libc-dev)")


def test_unsupported_architecture_raises(monkeypatch: pytest.MonkeyPatch) -> None:
    # Never reaches prctl: the architecture check comes first, so this is safe in the pytest process.
    monkeypatch.setattr(seccomp.platform, "machine", lambda: "riscv64")
    with pytest.raises(seccomp.SeccompUnavailable, match="riscv64"):
        seccomp.install_denylist()


# ---- argument rules: clone namespace flags, clone3, socket families ----------------------------------------

CLONE_SIGHAND = 0x800  # without CLONE_VM the kernel rejects it with EINVAL before it looks at anything else
SIGCHLD = 17


@needs_arch
@pytest.mark.parametrize("install", [True, False], ids=["filtered", "unfiltered"])
def test_clone_with_namespace_flags_is_refused(tmp_path: Path, install: bool) -> None:
    # Each namespace bit with CLONE_SIGHAND: EINVAL from the kernel without the filter (harmless, no child is
    # made), EPERM with it. The unfiltered run proves the probe itself is sound.
    proc = run_child(
        f"""
        INSTALLED = {install}
        flags = {{name: getattr(seccomp, name) for name in (
            "CLONE_NEWNS", "CLONE_NEWCGROUP", "CLONE_NEWUTS", "CLONE_NEWIPC", "CLONE_NEWUSER", "CLONE_NEWPID",
            "CLONE_NEWNET")}}
        assert sum(flags.values()) == seccomp.CLONE_NAMESPACE_FLAGS == 0x7E020000
        got = {{name: outcome(raw("clone", flag | {CLONE_SIGHAND}, 0, 0, 0, 0)) for name, flag in flags.items()}}
        want = "EPERM" if INSTALLED else "EINVAL"
        assert got == dict.fromkeys(flags, want), got
        # clone without namespace bits reaches the kernel, which gives its own answer
        assert outcome(raw("clone", {CLONE_SIGHAND}, 0, 0, 0, 0)) == "EINVAL"
        # clone3 with no argument struct: EINVAL from the kernel, ENOSYS from the filter
        assert outcome(raw("clone3", 0, 0)) == ("ENOSYS" if INSTALLED else "EINVAL")
        if INSTALLED:
            # the real attack: a child in a new user and network namespace
            ret = raw("clone", seccomp.CLONE_NEWUSER | seccomp.CLONE_NEWNET | {SIGCHLD}, 0, 0, 0, 0)
            if ret == 0:
                os._exit(0)
            assert ret == -1 and ctypes.get_errno() == errno.EPERM, ret
            assert eperm(libc.unshare(ctypes.c_int(seccomp.CLONE_NEWUSER))), "unshare(CLONE_NEWUSER)"
            assert eperm(raw("unshare", seccomp.CLONE_NEWUSER | seccomp.CLONE_NEWNET)), "raw unshare"
        print("CLONE-OK")
        """,
        tmp_path,
        install=install,
    )
    assert_ok(proc, "CLONE-OK")


@needs_arch
def test_fork_threads_subprocess_and_multiprocessing_still_work(tmp_path: Path) -> None:
    proc = run_child(
        """
        import multiprocessing

        pid = os.fork()
        if pid == 0:
            os._exit(7)
        assert os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) == 7
        box = []
        t = threading.Thread(target=lambda: box.append(threading.get_native_id()))
        t.start(); t.join()
        assert box and box[0] != threading.get_native_id()
        assert subprocess.run(["true"]).returncode == 0
        assert subprocess.run(["sh", "-c", "echo hi"], capture_output=True, text=True).stdout == "hi\\n"
        pid = os.posix_spawn("/bin/true", ["true"], os.environ)  # glibc tries clone3 first, then clone
        assert os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) == 0
        ctx = multiprocessing.get_context("fork")
        with ctx.Pool(2) as pool:  # workers are forked; the pool's helpers are threads
            assert pool.map(abs, [-1, -2, -3]) == [1, 2, 3]
        queue = ctx.Queue()
        child = ctx.Process(target=queue.put, args=("from child",))
        child.start()
        assert queue.get(timeout=30) == "from child"
        child.join()
        assert child.exitcode == 0
        print("PROCESSES-OK")
        """,
        tmp_path,
    )
    assert_ok(proc, "PROCESSES-OK")


@needs_arch
def test_socket_families_outside_unix_and_inet_are_refused(tmp_path: Path) -> None:
    proc = run_child(
        """
        ipv6 = True
        try:
            socket.socket(socket.AF_INET6, socket.SOCK_DGRAM).close()
        except OSError:
            ipv6 = False  # the kernel lacks IPv6 here: nothing to prove for it
        seccomp.install_denylist()

        def refused(*args, pair=False):
            try:
                (socket.socketpair if pair else socket.socket)(*args)
            except OSError as exc:
                return errno.errorcode[exc.errno]
            return "created"

        got = refused(socket.AF_PACKET, socket.SOCK_RAW, 0x0300)
        assert got == "EAFNOSUPPORT", got  # ETH_P_ALL
        got = refused(socket.AF_NETLINK, socket.SOCK_RAW, 12)
        assert got == "EAFNOSUPPORT", got  # NETLINK_NETFILTER
        got = refused(socket.AF_NETLINK, socket.SOCK_DGRAM, 0)
        assert got == "EAFNOSUPPORT", got  # NETLINK_ROUTE
        got = refused(socket.AF_NETLINK, socket.SOCK_DGRAM, pair=True)
        assert got == "EAFNOSUPPORT", got  # the kernel's answer would be EOPNOTSUPP
        got = refused(socket.AF_INET, socket.SOCK_STREAM, pair=True)
        assert got == "EAFNOSUPPORT", got  # only Unix pairs exist; the filter answers for the kernel
        # only the low 32 bits are compared, which are all the kernel reads of the int domain
        assert outcome(raw("socket", (1 << 32) | socket.AF_NETLINK, socket.SOCK_RAW, 0)) == "EAFNOSUPPORT"

        a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        a.sendall(b"x")
        assert b.recv(1) == b"x"
        a.close(); b.close()
        # A Unix socket that could reach any socket file by path is refused; a connected pair is not.
        assert refused(socket.AF_UNIX, socket.SOCK_STREAM) == "EPERM"
        assert refused(socket.AF_UNIX, socket.SOCK_DGRAM) == "EPERM"
        assert refused(socket.AF_UNIX, socket.SOCK_DGRAM, pair=True) == "EPERM"
        a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET | socket.SOCK_CLOEXEC)
        a.close(); b.close()
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as udp:
            udp.bind(("127.0.0.1", 0))
        if ipv6:
            with socket.socket(socket.AF_INET6, socket.SOCK_DGRAM) as udp6:
                udp6.bind(("::1", 0))
        print("SOCKETS-OK")
        """,
        tmp_path,
        install=False,
    )
    assert_ok(proc, "SOCKETS-OK")


@needs_arch
def test_keyrings_and_userfaultfd_are_refused(tmp_path: Path) -> None:
    # Real arguments, each of which would succeed as root without the filter.
    proc = run_child(
        """
        KEY_SPEC_PROCESS_KEYRING, KEYCTL_GET_KEYRING_ID, UFFD_USER_MODE_ONLY = -2, 0, 1
        key = libc.syscall(ctypes.c_long(TABLE["add_key"]), b"user", b"policybox-seccomp-test", b"secret",
                           ctypes.c_size_t(6), ctypes.c_long(KEY_SPEC_PROCESS_KEYRING))
        assert eperm(key), ("add_key", key)
        assert eperm(raw("keyctl", KEYCTL_GET_KEYRING_ID, KEY_SPEC_PROCESS_KEYRING, 1)), "keyctl"
        assert eperm(raw("request_key", 0, 0, 0, 0)), "request_key"
        assert eperm(raw("userfaultfd", os.O_CLOEXEC | UFFD_USER_MODE_ONLY)), "userfaultfd"
        print("KEYS-OK")
        """,
        tmp_path,
    )
    assert_ok(proc, "KEYS-OK")


def _run_bpf(prog: list[tuple[int, int, int, int]], arch: int, nr: int, arg0: int = 0, arg1: int = 0) -> int:
    """A tiny classic-BPF interpreter for the instructions the filter uses, over one seccomp_data."""
    data = {
        seccomp.SECCOMP_DATA_ARCH: arch,
        seccomp.SECCOMP_DATA_NR: nr,
        seccomp.SECCOMP_DATA_ARG0_LO: arg0,
        seccomp.SECCOMP_DATA_ARG1_LO: arg1,
    }
    pc, acc = 0, 0
    while True:
        code, jt, jf, k = prog[pc]
        assert 0 <= jt <= 255 and 0 <= jf <= 255
        if code == seccomp.BPF_RET_K:
            return k
        if code in (seccomp.BPF_LD_W_ABS, seccomp.BPF_ALU_AND_K):
            acc = data[k] if code == seccomp.BPF_LD_W_ABS else acc & k
            pc += 1
            continue
        taken = {seccomp.BPF_JEQ_K: acc == k, seccomp.BPF_JGE_K: acc >= k, seccomp.BPF_JSET_K: bool(acc & k)}[code]
        pc += 1 + (jt if taken else jf)
        assert pc < len(prog), "jumped off the end"


@pytest.mark.parametrize("machine", sorted(seccomp._ARCHES))
def test_program_on_both_architectures(machine: str) -> None:
    """Both tables' programs, run in the interpreter above (the foreign one cannot be loaded here)."""
    arch = seccomp._ARCHES[machine]
    prog = seccomp._program(
        arch.audit_arch, sorted(arch.denied.values()), x32=machine == "x86_64", checked=arch.checked
    )
    errno_of = {
        seccomp.SECCOMP_RET_ERRNO | e: errno.errorcode[e] for e in (errno.EPERM, errno.ENOSYS, errno.EAFNOSUPPORT)
    }
    verdict = {seccomp.SECCOMP_RET_ALLOW: "allow", seccomp.SECCOMP_RET_KILL_PROCESS: "kill", **errno_of}

    def run(name: str, arg0: int = 0, audit_arch: int = arch.audit_arch, arg1: int = 1) -> str:
        nr = arch.denied.get(name, arch.checked.get(name))
        return verdict[_run_bpf(prog, audit_arch, nr, arg0, arg1)]

    assert run("clone", seccomp.CLONE_NEWUSER | SIGCHLD) == "EPERM"
    assert run("clone", 0x003D0F00) == "allow"  # glibc's pthread_create flags
    assert run("clone", 0x01200011) == "allow"  # glibc's fork: CLONE_CHILD_SETTID|CLONE_CHILD_CLEARTID|SIGCHLD
    for bit in range(32):
        want = "EPERM" if (1 << bit) & seccomp.CLONE_NAMESPACE_FLAGS else "allow"
        assert run("clone", 1 << bit) == want, hex(1 << bit)
    assert run("clone3") == "ENOSYS"
    assert [run("socket", family) for family in (1, 2, 10)] == ["EPERM", "allow", "allow"]
    assert [run("socketpair", 1, arg1=kind) for kind in (1, 2, 5, 0x80005)] == ["allow", "EPERM", "allow", "allow"]
    for name in ("socket", "socketpair"):
        assert [run(name, family) for family in (0, 16, 17, 40)] == ["EAFNOSUPPORT"] * 4  # netlink, packet, vsock
    assert all(run(name) == "EPERM" for name in arch.denied)
    assert verdict[_run_bpf(prog, arch.audit_arch, 39 if machine == "x86_64" else 172)] == "allow"  # getpid
    assert run("clone", audit_arch=0x40000003) == "kill"  # i386
    if machine == "x86_64":
        assert verdict[_run_bpf(prog, arch.audit_arch, 0x40000000 | 56, seccomp.CLONE_NEWUSER)] == "EPERM"  # x32
