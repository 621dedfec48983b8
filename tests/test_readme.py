"""The README's "write your own policy" example works exactly as written."""

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import urllib.request
from pathlib import Path

README = (Path(__file__).parents[1] / "README.md").read_text()
WIDE = {**os.environ, "COLUMNS": "200"}
NARROW = {**os.environ, "COLUMNS": "80"}
EXAMPLES = Path(__file__).parents[1] / "examples"


def block_after(marker: str, language: str) -> str:
    start = README.index(marker)
    return re.search(rf"```{language}\n(.*?)```", README[start:], re.S).group(1)


def run_example(tmp_path: Path, bot_marker: str, bot_file: str, commands_marker: str) -> list[str]:
    """Write the README's bot under ``bots/``, run the commands after ``commands_marker`` one by one
    in ``tmp_path`` with this venv's tools; what each printed."""
    (tmp_path / "bots").mkdir()
    (tmp_path / "bots" / bot_file).write_text(block_after(bot_marker, "python"))
    venv_bin = str(Path(sys.executable).parent)
    printed = []
    for line in block_after(commands_marker, "bash").strip().splitlines():
        command = [word.replace(".venv/bin", venv_bin) for word in shlex.split(line)]
        run = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=300)
        assert run.returncode == 0, run.stdout + run.stderr
        printed.append(run.stdout)
    return printed


def test_write_your_own_policy_example(tmp_path):
    run_example(tmp_path, "`bots/greedy.py`:", "greedy.py", "Give it a checkpoint")
    result = json.loads((tmp_path / "result.json").read_text())
    greedy = [agent for agent in result["agents"] if agent["agent_id"] % 2 == 1]
    assert [agent["policy"] for agent in greedy] == ["Greedy:greedy.npy"] * 2
    assert all(agent["status"] == "ok" for agent in result["agents"])
    # The checkpoint prefers move_north: the greedy agents tried a move on every step.
    assert all(
        agent["stats"]["action.move.success"] + agent["stats"].get("action.move.failed", 0) == 1000 for agent in greedy
    )


def test_python_api_example(tmp_path):
    code = block_after("### Python API", "python")
    run = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr
    board, episode, spread, refused = run.stdout.splitlines()[:2], *run.stdout.splitlines()[2:]
    assert {line.split()[0] for line in board} == {"random", "noop"}
    assert (tmp_path / "board-api" / "summary.json").exists()
    assert episode.startswith("[0.0, 0.0, 0.0, 0.0] policybox-logs/") and (tmp_path / "policybox-logs").is_dir()
    assert spread.startswith("[('agent_0', -") and "'agent_2'" in spread
    assert refused.startswith("refused: unknown policy shorthand 'no_such_policy'")


def test_pettingzoo_example(tmp_path):
    """The README's PettingZoo commands as written, with its connect-four bot."""
    spread, connect_four, _ = run_example(tmp_path, "`bots/first_column.py`:", "first_column.py", "## PettingZoo games")
    assert "agent_2" in spread and "player_1" in connect_four and "FirstColumn" in connect_four
    summary = json.loads((tmp_path / "c4-board" / "summary.json").read_text())
    assert summary["episodes_done"] == 4 and {p["policy"] for p in summary["policies"]} == {"random", "FirstColumn"}


def test_the_main_job_command(tmp_path):
    """The README's first command, minus the set-up (the test suite runs inside that venv), in a folder
    holding the repository's examples/, at 80 columns: it prints the leaderboard the README shows
    (the latencies aside), on rows that differ and fit, and writes the report the README describes."""
    shutil.copytree(EXAMPLES, tmp_path / "examples")
    command = block_after("Set up and run the main job", "bash").strip().split(" && ")[-1]
    words = [word.replace(".venv/bin", str(Path(sys.executable).parent)) for word in shlex.split(command)]
    run = subprocess.run(words, cwd=tmp_path, capture_output=True, text=True, timeout=600, env=NARROW)
    assert run.returncode == 0, run.stdout + run.stderr
    summary = json.loads((tmp_path / "board" / "summary.json").read_text())
    assert summary["episodes_done"] == 6 and summary["ranking"] == ["Wanderer", "random", "noop"]
    wanderer, random, noop = summary["policies"]
    assert wanderer["reward"]["mean"] > random["reward"]["mean"] > noop["reward"]["mean"] == 0
    assert wanderer["versus_next"] == random["versus_next"] == "overlaps"  # rating intervals, mu ± 2 sigma: 6 episodes
    printed = run.stdout.splitlines()
    assert max(len(line) for line in printed) <= 80
    shown = block_after("It prints the leaderboard", "text").strip().splitlines()
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
    """The README's LSTM example: a checkpoint from MettaGrid's own save_policy_data, played in cells."""
    venv_bin = str(Path(sys.executable).parent)
    block = block_after("A checkpoint made by the policy's own", "bash")
    make, run = block.strip().split("\n.venv/bin/policybox")
    made = subprocess.run(
        shlex.split(make.replace(".venv/bin", venv_bin)), cwd=tmp_path, capture_output=True, text=True
    )
    assert made.returncode == 0, made.stderr
    command = [*shlex.split(f"{venv_bin}/policybox{run}"), "--out", "result.json"]
    played = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert played.returncode == 0, played.stdout + played.stderr
    result = json.loads((tmp_path / "result.json").read_text())
    assert [agent["status"] for agent in result["agents"]] == ["ok"] * 4
    assert len({agent["action_digest"] for agent in result["agents"]}) == 4


def test_inside_mettagrids_own_tools_example(tmp_path):
    code = block_after("## Inside MettaGrid's own tools", "python")
    run = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr
    assert run.stdout.split() == ["200", "True", "200", "True"]


def test_the_readme_can_be_followed_from_top_to_bottom():
    """Read in order, every command can run: each evaluate writes a folder of its own (a second
    tournament into the same folder would be refused), and every bot file a command names is one the
    README has shown before it."""
    outs: list[str] = []
    shown_bots: set[str] = set()
    for match in re.finditer(r"`(bots/[\w.]+\.py)`:|```bash\n(.*?)```", README, re.S):
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
                assert bot in shown_bots, f"{bot} is used before the README shows it: {line}"
    assert len(outs) == len(set(outs)), f"evaluate commands share a results folder: {outs}"


def test_the_ladder_example(tmp_path):
    """The README's ladder commands as written, in a folder holding the repository's examples/."""
    shutil.copytree(EXAMPLES, tmp_path / "examples")
    venv_bin = str(Path(sys.executable).parent)
    printed = []
    for line in block_after("## A ladder that runs", "bash").strip().splitlines():
        command = [word.replace(".venv/bin", venv_bin) for word in shlex.split(line)]
        run = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=600, env=WIDE)
        assert run.returncode == 0, run.stdout + run.stderr
        printed.append(run.stdout)
    table = printed[-1].splitlines()
    rows = [line.split() for line in table if line.split()[:1] in (["1"], ["2"], ["3"], ["—"])]
    assert [row[1] for row in rows][0::2] == ["wanderer", "noop"] and rows[-1][0] == "3"
    broken = "ladder submit league broken ./examples/broken.py:Broken"
    assert f"`{broken}`" in README
    command = [word.replace(".venv/bin", venv_bin) for word in shlex.split(f".venv/bin/policybox {broken}")]
    refused = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=600, env=WIDE)
    said = " ".join(README[README.index(f"`{broken}`") :].split("`")[3].split())
    assert refused.returncode == 2 and said in " ".join(refused.stderr.split()), refused.stdout + refused.stderr


def test_the_ladder_python_api_example(tmp_path):
    shutil.copytree(EXAMPLES, tmp_path / "examples")
    code = block_after("On a cluster**: `ladder run", "python")
    run = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stdout + run.stderr
    lines = run.stdout.splitlines()
    assert lines[0] == "4" and lines[1].startswith("1 wanderer 1 active") and lines[2].startswith("2 noop 1 active")


def test_a_ladder_in_five_commands(tmp_path):
    """The organiser's five commands as written: init, a token, run and serve beside each other (serve
    on a free port instead of 8000), and the team's curl line, which downloads the starter from
    /rules/starter.zip and uploads it with the token; the starter qualifies."""
    from test_ladder import wait_until
    from test_web_browser import free_port, stop

    shutil.copytree(EXAMPLES, tmp_path / "examples")
    venv_bin = str(Path(sys.executable).parent)
    init, token, run, serve, team = block_after("## A ladder in five commands", "bash").strip().splitlines()
    port = str(free_port())
    lines = [line.replace(".venv/bin", venv_bin) for line in (init, token, run, serve)]
    for line in lines[:2]:
        made = subprocess.run(shlex.split(line), cwd=tmp_path, capture_output=True, text=True, timeout=300)
        assert made.returncode == 0, made.stdout + made.stderr
    secret = made.stdout.strip()
    running = [
        subprocess.Popen(shlex.split(line), cwd=tmp_path, stdout=subprocess.DEVNULL, start_new_session=True)
        for line in (lines[2], f"{lines[3]} --port {port}")
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
