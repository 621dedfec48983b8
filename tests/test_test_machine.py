"""The test machine itself: the PostgreSQL server, the database fixtures, the headless browser, the
guards against leftovers, the plugin that reports what each test costs (tests/costs.py), and the setup
step that installs what they need (tests/prepare_machine.py, run by the README's test command)."""

from __future__ import annotations

import functools
import os
import re
import subprocess
import sys
import threading
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import costs
import prepare_machine
import psutil
import psycopg
import pytest
import sqlalchemy as sa
from conftest import CHROMIUM, descendants, ipc_objects_of

from policybox.host.uids import lease_uid

ROOT = Path(__file__).parents[1]


def scalar(url: str, query: str):
    """The one value ``query`` returns on a new connection to ``url``."""
    engine = sa.create_engine(url)
    try:
        with engine.connect() as connection:
            return connection.execute(sa.text(query)).scalar_one()
    finally:
        engine.dispose()  # no connection left open in the pool


def test_the_server_answers_through_sqlalchemy(postgres_url):
    assert postgres_url.startswith("postgresql+psycopg://policybox:")
    assert "@127.0.0.1:" in postgres_url
    assert scalar(postgres_url, "select version()").startswith("PostgreSQL ")


TABLES = "select count(*) from information_schema.tables where table_schema = 'public'"


@pytest.mark.parametrize("turn", [1, 2])
def test_each_test_gets_an_empty_database_of_its_own(postgres_url, turn):
    """Run twice: the second test sees nothing the first made (and not its database's name)."""
    assert scalar(postgres_url, TABLES) == 0
    engine = sa.create_engine(postgres_url)
    with engine.begin() as connection:
        connection.execute(sa.text("create table marker (turn integer)"))
        connection.execute(sa.text(f"insert into marker values ({turn})"))
    # Left open on purpose: dropping the database must not wait for this test's connections.
    engine.connect()
    assert scalar(postgres_url, TABLES) == 1


def test_two_databases_at_once_are_different(postgres_server):
    first, second = postgres_server.create_database(), postgres_server.create_database()
    try:
        assert first != second
        assert scalar(postgres_server.url(first), "select current_database()") == first
        assert scalar(postgres_server.url(second), "select current_database()") == second
    finally:
        postgres_server.drop_database(first)
        postgres_server.drop_database(second)


def test_a_wrong_password_or_none_is_refused(postgres_server, postgres_url):
    database = postgres_url.rsplit("/", 1)[1]
    with pytest.raises(sa.exc.OperationalError, match="password authentication failed"):
        scalar(postgres_server.url(database, password="wrong"), "select 1")
    # Anonymous: no password at all, straight through the driver (no trust rule lets it in).
    with pytest.raises(psycopg.OperationalError, match="no password supplied"):
        psycopg.connect(host="127.0.0.1", port=postgres_server.port, user="policybox", dbname=database).close()
    with pytest.raises(psycopg.OperationalError, match="no password supplied"):
        psycopg.connect(host="127.0.0.1", port=postgres_server.port, user="postgres", dbname="postgres").close()


@pytest.mark.storage
def test_database_url_is_each_database_in_turn(database_url, request):
    backend = request.node.callspec.params["database_url"]
    assert sa.make_url(database_url).get_backend_name() == backend
    engine = sa.create_engine(database_url)
    try:
        with engine.begin() as connection:
            connection.execute(sa.text("create table ladder (name text, rating real)"))
            connection.execute(sa.text("insert into ladder values ('random', 25.0)"))
        with engine.connect() as connection:
            assert connection.execute(sa.text("select name, rating from ladder")).all() == [("random", 25.0)]
    finally:
        engine.dispose()


def test_chromium_shows_a_page_served_here(browser, tmp_path):
    """Headless Chromium loads a page from a server on 127.0.0.1, reads its title and takes a screenshot
    (into $POLICYBOX_SCREENSHOTS if set, else the test's tmp_path)."""
    site = tmp_path / "site"
    site.mkdir()
    (site / "index.html").write_text("<!doctype html><title>policybox ladder</title><h1>Ladder</h1><p>random 25.0</p>")
    handler = functools.partial(QuietHandler, directory=str(site))
    with ThreadingHTTPServer(("127.0.0.1", 0), handler) as server:
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        thread.start()
        try:
            page = browser.new_page()
            page.goto(f"http://127.0.0.1:{server.server_address[1]}/", timeout=60_000)
            assert page.title() == "policybox ladder"
            assert page.locator("h1").inner_text() == "Ladder"
            folder = Path(os.environ.get("POLICYBOX_SCREENSHOTS") or tmp_path)
            folder.mkdir(parents=True, exist_ok=True)
            screenshot = folder / "test_test_machine.png"
            page.screenshot(path=screenshot)
            print(f"screenshot: {screenshot}")
            assert screenshot.read_bytes().startswith(b"\x89PNG")
        finally:
            server.shutdown()
            thread.join()
    # Debian's Chromium, not a browser of Playwright's own.
    debian = subprocess.run([CHROMIUM, "--version"], capture_output=True, text=True, timeout=60).stdout
    assert f"Chromium {browser.version} " in debian


class QuietHandler(SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass  # no request lines in the test output


def test_ci_runs_exactly_the_readmes_test_command():
    readme = (ROOT / "README.md").read_text()
    command = readme.split("Set up and run the whole test suite", 1)[1].split("```bash\n", 1)[1].split("\n```", 1)[0]
    assert "tests/prepare_machine.py" in command
    assert (ROOT / ".ci" / "run").read_text().rstrip("\n").splitlines()[-1] == command


def test_prepare_machine_is_quiet_when_nothing_is_missing():
    run = subprocess.run(
        [sys.executable, ROOT / "tests" / "prepare_machine.py"], capture_output=True, text=True, timeout=60
    )
    assert (run.returncode, run.stdout, run.stderr) == (0, "", "")


def test_prepare_machine_says_why_it_cannot_install(monkeypatch, capsys):
    monkeypatch.setattr(prepare_machine, "NEEDED", {"/nonexistent/chromium": ["chromium"]})
    monkeypatch.setattr(prepare_machine.os, "geteuid", lambda: 1000)
    assert prepare_machine.main() == 1
    printed = capsys.readouterr()
    assert printed.out == ""
    assert printed.err == (
        "prepare_machine: the tests need chromium, missing here; installing them needs root:"
        " run `sudo apt-get install -y chromium`\n"
    )


# The guards against what a test leaves behind (tests/conftest.py), with a leak of each kind they catch,
# and something of the same kind that is not the test's own -- the other xdist worker's -- which they
# must not count.

LEAKS_A_CHILD = """
import subprocess
from conftest import no_process_survives  # the suite's autouse guard, as every test of the suite has it

def test_leaves_a_child():
    subprocess.Popen(["sleep", "300"])
"""


def test_the_process_guard_fails_a_test_that_leaves_a_child(pytester):
    pytester.makepyfile(test_leaky=LEAKS_A_CHILD)
    run = pytester.runpytest_inprocess("-p", "no:importnb", "-p", "no:cacheprovider")
    left = descendants()  # the inner test ran in this process: its child is this process's
    try:
        assert [process.cmdline() for process in left] == [["sleep", "300"]]
        run.assert_outcomes(passed=1, errors=1)  # the test passed; the guard failed its teardown
        assert f"processes left behind: [({left[0].pid}, ['sleep', '300'])]" in run.stdout.str()
    finally:
        for process in left:
            process.kill()
            process.wait()


def test_the_process_guard_counts_no_process_outside_its_own_tree():
    """An orphan is no one's descendant, as the other worker's processes are not this one's."""
    started = subprocess.run(["sh", "-c", "sleep 300 >/dev/null 2>&1 & echo $!"], capture_output=True, text=True)
    stranger = psutil.Process(int(started.stdout))
    try:
        assert stranger.is_running() and stranger.pid not in {process.pid for process in descendants()}
    finally:
        stranger.kill()


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to run a process as a cell's uid")
def test_the_ipc_guard_finds_what_a_cells_uid_left_and_nothing_of_another_uid():
    """A process of a cell's uid makes a shared memory segment in the host's IPC namespace, where a
    cell without its own would leave one: the guard finds it for that uid, not for another cell's."""
    with lease_uid() as cell, lease_uid() as other_cell:
        made = subprocess.run(
            ["ipcmk", "-M", "4096"], user=cell.uid, group=cell.uid, extra_groups=[], capture_output=True, text=True
        )
        assert made.returncode == 0, made.stderr
        shmid = made.stdout.split()[-1]  # "Shared memory id: 42"
        try:
            [found] = ipc_objects_of({cell.uid})
            assert re.fullmatch(rf"shm key -?\d+ id {shmid} uid {cell.uid}", found), found  # a random key
            assert ipc_objects_of({other_cell.uid}) == []
        finally:
            subprocess.run(["ipcrm", "-m", shmid], check=True)
        assert ipc_objects_of({cell.uid}) == []


# The cost plugin (tests/costs.py): a busy test and an idle one, to see it tell them apart.

BUSY_AND_IDLE = """
import subprocess
import sys

def test_busy():
    for _ in range(3):  # each child burns 0.3 s of CPU, whatever the machine's load
        subprocess.run([sys.executable, "-c", "import time\\nwhile time.process_time() < 0.3: pass"], check=True)

def test_idle():
    pass
"""


def costliest(output: str) -> list[tuple[float, str, str]]:
    """The rows of the plugin's summary: (CPU seconds, processes, test id), costliest first."""
    section = output.split("costliest tests (CPU seconds, children included)", 1)[1]
    return [
        (float(cpu), processes, test)
        for cpu, processes, test in re.findall(r"^ +([\d.]+) +[\d.]+ +(\S+) +\S+  (\S+)$", section, re.M)
    ]


@pytest.mark.skipif(
    os.geteuid() != 0 and int(Path("/proc/sys/kernel/perf_event_paranoid").read_text()) > 1,
    reason="counting a test's processes needs perf_event_open, which this user may not use",
)
def test_the_cost_plugin_counts_a_tests_children(pytester, monkeypatch):
    """The children's CPU and count reach the summary, through an xdist worker as in the suite's runs
    (in a pytest of its own: its worker must find the plugin on PYTHONPATH)."""
    pytester.makepyfile(test_costly=BUSY_AND_IDLE)
    monkeypatch.setenv("PYTHONPATH", str(ROOT / "tests"))
    run = pytester.runpytest_subprocess("-p", "costs", "-n", "1", "-p", "no:importnb", "-p", "no:cacheprovider")
    run.assert_outcomes(passed=2)
    [(busy_cpu, busy_processes, busy), (idle_cpu, idle_processes, idle)] = costliest(run.stdout.str())
    assert (busy, idle) == ("test_costly.py::test_busy", "test_costly.py::test_idle")
    assert busy_cpu >= 0.8 and int(busy_processes) >= 3
    assert idle_cpu < 0.2 and idle_processes == "0"


def test_the_cost_plugin_measures_cpu_without_perf_events(pytester, monkeypatch):
    """Where perf_event_open is refused the CPU still comes from getrusage, processes are not counted,
    and the summary says why."""

    def refused() -> costs.PerfMeter:
        raise PermissionError(13, "perf_event_open: Permission denied")

    monkeypatch.setattr(costs, "PerfMeter", refused)
    pytester.makepyfile(test_costly=BUSY_AND_IDLE)
    run = pytester.runpytest_inprocess("-p", "costs", "-p", "no:importnb", "-p", "no:cacheprovider")
    run.assert_outcomes(passed=2)
    [(busy_cpu, busy_processes, busy), (idle_cpu, idle_processes, idle)] = costliest(run.stdout.str())
    assert (busy, idle) == ("test_costly.py::test_busy", "test_costly.py::test_idle")
    assert busy_cpu >= 0.8 and idle_cpu < 0.2
    assert busy_processes == idle_processes == "?"
    run.stdout.fnmatch_lines(["costs: perf_event_open unavailable (*Permission denied): CPU from getrusage*"])
