"""Shared fixtures: policy file paths, a one-call episode runner, the guards against leftover processes
and IPC objects, databases (SQLite and a real PostgreSQL server), a test's own temporary folder, a real
headless Chromium, and small tmpfs disks to fill; and the helper modules whose fixtures several test
files share, loaded as plugins (``pytest_plugins``). What test files share lives here or in
``tests/helpers/``, never in a test file (``tests/test_suite_house.py``).

The suite runs on three pytest-xdist workers at once (the README's test command), on a machine others
share: every guard looks only at what its own test made -- this process's tree, the uids its cells
had -- never at the whole machine, so that another worker's test cannot fail it."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import tempfile
import traceback
import unittest.mock
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, NamedTuple

import postgres
import psutil
import pytest

from policybox.episode import run_episode
from policybox.host.zygote import Zygote, kept_zygotes
from policybox.league.play.worker_pool import kept_workers
from policybox.results import EpisodeResult
from policybox.settings import EpisodeSettings

POLICIES = Path(__file__).parent / "policies"

# The suite keeps Python's bytecode caches whatever the shell says (a container's PYTHONDONTWRITEBYTECODE=1):
# without them every worker rewrites each test module's assertions again (3.4 s a collection), and every
# `policybox` subprocess compiles policybox's own modules again (0.1 s).
sys.dont_write_bytecode = False
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)


def policy(name: str, **extra: str) -> str:
    """A -p string for a test policy: ``policy("faults.py:RaiseInStep")``."""
    return ",".join([str(POLICIES / name), *(f"{key}={value}" for key, value in extra.items())])


# This worker's zygotes (one per preload) and pools of workers (one per size and role), for every episode
# and run its tests play in this process: started on first use, kept from test to test (``kept``), stopped
# at the end of the run, exempt from the leftover guard (their cells are not). A test whose subject is a
# zygote's or a worker's life starts its own.
KEPT_ZYGOTES: dict[tuple[str, ...], Zygote] = {}
KEPT_WORKERS: dict = {}


@pytest.fixture(scope="session", autouse=True)
def stop_kept_processes() -> Iterator[None]:
    yield
    for pool in KEPT_WORKERS.values():
        pool.stop()
    for zygote in KEPT_ZYGOTES.values():
        zygote.close()


@pytest.fixture(autouse=True)
def kept() -> Iterator[None]:
    """Each test plays with this worker's kept zygotes and workers (``policybox.kept_zygotes``,
    ``kept_workers``), rather than starting its own for every episode and run."""
    with kept_zygotes(KEPT_ZYGOTES), kept_workers(KEPT_WORKERS):
        yield


@pytest.fixture
def play(tmp_path: Path):
    """Run one episode: ``play(["random", policy("x.py:X")], agents=4, steps=50, mode="inline")``
    (``agents=None``: the game's own number)."""

    def _play(policies: list[str], agents: int | None = 4, **settings) -> EpisodeResult:
        settings.setdefault("steps", 50)
        return run_episode(policies, EpisodeSettings(**settings), tmp_path / "logs", agents=agents)

    return _play


# pytester: tests/test_test_machine.py runs a test that leaks, to see the guard fail it. costs: each test's
# CPU and processes, the costliest printed at the end (tests/costs.py). The fixtures several test files
# share and that belong with their helpers: helpers.played (ladders that have played, built once per
# worker), helpers.take_home (the take-home ladder, once per test module), helpers.web (an empty ladder
# to submit to).
pytest_plugins = ["pytester", "costs", "helpers.played", "helpers.take_home", "helpers.web"]


class Ran(NamedTuple):
    """What a ``policybox`` command did, named as ``subprocess.CompletedProcess`` names it."""

    returncode: int
    stdout: str
    stderr: str


def policybox(*args: str | Path, cwd: Path | None = None, columns: int = 200, env: Mapping[str, str] = {}) -> Ran:
    """``policybox ARGS`` as a user types it, run in this process (typer's CliRunner): its exit code and what
    it printed on stdout and stderr, a terminal of ``columns`` wide. For the tests that judge exit codes,
    text and files; a test whose subject is the process itself (a signal, a tty, kill -9, what ``/proc``
    shows, ``serve``) starts ``python -m policybox`` instead. An exception the command let out is in
    ``stderr`` as its traceback, as a user would see it, with exit code 1."""
    from typer.testing import CliRunner

    from policybox.cli import app, common

    with (
        contextlib.chdir(cwd) if cwd else contextlib.nullcontext(),
        unittest.mock.patch("os._exit", side_effect=_ends_at_once),
        # The consoles were made once, at the first import, at the width COLUMNS said then: this call's.
        unittest.mock.patch.object(common.console, "_width", None),
        unittest.mock.patch.object(common.errors, "_width", None),
    ):
        ran = CliRunner().invoke(app, [str(arg) for arg in args], env={"COLUMNS": str(columns), **env})
    stderr = ran.stderr
    if ran.exception is not None and not isinstance(ran.exception, SystemExit):
        stderr += "".join(traceback.format_exception(ran.exception))
    return Ran(ran.exit_code, ran.stdout, stderr)


def policybox_process(*args: str | Path, cwd: Path | None = None, columns: int = 200) -> subprocess.CompletedProcess:
    """``python -m policybox ARGS``, a process of its own: for a test whose subject is the process (what it
    imports, a signal it gets) or what it does to its own interpreter (inline mode imports policies and
    their environments into it)."""
    command = [sys.executable, "-m", "policybox", *map(str, args)]
    environment = {**os.environ, "COLUMNS": str(columns)}
    return subprocess.run(command, capture_output=True, text=True, timeout=600, cwd=cwd, env=environment)


def _ends_at_once(code: int) -> None:
    raise AssertionError(
        f"the command ended its process at once (os._exit({code})): run it as a process of its own, "
        "not in the test's (a database changed under it would bring this one down too)"
    )


@pytest.fixture(autouse=True)
def no_process_survives():
    """Every test must leave no child process behind (cells are reaped, not orphaned). Only this
    process's tree counts: the other xdist worker's processes are not in it."""
    yield
    children = descendants()
    assert not children, f"processes left behind: {[(c.pid, _cmdline(c)) for c in children]}"


def descendants() -> list[psutil.Process]:
    """This process's children, recursively, but for those that live as long as the test run by design
    and are not cells: multiprocessing's resource tracker (started by the evaluator's worker pool), this
    worker's kept zygotes and workers (``kept_pids``; not their cells), what a session's fixture started
    (``of_the_whole_run``: its browser, a Ray node) and the test PostgreSQL server's processes
    (``postgres_server``). The tree is read from ``/proc`` once: this runs after every test."""
    tree = psutil.Process().children(recursive=True)
    parent_of = {}
    for process in tree:
        with contextlib.suppress(psutil.NoSuchProcess):
            parent_of[process.pid] = process.ppid()
    exempt = kept_pids(parent_of)
    return [process for process in tree if not _of_the_whole_run(process, parent_of, exempt)]


def kept_pids(parent_of: dict[int, int] | None = None) -> set[int]:
    """This worker's kept zygotes and workers, and the zygotes of those workers: processes that serve every
    test (their cells serve one). ``parent_of``: this process's tree (pid to parent pid), if already read."""
    if parent_of is None:
        parent_of = {process.pid: process.ppid() for process in psutil.Process().children(recursive=True)}
    zygotes = {pid for zygote in KEPT_ZYGOTES.values() for pid in zygote.pids}
    workers = {pid for pool in KEPT_WORKERS.values() for pid in pool.pids}
    theirs = {pid for pid, parent in parent_of.items() if parent in workers and _is_zygote(pid)}
    return zygotes | workers | theirs


def _is_zygote(pid: int) -> bool:
    try:
        return "policybox.cell.zygote" in psutil.Process(pid).cmdline()
    except psutil.Error:
        return False  # gone


# Processes started once for the whole run, by a session's fixture, and everything under them.
WHOLE_RUN: set[int] = set()


@contextlib.contextmanager
def of_the_whole_run() -> Iterator[set[int]]:
    """The processes this block starts (a fixture's server: a browser's driver, a Ray node) live as long as
    the fixture: they, and all under them, are exempt from the leftover guard. Yields the set of their pids,
    filled when the block ends."""
    before, started = {child.pid for child in psutil.Process().children()}, set()
    try:
        yield started
    finally:
        started.update(child.pid for child in psutil.Process().children() if child.pid not in before)
        WHOLE_RUN.update(started)


def _of_the_whole_run(process: psutil.Process, parent_of: dict[int, int], kept: set[int]) -> bool:
    if process.pid in kept or "multiprocessing.resource_tracker" in " ".join(_cmdline(process)):
        return True
    pid = process.pid
    while pid in parent_of:  # up to this process, the root of the tree
        if pid in WHOLE_RUN:
            return True
        pid = parent_of[pid]
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


@pytest.fixture
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A new empty database as a SQLAlchemy URL: a SQLite file in ``tmp_path``, and for a test marked
    ``storage`` (its subject is how a ladder stores) once more, a database of the test PostgreSQL server
    (``postgres_url``): ``pytest_generate_tests`` gives the databases."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'policybox.sqlite3'}"
    return request.getfixturevalue("postgres_url")  # only now: a SQLite-only run starts no server


@pytest.fixture
def temp_folder(tmp_path, monkeypatch) -> Path:
    """This test's own temporary folder, for this process and the commands it starts: its listing
    is the uploads' alone (other tests of the machine write to the real one meanwhile)."""
    folder = tmp_path / "tmp"
    folder.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(folder))
    monkeypatch.setenv("TMPDIR", str(folder))
    return folder


# The quick loop (``pytest -n 3 -m "quick and not alone"``, about 2 minutes here): a part of every floor of the house --
# the wire and specs, the engine's faults and sandbox, the CLI, PettingZoo, cells per policy, the
# statistics, the web pages and uploads, the architecture and types -- for iterating; the README's whole
# suite is still what decides.
QUICK = {
    "test_architecture",
    "test_balanced",
    "test_cell_protocol",
    "test_cells_per_policy",
    "test_cli",
    "test_cli_imports",
    "test_conformance",
    "test_database_owners",
    "test_equivalence",
    "test_escapes",
    "test_faults",
    "test_frame_fuzz",
    "test_game_faults",
    "test_hostile",
    "test_landlock",
    "test_lifecycle",
    "test_match_page",
    "test_matchmaking",
    "test_packing",
    "test_pettingzoo",
    "test_policies",
    "test_ranking",
    "test_reads",
    "test_replays",
    "test_seccomp",
    "test_spaces",
    "test_spec",
    "test_stats_plackett_luce",
    "test_stats_sequential",
    "test_submissions",
    "test_suite_house",
    "test_summary",
    "test_tokens",
    "test_tournament",
    "test_types",
    "test_uploads",
    "test_versions",
    "test_versus",
    "test_web",
    "test_wire",
    "test_zygote",
}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if item.path.stem in QUICK:
            item.add_marker(pytest.mark.quick)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Every test of a ladder runs on SQLite; those whose subject is storage (``@pytest.mark.storage``) on
    PostgreSQL too."""
    if "database_url" in metafunc.fixturenames:
        storage = metafunc.definition.get_closest_marker("storage") is not None
        metafunc.parametrize("database_url", ["sqlite", "postgresql"] if storage else ["sqlite"], indirect=True)


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
# The pages' screenshots for a person to look at show the window; whole pages only when asked for
# (POLICYBOX_WHOLE_PAGES=1): a whole page costs Chromium about 0.5-0.6 CPU-seconds to draw and encode, the
# window 0.05 (measured), and a run takes some 90 of them.
WHOLE_PAGES = os.environ.get("POLICYBOX_WHOLE_PAGES") == "1"


def keep_screenshot(page: Any, path: Path | str) -> None:
    """A screenshot of ``page`` at ``path`` (under ``ARTIFACTS``): its window, or the whole page if asked for."""
    page.screenshot(path=path, full_page=WHOLE_PAGES)
    print(f"screenshot: {path}")


@pytest.fixture
def screenshots() -> Path:
    """The folder browser tests save their screenshots in (see ``ARTIFACTS``)."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    return ARTIFACTS


@pytest.fixture(scope="session")
def chromium() -> Iterator:
    """This worker's headless Chromium driven by Playwright (a ``playwright.sync_api.Browser``): started by
    the first test that asks for it, closed at the end of the run. Playwright's driver and the browser
    under it are exempt from the leftover guard (``WHOLE_RUN``)."""
    from playwright.sync_api import sync_playwright

    with contextlib.ExitStack() as stack:
        with of_the_whole_run():
            playwright = stack.enter_context(sync_playwright())
        launched = playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        try:
            yield launched
        finally:
            launched.close()


@pytest.fixture
def browser(chromium):
    """The worker's Chromium for one test: each context the test opens (``browser.new_context()``, a fresh
    profile: no cookie or storage of another test's) is closed after it."""
    yield chromium
    for context in chromium.contexts:
        context.close()


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
