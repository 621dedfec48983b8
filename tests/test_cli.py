"""The policybox command as a user runs it: the table, the JSON, exit codes and clear errors.

Run in this process (``conftest.policybox``): the subject is what the command prints and writes. A
virtualenv reached through a symlink is the one test here that starts ``python`` itself."""

import json
import os
import shutil
import subprocess
import sys

import pytest
from conftest import POLICIES, Ran, policy, policybox

from policybox.results import EpisodeResult


def policybox_run(folder, *args: str) -> tuple[Ran, EpisodeResult | None]:
    """``policybox run ARGS`` writing its result and logs into ``folder``; the result if it wrote one."""
    out = folder / "result.json"
    run = policybox("run", *args, "--out", str(out), "--log-dir", str(folder / "logs"))
    return run, EpisodeResult.model_validate_json(out.read_text()) if out.exists() else None


def test_run_prints_every_agent_and_writes_the_result(tmp_path):
    stateful = policy("stateful.py:Stateful")
    run, result = policybox_run(
        tmp_path, "--agents", "4", "-p", "random", "-p", stateful, "--steps", "60", "--seed", "7"
    )
    assert run.returncode == 0, run.stderr
    rows = [line for line in run.stdout.splitlines() if line.split()[:1] in (["0"], ["1"], ["2"], ["3"])]
    assert len(rows) == 4
    assert "random" in rows[0] and "Stateful" in rows[1] and all(" ok " in row for row in rows)
    assert (result.seed, result.steps, result.mode, len(result.agents)) == (7, 60, "process", 4)
    assert result.game_stats and all(agent.stats for agent in result.agents)
    assert result.agents[1].log_path == str(tmp_path / "logs" / "agent-1.log")
    assert result.agents[1].latency.count == 60 and result.agents[1].latency.p99_ms > 0


def test_spec_file_and_inline_mode(tmp_path):
    """A spec file is identified by its path as given; the name it declares is only a label."""
    (tmp_path / "bots").mkdir()
    shutil.copy(POLICIES / "stateful.py", tmp_path / "bots" / "stateful.py")
    (tmp_path / "bots" / "memo.yaml").write_text(
        "class_path: stateful.py:Stateful\ninit_kwargs:\n  stride: 3\nname: memo\n"
    )
    out = tmp_path / "r.json"
    args = ("run", "-n", "2", "-p", "bots/memo.yaml", "--steps", "20", "--mode", "inline", "--out", str(out))
    run = policybox(*args, cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    result = json.loads(out.read_text())
    assert [a["policy"] for a in result["agents"]] == ["bots/memo.yaml", "bots/memo.yaml"]
    assert result["agents"][0]["spec"]["label"] == "memo"
    assert result["agents"][0]["spec"]["init_kwargs"] == {"stride": 3}


def test_failed_agent_shows_its_cause_and_exits_1(tmp_path):
    run = policybox(
        "run",
        "-n",
        "2",
        "-p",
        policy("faults.py:RaiseInStep"),
        "-p",
        "noop",
        "--steps",
        "20",
        "--log-dir",
        str(tmp_path),
    )
    assert run.returncode == 1
    assert "agent 0 (RaiseInStep) error: RuntimeError at step 11: policy gave up at step 10" in run.stdout
    assert 'faults.py", line' in run.stdout  # the traceback is shown


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["-p", "./no_such_bot.py:Bot"], "policy file './no_such_bot.py' does not exist"),
        (["-p", "randm"], "unknown policy shorthand 'randm'; MettaGrid knows: "),
        (["-p", "random", "--env", "nowhere.yaml"], "--env 'nowhere.yaml': the game file nowhere.yaml does not exist"),
        (["-p", "random", "--env", "nowhere"], "is neither a known game"),
        (
            ["-p", "random", "--env", "pettingzoo:mpe2.simple_spread_v3:parallel_env", "--env-kwargs", '{"N": '],
            "--env-kwargs must be a JSON object or @FILE: Expecting value",
        ),
        (["-p", "random,data=a.pt,data=b.pt"], "data= is given twice; give it once"),
        (
            ["-p", "random", "--out", "/no/such/folder/r.json"],
            "Invalid value for --out: folder /no/such/folder does not exist",
        ),
        (["-p", "random", "--agents", "0"], "Invalid value for '--agents'"),
        (["-p", "random", "--mode", "thread"], "Invalid value for '--mode'"),
        (["-p", "random", "--log-dir", "/etc/hostname"], "Invalid value for --log-dir: /etc/hostname is a file"),
        (["-p", "random", "--log-dir", "/etc/hostname/logs"], "Invalid value for --log-dir: /etc/hostname is a file"),
        (["-p", "random", "-n", "700"], "MettaGrid cannot build arena.combat for 700 agents"),
        (["-p", "random", "--preload", "no_such_module_here"], "preload failed: ModuleNotFoundError"),
    ],
)
def test_bad_input_is_one_clear_error(args, message, tmp_path):
    run = policybox("run", "--steps", "5", *args, cwd=tmp_path)
    assert run.returncode == 2
    assert message in " ".join(run.stderr.split())
    assert "Traceback" not in run.stderr and "pydantic" not in run.stderr
    assert "╭" not in run.stderr and run.stderr.splitlines()[-1].startswith("Error: ")  # one style, plain


@pytest.mark.parametrize(("name", "text"), [("game.json", '{"game": {'), ("game.yaml", "game: [1,\n")])
def test_a_game_file_that_does_not_parse_is_one_clear_error(name, text, tmp_path):
    (tmp_path / name).write_text(text)  # JSON read by json, YAML by libyaml: each error is the same message
    run = policybox("run", "--steps", "5", "-p", "random", "--env", name, cwd=tmp_path)
    assert run.returncode == 2 and f"{name} is not a valid MettaGridConfig" in " ".join(run.stderr.split())
    assert "Traceback" not in run.stderr


def test_evaluate_blames_out_for_a_file_where_its_folder_should_be(tmp_path):
    (tmp_path / "README.md").write_text("not a folder")
    run = policybox("evaluate", "-p", "random", "--out", "README.md", cwd=tmp_path)
    assert run.returncode == 2 and "Invalid value for --out: " in run.stderr and "--log-dir" not in run.stderr


def test_help_and_errors_read_well_at_80_columns():
    run = policybox("run", "--help", columns=80)
    assert run.returncode == 0
    assert max(len(line) for line in run.stdout.splitlines()) <= 80
    assert "<int" not in run.stdout and "<float" not in run.stdout and "list[str]" not in run.stdout
    assert "-p, --policy SPEC" in run.stdout and "--act-timeout-ms MS" in run.stdout and "--steps N" in run.stdout
    assert "env.NAME=VALUE" in run.stdout and "class=CLASS" in run.stdout and "zip" in run.stdout
    long_path = "/no/such/" + "very-long-folder-name/" * 6 + "r.json"
    error = policybox("run", "-p", "random", "--out", long_path, columns=80)
    assert long_path.rsplit("/", 1)[0] in error.stderr  # the path whole, on one line


def test_version():
    from policybox import __version__

    run = policybox("--version")
    assert run.returncode == 0 and run.stdout.strip() == f"policybox {__version__}"


def test_existing_result_survives_bad_input(tmp_path):
    out = tmp_path / "r.json"
    out.write_text("previous result")
    run = policybox("run", "-p", "randm", "--out", str(out))
    assert run.returncode == 2
    assert out.read_text() == "previous result"


def test_declared_minimum_step_time_is_reported_and_warned_about(tmp_path):
    slow = policy("stateful.py:SlowThinker")
    run, result = policybox_run(
        tmp_path, "-n", "2", "-p", slow, "-p", "random", "--steps", "5", "--act-timeout-ms", "300"
    )
    assert run.returncode == 0, run.stderr
    assert [a.minimum_action_timeout_ms for a in result.agents] == [2000, 0]
    assert "agent 0 (SlowThinker) declares it needs 2000 ms per step; --act-timeout-ms is 300" in run.stdout


def test_doctor_lists_every_layer():
    run = policybox("doctor")
    from policybox.host.diagnosis import diagnose
    from policybox.sandbox import Layer

    assert run.returncode == (0 if all(check.works for check in diagnose()) else 1), run.stderr
    for layer in Layer:
        assert f"│ {layer.value} " in run.stdout


def test_strict_sandbox_runs_only_with_every_layer(tmp_path):
    from policybox.host.diagnosis import diagnose

    run, result = policybox_run(tmp_path, "-n", "2", "-p", "random", "--steps", "5", "--sandbox", "strict")
    missing = [check.layer.value for check in diagnose() if not check.works]
    if missing:
        assert run.returncode == 2 and "strict sandbox refused" in run.stderr
        assert all(layer in run.stderr for layer in missing)
        return
    assert run.returncode == 0, run.stderr
    assert result.sandbox == "strict"
    assert all(agent.sandbox["seccomp"].startswith("active") for agent in result.agents)


def test_strict_sandbox_refuses_inline_mode():
    run = policybox("run", "-p", "random", "--steps", "5", "--sandbox", "strict", "--mode", "inline")
    assert run.returncode == 2 and "a strict sandbox needs --mode process" in run.stderr


def test_sandbox_off_says_so_loudly(tmp_path):
    run, result = policybox_run(tmp_path, "-n", "1", "-p", "random", "--steps", "5", "--sandbox", "off")
    assert run.returncode == 0, run.stderr
    assert "SANDBOX OFF (--sandbox off)" in run.stdout
    assert result.sandbox == "off" and result.agents[0].sandbox == {}


def test_a_virtualenv_reached_through_a_symlink_plays_and_passes_the_doctor(tmp_path):
    """``.venv -> /elsewhere/venv``, the link inside a folder cells see masked (/tmp): the cells still
    import every policy, and the doctor's probe, which imports what real policies import, agrees."""
    if sys.prefix == sys.base_prefix:
        pytest.skip("not running from a virtualenv")
    link = tmp_path / "venv"
    link.symlink_to(sys.prefix)
    python = str(link / "bin" / "python")
    out = tmp_path / "result.json"
    args = ["-n", "2", "-p", "random", "--steps", "5", "--out", str(out), "--log-dir", str(tmp_path / "logs")]
    run = subprocess.run([python, "-m", "policybox", "run", *args], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr
    assert [agent.status for agent in EpisodeResult.model_validate_json(out.read_text()).agents] == ["ok", "ok"]
    doctor = subprocess.run([python, "-m", "policybox", "doctor"], capture_output=True, text=True, timeout=300)
    assert doctor.returncode == 0 and "cannot be imported" not in doctor.stdout, doctor.stdout


def test_another_librarys_warning_is_shown_as_python_shows_it(tmp_path):
    """The command shows a policybox warning as one line and another library's as Python does: never by
    calling itself (its module once kept the warnings hook it found, which could be its own, and a
    warning of PettingZoo's then ended ``evaluate`` in a RecursionError). A process of its own: the hook is
    set as the command starts, and its module imported after."""
    game = "pettingzoo:pettingzoo.classic.connect_four_v3:env"
    command = [sys.executable, "-m", "policybox", "evaluate", "-p", "random", "--env", game, "--episodes", "1"]
    command += ["--mode", "inline", "--out", str(tmp_path / "board")]
    environment = {**os.environ, "PYTHONWARNINGS": "always::DeprecationWarning"}
    run = subprocess.run(command, capture_output=True, text=True, timeout=300, env=environment)
    assert run.returncode == 0, run.stderr
    assert "DeprecationWarning: The old environment creation API" in run.stderr and "Traceback" not in run.stderr


def test_ladder_show_says_start_up_for_a_failure_before_the_first_step(tmp_path):
    """A version that raises in its constructor fails at start-up (its failure's step is None): ``ladder
    show`` says so in its failure's line, as ``Failure.one_line`` and the pages do, never "step None"."""
    from helpers.ladders import WANDERER, activate, api_ladder, ladder_command

    folder = tmp_path / "cup"
    with api_ladder(folder) as ladder:
        ladder.submit("walker", WANDERER)
        ladder.submit("broken", policy("faults.py:RaiseInInit"), check=False)
        for name in ("walker", "broken"):
            activate(ladder, name)  # plays without its qualification, which would reject it
        ladder.run(matches=1, workers=1)
    shown = ladder_command("show", str(folder), "broken")
    assert shown.returncode == 0, shown.stderr
    assert "error: ValueError at start-up: bad configuration for this policy" in shown.stdout
    assert "step None" not in shown.stdout and "at step" not in shown.stdout


@pytest.mark.parametrize(
    ("name", "value", "message"),
    [
        ("act_timeout_ms", "0", "Input should be greater than 0"),
        ("init_timeout_s", "0", "Input should be greater than 0"),
        ("time_bank_ms", "-1", "Input should be greater than or equal to 0"),
        ("steps", "-3", "Input should be greater than or equal to 1"),
        ("workers", "0", "Input should be greater than or equal to 1"),
        ("backend", "slurm", "'local'"),  # click's "is not one of", pydantic's "should be": naming the choices
        ("seating", "bogus", "'balanced'"),
        ("episodes", "0", "Input should be greater than or equal to 1"),
        ("rank_by", "bogus", "'reward'"),
    ],
)
def test_a_tournament_file_and_the_command_line_refuse_the_same_values(name, value, message, tmp_path):
    """The values of evaluate's options are checked by the models whose fields they are (EpisodeSettings,
    Limits, the Runner, evaluate's Evaluation), on the command line as in a tournament file: the same refusal,
    one line naming the option, exit 2, nothing made."""
    option = f"--{name.replace('_', '-')}"
    (tmp_path / "cup.yaml").write_text(f"policies: [random]\nout: board\n{name}: {value}\n")
    from_file = policybox("evaluate", str(tmp_path / "cup.yaml"))
    given = policybox("evaluate", "-p", "random", "--out", str(tmp_path / "board"), option, value)
    for run in (from_file, given):
        assert run.returncode == 2 and "Traceback" not in run.stderr, run.stderr
        [error] = [line for line in run.stderr.splitlines() if line.startswith("Error: ")]
        assert option in error and message in error, run.stderr
    assert not (tmp_path / "board").exists()


def test_an_act_timeout_below_a_millisecond_is_taken_from_a_file_as_from_the_command_line(tmp_path):
    """gt=0, not at least 1: both stop at what is missing (no policies), not at the value."""
    (tmp_path / "cup.yaml").write_text("out: board\nact_timeout_ms: 0.5\n")
    for run in (policybox("evaluate", str(tmp_path / "cup.yaml")), policybox("evaluate", "--act-timeout-ms", "0.5")):
        assert run.returncode == 2 and "give the policies" in run.stderr, run.stderr


def test_ladder_settings_refuse_what_ladder_init_refuses(tmp_path):
    from policybox.envs import ConfigError
    from policybox.league.ladder.settings import LadderSettings
    from policybox.settings import EpisodeSettings

    run = policybox("ladder", "init", str(tmp_path / "cup"), "-n", "2", "--keep-logs", "-1")
    assert run.returncode == 2 and "--keep-logs" in run.stderr and "greater than or equal to 0" in run.stderr
    with pytest.raises(ConfigError, match="--keep-logs: Input should be greater than or equal to 0"):
        LadderSettings.from_options(EpisodeSettings(), 2, {"keep_logs": -1})
    seats = policybox("ladder", "init", str(tmp_path / "cup"), "-n", "2", "--versions-per-match", "3")
    assert seats.returncode == 2 and "--versions-per-match: 3 versions cannot share a match of 2 seats" in seats.stderr
    assert not (tmp_path / "cup").exists()
