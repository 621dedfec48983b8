"""Requirements as the worst entrant picks them: a wheel that unpacks past the cap, a module that is
costly to byte-compile, and an index that shadows another. Every build runs in cells; the host only
harvests what they made.

Each wheel is made here with ``zipfile`` and served from an index made here (a ``file://`` folder, and
once over HTTP from 127.0.0.1); no test reaches PyPI. Builds run in a process of their own -- the host
-- whose every folder (the environments, TMPDIR, HOME, where uv would keep its cache) is on a small
tmpfs, and it is judged from outside: what the refusal says, how full that tmpfs ever was, the peak
memory (VmHWM) of each process of the host's tree that runs as root (outside every cell), and which of
them were uv.
"""

from __future__ import annotations

import functools
import http.server
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil
import pytest
from helpers.environments import package_index

import policybox.files.environments as environments
from policybox.files.package_source import PackageSource

CAP_MB = 32  # the environment cap these builds run under (the default is 4096)
MEMORY_MB = 256  # a cell's memory limit for the compile bomb: its build's cell may use CAP_MB on top
BOMB_MB = 128  # what the wheel bomb unpacks to: its wheel is about 130 KB
HOST_MB = 2 * CAP_MB  # the tmpfs every folder of the host's is on
COMPILE_BOMB_ELEMENTS = 1_500_000  # 3 MiB of source, a few KB of wheel, about 1 GiB to byte-compile
UID_LOCKS = "tmp/policybox-uids"  # policybox.host.uids: the lock files of cells' uids, kept for reuse
ROOT_PEAK_MB = 400  # the most any process of the host's may hold (the host itself, its zygote)
BUILD = """
import json, sys
from pathlib import Path
from policybox.files.environments import EnvironmentRefused, environment
from policybox.files.package_source import PackageSource
from policybox.limits import Limits
from policybox.settings import EpisodeSettings
asked = json.loads(sys.argv[1])
limits = Limits(**({"memory_limit_mb": asked["memory_mb"]} if asked["memory_mb"] else {}))
settings = EpisodeSettings(environment_limit_mb=asked["cap_mb"], limits=limits)
source = PackageSource(*asked["indexes"][:1], tuple(asked["indexes"][1:]), settings=settings)
try:
    built = environment(asked["requirements"], Path(asked["folder"]), source, "bomber")
except EnvironmentRefused as refused:
    print(json.dumps({"public": refused.public, "detail": refused.detail}))
else:
    print(json.dumps({"lock": (built / "lock.txt").read_text()}))
"""


@pytest.fixture
def bombs(tmp_path: Path) -> Path:
    """An index of the two bombs: ``bomb`` unpacks to BOMB_MB of zeros, ``compilebomb`` is a module of
    COMPILE_BOMB_ELEMENTS list elements."""
    source = b"ZEROS = [" + b"0," * COMPILE_BOMB_ELEMENTS + b"]\n"
    return package_index(
        tmp_path / "bombs",
        {
            "bomb": [("1.0", {"bomb/__init__.py": b"", "bomb/zeros.bin": bytes(BOMB_MB << 20)})],
            "compilebomb": [("1.0", {"compilebomb/__init__.py": source})],
        },
    )


class Watch:
    """What a host's process tree did while it built: the fullest its tmpfs ever was, the peak memory of
    its processes that ran as root, and their programs' names."""

    def __init__(self, pid: int, disk: Path) -> None:
        self.pid, self.disk = pid, disk
        self.disk_peak = 0
        self.root_peaks: dict[int, tuple[str, int]] = {}  # pid: (program, VmHWM in KiB)
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)
        self._thread.start()

    def _watch(self) -> None:
        while not self._done.wait(0.02):
            usage = os.statvfs(self.disk)
            self.disk_peak = max(self.disk_peak, (usage.f_blocks - usage.f_bfree) * usage.f_frsize)
            try:
                tree = [psutil.Process(self.pid), *psutil.Process(self.pid).children(recursive=True)]
            except psutil.NoSuchProcess:
                continue
            for process in tree:
                try:
                    status = Path(f"/proc/{process.pid}/status").read_text()
                    program = Path(process.cmdline()[0]).name
                except (OSError, IndexError, psutil.Error):
                    continue
                fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
                if fields["Uid"].split()[0] == "0" and "VmHWM" in fields:
                    peak = max(int(fields["VmHWM"].split()[0]), self.root_peaks.get(process.pid, ("", 0))[1])
                    self.root_peaks[process.pid] = (program, peak)

    def stop(self) -> None:
        self._done.set()
        self._thread.join()

    @property
    def root_peak_mb(self) -> float:
        return max(peak for _, peak in self.root_peaks.values()) / 1024

    @property
    def root_programs(self) -> set[str]:
        return {program for program, _ in self.root_peaks.values()}


def build_as_a_host(
    disk, tmp_path: Path, requirements: list[str], *indexes: str, memory_mb: int | None = None
) -> tuple[dict, Watch, Path]:
    """Build ``requirements`` from ``indexes`` (the first the index, the others extra ones) in a process
    of its own, every folder of its on a fresh tmpfs of HOST_MB, with a cell's memory limit of
    ``memory_mb`` (None: the default): what it said (the refusal's public reason and detail, or the
    built lock), how it went, and that tmpfs."""
    point = disk(f"size={HOST_MB}m")
    for folder in ("home", "tmp"):
        (point / folder).mkdir()
    env = {key: value for key, value in os.environ.items() if not key.startswith(("UV_", "XDG_"))}
    env.update(HOME=str(point / "home"), TMPDIR=str(point / "tmp"))
    asked = {"requirements": requirements, "indexes": list(indexes), "folder": str(point / "envs")}
    asked |= {"cap_mb": CAP_MB, "memory_mb": memory_mb}
    host = subprocess.Popen(
        [sys.executable, "-c", BUILD, json.dumps(asked)], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    watch = Watch(host.pid, point)
    try:
        out, err = host.communicate(timeout=300)
    finally:
        watch.stop()
    assert host.returncode == 0, err.decode()
    return json.loads(out), watch, point


def left_on_the_host(point: Path) -> list[str]:
    """What a build left on the host's tmpfs: anything but the (empty) environments' folder, the host's
    two folders and the lock files of the cells' uids (machine-wide, in TMPDIR)."""
    left = [str(path.relative_to(point)) for path in point.rglob("*")]
    return sorted(path for path in left if path not in ("envs", "home", "tmp") and not path.startswith(UID_LOCKS))


@pytest.fixture
def served(bombs: Path):
    """The bombs' index over HTTP, on 127.0.0.1; the paths asked for."""
    asked: list[str] = []

    class Handler(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            asked.append(self.path)

    handler = functools.partial(Handler, directory=str(bombs))
    with http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler) as server:
        threading.Thread(target=server.serve_forever, daemon=True).start()
        yield f"http://127.0.0.1:{server.server_address[1]}/", asked
        server.shutdown()


def test_a_wheel_that_unpacks_past_the_cap_is_refused_in_its_cell_and_the_host_never_holds_it(disk, tmp_path, bombs):
    """A wheel of ~130 KB that unpacks to 128 MiB, from a file:// index: uv unpacks it in its cell's
    tmpfs of the cap (32 MiB), which fills; the host's own tmpfs (64 MiB) never holds more than a
    little of anything, no uv cache is left on it, and uv never runs as root."""
    said, watch, point = build_as_a_host(disk, tmp_path, ["bomb==1.0"], f"file://{bombs}")
    assert said["public"] == f"its environment needs more than {CAP_MB} MiB of disk or 100000 files, the cap", said
    assert "No space left on device" in said["detail"]
    assert watch.disk_peak < CAP_MB << 20, watch.disk_peak
    assert left_on_the_host(point) == []  # no environment half-built, no uv cache, no cell's scratch
    assert watch.root_peaks and "uv" not in watch.root_programs, watch.root_programs


def test_over_http_the_build_cell_has_the_network_and_its_cap(disk, tmp_path, served):
    """The same wheel from an index over HTTP: the build's cell keeps the host's network to fetch it
    (the server was asked for the wheel), and everything else of its sandbox: the cap holds."""
    url, asked = served
    said, watch, point = build_as_a_host(disk, tmp_path, ["bomb==1.0"], f"{url}")
    assert said["public"] == f"its environment needs more than {CAP_MB} MiB of disk or 100000 files, the cap", said
    assert "/bomb/bomb-1.0-py3-none-any.whl" in asked, asked
    assert watch.disk_peak < CAP_MB << 20 and left_on_the_host(point) == []
    assert "uv" not in watch.root_programs, watch.root_programs


def test_a_module_costly_to_byte_compile_is_refused_in_its_cell_and_the_host_stays_small(disk, tmp_path, bombs):
    """A wheel of a few KB whose 3 MiB module takes about 1 GiB to byte-compile: the compiler runs
    in the build's cell and is stopped at its limit (a cell's MEMORY_MB plus the cap); no process of the
    host's, outside every cell, ever holds more than ROOT_PEAK_MB."""
    said, watch, _ = build_as_a_host(disk, tmp_path, ["compilebomb==1.0"], f"file://{bombs}", memory_mb=MEMORY_MB)
    assert said["public"] == f"its build ran out of memory (limit {MEMORY_MB + CAP_MB} MiB)", said
    assert watch.root_peak_mb < ROOT_PEAK_MB, watch.root_peaks
    assert "uv" not in watch.root_programs, watch.root_programs


def test_with_an_extra_index_the_best_version_of_all_is_taken_as_pip_takes_it(tmp_path):
    """The main index holds toy 2.0, an extra one toy 1.0 (a private mirror, say): pip install takes
    2.0 (its best across every index), and so does the environment; uv alone would stop at the extra
    index, which it asks first, and take 1.0."""
    main = package_index(tmp_path / "main", {"pbtoy": [("2.0", {"pbtoy.py": b"VERSION = '2.0'\n"})]})
    extra = package_index(tmp_path / "extra", {"pbtoy": [("1.0", {"pbtoy.py": b"VERSION = '1.0'\n"})]})
    urls = ["--index-url", f"file://{main}", "--extra-index-url", f"file://{extra}"]
    pip = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--isolated", "--dry-run", "--quiet", "--report", "-", *urls, "pbtoy"],
        capture_output=True,
        text=True,
        check=True,
    )
    [chosen] = [item["metadata"]["version"] for item in json.loads(pip.stdout)["install"]]
    assert chosen == "2.0"
    source = PackageSource(f"file://{main}", (f"file://{extra}",))
    built = environments.environment(["pbtoy"], tmp_path / "envs", source, "bot")
    assert (built / "lock.txt").read_text() == f"pbtoy=={chosen}\n"
    assert (built / "site" / "pbtoy.py").read_text() == f"VERSION = '{chosen}'\n"


def test_a_ladder_rejects_a_wheel_bomb_naming_the_cap_and_plays_on(tmp_path, bombs):
    """A ladder (on SQLite) whose version asks for the wheel bomb: it is rejected at qualification, in
    a setup worker, with the cap in its public reason, while the other versions' matches are stored
    with every agent ok."""
    from policybox import EpisodeSettings, LadderSettings
    from policybox.ladder import Ladder

    bomber = tmp_path / "bomber"
    bomber.mkdir()
    (bomber / "bot.py").write_text("from mettagrid.policy.random_agent import RandomMultiAgentPolicy as Bot\n")
    (bomber / "policy_spec.json").write_text(json.dumps({"class_path": "bot.py:Bot", "requirements": ["bomb==1.0"]}))
    settings = EpisodeSettings(env="arena", steps=20, index_url=f"file://{bombs}", environment_limit_mb=CAP_MB)
    folder = tmp_path / "cup"
    with Ladder.create(folder, LadderSettings(settings=settings, agents=2, placement_matches=0)) as ladder:
        for name, spec in (("bomber", str(bomber)), ("steady", "noop"), ("walker", "random")):
            ladder.submit(name, spec)

    def rows() -> dict:
        with Ladder.open(folder, read_only=True) as reader:
            return {row.name: row for row in reader.standings().rows}

    command = [sys.executable, "-m", "policybox", "ladder", "run", str(folder), "--workers", "1"]
    run = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)
    try:
        give_up = time.monotonic() + 300
        while not (rows()["bomber"].state == "rejected" and rows()["walker"].matches >= 4):
            assert time.monotonic() < give_up and run.poll() is None, "the bomb was not rejected beside 4 matches"
            time.sleep(0.5)
    finally:
        run.terminate()
        _, err = run.communicate(timeout=120)
    seen = rows()
    assert seen["bomber"].reason.startswith(f"its environment needs more than {CAP_MB} MiB of disk"), seen["bomber"]
    assert "No space" not in seen["bomber"].reason and str(bombs) not in seen["bomber"].reason  # uv's words: private
    for name in ("steady", "walker"):
        assert seen[name].state == "active" and set(seen[name].statuses) == {"ok"}, (seen[name], err.decode())
