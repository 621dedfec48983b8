"""Shared fixtures: policy file paths, a one-call episode runner, the guards against leftover processes
and IPC objects, databases (SQLite and a real PostgreSQL server), a real headless Chromium, and small
tmpfs disks to fill.

The suite runs on two pytest-xdist workers at once (the README's test command), on a machine others
share: every guard looks only at what its own test made -- this process's tree, the uids its cells
had -- never at the whole machine, so that the other worker's test cannot fail it."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import postgres
import psutil
import pytest

from policybox.episode import run_episode
from policybox.results import EpisodeResult
from policybox.settings import EpisodeSettings

POLICIES = Path(__file__).parent / "policies"


def policy(name: str, **extra: str) -> str:
    """A -p string for a test policy: ``policy("faults.py:RaiseInStep")``."""
    return ",".join([str(POLICIES / name), *(f"{key}={value}" for key, value in extra.items())])


@pytest.fixture
def play(tmp_path: Path):
    """Run one episode: ``play(["random", policy("x.py:X")], agents=4, steps=50, mode="inline")``
    (``agents=None``: the game's own number)."""

    def _play(policies: list[str], agents: int | None = 4, **settings) -> EpisodeResult:
        settings.setdefault("steps", 50)
        return run_episode(policies, EpisodeSettings(**settings), tmp_path / "logs", agents=agents)

    return _play


pytest_plugins = ["pytester"]  # tests/test_test_machine.py runs a test that leaks, to see the guard fail it


@pytest.fixture(autouse=True)
def no_process_survives():
    """Every test must leave no child process behind (cells are reaped, not orphaned). Only this
    process's tree counts: the other xdist worker's processes are not in it."""
    yield
    children = descendants()
    assert not children, f"processes left behind: {[(c.pid, _cmdline(c)) for c in children]}"


def descendants() -> list[psutil.Process]:
    """This process's children, recursively, but for those that live as long as the test run by design
    and are not cells: multiprocessing's resource tracker (started by the evaluator's worker pool) and
    the test PostgreSQL server's processes (``postgres_server``)."""
    return [child for child in psutil.Process().children(recursive=True) if not _of_the_whole_run(child)]


def _of_the_whole_run(process: psutil.Process) -> bool:
    if "multiprocessing.resource_tracker" in " ".join(_cmdline(process)):
        return True
    try:
        return postgres.is_server_process(process)
    except psutil.NoSuchProcess:
        return True  # gone since it was listed (a backend whose client just closed): not left behind


def _cmdline(process: psutil.Process) -> list[str]:
    try:
        return process.cmdline()
    except psutil.Error:
        return []


def ipc_objects_of(uids: set[int]) -> list[str]:
    """The System V IPC objects (shared memory, message queues, semaphore sets) in this process's IPC
    namespace that one of ``uids`` owns or created: what cells of those uids left where the host sees
    it. Nothing of another uid counts (the other worker's cells', the PostgreSQL server's)."""
    found = []
    for kind in ("shm", "msg", "sem"):
        header, *rows = Path(f"/proc/sysvipc/{kind}").read_text().splitlines()
        names = header.split()
        for row in (dict(zip(names, line.split(), strict=True)) for line in rows):
            if {int(row["uid"]), int(row["cuid"])} & uids:
                found.append(f"{kind} key {row['key']} id {row[names[1]]} uid {row['uid']}")
    return found


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[postgres.PostgresServer]:
    """A real PostgreSQL server on 127.0.0.1, password required, shared by the whole run. Started by
    the first test that asks for it (other runs pay nothing), stopped at the end of the run, even
    after failures or Ctrl-C (and by the kernel if pytest is killed)."""
    server = postgres.PostgresServer.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def postgres_url(postgres_server: postgres.PostgresServer) -> Iterator[str]:
    """A new empty database of its own for this test, dropped after it, as a SQLAlchemy URL:
    ``postgresql+psycopg://policybox:PASSWORD@127.0.0.1:PORT/DBNAME``."""
    name = postgres_server.create_database()
    try:
        yield postgres_server.url(name)
    finally:
        postgres_server.drop_database(name)


@pytest.fixture(params=["sqlite", "postgresql"])
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """The test once per database the project supports, as a SQLAlchemy URL of a new empty database:
    a SQLite file in ``tmp_path``, then a database of the test PostgreSQL server (``postgres_url``)."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'policybox.sqlite3'}"
    return request.getfixturevalue("postgres_url")  # only now: a SQLite-only run starts no server


# Debian's Chromium (tests/prepare_machine.py installs it). Root needs --no-sandbox; the rest keep a
# headless test browser from calling Google's services, which this machine refuses.
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-quic",
]


# Screenshots the browser tests take: in $POLICYBOX_ARTIFACTS, else test-artifacts/ in the checkout (ignored
# by git), where a CI run keeps them after the temporary folders are gone.
ARTIFACTS = Path(os.environ.get("POLICYBOX_ARTIFACTS", Path(__file__).parents[1] / "test-artifacts"))


@pytest.fixture
def screenshots() -> Path:
    """The folder browser tests save their screenshots in (see ``ARTIFACTS``)."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    return ARTIFACTS


@pytest.fixture
def browser():
    """A headless Chromium driven by Playwright (a ``playwright.sync_api.Browser``), closed after the test."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        try:
            yield chromium
        finally:
            chromium.close()


@pytest.fixture
def disk(tmp_path: Path) -> Iterator[callable]:
    """``disk("size=80k")``: a fresh tmpfs mounted with these options, unmounted after the test."""
    if os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs to fill needs root")
    mounted: list[Path] = []

    def mount(options: str) -> Path:
        point = tmp_path / f"disk{len(mounted)}"
        point.mkdir()
        done = subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(point)], capture_output=True)
        if done.returncode != 0:
            pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode().strip()}")
        mounted.append(point)
        return point

    try:
        yield mount
    finally:
        for point in mounted:
            if subprocess.run(["umount", str(point)], capture_output=True).returncode != 0:
                subprocess.run(["umount", "-l", str(point)], check=True)  # busy: detach it all the same


def remount(point: Path, options: str) -> None:
    """Give the filesystem room again, keeping every file on it."""
    subprocess.run(["mount", "-o", f"remount,{options}", str(point)], check=True)
