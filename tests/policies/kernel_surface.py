"""A policy that reaches for kernel surface an unprivileged process should never touch: new namespaces
(where it would hold every capability), raw packet and netfilter sockets, keyrings and userfaultfd.
It prints one line per attempt, "NAME: refused ERRNONAME" or "NAME: succeeded", then plays noop;
tests/test_kernel_surface.py checks from outside the cell that nothing got through."""

import ctypes
import errno
import os
import platform
import signal
import socket

from mettagrid.policy.noop import NoopPolicy

libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long

CLONE_NEWUSER, CLONE_NEWNET = 0x10000000, 0x40000000
AF_PACKET, AF_NETLINK, NETLINK_NETFILTER, ETH_P_ALL = 17, 16, 12, 0x0003
KEY_SPEC_USER_KEYRING, KEYCTL_SETPERM, KEY_ALL_TO_ALL = -4, 5, 0x3F3F3F3F
UFFD_USER_MODE_ONLY = 1
SYSCALLS = {  # the kernel's own numbers: an attacker does not ask policybox for them
    "x86_64": {"clone": 56, "clone3": 435, "add_key": 248, "keyctl": 250, "userfaultfd": 323},
    "aarch64": {"clone": 220, "clone3": 435, "add_key": 217, "keyctl": 219, "userfaultfd": 282},
}[platform.machine()]


def syscall(name, *args):
    """The raw syscall: its result, or OSError with the errno."""
    ret = libc.syscall(ctypes.c_long(SYSCALLS[name]), *args)
    if ret == -1:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))
    return ret


def reap_if_child(pid):
    """After a clone that worked like fork: the child leaves at once, the parent waits for it."""
    if pid == 0:
        os._exit(0)
    os.waitpid(pid, 0)
    return pid


def attempt(name, action):
    try:
        action()
    except OSError as exc:
        print(f"{name}: refused {errno.errorcode.get(exc.errno, exc.errno)}", flush=True)
    else:
        print(f"{name}: succeeded", flush=True)


class clone_args(ctypes.Structure):  # noqa: N801 - the kernel's struct name (CLONE_ARGS_SIZE_VER0)
    _fields_ = [
        (field, ctypes.c_uint64)
        for field in ("flags", "pidfd", "child_tid", "parent_tid", "exit_signal", "stack", "stack_size", "tls")
    ]


class Attack(NoopPolicy):
    def __init__(self, policy_env_info, key_description="policybox-kernel-surface", **kwargs):
        super().__init__(policy_env_info)
        key_id = []

        def unshare():
            if libc.unshare(ctypes.c_int(CLONE_NEWUSER)) != 0:
                err = ctypes.get_errno()
                raise OSError(err, os.strerror(err))

        def clone():
            flags = CLONE_NEWUSER | CLONE_NEWNET | signal.SIGCHLD
            return reap_if_child(syscall("clone", ctypes.c_long(flags), *[ctypes.c_long(0)] * 4))

        def clone3():
            args = clone_args(flags=CLONE_NEWUSER, exit_signal=signal.SIGCHLD)
            return reap_if_child(syscall("clone3", ctypes.byref(args), ctypes.c_size_t(ctypes.sizeof(args))))

        def add_key():
            user_keyring = ctypes.c_long(KEY_SPEC_USER_KEYRING)  # outlives the cell: evidence if it got through
            payload = b"stolen"
            key_id.append(
                syscall(
                    "add_key", b"user", key_description.encode(), payload, ctypes.c_size_t(len(payload)), user_keyring
                )
            )

        def keyctl():
            # Let everyone, root reading /proc/keys included, see the key (or the user keyring, without one).
            target = key_id[0] if key_id else KEY_SPEC_USER_KEYRING
            syscall("keyctl", ctypes.c_long(KEYCTL_SETPERM), ctypes.c_long(target), ctypes.c_long(KEY_ALL_TO_ALL))

        # Keys first: after a successful unshare(CLONE_NEWUSER) they would land in the new user namespace's
        # keyring, which dies with it and which the host's /proc/keys does not show.
        attempt("add_key", add_key)
        attempt("keyctl", keyctl)
        attempt("unshare(CLONE_NEWUSER)", unshare)
        attempt("clone(CLONE_NEWUSER|CLONE_NEWNET)", clone)
        attempt("clone3", clone3)
        attempt("socket(AF_PACKET)", lambda: socket.socket(AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL)).close())
        attempt(
            "socket(AF_NETLINK, NETLINK_NETFILTER)",
            lambda: socket.socket(AF_NETLINK, socket.SOCK_RAW, NETLINK_NETFILTER).close(),
        )
        attempt(
            "userfaultfd", lambda: os.close(syscall("userfaultfd", ctypes.c_long(os.O_CLOEXEC | UFFD_USER_MODE_ONLY)))
        )
