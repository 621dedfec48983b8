"""Every shell and Python block of the README and of docs/ works as written: each is run by a test
here, or, where it needs a server, a cluster or minutes of play, checked (its ``policybox`` commands
parsed by the CLI itself, its ``pip install`` extras found in pyproject) with the reason given.

A block is known by its page, the heading it is under, its language and its place among that
heading's blocks of that language, so that editing the text around a block never loses it, and a
block added without a test fails ``test_every_block_is_run_or_checked``."""

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tomllib
import urllib.request
from pathlib import Path

import pytest
import yaml
from conftest import Ran, policybox
from helpers.docs import CHECKS, PLANNER, ROOT, WHEELHOUSE, Block, block, page_path, parse_blocks
from helpers.ladders import wait_until
from helpers.ports import free_port
from helpers.servers import stop

EXAMPLES = ROOT / "examples"
VENV_BIN = str(Path(sys.executable).parent)
CHECKED_LANGUAGES = ("bash", "sh", "python")


def pages() -> list[str]:
    """The README, then docs/ in the site's reading order (mkdocs.yml's nav), then any page not in it."""

    def walk(nav) -> list[str]:
        items = nav.values() if isinstance(nav, dict) else nav
        return [page for item in items for page in ([item] if isinstance(item, str) else walk(item))]

    ordered = walk(yaml.safe_load((ROOT / "mkdocs.yml").read_text())["nav"])
    rest = sorted(path.name for path in (ROOT / "docs").glob("*.md") if path.name not in ordered)
    return ["README.md", *ordered, *rest]


def all_blocks() -> dict[Block, str]:
    return {
        Block(page, *key): code
        for page in pages()
        for key, code in parse_blocks(page_path(page).read_text()).items()
        if key[1] in CHECKED_LANGUAGES
    }


def local(line: str) -> list[str]:
    """A command line of the docs as words, with the docs' ``.venv/bin`` made this venv's."""
    return [word.replace(".venv/bin", VENV_BIN) for word in shlex.split(line)]


def run_line(line: str, cwd: Path, columns: int = 200) -> Ran | subprocess.CompletedProcess:
    """A command line of the docs, run as written in ``cwd`` on a terminal ``columns`` wide: a ``policybox``
    command in this process (``conftest.policybox``: its text, exit code and files are what is judged),
    anything else (``python -c``) as a process of this venv."""
    words = local(line)
    if Path(words[0]).name == "policybox":
        return policybox(*words[1:], cwd=cwd, columns=columns)
    environment = {**os.environ, "COLUMNS": str(columns)}
    return subprocess.run(words, cwd=cwd, capture_output=True, text=True, timeout=600, env=environment)


# --- the blocks a test here runs (block → the test), and the blocks checked instead (block → why) ---

MAIN_JOB = Block("README.md", "Two commands", "bash", 0)
TEST_COMMAND = Block("README.md", "Two commands", "bash", 1)
FIVE_COMMANDS = Block("README.md", "A ladder in five commands", "bash", 0)
GREEDY = Block("policies.md", "Write your own policy in five minutes", "python", 0)
GREEDY_RUN = Block("policies.md", "Write your own policy in five minutes", "bash", 0)
NN_INSTALL = Block("neural-networks.md", "Neural-network policies", "bash", 0)
LSTM = Block("neural-networks.md", "Neural-network policies", "bash", 1)
METTAGRID_TOOLS = Block("mettagrid.md", "Inside MettaGrid's own tools", "python", 0)
FIRST_COLUMN = Block("pettingzoo.md", "PettingZoo games", "python", 0)
PETTINGZOO_RUN = Block("pettingzoo.md", "PettingZoo games", "bash", 0)
KAGGLE_INSTALL = Block("kaggle.md", "Kaggle's games", "bash", 0)
KAGGLE_AGENT = Block("kaggle.md", "A Kaggle agent in five minutes", "python", 0)
KAGGLE_RUN = Block("kaggle.md", "A Kaggle agent in five minutes", "bash", 0)
EVALUATE_CUP = Block("evaluate.md", "Evaluate a leaderboard", "bash", 0)
PYTHON_API = Block("evaluate.md", "Python API", "python", 0)
LADDER = Block("ladder.md", "A ladder from the command line", "bash", 0)
AT_HOME = Block("ladder.md", "A ladder from the command line", "bash", 1)
LADDER_API = Block("ladder.md", "From Python", "python", 0)
SERVE = Block("web.md", "The web page", "bash", 0)
VERSUS = Block("versus.md", "Is B better than A? `policybox versus`", "bash", 0)
VERSUS_API = Block("versus.md", "From Python", "python", 0)
LADDER_TEST = Block("versus.md", "Inside a ladder: `ladder test`", "bash", 0)
RAY_START = Block("scale.md", "Running on a real cluster", "bash", 0)
RAY_EVALUATE = Block("scale.md", "Running on a real cluster", "bash", 1)
POSTGRES_INIT = Block("scale.md", "A ladder on a cluster, with PostgreSQL", "bash", 0)
RAY_LADDER = Block("scale.md", "A ladder on a cluster, with PostgreSQL", "bash", 1)

RUN = {
    MAIN_JOB: "test_the_main_job_command",
    TEST_COMMAND: "test_test_machine.py::test_ci_runs_exactly_the_readmes_test_command",
    FIVE_COMMANDS: "test_a_ladder_in_five_commands",
    GREEDY: "test_write_your_own_policy_example",
    GREEDY_RUN: "test_write_your_own_policy_example",
    LSTM: "test_neural_network_example",
    METTAGRID_TOOLS: "test_inside_mettagrids_own_tools_example",
    FIRST_COLUMN: "test_pettingzoo_example",
    PETTINGZOO_RUN: "test_pettingzoo_example",
    KAGGLE_AGENT: "test_kaggle_example",
    KAGGLE_RUN: "test_kaggle_example",
    PLANNER: "test_environments.py::test_the_docs_offline_competition_plays_from_a_wheelhouse_alone",
    WHEELHOUSE: "test_environments.py::test_the_docs_offline_competition_plays_from_a_wheelhouse_alone",
    PYTHON_API: "test_python_api_example",
    LADDER: "test_the_ladder_example",
    AT_HOME: "test_the_ladder_example",
    LADDER_API: "test_the_ladder_python_api_example",
    CHECKS: "test_types.py::test_the_checks_pass",
    VERSUS_API: "test_the_versus_python_example",
}
CHECKED = {
    VERSUS: "test_versus.py::test_a_better_bot_is_found_better_in_a_mettagrid_arena runs this command, with --steps 30",
    LADDER_TEST: "test_ladder_test.py::test_a_better_version_is_found_better_than_its_base_and_nothing_is_rated "
    "plays this ladder (submitted and qualified from Python) and runs ladder test on it",
    NN_INSTALL: "an install into the venv: the README's test command installs the same extra and pin",
    KAGGLE_INSTALL: "an install into the venv: the README's test command installs the same extra and pin",
    EVALUATE_CUP: "60 episodes of 1,000 steps take minutes; the main job and the Python API run evaluate",
    SERVE: "ladder serve runs until Ctrl-C; test_a_ladder_in_five_commands runs token and serve",
    RAY_START: "starts Ray on a cluster's nodes, as root",
    RAY_EVALUATE: "needs a Ray cluster at HEAD_IP (tests/test_ray.py plays one on a local cluster)",
    POSTGRES_INIT: "needs a PostgreSQL server at DBHOST",
    RAY_LADDER: "needs a Ray cluster and the ladder's PostgreSQL server",
}


def test_every_block_is_run_or_checked():
    found = set(all_blocks())
    assert not set(RUN) & set(CHECKED)
    assert found - set(RUN) - set(CHECKED) == set(), "a block that no test runs or checks: add it to RUN or CHECKED"
    assert (set(RUN) | set(CHECKED)) - found == set(), "a block listed here that the docs no longer have"
    for test in RUN.values():
        file, _, name = test.rpartition("::")
        assert f"\ndef {name}(" in (Path(__file__).parent / (file or Path(__file__).name)).read_text(), test


def policybox_commands(code: str) -> list[list[str]]:
    """The ``policybox`` commands of a shell block, as their arguments (after ``policybox``)."""
    commands = []
    for line in code.replace("\\\n", " ").splitlines():
        for part in line.split("&&"):
            words = shlex.split(part, comments=True)
            if words and words[0].rsplit("/", 1)[-1] == "policybox":
                commands.append(words[1:])
    return commands


def parse_with_the_cli(arguments: list[str]) -> str:
    """The command's name, once the CLI has parsed every option and argument of it (running nothing)."""
    import typer

    from policybox.cli.app import app

    command = typer.main.get_command(app)
    context = command.make_context("policybox", list(arguments))
    while hasattr(command, "resolve_command"):  # a group: its subcommand parses the rest
        name, command, rest = command.resolve_command(context, context._protected_args + context.args)
        context = command.make_context(name, rest, parent=context)
    return context.command_path


@pytest.mark.parametrize("checked", sorted(CHECKED), ids=lambda checked: f"{checked.page}:{checked.heading}")
def test_checked_blocks_parse(checked):
    """A block that is not run: each of its ``policybox`` commands parses, and each extra it installs exists."""
    code = block(*checked)
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    for arguments in policybox_commands(code):
        assert parse_with_the_cli(arguments).startswith("policybox ")
    for installed in re.findall(r"""pip install[^&]*?["']?(?:\.|policybox)\[([\w,]+)\]""", code):
        assert set(installed.split(",")) <= set(extras), installed
    pinned = {pin for pins in re.findall(r"--no-deps ([^&]+)", block(*TEST_COMMAND)) for pin in pins.split()}
    for pins in re.findall(r"--no-deps ([^&]+)", code):
        assert set(pins.split()) <= pinned, pins  # installed as the README's test command installs it


def run_example(tmp_path: Path, bot: Block, bot_file: str, commands: Block) -> list[str]:
    """Write the docs' bot under ``bots/``, run the commands of ``commands`` one by one in ``tmp_path``
    with this venv's tools; what each printed."""
    (tmp_path / "bots").mkdir()
    (tmp_path / "bots" / bot_file).write_text(block(*bot))
    printed = []
    for line in block(*commands).strip().splitlines():
        run = run_line(line, tmp_path)
        assert run.returncode == 0, run.stdout + run.stderr
        printed.append(run.stdout)
    return printed


def test_write_your_own_policy_example(tmp_path):
    run_example(tmp_path, GREEDY, "greedy.py", GREEDY_RUN)
    result = json.loads((tmp_path / "result.json").read_text())
    greedy = [agent for agent in result["agents"] if agent["agent_id"] % 2 == 1]
    assert [agent["policy"] for agent in greedy] == ["Greedy:greedy.npy"] * 2
    assert all(agent["status"] == "ok" for agent in result["agents"])
    # The checkpoint prefers move_north: the greedy agents tried a move on every step.
    assert all(
        agent["stats"]["action.move.success"] + agent["stats"].get("action.move.failed", 0) == 1000 for agent in greedy
    )


def test_python_api_example(tmp_path):
    run = subprocess.run(
        [sys.executable, "-c", block(*PYTHON_API)], cwd=tmp_path, capture_output=True, text=True, timeout=300
    )
    assert run.returncode == 0, run.stdout + run.stderr
    board, episode, spread, refused = run.stdout.splitlines()[:2], *run.stdout.splitlines()[2:]
    assert {line.split()[0] for line in board} == {"random", "noop"}
    assert (tmp_path / "board-api" / "summary.json").exists()
    assert episode.startswith("[0.0, 0.0, 0.0, 0.0] policybox-logs/") and (tmp_path / "policybox-logs").is_dir()
    assert spread.startswith("[('agent_0', -") and "'agent_2'" in spread
    assert refused.startswith("refused: unknown policy shorthand 'no_such_policy'")


def test_the_versus_python_example(tmp_path):
    """The versus page's Python example as written, from a folder that holds the repository's examples:
    the walker is found better than noop."""
    (tmp_path / "examples").symlink_to(ROOT / "examples")
    run = subprocess.run(
        [sys.executable, "-c", block(*VERSUS_API)], cwd=tmp_path, capture_output=True, text=True, timeout=300
    )
    assert run.returncode == 0, run.stdout + run.stderr
    assert run.stdout.startswith("B better "), run.stdout
    assert json.loads((tmp_path / "ab" / "versus.json").read_text())["verdict"] == "B better"


def test_pettingzoo_example(tmp_path):
    """The PettingZoo page's commands as written, with its connect-four bot."""
    spread, connect_four, _ = run_example(tmp_path, FIRST_COLUMN, "first_column.py", PETTINGZOO_RUN)
    assert "agent_2" in spread and "player_1" in connect_four and "FirstColumn" in connect_four
    summary = json.loads((tmp_path / "c4-board" / "summary.json").read_text())
    assert summary["episodes_done"] == 4 and {p["policy"] for p in summary["policies"]} == {"random", "FirstColumn"}


def test_kaggle_example(tmp_path):
    """The Kaggle page's agent file and commands as written."""
    one, _ = run_example(tmp_path, KAGGLE_AGENT, "main.py", KAGGLE_RUN)
    assert "kaggle:negamax" in one and "bots" in one  # the agent file is named by its folder
    summary = json.loads((tmp_path / "connectx-board" / "summary.json").read_text())
    assert summary["episodes_done"] == 6 and summary["ranking"][0] == "kaggle:negamax"


def test_the_main_job_command(tmp_path):
    """The README's first command, minus the set-up (the test suite runs inside that venv), in a folder
    holding the repository's examples/, at 80 columns: it prints the leaderboard the README shows
    (the latencies aside), on rows that differ and fit, and writes the report the README describes."""
    shutil.copytree(EXAMPLES, tmp_path / "examples")
    command = block(*MAIN_JOB).strip().split(" && ")[-1]
    run = run_line(command, tmp_path, columns=80)
    assert run.returncode == 0, run.stdout + run.stderr
    summary = json.loads((tmp_path / "board" / "summary.json").read_text())
    assert summary["episodes_done"] == 6 and summary["ranking"] == ["Wanderer", "random", "noop"]
    wanderer, random, noop = summary["policies"]
    assert wanderer["reward"]["mean"] > random["reward"]["mean"] > noop["reward"]["mean"] == 0
    assert wanderer["versus_next"] == random["versus_next"] == "overlaps"  # rating intervals, mu ± 2 sigma: 6 episodes
    printed = run.stdout.splitlines()
    assert max(len(line) for line in printed) <= 80
    shown = block("README.md", "Two commands", "text").strip().splitlines()
    assert [_but_latency(line) for line in printed[: len(shown)]] == [_but_latency(line) for line in shown]
    assert "report: board/report.html" in printed
    page = (tmp_path / "board" / "report.html").read_text()
    assert page.count("<svg") >= 4 and "<script" not in page


def _but_latency(line: str) -> str:
    """A standings line without its last column, the p99 step time, which is the machine's (and without
    the padding a header line ends with, which the README's text does not keep)."""
    line = line.rstrip()
    return re.sub(r" +[0-9.]+$", "", line) if line[:1].isdigit() else line


def test_neural_network_example(tmp_path):
    """The LSTM example: a checkpoint from MettaGrid's own save_policy_data, played in cells."""
    make, run = block(*LSTM).strip().split("\n.venv/bin/policybox")
    made = run_line(make, tmp_path)
    assert made.returncode == 0, made.stderr
    played = run_line(f".venv/bin/policybox{run} --out result.json", tmp_path)
    assert played.returncode == 0, played.stdout + played.stderr
    result = json.loads((tmp_path / "result.json").read_text())
    assert [agent["status"] for agent in result["agents"]] == ["ok"] * 4
    assert len({agent["action_digest"] for agent in result["agents"]}) == 4


def test_inside_mettagrids_own_tools_example(tmp_path):
    run = subprocess.run(
        [sys.executable, "-c", block(*METTAGRID_TOOLS)], cwd=tmp_path, capture_output=True, text=True, timeout=300
    )
    assert run.returncode == 0, run.stdout + run.stderr
    assert run.stdout.split() == ["200", "True", "200", "True"]


def test_the_docs_can_be_followed_from_top_to_bottom():
    """Read in order (the README, then the site's pages), every command can run: each evaluate writes a
    folder of its own (a second tournament into the same folder would be refused), and every bot file a
    command names is one the docs have shown before it."""
    outs: list[str] = []
    shown_bots: set[str] = set()
    for page in pages():
        text = page_path(page).read_text()
        for match in re.finditer(r"`(bots/[\w.]+\.py)`:|^ *```bash\n(.*?)^ *```", text, re.S | re.M):
            if match.group(1):
                shown_bots.add(match.group(1))
                continue
            for line in match.group(2).replace("\\\n", " ").splitlines():
                try:
                    words = shlex.split(line)
                except ValueError:  # a line of a multi-line `python -c "..."`
                    continue
                if "evaluate" in words and "--out" in words:
                    outs.append(words[words.index("--out") + 1])
                for bot in re.findall(r"\./(bots/[\w.]+\.py)", line):
                    assert bot in shown_bots, f"{page}: {bot} is used before the docs show it: {line}"
    assert len(outs) == len(set(outs)), f"evaluate commands share a results folder: {outs}"


def test_the_ladder_example(tmp_path, monkeypatch):
    """The ladder page's commands as written, in a folder holding the repository's examples/, and the
    broken submission its text says is refused, with the message it quotes; then the commands its rules
    page gives a team to play at home are the page's (``test_participant.py`` runs them)."""
    shutil.copytree(EXAMPLES, tmp_path / "examples")
    printed = []
    for line in block(*LADDER).strip().splitlines():
        run = run_line(line, tmp_path)
        assert run.returncode == 0, run.stdout + run.stderr
        printed.append(run.stdout)
    table = printed[-1].splitlines()
    rows = [line.split() for line in table if line.split()[:1] in (["1"], ["2"], ["3"], ["—"])]
    assert [row[1] for row in rows][0::2] == ["wanderer", "noop"] and rows[-1][0] == "3"
    page = page_path(LADDER.page).read_text()
    broken = "ladder submit league broken ./examples/broken.py:Broken"
    assert f"`{broken}`" in page
    refused = run_line(f".venv/bin/policybox {broken}", tmp_path)
    said = " ".join(page[page.index(f"`{broken}`") :].split("`")[3].split())
    assert refused.returncode == 2 and said in " ".join(refused.stderr.split()), refused.stdout + refused.stderr
    from importlib.metadata import version

    from policybox.ladder import Ladder
    from policybox.league.views.rules import rules

    monkeypatch.chdir(tmp_path)  # the ladder's game is examples/moves.yaml, from here
    with Ladder.open(tmp_path / "league", read_only=True) as ladder:
        home = rules(ladder).at_home
    written = block(*AT_HOME)
    for package in ("policybox", "mettagrid"):  # the page's versions are an example's
        written = re.sub(rf"{package}==\S+", f"{package}=={version(package)}", written)
    assert written.splitlines() == [home.install, home.unpack, home.play]


def test_the_ladder_python_api_example(tmp_path):
    shutil.copytree(EXAMPLES, tmp_path / "examples")
    run = subprocess.run(
        [sys.executable, "-c", block(*LADDER_API)], cwd=tmp_path, capture_output=True, text=True, timeout=600
    )
    assert run.returncode == 0, run.stdout + run.stderr
    lines = run.stdout.splitlines()
    assert lines[0] == "4" and lines[1].startswith("1 wanderer 1 active") and lines[2].startswith("2 noop 1 active")
    assert lines[3] == "done 2 ['wanderer', 'noop']"  # one cycle of two names: each seat map once


def test_a_ladder_in_five_commands(tmp_path):
    """The organiser's five commands as written: init, a token, run and serve beside each other (serve
    on a free port instead of 8000), and the team's curl line, which downloads the starter from
    /rules/starter.zip and uploads it with the token; the starter qualifies."""

    shutil.copytree(EXAMPLES, tmp_path / "examples")
    init, token, run, serve, team = block(*FIVE_COMMANDS).strip().splitlines()
    port = str(free_port())
    for line in (init, token):
        made = run_line(line, tmp_path)
        assert made.returncode == 0, made.stdout + made.stderr
    secret = made.stdout.strip()
    running = [
        subprocess.Popen(words, cwd=tmp_path, stdout=subprocess.DEVNULL, start_new_session=True)
        for words in (local(run), [*local(serve), "--port", port])
    ]
    try:
        url = f"http://127.0.0.1:{port}"

        def state() -> str | None:
            try:
                with urllib.request.urlopen(url + "/api/standings", timeout=30) as answer:
                    rows = json.load(answer)["rows"]
            except OSError:
                return None
            return next((row["state"] for row in rows if row["name"] == "alphabot"), "none")

        wait_until(lambda: state() is not None, 120, "ladder serve to answer")
        sent = subprocess.run(
            ["bash", "-c", team.replace(":8000", f":{port}")],
            cwd=tmp_path,
            env={**os.environ, "TOKEN": secret},
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert sent.returncode == 0 and json.loads(sent.stdout)["name"] == "alphabot", sent.stdout + sent.stderr
        wait_until(lambda: state() == "active", 600, "the starter to qualify")
    finally:
        for process in running:
            stop(process)
