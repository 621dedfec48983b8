"""The worst entrant: policies that try to fill the disk, open channels to other cells or the host,
read secrets and other agents' output, outspend the CPU limit, stall the host or forge their sandbox
report. Each prints what it got, one line per attempt, and plays noop; the tests judge from outside.
"""

import ctypes
import errno
import os
import socket
import sys
import time
from pathlib import Path

from mettagrid.policy.noop import NoopPolicy

MARK = "ATTACK-DONE"
FALLOC_FL_KEEP_SIZE = 1
IPC_CREAT, IPC_NOWAIT = 0o1000, 0o4000
KEY = 0x5EED

libc = ctypes.CDLL(None, use_errno=True)


def attempt(name, action):
    try:
        print(f"{name}: succeeded {action()!r}", flush=True)
    except Exception as exc:
        print(f"{name}: refused {type(exc).__name__}: {exc}", flush=True)


def checked(result):
    if result == -1:
        code = ctypes.get_errno()
        raise OSError(code, f"{errno.errorcode.get(code, code)}")
    return result


class FillDisk(NoopPolicy):
    """Reserves 1 GiB through its output descriptor, then writes ``megabytes`` into files of at most
    32 MiB and ``files`` empty files into its scratch folder, until refused."""

    def __init__(self, policy_env_info, megabytes=256, files=2000, **kwargs):
        super().__init__(policy_env_info)
        for fd in (1, 2):
            attempt(f"fallocate fd {fd}", lambda fd=fd: checked(libc.fallocate(fd, FALLOC_FL_KEEP_SIZE, 0, 2**30)))
        written = 0
        try:
            for index in range(megabytes // 32 + 1):
                with open(f"big-{index}.bin", "wb") as big:
                    for _ in range(32):
                        if written >= megabytes:
                            break
                        big.write(b"\1" * 2**20)
                        written += 1
        except OSError as exc:
            print(f"disk refused after {written} MiB: {exc.strerror}", flush=True)
        print(f"wrote {written} MiB", flush=True)
        made = 0
        try:
            os.mkdir("many")
            for index in range(files):
                open(f"many/{index}", "w").close()
                made += 1
        except OSError as exc:
            print(f"files refused after {made}: {exc.strerror}", flush=True)
        print(f"made {made} files", flush=True)
        print(MARK, flush=True)


class IpcWriter(NoopPolicy):
    """Creates a 16 MiB System V shared memory segment and a message queue under a fixed key."""

    def __init__(self, policy_env_info, **kwargs):
        super().__init__(policy_env_info)
        attempt("shmget create", lambda: checked(libc.shmget(KEY, 16 * 2**20, IPC_CREAT | 0o666)))
        attempt("msgget create", lambda: checked(libc.msgget(KEY, IPC_CREAT | 0o666)))
        print(MARK, flush=True)


class IpcReader(NoopPolicy):
    """Looks, at every step, for the writer's segment and queue by their key."""

    def __init__(self, policy_env_info, **kwargs):
        super().__init__(policy_env_info)
        self._tries = 0

    def agent_policy(self, agent_id):
        parent = self
        agent = super().agent_policy(agent_id)
        step = agent.step

        def look(obs):
            parent._tries += 1
            if parent._tries == 20:
                attempt("shmget find", lambda: checked(libc.shmget(KEY, 0, 0)))
                attempt("msgget find", lambda: checked(libc.msgget(KEY, 0)))
            return step(obs)

        agent.step = look
        return agent


class Snoop(NoopPolicy):
    """Reads what it can of other processes: /proc/<pid>/comm and cmdline of every pid it can see
    and of the host's, another agent's log file, and a Unix socket the host listens on."""

    def __init__(self, policy_env_info, host_pid, log_path="", socket_paths="", **kwargs):
        super().__init__(policy_env_info)
        visible = [pid for pid in os.listdir("/proc") if pid.isdigit()]
        print(f"visible pids: {len(visible)}", flush=True)
        for pid in [*visible, str(host_pid)]:
            for entry in ("comm", "cmdline", "environ"):
                attempt(f"/proc/{pid}/{entry}", lambda pid=pid, entry=entry: Path(f"/proc/{pid}/{entry}").read_bytes())
        if log_path:
            attempt("other agent's log", lambda: Path(log_path).read_text())
            attempt("log folder", lambda: os.listdir(Path(log_path).parent))
        for shared in ("/dev/shm", "/tmp", "/var/tmp", "/run"):  # where cells could leave notes for each other
            attempt(f"drop {shared}", lambda shared=shared: Path(shared, "policybox-meeting-point").write_text("hi"))
        peer = Path(os.environ["HOME"]).parent / "agent-1"
        attempt("peer's open file", lambda: (peer / "open.txt").read_text())
        attempt("peer's open socket", lambda: _connect(str(peer / "open.sock")))
        for path in filter(None, socket_paths.split("|")):
            attempt(f"unix stream {path}", lambda path=path: _connect(path))
            attempt(f"unix datagram {path}.dgram", lambda path=path: _datagram(f"{path}.dgram"))
        print(MARK, flush=True)


def _serve(path):
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(path))
    server.listen()
    os.chmod(path, 0o777)
    return server


def _connect(path):
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.connect(path)
        sock.sendall(b"hello from a cell")


def _datagram(path):
    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
    with a, b:
        a.sendto(b"hello from a cell", path)


class Diarist(NoopPolicy):
    """The victim: prints a private line at start, holds a secret in its environment, and opens its
    scratch folder to everyone: mode 777, a 666 file and a listening Unix socket... if it could make one."""

    def __init__(self, policy_env_info, **kwargs):
        super().__init__(policy_env_info)
        print("VICTIM-PRIVATE-DIARY", flush=True)
        home = Path(os.environ["HOME"])
        home.chmod(0o777)
        (home / "open.txt").write_text("OPEN-HOUSE-SECRET")
        (home / "open.txt").chmod(0o666)
        attempt("serve a unix socket", lambda: _serve(home / "open.sock"))
        token = os.environ.get("API_TOKEN", "")
        print(f"token length {len(token)}, starts {token[:2]!r}", flush=True)


class CpuSpreader(NoopPolicy):
    """Spreads busy loops over six child processes: each stays far under a per-process CPU limit."""

    def __init__(self, policy_env_info, children=6, **kwargs):
        super().__init__(policy_env_info)
        for _ in range(children):
            if os.fork() == 0:
                end = time.process_time() + 60
                while time.process_time() < end:
                    pass
                os._exit(0)
        print(MARK, flush=True)


class Staller(NoopPolicy):
    """Answers its first step, then stops reading its socket for a while: the host must not wait on it."""

    def __init__(self, policy_env_info, pause_s=3.0, **kwargs):
        super().__init__(policy_env_info)
        for module in (sys.modules.get("__main__"), sys.modules.get("policybox.cell.__main__")):
            connection = getattr(module, "HostConnection", None)
            if connection is not None and not hasattr(connection, "_stalled"):
                read = connection.read
                calls = [0]

                def slow_read(self, read=read, calls=calls):
                    calls[0] += 1
                    if calls[0] == 2:  # the observation after its first reply
                        time.sleep(pause_s)
                    return read(self)

                connection.read = slow_read
                connection._stalled = True


class Forger(NoopPolicy):
    """Rewrites the sandbox report its own cell is about to send: every layer 'active: forged'."""

    def __init__(self, policy_env_info, **kwargs):
        super().__init__(policy_env_info)
        frame = sys._getframe()
        while frame is not None and "statuses" not in frame.f_locals:
            frame = frame.f_back
        if frame is not None:
            statuses = frame.f_locals["statuses"]
            for layer in ("uid", "network", "ipc", "filesystem", "disk", "proc", "landlock", "rlimits", "seccomp"):
                statuses[layer] = "active: forged"
            print("forged the report", flush=True)


class SelfEdit(NoopPolicy):
    """Tries to rewrite its own policy file and its checkpoint (to change what a later match runs)."""

    def __init__(self, policy_env_info, **kwargs):
        super().__init__(policy_env_info)
        self._data = None

    def load_policy_data(self, path):
        self._data = path
        attempt("edit policy file", lambda: Path(__file__).write_text("HACKED"))
        attempt("edit checkpoint", lambda: Path(path).write_text("HACKED"))


class TakeOverRay(NoopPolicy):
    """Run inside an episode of ``--backend ray``, it tries to take over the cluster it runs in: the
    head's address is ``address`` (as an entrant could guess it), the prize a Ray task that writes
    ``marker`` as root outside every sandbox. It connects only once a TCP connection is possible."""

    def __init__(self, policy_env_info, address, marker, **kwargs):
        super().__init__(policy_env_info)
        host, port = address.rsplit(":", 1)
        attempt("tcp to the Ray head", lambda: socket.create_connection((host, int(port)), timeout=3).close())
        attempt("read Ray's session folder", lambda: os.listdir("/tmp/ray"))
        try:
            socket.create_connection((host, int(port)), timeout=3).close()
        except OSError:
            return
        import ray

        def take_over():
            ray.init(address=address, log_to_driver=False)

            @ray.remote(num_cpus=0)
            def plant():
                Path(marker).write_text("planted by a policy")

            return ray.get(plant.remote(), timeout=60)

        attempt("a Ray task outside the sandbox", take_over)
