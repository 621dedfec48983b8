"""Setup scripts, run once per version in a cell, as the worst entrant writes them.

Each submission is real files with a real ``setup.py``; the outcome is judged from outside the cell:
the files on the host, the processes left on the machine, the outcome and its output. A setup that
works must make what the policy then loads in a real episode.
"""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
import textwrap
import threading
import time
import uuid
import zipfile
from pathlib import Path

import psutil
import pytest
from helpers.setups import BUILD, team

import policybox.files.setup_scripts as setup
import policybox.submission as submission
from policybox.episode import run_episode
from policybox.files.harvest import HarvestRefused, harvest
from policybox.files.version_files import keep
from policybox.host.zygote import ZygoteError
from policybox.league.evaluate.results_folder import TournamentMismatch, evaluate
from policybox.limits import Limits
from policybox.results import AgentStatus
from policybox.settings import EpisodeSettings
from policybox.spec import SpecError
from policybox.startup import PolicyRefused


@pytest.fixture(autouse=True)
def unpacked(tmp_path, monkeypatch) -> Path:
    root = tmp_path / "unpacked"
    monkeypatch.setattr(submission, "submissions_root", lambda: root)
    return root


@pytest.fixture
def token() -> str:
    """In the team folder's name, so in the command line of every process its script starts."""
    return f"team{uuid.uuid4().hex[:12]}"


def set_up(tmp_path: Path, script: str, timeout_s: float = 60, name: str = "team_a", **limits):
    """Store a submission with ``script`` and run it: (the stored version, the outcome, ``out``)."""
    stored = keep(str(team(tmp_path / "originals" / name, script)), tmp_path / "versions")
    out = tmp_path / "setups" / stored.digest
    settings = EpisodeSettings(limits=Limits(**limits))
    return stored, setup.run_setup(stored, settings, out, timeout_s), out


def survivors(token: str) -> list[psutil.Process]:
    """Processes anywhere on the machine whose command line names the team's folder."""
    return [process for process in psutil.process_iter() if token in named(process)]


def named(process: psutil.Process) -> str:
    try:
        return " ".join(process.cmdline())
    except psutil.Error:
        return ""


def files_under(folder: Path) -> dict[str, bytes | None]:
    return {str(p.relative_to(folder)): p.read_bytes() if p.is_file() else None for p in sorted(folder.rglob("*"))}


# -- a script that works -------------------------------------------------------------------------


def test_a_setup_script_makes_the_checkpoint_the_policy_then_loads(tmp_path):
    """MettaGrid's own zip format (policy_spec.json with a setup_script): the script runs in a copy of
    the submission folder, makes the checkpoint, and a real episode's policy reads what it made."""
    folder = team(tmp_path / "team_a", BUILD, manifest="policy_spec.json")
    with zipfile.ZipFile(tmp_path / "team_a.zip", "w") as archive:
        for file in sorted(folder.rglob("*")):
            archive.write(file, file.relative_to(folder))
    stored = keep(str(tmp_path / "team_a.zip"), tmp_path / "versions")
    kept = files_under(stored.files)
    out = tmp_path / "setups" / stored.digest
    outcome = setup.run_setup(stored, EpisodeSettings(), out, 60)

    assert outcome.ok, outcome.output
    assert "version/0/" in outcome.output and "with its manifest: True" in outcome.output  # in its copy
    assert "and TEAM_MODE x" in outcome.output  # the version's variables, as its policy gets them
    assert files_under(stored.files) == kept  # the stored version itself is untouched
    made = next(out.glob("0/*/ckpt/weights.txt"))
    assert made.read_text() == "built-by-setup"
    assert stat.S_IMODE(out.parent.stat().st_mode) == 0o700  # root-only
    for path in [out, *out.rglob("*")]:
        info = path.lstat()
        assert info.st_uid == os.geteuid() and stat.S_IMODE(info.st_mode) == (0o755 if path.is_dir() else 0o644)
    spec = outcome.spec
    assert spec.setup_script is None and spec.data_path == str(made)
    assert spec.python_path == [str(made.parent.parent)] and spec.name == stored.spec.name
    agent = run_episode([spec], EpisodeSettings(steps=3), tmp_path / "logs", agents=1).agents[0]
    assert agent.status == AgentStatus.OK, agent.failure
    assert "checkpoint: built-by-setup" in Path(agent.log_path).read_text()


@pytest.mark.parametrize(("launcher", "sandbox"), [("spawn", "standard"), ("zygote", "off")])
def test_the_settings_launcher_and_sandbox_are_used(tmp_path, launcher, sandbox):
    stored = keep(str(team(tmp_path / "team_a", BUILD)), tmp_path / "versions")
    settings = EpisodeSettings(launcher=launcher, sandbox=sandbox)
    outcome = setup.run_setup(stored, settings, tmp_path / "setups" / stored.digest, 60)
    assert outcome.ok, outcome.output
    assert next((tmp_path / "setups").glob("*/0/team_a/ckpt/weights.txt")).read_text() == "built-by-setup"
    scratch = "/policybox-scratch-" if sandbox == "standard" else "/policybox-job-"  # no scratch folder when off
    assert scratch in outcome.output


def test_a_spec_whose_script_has_not_run_is_refused_by_the_engine(tmp_path):
    stored = keep(str(team(tmp_path / "team_a", BUILD)), tmp_path / "versions")
    with pytest.raises(SpecError, match=r"has a setup script \(.*/setup.py\) that must run first, in a cell"):
        run_episode([stored.spec], EpisodeSettings(steps=1), tmp_path / "logs", agents=1)


# -- scripts that fail ---------------------------------------------------------------------------


def test_a_failing_script_rejects_the_version_with_its_output(tmp_path):
    script = "print('building the model')\nraise ValueError('no GPU here')\n"
    _, outcome, out = set_up(tmp_path, script)
    assert not outcome.ok and outcome.spec is None
    assert outcome.output.startswith("setup script setup.py exited with code 1\n")
    assert "building the model" in outcome.output and "ValueError: no GPU here" in outcome.output
    assert not out.exists()


@pytest.mark.parametrize(
    ("script", "shown"),
    [
        ("import time\nprint('waiting forever', flush=True)\ntime.sleep(10**6)\n", "waiting forever"),
        ("while True:\n    print('flood ' * 100)\n", "flood flood"),
    ],
    ids=["sleeps", "floods its output"],
)
def test_a_script_that_never_ends_is_stopped_at_its_timeout(tmp_path, token, script, shown):
    started = time.monotonic()
    _, outcome, out = set_up(tmp_path, script, timeout_s=3, name=token)
    assert time.monotonic() - started < 120
    assert not outcome.ok and outcome.output.startswith("setup script setup.py did not finish within 3 s")
    assert shown in outcome.output and len(outcome.output) <= setup.OUTPUT_CHARS and not out.exists()
    assert survivors(token) == []


def test_control_characters_in_the_output_are_made_inert(tmp_path):
    _, outcome, _ = set_up(tmp_path, "print('\\x1b[2J\\x1b]0;pwned\\x07 cleared')\nraise SystemExit(3)\n")
    assert not outcome.ok and "\\x1b[2J\\x1b]0;pwned\\x07 cleared" in outcome.output and "\x1b" not in outcome.output


# -- the worst entrant ---------------------------------------------------------------------------


def test_writing_outside_its_folder_reaches_nothing_of_the_host(tmp_path, token):
    open_folder = tmp_path / "open"
    open_folder.mkdir(mode=0o777)
    open_folder.chmod(0o777)  # even a folder anyone may write to
    victim = keep(str(team(tmp_path / "originals" / "victim", BUILD)), tmp_path / "versions")
    targets = [
        open_folder / "escaped.txt",
        victim.files / "escaped.txt",  # another version's stored copy
        tmp_path / "versions" / "escaped.txt",  # the versions folder
        tmp_path / "originals" / token / "escaped.txt",  # the submission as it was handed in
        tmp_path / "setups" / "escaped.txt",  # where the host keeps what setup scripts made
        Path(f"/tmp/{token}-escaped.txt"),
        Path(f"/root/{token}-escaped.txt"),
        Path(f"/{token}-escaped.txt"),
    ]
    script = BUILD + textwrap.dedent(f"""
        for target in {[str(t) for t in targets]!r}:
            try:
                with open(target, "w") as file:
                    file.write("escaped")
                print("WROTE", target)
            except OSError as exc:
                print("refused", target, type(exc).__name__)
        for own in ("../../../escaped.txt", "/proc/self/cwd/../../../escaped.txt"):  # its scratch: allowed
            Path(own).write_text("its own")
    """)
    stored = keep(str(team(tmp_path / "originals" / token, script)), tmp_path / "versions")
    kept, victim_kept = files_under(stored.files), files_under(victim.files)
    outcome = setup.run_setup(stored, EpisodeSettings(), tmp_path / "setups" / stored.digest, 60)
    assert outcome.ok, outcome.output
    assert outcome.output.count("refused ") == len(targets) and "WROTE" not in outcome.output
    assert [target for target in targets if target.exists()] == []
    assert files_under(stored.files) == kept and files_under(victim.files) == victim_kept
    assert not list((tmp_path / "setups").rglob("escaped.txt"))  # only its copy comes out, not its scratch


def test_a_fork_bomb_is_contained_and_killed(tmp_path, token):
    script = "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass\n"
    _, outcome, out = set_up(tmp_path, script, timeout_s=5, name=token, max_processes=32)
    assert not outcome.ok and "did not finish within 5 s" in outcome.output and not out.exists()
    assert survivors(token) == []


def test_processes_it_leaves_behind_are_killed_before_its_files_are_read(tmp_path, token):
    """A daemon (double fork, new session) that keeps writing: it is dead by the time the host copies,
    and the copy is kept."""
    script = BUILD + textwrap.dedent("""
        import os, sys, time
        if os.fork() == 0:
            os.setsid()
            if os.fork() == 0:
                Path("daemon.pid").write_text(str(os.getpid()))
                while True:
                    with open("late.txt", "a") as late:
                        late.write("x")
                    time.sleep(0.01)
            os._exit(0)
        os.wait()
        while not Path("late.txt").exists():
            time.sleep(0.01)
        print("leaving a daemon behind")
    """)
    _, outcome, out = set_up(tmp_path, script, name=token)
    assert outcome.ok, outcome.output
    daemon = int(next(out.glob("0/*/daemon.pid")).read_text())
    assert not psutil.pid_exists(daemon) or token not in " ".join(psutil.Process(daemon).cmdline())
    assert survivors(token) == []
    late = next(out.glob("0/*/late.txt")).read_bytes()
    time.sleep(0.5)
    assert next(out.glob("0/*/late.txt")).read_bytes() == late  # nothing writes the kept copy


@pytest.mark.parametrize(
    ("plant", "refusal"),
    [
        ("os.symlink('/etc/shadow', 'stolen')", "stolen is a symlink"),
        ("os.symlink('/', 'ckpt/rootfs')", "ckpt/rootfs is a symlink"),
        ("os.mkfifo('ckpt/pipe')", "ckpt/pipe is a FIFO"),
        ("os.makedirs('a/' * 70)", "more than 64 folders deep"),
    ],
    ids=["symlink to /etc/shadow", "symlink to /", "fifo", "too deep"],
)
def test_what_may_not_be_kept_rejects_the_version_and_nothing_is_copied(tmp_path, plant, refusal):
    _, outcome, out = set_up(tmp_path, BUILD + f"import os\n{plant}\n")
    assert not outcome.ok and outcome.spec is None
    assert outcome.output.startswith("what the setup script made cannot be kept: ") and refusal in outcome.output
    assert list(out.parent.iterdir()) == []  # not even the files it made honestly


def test_too_many_files_rejects_the_version(tmp_path):
    script = BUILD + "for i in range(100):\n    Path(f'f{i}').write_text('')\n"
    _, outcome, out = set_up(tmp_path, script, disk_limit_files=64)
    assert not outcome.ok and not out.exists()
    assert "No space left on device" in outcome.output  # its scratch tmpfs holds 64 files at most


@pytest.mark.parametrize(
    ("files", "size", "refusal"), [(65, 1, "more than 64 files and folders"), (2, 40, "more than 64 bytes")]
)
def test_the_copy_out_counts_for_itself(tmp_path, files, size, refusal):
    """Where no tmpfs caps the scratch folder (no root), the copy out is bounded on its own."""
    source = tmp_path / "made"
    source.mkdir()
    for index in range(files):
        (source / f"f{index}").write_bytes(bytes(size))
    with pytest.raises(HarvestRefused, match=refusal):
        harvest(source, tmp_path / "out", max_entries=64, max_bytes=64)
    assert list(tmp_path.iterdir()) == [source]


def test_the_copy_out_chooses_the_modes(tmp_path):
    source = tmp_path / "made"
    (source / "folder").mkdir(parents=True)
    for name, mode in (("secret", 0o000), ("tool", 0o4777), ("folder/data", 0o666)):
        (source / name).write_text(name)
        (source / name).chmod(mode)
    (source / "folder").chmod(0o000)
    harvest(source, tmp_path / "out", max_entries=64, max_bytes=64)
    modes = {
        str(p.relative_to(tmp_path / "out")): stat.S_IMODE(p.stat().st_mode) for p in (tmp_path / "out").rglob("*")
    }
    assert modes == {"secret": 0o644, "tool": 0o755, "folder": 0o755, "folder/data": 0o644}


def test_a_huge_file_stops_at_the_disk_limit(tmp_path):
    script = BUILD + textwrap.dedent("""
        written = 0
        try:
            with open("huge", "wb") as huge:
                for _ in range(64):
                    huge.write(bytes(1 << 20))
                    huge.flush()
                    written += 1
        except OSError as exc:
            print(f"stopped after {written} MiB:", exc.strerror)
    """)
    _, outcome, out = set_up(tmp_path, script, disk_limit_mb=8)
    assert outcome.ok, outcome.output
    assert "stopped after" in outcome.output and "No space left on device" in outcome.output
    assert next(out.glob("0/*/huge")).stat().st_size <= 8 << 20
    assert sum(path.stat().st_size for path in out.rglob("*") if path.is_file()) <= 8 << 20


def test_a_script_that_kills_its_runner_is_rejected_not_retried(tmp_path):
    _, outcome, out = set_up(tmp_path, "import os, signal\nos.kill(os.getppid(), signal.SIGKILL)\n")
    assert not outcome.ok and outcome.output.startswith("the cell of the setup script failed: ") and not out.exists()


def test_a_zygote_that_dies_is_the_machinerys_failure_and_raised(tmp_path, token):
    def kill_the_zygote() -> None:
        for _ in range(1200):
            for zygote in psutil.Process().children():
                cells = zygote.children(recursive=True)
                if "policybox.cell.zygote" in " ".join(zygote.cmdline()) and any(token in named(p) for p in cells):
                    zygote.send_signal(signal.SIGKILL)
                    return
            time.sleep(0.05)

    killer = threading.Thread(target=kill_the_zygote)
    killer.start()
    try:
        with pytest.raises(ZygoteError, match="the zygote died"):
            set_up(tmp_path, "import time\ntime.sleep(600)\n", name=token)
    finally:
        killer.join()
    assert survivors(token) == []


# -- run and evaluate ----------------------------------------------------------------------------


def test_policybox_run_sets_up_a_submission_first(tmp_path):
    folder = team(tmp_path / "team_a", BUILD)
    temp = tmp_path / "temp"
    temp.mkdir()
    # A process of its own: TMPDIR, where its setup copy goes, is read once per interpreter (tempfile keeps it).
    run = subprocess.run(
        [sys.executable, "-m", "policybox", "run", "-n", "1", "-p", str(folder), "--steps", "3"]
        + ["--log-dir", str(tmp_path / "logs")],
        capture_output=True,
        text=True,
        timeout=300,
        env={"PATH": "/usr/bin:/bin", "COLUMNS": "200", "TMPDIR": str(temp)},
    )
    assert run.returncode == 0, run.stdout + run.stderr
    assert "checkpoint: built-by-setup" in (tmp_path / "logs" / "agent-0.log").read_text()
    assert list(temp.glob("policybox-setup-*")) == []  # its copy is gone with the run
    assert not (folder / "ckpt").exists()


def test_evaluate_sets_up_once_and_reuses_it_on_resume(tmp_path, monkeypatch):
    folder = team(tmp_path / "team_a", BUILD)
    runs = []
    real = setup.run_setup
    monkeypatch.setattr(setup, "run_setup", lambda *args: runs.append(args) or real(*args))
    out = tmp_path / "board"
    summary = evaluate([str(folder), "noop"], out, episodes=2, agents=2, steps=3, workers=1)
    assert [row.episodes for row in summary.policies] == [2, 2] and len(runs) == 1
    made = list((out / "setup").glob("*/0/team_a/ckpt/weights.txt"))
    assert [path.read_text() for path in made] == ["built-by-setup"]
    assert any("checkpoint: built-by-setup" in log.read_text() for log in (out / "logs").rglob("agent-*.log"))
    stored = json.loads((out / "tournament.json").read_text())["entrants"][0]["spec"]
    assert stored["setup_script"] == str(folder / "setup.py")  # shown as given
    evaluate([str(folder), "noop"], out, episodes=3, agents=2, steps=3, workers=1)
    assert len(runs) == 1  # the resume played from the same setup


def test_evaluate_refuses_a_failing_setup_before_any_episode(tmp_path):
    folder = team(tmp_path / "team_a", "print('cannot build')\nraise SystemExit(4)\n")
    out = tmp_path / "board"
    with pytest.raises(PolicyRefused, match="team_a cannot be built: setup script setup.py exited with code 4"):
        evaluate([str(folder), "noop"], out, episodes=1, agents=2, steps=3, workers=1)
    assert not (out / "tournament.json").exists()
    (folder / "setup.py").write_text(BUILD)  # fixed: the same folder can take the tournament
    assert evaluate([str(folder), "noop"], out, episodes=1, agents=2, steps=3, workers=1).policies


def test_a_folder_of_another_tournament_is_refused_before_any_setup_runs(tmp_path, monkeypatch):
    out = tmp_path / "board"
    evaluate(["random", "noop"], out, episodes=1, agents=2, steps=3, workers=1)
    before = files_under(out)
    monkeypatch.setattr(setup, "run_setup", lambda *args: pytest.fail("a setup ran"))
    with pytest.raises(TournamentMismatch, match="holds another tournament"):
        evaluate([str(team(tmp_path / "team_a", BUILD)), "noop"], out, episodes=1, agents=2, steps=3, workers=1)
    assert files_under(out) == before


def test_a_version_whose_environment_is_refused_says_why_in_public_and_in_full_to_its_team(tmp_path):
    """A ladder's preparation (``prepare_version``): the script runs, then its environment is refused --
    its pin conflicts with the host's numpy. In public one line, naming no folder and quoting no uv;
    for the team, its script's output and the refusal in full, uv's reason among it."""
    folder = team(tmp_path / "team_a", BUILD)
    (folder / "requirements.txt").write_text("numpy==1.26.4\n")
    stored = keep(str(folder), tmp_path / "versions")
    settings = EpisodeSettings(index_url="file:///opt/pypi/simple")
    out, envs = tmp_path / "setups" / stored.digest, tmp_path / "envs"
    outcome = setup.prepare_version(stored, settings, out, 60, envs, "team_a@v1")
    assert not outcome.ok and outcome.spec is None
    assert outcome.refused == "its requirements cannot be resolved beside the host's packages"
    script, _, refusal = outcome.output.partition("\npolicy team_a@v1: ")
    assert "with its manifest: True" in script  # the script ran, and said so
    assert refusal.startswith(f"{outcome.refused}: uv (resolving) exited with code 1")
    assert f"numpy=={__import__('numpy').__version__}" in refusal  # uv's words, the host's pin, for the team
