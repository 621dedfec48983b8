"""A submission's own packages: requirements built once with uv into an environment layered on the
host's, seen only by that submission's cells.

Packages come from this machine's own index (file:///opt/pypi/simple): more-itertools, which the host
does not have, in two versions. Every outcome is judged from outside the cells: the agents' statuses
(a policy refuses to play unless it imports the version it expects), the folders on disk, the number
of times uv ran, a TCP listener this test holds.
"""

from __future__ import annotations

import functools
import http.server
import importlib.util
import json
import os
import shlex
import shutil
import socket
import ssl
import stat
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from conftest import POLICIES, policybox, policybox_process, remount
from helpers.docs import PLANNER, WHEELHOUSE, block
from helpers.environments import INDEX, NEW, OLD, package_index, submission, trojan_sdist

import policybox.files.cell_jobs as cell_jobs
import policybox.files.environments as environments
from policybox.episode import run_episode
from policybox.files.environments import EnvironmentRefused, with_environments
from policybox.files.package_source import PackageSource, package_source, pip_configured_source
from policybox.results import AgentStatus
from policybox.settings import EpisodeSettings
from policybox.spec import SpecError, parse_policy_arg

LOCAL = PackageSource(INDEX)


@pytest.fixture(autouse=True)
def host_lacks_the_package():
    assert importlib.util.find_spec("more_itertools") is None, "the host must not have more-itertools for these tests"


def test_two_submissions_pinning_different_versions_play_one_match_each_with_its_own(tmp_path):
    old = submission(tmp_path / "old", OLD, f"# pinned\nmore-itertools=={OLD}\n")
    new = submission(tmp_path / "new", NEW, f"more-itertools=={NEW}\n")
    bare = submission(tmp_path / "bare", OLD, None)  # the same policy, without requirements
    out, envs = tmp_path / "result.json", tmp_path / "envs"
    run = policybox(
        "run", "-p", str(old), "-p", str(new), "-p", str(bare), "-n", "3", "--steps", "10",
        "--index-url", INDEX, "--environments", str(envs), "--out", str(out), "--log-dir", str(tmp_path / "logs"),
        "--no-check",  # the bare one fails as an agent, beside the others
    )  # fmt: skip
    result = json.loads(out.read_text())
    statuses = [agent["status"] for agent in result["agents"]]
    assert statuses == ["ok", "ok", "error"], run.stdout + run.stderr
    assert result["agents"][2]["failure"]["message"] == "No module named 'more_itertools'"  # the host lacks it
    logs = {i: (tmp_path / "logs" / f"agent-{i}.log").read_text() for i in (0, 1)}
    assert f"more-itertools {OLD} from {envs}" in logs[0] and f"more-itertools {NEW} from {envs}" in logs[1]
    built = sorted(path for path in envs.iterdir() if path.name != environments.REQUESTS)
    assert len(built) == 2
    assert stat.S_IMODE(envs.stat().st_mode) == 0o700 and envs.stat().st_uid == 0
    for path in built:  # root's, and no cell may write there
        for entry in [path, *path.rglob("*")]:
            assert entry.lstat().st_uid == 0 and not entry.lstat().st_mode & 0o022, entry


def cells_of_builds(monkeypatch) -> list[str]:
    """What each build's cell does from now on in this process, in order: "resolved", or "installed" too."""
    done: list[str] = []
    real = cell_jobs.run_job

    def run_job(job, what, settings, out, *rest, **kwargs):
        outcome = real(job, what, settings, out, *rest, **kwargs)
        done.append("installed" if (out / "site").is_dir() else "resolved")
        return outcome

    monkeypatch.setattr(cell_jobs, "run_job", run_job)
    return done


def test_the_same_requirements_build_nothing_the_second_time(tmp_path, monkeypatch):
    calls = cells_of_builds(monkeypatch)
    envs = tmp_path / "envs"
    first = environments.environment([f"more-itertools=={OLD}"], envs, LOCAL, "first")
    assert calls == ["installed"]  # resolved and installed, in one cell
    built = (first / "site").stat()
    again = environments.environment([f"more-itertools=={OLD}"], envs, LOCAL, "second")
    assert again == first and calls == ["installed"]  # remembered: not even resolved again
    spelt_otherwise = environments.environment([f"more_itertools == {OLD}"], envs, LOCAL, "third")
    assert spelt_otherwise == first and calls == ["installed", "resolved"]  # resolved, not installed
    assert (first / "site").stat().st_mtime_ns == built.st_mtime_ns
    assert (first / "lock.txt").read_text() == f"more-itertools=={OLD}\n"
    assert not [path for path in envs.iterdir() if path.name.startswith(".building")]


def test_a_set_removed_while_a_build_finds_it_built_is_built_again(tmp_path, monkeypatch):
    """``ladder prune`` may delete an unused environment while a build's cell finds its set among those
    the host has: the build then installs the set after all, instead of refusing the policy."""
    envs = tmp_path / "envs"
    first = environments.environment([f"more-itertools=={OLD}"], envs, LOCAL, "first")
    done = cells_of_builds(monkeypatch)
    counted = cell_jobs.run_job

    def pruned_meanwhile(*args, **kwargs):
        outcome = counted(*args, **kwargs)
        shutil.rmtree(first, ignore_errors=True)
        return outcome

    monkeypatch.setattr(cell_jobs, "run_job", pruned_meanwhile)
    again = environments.environment([f"more_itertools == {OLD}"], envs, LOCAL, "second")
    assert done == ["resolved", "installed"] and again == first
    assert (first / "site" / "more_itertools").is_dir() and (
        first / "lock.txt"
    ).read_text() == f"more-itertools=={OLD}\n"


def test_a_built_spec_plays_from_python_and_an_unbuilt_one_is_refused(tmp_path):
    spec = parse_policy_arg(str(submission(tmp_path / "bot", NEW, f"more-itertools=={NEW}")))
    assert spec.requirements == [f"more-itertools=={NEW}"]
    settings = EpisodeSettings(steps=10, index_url=INDEX, environments=str(tmp_path / "envs"))
    with pytest.raises(SpecError, match="declares requirements .* must be built first"):
        run_episode([spec, "random"], settings, tmp_path / "logs", agents=2)
    ready = with_environments([spec, parse_policy_arg("random")], settings, tmp_path / "unused")
    assert ready[0].requirements == [] and ready[0].python_path[-1].startswith(str(tmp_path / "envs"))
    played = run_episode(ready, settings, tmp_path / "logs", agents=2)
    assert [agent.status for agent in played.agents] == [AgentStatus.OK, AgentStatus.OK]
    assert not (tmp_path / "unused").exists()


def test_inline_mode_takes_one_environment_in_its_one_process(tmp_path):
    """Inline mode imports every policy in the host's process (a subprocess here, so that this one stays
    without the package): one environment plays, two are refused -- a process holds one version."""
    old = submission(tmp_path / "old", OLD, f"more-itertools=={OLD}")
    new = submission(tmp_path / "new", NEW, f"more-itertools=={NEW}")
    common = ["-n", "2", "--steps", "5", "--mode", "inline", "--index-url", INDEX, "--environments", str(tmp_path)]
    one = policybox_process("run", "-p", str(old), *common, "--out", str(tmp_path / "one.json"))
    assert one.returncode == 0, one.stdout + one.stderr
    two = policybox_process("run", "-p", str(old), "-p", str(new), *common)
    assert two.returncode == 2 and "cannot hold 2 environments' packages at once" in two.stderr, two.stderr


def test_a_cell_in_a_built_environment_cannot_reach_the_network_nor_change_its_environment(tmp_path):
    folder = submission(tmp_path / "bot", NEW, f"more-itertools=={NEW}", cls="NeedsPackageOnline", port=0)
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        server.setblocking(False)
        spec = parse_policy_arg(str(folder))
        spec = spec.model_copy(update={"init_kwargs": {**spec.init_kwargs, "port": server.getsockname()[1]}})
        settings = EpisodeSettings(steps=10, index_url=INDEX)
        ready = with_environments([spec], settings, tmp_path / "envs")
        (agent,) = run_episode(ready, settings, tmp_path / "logs", agents=1).agents
        with pytest.raises(BlockingIOError):
            server.accept()  # the listener saw no connection
    assert agent.status == AgentStatus.OK
    log = (tmp_path / "logs" / "agent-0.log").read_text()
    assert "tcp: refused" in log and "plant: refused" in log and "rewrite: refused" in log, log
    package = Path(ready[0].python_path[-1]) / "more_itertools"
    assert not (package / "planted.py").exists() and "SystemExit" not in (package / "__init__.py").read_text()


@pytest.mark.parametrize(
    ("requirements", "message"),
    [
        ("numpy==1.26.4", rf"numpy==1\.26\.4 and numpy=={__import__('numpy').__version__}"),  # the host's pin
        ("no-such-package-policybox", "no-such-package-policybox was not found"),
        ("more-itertools==0.0.1", "there is no version of more-itertools==0.0.1"),
    ],
)
def test_requirements_that_cannot_be_met_are_refused_with_uvs_reason(tmp_path, requirements, message):
    folder = submission(tmp_path / "bot", OLD, requirements)
    with pytest.raises(EnvironmentRefused, match=rf"policy \S*bot: its requirements cannot be resolved.*{message}"):
        with_environments(
            [parse_policy_arg(str(folder), base_dir=tmp_path)], EpisodeSettings(index_url=INDEX), tmp_path / "envs"
        )
    leftovers = [path.name for path in (tmp_path / "envs").iterdir()]
    assert leftovers == [], leftovers  # nothing half-built


def test_bad_requirements_and_an_unreachable_index_are_one_clear_error_and_keep_the_result(tmp_path):
    out = tmp_path / "result.json"
    out.write_text("kept")
    cases = {
        "--index-url http://evil.example/simple\n": "is not a package requirement",
        "pkg @ https://evil.example/pkg.whl\n": "names a URL",
        "numpy==1.26.4\n": "cannot be resolved beside the host's packages",
    }
    for index, (requirements, message) in enumerate(cases.items()):
        folder = submission(tmp_path / f"bot{index}", OLD, requirements)
        run = policybox("run", "-p", str(folder), "-n", "1", "--index-url", INDEX, "--out", str(out),
                        "--environments", str(tmp_path / "envs"))  # fmt: skip
        assert run.returncode == 2 and message in run.stderr and "Traceback" not in run.stderr, run.stderr
    offline = submission(tmp_path / "offline", OLD, f"more-itertools=={OLD}\n")
    with socket.socket() as closed:  # a port nothing listens on
        closed.bind(("127.0.0.1", 0))
        index = f"http://127.0.0.1:{closed.getsockname()[1]}/simple"
        run = policybox("run", "-p", str(offline), "-n", "1", "--index-url", index, "--out", str(out),
                        "--environments", str(tmp_path / "envs"))  # fmt: skip
    assert run.returncode == 2 and "its requirements cannot be resolved" in run.stderr, run.stderr
    assert out.read_text() == "kept"
    nowhere = policybox("run", "-p", str(offline), "-n", "1", "--environments", str(out / "envs"), "--out", str(out))
    assert nowhere.returncode == 2 and "cannot make the environments' folder" in nowhere.stderr, nowhere.stderr
    assert "Traceback" not in nowhere.stderr and out.read_text() == "kept"


def test_a_cogames_manifest_declares_requirements_in_its_policy_table(tmp_path):
    folder = tmp_path / "team"
    folder.mkdir()
    (folder / "bot.py").write_text((POLICIES / "needs_package.py").read_text())
    requirement = "more-itertools==10.8.0 ; python_version >= '3'"
    (folder / "cogames.toml").write_text(
        f'[policy]\nclass_path = "bot.py:NeedsPackage"\nrequirements = ["{requirement}"]\n'
    )
    assert parse_policy_arg(str(folder)).requirements == ['more-itertools==10.8.0; python_version >= "3"']


def test_a_requirement_with_a_control_character_is_refused(tmp_path):
    folder = submission(tmp_path / "bot", OLD, 'more-itertools ; python_version == "\x1b]0;owned\x07"\n')
    with pytest.raises(SpecError, match=r"holds a control character"):
        parse_policy_arg(str(folder))


def test_requirements_in_the_spec_and_in_a_file_are_refused(tmp_path):
    folder = submission(tmp_path / "bot", OLD, f"more-itertools=={OLD}")
    spec = json.loads((folder / "policy_spec.json").read_text())
    (folder / "policy_spec.json").write_text(json.dumps({**spec, "requirements": [f"more-itertools=={NEW}"]}))
    with pytest.raises(SpecError, match="declared in its spec and in requirements.txt: keep one"):
        parse_policy_arg(str(folder))
    (folder / "requirements.txt").unlink()
    assert parse_policy_arg(str(folder)).requirements == [f"more-itertools=={NEW}"]


def test_a_wheelhouse_alone_builds_offline(tmp_path):
    wheelhouse = tmp_path / "wheels"
    wheelhouse.mkdir()
    for wheel in Path("/opt/pypi/files").glob(f"more_itertools-{OLD}-*.whl"):
        (wheelhouse / wheel.name).write_bytes(wheel.read_bytes())
    source = package_source(EpisodeSettings(find_links=[str(wheelhouse)]))
    assert source.uv_arguments() == ["--no-index", "--find-links", str(wheelhouse)]
    built = environments.environment([f"more-itertools=={OLD}"], tmp_path / "envs", source, "bot")
    assert (built / "lock.txt").read_text() == f"more-itertools=={OLD}\n"
    with pytest.raises(EnvironmentRefused, match="cannot be resolved"):
        environments.environment([f"more-itertools=={NEW}"], tmp_path / "envs", source, "bot")


def test_by_default_requirements_come_from_where_pip_install_looks():
    configured = subprocess.run(
        [sys.executable, "-m", "pip", "config", "list"], capture_output=True, text=True, check=True
    ).stdout
    source = pip_configured_source()
    for value in (*source.find_links, *source.extra_index_urls, *source.constraints, *filter(None, [source.cert])):
        assert value in configured
    named = [("find-links", source.find_links), ("extra-index-url", source.extra_index_urls), ("cert", source.cert)]
    for name, values in named:
        assert bool(values) == (f"{name}=" in configured)
    assert len(set(source.find_links)) == len(source.find_links)  # pip lists one from a file and PIP_FIND_LINKS
    assert package_source(EpisodeSettings()) == source


def test_an_index_over_https_is_checked_against_the_certificates_pip_trusts(tmp_path):
    """An index over HTTPS whose certificate a CA of this test's signed (as a company's mirror behind its
    own CA): the build's cell, which has none of the host's variables, checks it against pip's certificate
    bundle -- refused without it, built with it."""

    ca, cert, key = (tmp_path / name for name in ("ca.pem", "cert.pem", "key.pem"))
    for command in (
        f"req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=test-ca -keyout {tmp_path}/ca.key -out {ca}",
        f"req -newkey rsa:2048 -nodes -subj /CN=127.0.0.1 -keyout {key} -out {tmp_path}/cert.csr",
        f"x509 -req -in {tmp_path}/cert.csr -CA {ca} -CAkey {tmp_path}/ca.key -days 1 -out {cert} -extfile /dev/stdin",
    ):
        subprocess.run(
            ["openssl", *command.split()], input=b"subjectAltName=IP:127.0.0.1\n", check=True, capture_output=True
        )
    served = package_index(tmp_path / "index", {"pbtoy": [("1.0", {"pbtoy.py": b"VERSION = '1.0'\n"})]})
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(served))
    with http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler) as server:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(cert, key)
        server.socket = context.wrap_socket(server.socket, server_side=True)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        url = f"https://127.0.0.1:{server.server_address[1]}/"
        with pytest.raises(EnvironmentRefused, match="cannot be resolved") as refused:
            environments.environment(["pbtoy"], tmp_path / "envs", PackageSource(url), "bot")
        assert "certificate" in refused.value.detail
        built = environments.environment(["pbtoy"], tmp_path / "envs", PackageSource(url, cert=str(ca)), "bot")
        server.shutdown()
    assert (built / "lock.txt").read_text() == "pbtoy==1.0\n"


def test_evaluate_builds_each_environment_once_in_its_results_folder(tmp_path):
    old = submission(tmp_path / "old", OLD, f"more-itertools=={OLD}")
    new = submission(tmp_path / "new", NEW, f"more-itertools=={NEW}")
    out = tmp_path / "results"
    args = ["evaluate", "-p", str(old), "-p", str(new), "--episodes", "2", "--agents", "2", "--steps", "5"]
    run = policybox(*args, "--index-url", INDEX, "--out", str(out))
    assert run.returncode == 0, run.stdout + run.stderr
    summary = json.loads((out / "summary.json").read_text())
    assert all(entry["statuses"] == {"ok": 2} for entry in summary["policies"]), summary["policies"]
    built = sorted(p for p in (out / "environments").iterdir() if p.name != environments.REQUESTS)
    assert len(built) == 2
    tournament = json.loads((out / "tournament.json").read_text())
    assert [e["spec"]["requirements"] for e in tournament["entrants"]] == [[f"more-itertools=={v}"] for v in (OLD, NEW)]
    stamps = [path.stat().st_mtime_ns for path in built]
    again = policybox(*args, "--episodes", "4", "--index-url", INDEX, "--out", str(out))  # more episodes, same folder
    assert again.returncode == 0, again.stdout + again.stderr
    assert [path.stat().st_mtime_ns for path in built] == stamps
    assert len([p for p in (out / "environments").iterdir() if p.name != environments.REQUESTS]) == 2


def test_a_ladder_builds_at_qualification_plays_each_version_in_its_own_and_rejects_what_cannot_be_built(
    tmp_path, monkeypatch
):
    """Each build runs in a setup worker, beside play: uv never runs in the ladder's own process."""
    from policybox import EpisodeSettings as Settings
    from policybox import LadderSettings
    from policybox.ladder import Ladder

    sdists = trojan_sdist(tmp_path, build="raise SystemExit('this build needs a compiler it cannot have')")
    settings = Settings(env="arena", steps=20, index_url=INDEX, find_links=[str(sdists)], sdists=True)
    made = LadderSettings(settings=settings, agents=2, placement_matches=0, suspend_after=3)
    with Ladder.create(tmp_path / "cup", made) as ladder:
        # The refused first: one setup worker prepares one version at a time, and no match is played
        # before two versions are active, so both are decided before the run's two matches end it.
        ladder.submit("conflict", str(submission(tmp_path / "conflict", OLD, "numpy==1.26.4")))
        ladder.submit("unbuildable", str(submission(tmp_path / "unbuildable", OLD, "trojan==1.0")))
        ladder.submit("old", str(submission(tmp_path / "old", OLD, f"more-itertools=={OLD}")))
        ladder.submit("new", str(submission(tmp_path / "new", NEW, f"more-itertools=={NEW}")))
        in_this_process = cells_of_builds(monkeypatch)
        ladder.run(matches=2, workers=1)
        assert in_this_process == []
        monkeypatch.undo()
        rows = {row.name: row for row in ladder.standings().rows}
        assert rows["old"].state == rows["new"].state == "active" and rows["old"].matches == 2
        assert rows["conflict"].state == "rejected"
        assert "its requirements cannot be resolved beside the host's packages" in rows["conflict"].reason
        assert rows["unbuildable"].state == "rejected"  # its sdist's build, in a cell, failed
        assert "its requirements need a package built from source, and the build failed" in rows["unbuildable"].reason
        for row in (rows["conflict"], rows["unbuildable"]):  # uv's words, naming the organiser's folders, are private
            assert "uv (" not in row.reason and str(sdists) not in row.reason and "numpy==2" not in row.reason
        built = [p for p in (tmp_path / "cup" / "environments").iterdir() if p.name != environments.REQUESTS]
        assert len(built) == 2
        logs = sorted((tmp_path / "cup" / "logs").glob("match-*/agent-*.log"))
        assert len(logs) == 4
        seen = {log.read_text().split(" from ")[0] for log in logs}  # each agent's own version, from its log
        assert seen == {f"more-itertools {OLD}", f"more-itertools {NEW}"}
        stray = environments.environment(["humanize"], tmp_path / "cup" / "environments", LOCAL, "nobody")
        freed = ladder.prune()
        assert freed.environments == 1 and not stray.exists() and all(path.is_dir() for path in built)
        assert str(freed).startswith("0 log folders, 1 unused environment and 0 replays deleted")
        assert ladder.prune().environments == 0
        ladder.run(matches=1, workers=1)  # the versions still play from theirs
        assert ladder.standings().matches == 3


def test_the_docs_offline_competition_plays_from_a_wheelhouse_alone(tmp_path):
    """docs/environments.md's team and its two commands: the wheels downloaded, then the team plays with
    the wheelhouse as its only source (uv gets --no-index), its environment in the user's cache."""

    team = tmp_path / "team"
    team.mkdir()
    (team / "bot.py").write_text(block(*PLANNER))
    (team / "requirements.txt").write_text(block(PLANNER.page, PLANNER.heading, "text"))
    (team / "policy_spec.json").write_text(json.dumps({"class_path": "bot.py:Planner"}))
    path = f"{Path(sys.executable).parent}:{os.environ['PATH']}"
    env = {**os.environ, "PATH": path, "XDG_CACHE_HOME": str(tmp_path / "cache"), "COLUMNS": "200"}
    for line in block(*WHEELHOUSE).strip().splitlines():
        run = subprocess.run(shlex.split(line), cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
        assert run.returncode == 0, run.stdout + run.stderr
    assert [wheel.name for wheel in (tmp_path / "wheelhouse").iterdir()] == [f"more_itertools-{OLD}-py3-none-any.whl"]
    assert "ok" in run.stdout and "error" not in run.stdout
    built = tmp_path / "cache" / "policybox" / "environments"
    assert [(path / "lock.txt").read_text() for path in built.iterdir() if path.name != environments.REQUESTS] == [
        f"more-itertools=={OLD}\n"
    ]


def test_an_sdist_is_never_built_on_the_host(tmp_path):
    """A package offered only as an sdist whose setup.py plants a file when it is built: refused, and
    the file is never made (uv gets --only-binary :all:; without it, uv builds it here and the file is
    made -- the wheelhouse holds setuptools for that)."""
    wheelhouse = trojan_sdist(tmp_path)
    source = package_source(EpisodeSettings(find_links=[str(wheelhouse)]))
    with pytest.raises(EnvironmentRefused, match="cannot be resolved.*trojan"):
        environments.environment(["trojan==1.0"], tmp_path / "envs", source, "bot")
    assert not (tmp_path / "built-on-the-host").exists()


def test_an_allowed_sdist_is_built_in_a_sandboxed_cell_offline_and_plays(tmp_path):
    """With --sdists the same package is built -- in a cell: its setup.py cannot plant its file on the
    host nor reach a listener this test holds, it runs as a cell's uid, not root -- and the policy that
    imports it plays, from its environment, root's and read-only like any other."""
    listener = socket.create_server(("127.0.0.1", 0))
    listener.setblocking(False)
    forge = (  # the lock the cell hands back, rewritten to name another set: its environment's folder name?
        "import os\nlock = Path(os.environ['UV_CACHE_DIR']).parent / 'version' / 'lock.txt'\n"
        f"attempt('forge', lambda: lock.write_text('more-itertools=={OLD}\\n'))"
    )
    wheelhouse = trojan_sdist(tmp_path, port=listener.getsockname()[1], build=forge)
    folder = tmp_path / "bot"
    folder.mkdir()
    (folder / "bot.py").write_text((POLICIES / "needs_built_package.py").read_text())
    (folder / "policy_spec.json").write_text(json.dumps({"class_path": "bot.py:NeedsBuiltPackage"}))
    (folder / "requirements.txt").write_text("trojan==1.0\n")
    envs, logs = tmp_path / "envs", tmp_path / "logs"
    args = ["run", "-p", str(folder), "-n", "1", "--steps", "5", "--find-links", str(wheelhouse)]
    args += ["--environments", str(envs), "--log-dir", str(logs)]
    refused = policybox(*args)  # wheels only, as by default
    assert refused.returncode == 2 and "trojan" in refused.stderr and "no usable wheels" in refused.stderr, (
        refused.stderr
    )
    run = policybox(*args, "--sdists")
    assert run.returncode == 0, run.stdout + run.stderr
    said = (logs / "agent-0.log").read_text()
    assert "trojan says built as uid " in said and f"from {envs}" in said and "built as uid 0" not in said
    assert not (tmp_path / "built-on-the-host").exists()
    with pytest.raises(BlockingIOError):  # nobody called
        listener.accept()
    [built] = [path for path in envs.iterdir() if path.name != environments.REQUESTS]
    for entry in [built, *built.rglob("*")]:
        assert entry.lstat().st_uid == 0 and not entry.lstat().st_mode & 0o022, entry
    assert (built / "lock.txt").read_text() == f"more-itertools=={OLD}\n"  # forged: it names nothing but its own
    assert built.name.startswith("from-source-")
    honest = environments.environment([f"more-itertools=={OLD}"], envs, LOCAL, "honest")
    assert honest != built and (honest / "site" / "more_itertools").is_dir()
    assert not (honest / "site" / "trojan.py").exists()


def test_a_failing_sdist_build_is_refused_with_its_output_and_leaves_nothing(tmp_path):
    wheelhouse = trojan_sdist(tmp_path, build="raise SystemExit('this build needs a compiler it cannot have')")
    source = package_source(EpisodeSettings(find_links=[str(wheelhouse)], sdists=True))
    with pytest.raises(EnvironmentRefused) as refused:
        environments.environment(["trojan==1.0"], tmp_path / "envs", source, "bot")
    assert str(refused.value).startswith(
        "policy bot: its requirements need a package built from source, and the build failed"
    )
    assert "this build needs a compiler it cannot have" in str(refused.value)
    assert "plant: refused" in str(refused.value)  # the build's own output, as it said it
    assert list((tmp_path / "envs").iterdir()) == []
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(wheelhouse))
    with http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler) as server:  # the same sdist, from a page
        threading.Thread(target=server.serve_forever, daemon=True).start()
        page = f"http://127.0.0.1:{server.server_address[1]}/"
        online = PackageSource(find_links=(page,), no_index=True, sdists=True)
        with pytest.raises(EnvironmentRefused, match="built offline, from local folders .* and none is given"):
            environments.environment(["trojan==1.0"], tmp_path / "envs", online, "bot")
        server.shutdown()


def test_a_build_from_source_that_hands_back_a_symlink_is_refused_and_keeps_nothing(tmp_path):
    """The sdist's setup.py plants a symlink to /etc/shadow in what its build hands back: the copy out of
    the cell follows nothing and refuses it, and nothing is kept."""
    plant = (
        "import os\nout = Path(os.environ['UV_CACHE_DIR']).parent / 'version'\n"
        "attempt('symlink', lambda: os.symlink('/etc/shadow', out / 'stolen'))"
    )
    wheelhouse = trojan_sdist(tmp_path, build=plant)
    source = package_source(EpisodeSettings(find_links=[str(wheelhouse)], sdists=True))
    with pytest.raises(EnvironmentRefused) as refused:
        environments.environment(["trojan==1.0"], tmp_path / "envs", source, "bot")
    assert refused.value.public.startswith("what its build made cannot be kept: more than 4096 MiB")
    assert "stolen is a symlink" in refused.value.detail and "/etc/shadow" not in refused.value.public
    assert list((tmp_path / "envs").iterdir()) == []


def test_an_sdist_is_built_offline_even_where_its_wheels_were_looked_for_online(tmp_path):
    """An index over HTTP (this test's, on 127.0.0.1) that lacks trojan, and a wheelhouse with its sdist:
    the wheels-only build's cell has the network and asks the index; the build from source that follows
    has none -- its setup.py reaches no listener -- and the environment is built."""
    listener = socket.create_server(("127.0.0.1", 0))
    listener.setblocking(False)
    wheelhouse = trojan_sdist(tmp_path, port=listener.getsockname()[1])
    asked: list[str] = []

    class Index(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            asked.append(self.path)

    (tmp_path / "index").mkdir()
    handler = functools.partial(Index, directory=str(tmp_path / "index"))
    with http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler) as server:
        threading.Thread(target=server.serve_forever, daemon=True).start()
        url = f"http://127.0.0.1:{server.server_address[1]}/"
        source = PackageSource(url, find_links=(str(wheelhouse),), sdists=True)
        built = environments.environment(["trojan==1.0"], tmp_path / "envs", source, "bot")
        server.shutdown()
    assert "/trojan/" in asked and built.name.startswith("from-source-") and (built / "site" / "trojan.py").is_file()
    with pytest.raises(BlockingIOError):  # nobody called
        listener.accept()


def test_on_a_ray_cluster_each_episode_plays_in_its_environments(tmp_path):
    """``--backend ray`` with a Ray started for the run: the driver builds each environment (its check),
    sends the node its locked pins, not its files, and the node builds the same set into a folder of its
    own, by the same hash, where each agent imports its own version. The results folder is given
    relative to where the command runs."""
    from policybox.league.evaluate.journal import RESULTS, read_records
    from policybox.league.play.ray_backend import NODE_BASE

    for version in (OLD, NEW):
        submission(tmp_path / version, version, f"more-itertools=={version}")
    sdists = trojan_sdist(tmp_path)  # and one built from source: on the node too, in a cell there
    (tmp_path / "built").mkdir()
    (tmp_path / "built" / "bot.py").write_text((POLICIES / "needs_built_package.py").read_text())
    (tmp_path / "built" / "policy_spec.json").write_text(json.dumps({"class_path": "bot.py:NeedsBuiltPackage"}))
    (tmp_path / "built" / "requirements.txt").write_text("trojan==1.0\n")
    run = policybox(
        "evaluate", "-p", OLD, "-p", NEW, "-p", "built", "--episodes", "2", "--agents", "3", "--steps", "10",
        "--backend", "ray", "--index-url", INDEX, "--find-links", str(sdists), "--sdists", "--out", "results",
        cwd=tmp_path,
    )  # fmt: skip
    assert run.returncode == 0, run.stdout + run.stderr
    summary = json.loads((tmp_path / "results" / "summary.json").read_text())
    assert [list(entry["statuses"]) for entry in summary["policies"]] == [["ok"]] * 3, summary["policies"]
    records, _ = read_records(tmp_path / "results" / RESULTS)
    played = {agent.spec.requirements[0] for record in records.values() for agent in record.agents}
    assert played == {f"more-itertools=={OLD}", f"more-itertools=={NEW}", "trojan==1.0"}  # pins, not files
    built = [p.name for p in (tmp_path / "results" / "environments").iterdir() if p.name != environments.REQUESTS]
    for name in built:
        if not name.startswith("from-source-"):  # named by its lock: the node's has the same name
            assert (NODE_BASE / "environments" / name / "site" / "more_itertools").is_dir()
    assert len(built) == 3 and any((p / "site" / "trojan.py").is_file() for p in (NODE_BASE / "environments").iterdir())


def test_a_full_disk_is_the_machines_fault_not_the_policys_and_leaves_nothing_half_built(disk, tmp_path):
    """The environments' folder on a tmpfs too small for the package: StorageFull (exit 1 from the CLI,
    naming what ran out), never a refusal of the policy; with room, the same command builds and plays."""
    point = disk("size=64k")
    folder = submission(tmp_path / "bot", OLD, f"more-itertools=={OLD}")
    args = ["run", "-p", str(folder), "-n", "1", "--steps", "5", "--index-url", INDEX]
    full = policybox(*args, "--environments", str(point / "envs"))
    assert full.returncode == 1 and "no space left on the filesystem" in full.stderr, full.stderr
    assert "cannot be" not in full.stderr
    assert [path.name for path in (point / "envs").iterdir()] == []  # nothing half-built
    remount(point, "size=64m")
    roomy = policybox(*args, "--environments", str(point / "envs"))
    assert roomy.returncode == 0, roomy.stdout + roomy.stderr


def test_a_build_over_its_time_cap_is_refused_and_leaves_nothing(tmp_path, monkeypatch):
    """(Over its disk and memory caps: tests/test_environment_bombs.py.)"""
    monkeypatch.setattr(environments, "BUILD_TIMEOUT_S", 0.001)
    with pytest.raises(EnvironmentRefused, match="policy bot: its build took longer than 0.001 s, the cap") as refused:
        environments.environment([f"more-itertools=={NEW}"], tmp_path / "envs", LOCAL, "bot")
    assert refused.value.public == "its build took longer than 0.001 s, the cap"
    assert list((tmp_path / "envs").iterdir()) == []
