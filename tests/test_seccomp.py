"""The seccomp denylist: every filter is loaded in a child interpreter, never in the pytest process."""

from __future__ import annotations

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
TABLE = seccomp._ARCHES[seccomp._arch()][1]
NONEXISTENT = b"/nonexistent-policybox-seccomp-test"

def eperm(ret):
    '''A libc call's result: True iff it failed with EPERM.'''
    return ret == -1 and ctypes.get_errno() == errno.EPERM

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
        seccomp._load(seccomp._program(0x12345678, [], x32=False), seccomp._ARCHES[seccomp._arch()][2])
        print("SURVIVED", flush=True)
        """,
        tmp_path,
        install=False,
    )
    assert proc.returncode == -signal.SIGSYS, (proc.returncode, proc.stdout, proc.stderr)
    assert proc.stdout.splitlines() == ["LOADING"]


def test_denied_names() -> None:
    assert "ptrace" in seccomp.DENIED
    assert "bpf" in seccomp.DENIED
    assert len(set(seccomp.DENIED)) == len(seccomp.DENIED)


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
        table = seccomp._ARCHES[arch][1]
        wrong = {name: (nr, defined[name]) for name, nr in table.items() if name in defined and defined[name] != nr}
        assert not wrong, f"{path}: {wrong}"
        assert "ptrace" in defined
        checked += 1
    if not checked:
        pytest.skip("no kernel headers installed (linux-libc-dev)")


def test_unsupported_architecture_raises(monkeypatch: pytest.MonkeyPatch) -> None:
    # Never reaches prctl: the architecture check comes first, so this is safe in the pytest process.
    monkeypatch.setattr(seccomp.platform, "machine", lambda: "riscv64")
    with pytest.raises(seccomp.SeccompUnavailable, match="riscv64"):
        seccomp.install_denylist()
