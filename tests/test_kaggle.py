"""Kaggle's games (``--env kaggle:GAME``), every agent in a cell of its own: the same episodes as
``kaggle_environments``' own runner plays in its process, its agents unchanged (agent files whose last
callable is the agent, the games' built-in agents), its statuses told to the game as Kaggle's runner
tells them, and one clear error for a game, a configuration or a seat count it does not have."""

from __future__ import annotations

import importlib.util
import inspect
import io
import json
import random
import tarfile
import zipfile
import zlib
from pathlib import Path

import numpy as np
import pytest
from conftest import POLICIES, policybox

from policybox.envs.kaggle import kaggle
from policybox.ladder import Ladder
from policybox.league.views.rules import starter_zip
from policybox.limits import Limits
from policybox.results import AgentStatus
from policybox.settings import EpisodeSettings

pytest.importorskip("kaggle_environments")
_bots = importlib.util.spec_from_file_location("kaggle_bots", POLICIES / "kaggle_bots.py")
assert _bots is not None and _bots.loader is not None
kaggle_bots = importlib.util.module_from_spec(_bots)
_bots.loader.exec_module(kaggle_bots)


def kaggle_agent(folder: Path, function) -> str:
    """An agent file, ``folder/main.py``, whose last callable is ``function`` (from tests/policies/kaggle_bots.py)."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "main.py").write_text(inspect.getsource(function))
    return str(folder / "main.py")


def kaggle_run(game: str, agents: list, configuration: dict | None = None, seed: int = 0) -> list:
    """The episode as Kaggle's own runner plays it, every agent in this process: its steps. The game's
    draws (Hungry Geese's food) come from Python's and numpy's streams, seeded as policybox seeds them."""
    random.seed(seed)
    np.random.seed(seed)
    env = kaggle().make(game, configuration=configuration or {})
    return env.run(agents)


def moves(path: Path) -> list[dict]:
    return json.loads(zlib.decompress(path.read_bytes()))["moves"]


def acted(steps: list) -> list[tuple[int, int, object]]:
    """(step, seat, action) of every seat that was asked to act, from Kaggle's steps."""
    return [
        (index, seat, steps[index + 1][seat].action)
        for index in range(len(steps) - 1)
        for seat, state in enumerate(steps[index])
        if state.status == "ACTIVE"
    ]


@pytest.mark.parametrize(
    ("game", "seats", "bots", "configuration"),
    [
        ("connectx", 2, ["leftmost", "rightmost"], {}),
        ("connectx", 2, ["rightmost", "leftmost"], {"rows": 5, "columns": 6, "inarow": 3}),
        ("rps", 2, ["kaggle:rock", "kaggle:statistical"], {"episodeSteps": 30}),
        ("hungry_geese", 4, ["turner", "climber", "climber", "turner"], {}),  # greedy draws when stuck
    ],
)
def test_the_same_episode_as_kaggles_own_runner(play, tmp_path, game, seats, bots, configuration):
    specs, reference = [], []
    for index, bot in enumerate(bots):
        if bot.startswith("kaggle:"):
            specs.append(bot)
            reference.append(bot.removeprefix("kaggle:"))
        else:
            specs.append(kaggle_agent(tmp_path / f"bot{index}", getattr(kaggle_bots, bot)))
            reference.append(specs[-1])
    query = "&".join(f"{key}={value}" for key, value in configuration.items())
    replay = tmp_path / "moves.json.z"
    result = play(
        specs, agents=seats, env=f"kaggle:{game}" + (f"?{query}" if query else ""), steps=1000, replay=str(replay)
    )
    steps = kaggle_run(game, reference, configuration)
    assert [agent.status for agent in result.agents] == [AgentStatus.OK] * seats
    assert result.steps == len(steps) - 1
    assert [agent.reward for agent in result.agents] == [float(state.reward) for state in steps[-1]]
    assert [agent.stats for agent in result.agents] == [{f"status.{state.status}": 1.0} for state in steps[-1]]
    ours = [(move["step"], int(move["agent"].split("_")[1]), move["action"]) for move in moves(replay)]
    assert ours == acted(steps)
    record = json.loads(zlib.decompress(replay.read_bytes()))["kaggle"]  # as Kaggle keeps an episode: env.toJSON()
    assert record["name"] == game and record["statuses"] == [state.status for state in steps[-1]]
    assert [[(state["action"], state["status"]) for state in step] for step in record["steps"]] == [
        [(state.action, state.status) for state in step] for step in steps
    ]
    assert record["rewards"] == [state.reward for state in steps[-1]]
    assert all(move["board"] for move in moves(replay))  # rps renders no text: its observation stands in


def test_an_agent_that_raises_is_an_error_the_game_is_told_of_and_it_ranks_below(play, tmp_path):
    raiser = kaggle_agent(tmp_path / "raiser", kaggle_bots.raiser)
    steady = kaggle_agent(tmp_path / "steady", kaggle_bots.leftmost)
    result = play([raiser, steady], agents=2, env="kaggle:connectx")
    bad, good = result.agents
    assert bad.status == AgentStatus.ERROR and "kaggle agent raised on purpose" in bad.failure.message
    assert bad.stats == {"status.ERROR": 1.0} and bad.reward == 0.0  # Kaggle's None
    assert good.status == AgentStatus.OK and good.stats == {"status.DONE": 1.0}
    assert result.steps == 5  # its third turn: the game ends there, as Kaggle's runner ends it


def test_an_action_the_game_refuses_is_invalid_and_the_game_marks_it(play, tmp_path):
    wild = kaggle_agent(tmp_path / "wild", kaggle_bots.out_of_range)
    result = play([wild, "kaggle:random"], agents=2, env="kaggle:connectx")
    bad, good = result.agents
    assert bad.status == AgentStatus.INVALID_ACTION and bad.failure.kind == "InvalidAction", bad.failure
    assert bad.failure.message == "the game marked its action 12 INVALID"  # by its rules, not its schema
    assert bad.stats == {"status.INVALID": 1.0} and good.stats == {"status.DONE": 1.0}
    assert result.steps == 1


def test_an_agent_past_its_deadline_and_bank_is_kaggles_timeout(play, tmp_path):
    slow = kaggle_agent(tmp_path / "slow", kaggle_bots.sleeper)
    limits = Limits(act_timeout_ms=500, time_bank_ms=0)
    result = play(["kaggle:negamax", slow], agents=2, env="kaggle:connectx", limits=limits)
    good, late = result.agents
    # Past its deadline with no bank: policybox records a timeout (or the bank used up, as the two race).
    assert (late.status, late.failure.kind) in {(AgentStatus.TIMEOUT, "Timeout"), (AgentStatus.DISABLED, "TimeBank")}
    assert late.stats == {"status.TIMEOUT": 1.0}  # the game was told as Kaggle's runner tells it
    assert good.status == AgentStatus.OK


def test_the_games_time_rules_are_the_limits_left_unset_and_a_limit_given_wins(tmp_path):
    """ConnectX's spec: actTimeout 2 s, remainingOverageTime 60 s, runTimeout 1200 s; the start-up gets what
    Kaggle's runner gives a first call (2 + 60 s). A MettaGrid game keeps policybox's defaults."""
    ruled = EpisodeSettings(env="kaggle:connectx").limits
    assert (ruled.act_timeout_ms, ruled.time_bank_ms, ruled.wait_on_bank) == (2000, 60_000, True)
    assert (ruled.init_timeout_s, ruled.episode_timeout_s) == (62, 1200)
    given = EpisodeSettings.from_options({"env": "kaggle:connectx", "act_timeout_ms": 300, "time_bank_ms": None})
    assert (given.limits.act_timeout_ms, given.limits.time_bank_ms) == (300, 60_000)
    assert EpisodeSettings(env="arena").limits == Limits()
    again = EpisodeSettings.model_validate_json(given.model_dump_json())  # as a ladder or a results folder reads it
    assert again.limits == given.limits
    out = tmp_path / "result.json"
    ran = policybox(
        "run", "--env", "kaggle:rps?episodeSteps=3", "-p", "kaggle:rock", "-p", "kaggle:paper",
        "--act-timeout-ms", "700", "--no-wait-on-bank", "--out", out,
    )  # fmt: skip
    assert ran.returncode == 0, ran.stdout + ran.stderr
    limits = json.loads(out.read_text())["limits"]
    assert (limits["act_timeout_ms"], limits["wait_on_bank"], limits["time_bank_ms"]) == (700, False, 60_000)


@pytest.mark.parametrize("wait", [True, False])
def test_a_late_reply_waits_on_the_bank_as_kaggles_overage_and_the_agent_is_told_what_is_left(play, tmp_path, wait):
    """An agent 0.8 s into a 0.3 s deadline with 3 s of bank: waited for, its move is its own and the game's
    remainingOverageTime falls by its lateness, as policybox's bank does. Without waiting, the late move is
    dropped and the game is told it timed out."""
    slow = kaggle_agent(tmp_path / "slow", kaggle_bots.overdrawn)
    limits = Limits(act_timeout_ms=300, time_bank_ms=3000, wait_on_bank=wait)
    replay = tmp_path / "moves.json.z"
    result = play([slow, "kaggle:random"], agents=2, env="kaggle:connectx", limits=limits, replay=str(replay))
    late, other = result.agents
    told = [line.split() for line in Path(late.log_path).read_text().splitlines() if line.startswith("act ")]
    assert told[0] == ["act", "0.3", "overage", "3.000"]
    if wait:
        assert late.status == AgentStatus.OK and late.stats == {"status.DONE": 1.0}, late
        lateness_s = late.latency.max_ms / 1000 - 0.3  # as the host counted it: its bank's draw
        assert lateness_s >= 0.5 and float(told[2][3]) == pytest.approx(3 - lateness_s, abs=0.002), (told, late)
        assert [move["action"] for move in moves(replay) if move["agent"] == "player_0"][1] == 0  # its own move
    else:
        assert late.status == AgentStatus.TIMEOUT and late.stats == {"status.TIMEOUT": 1.0}
        assert len(told) == 2 and other.status == AgentStatus.OK


@pytest.mark.parametrize(
    ("env", "agents", "message"),
    [
        ("kaggle:chess_but_not", None, "unknown Kaggle game 'chess_but_not'; installed here: "),
        ("kaggle:open_spiel", None, "the Kaggle game 'open_spiel' does not load here (No module named 'pyspiel')"),
        ("kaggle:connectx?colour=red", None, "kaggle:connectx has no configuration key colour; its keys: "),
        ("kaggle:connectx?rows=-2", None, "Configuration Invalid"),
        ("kaggle:connectx?rows", None, "the configuration is KEY=VALUE pairs joined by &"),
        ("kaggle:connectx", "3", "kaggle:connectx is a game for 2 agents, not 3"),
        ("kaggle:hungry_geese", "9", "kaggle:hungry_geese is a game for 1, 2, 3, 4, 5, 6, 7, 8 agents, not 9"),
    ],
)
def test_a_game_a_configuration_or_a_seat_count_kaggle_has_not_is_one_clear_error(env, agents, message):
    ran = policybox("run", "--env", env, "-p", "kaggle:random", *(["--agents", agents] if agents else []))
    assert ran.returncode == 2, ran.stdout + ran.stderr
    assert message in ran.stderr and len(ran.stderr.strip().splitlines()) == 1, ran.stderr


def test_a_configuration_file_is_read_once_and_the_game_is_made_with_it(tmp_path):
    """``--env-kwargs @FILE``: YAML (or JSON); the result says the configuration the game was made with."""
    (tmp_path / "small.yaml").write_text("rows: 5\ncolumns: 6\ninarow: 3\n")
    out = tmp_path / "result.json"
    ran = policybox(
        "run", "--env", "kaggle:connectx", "--env-kwargs", f"@{tmp_path / 'small.yaml'}", "-p", "kaggle:negamax",
        "-p", "kaggle:random", "--out", out,
    )  # fmt: skip
    assert ran.returncode == 0, ran.stdout + ran.stderr
    configuration = json.loads(out.read_text())["env"]["configuration"]
    assert (configuration["rows"], configuration["columns"], configuration["inarow"]) == (5, 6, 3)
    (tmp_path / "list.yaml").write_text("- rows\n")
    (tmp_path / "numbers.yaml").write_text("1: 2\nrows: 5\n")
    for given, message in [
        ("@missing.yaml", "No such file or directory"),
        (f"@{tmp_path / 'list.yaml'}", "must hold a mapping"),
        (f"@{tmp_path / 'numbers.yaml'}", "its keys must be text, not 1"),
    ]:
        refused = policybox("run", "--env", "kaggle:connectx", "--env-kwargs", given, "-p", "kaggle:random")
        assert refused.returncode == 2 and message in refused.stderr, refused.stderr
        assert len(refused.stderr.strip().splitlines()) == 1, refused.stderr


def test_an_agent_file_in_a_mettagrid_game_is_told_to_name_its_class(tmp_path):
    agent = kaggle_agent(tmp_path / "bot", kaggle_bots.leftmost)
    ran = policybox("run", "-p", agent, "--steps", "2")
    assert ran.returncode == 2 and "is an agent file (Kaggle's form), not a MettaGrid policy" in ran.stderr, ran.stderr


def test_evaluate_rotates_kaggle_seats_and_ranks_the_stronger_first(tmp_path):
    ran = policybox(
        "evaluate", "--env", "kaggle:connectx", "-p", "kaggle:negamax", "-p", "kaggle:random",
        "--episodes", "4", "--out", tmp_path / "board",
    )  # fmt: skip
    assert ran.returncode == 0, ran.stdout + ran.stderr
    summary = json.loads((tmp_path / "board" / "summary.json").read_text())
    assert [row["policy"] for row in summary["policies"]][0] == "kaggle:negamax"


def test_versus_pairs_kaggle_episodes_and_finds_the_stronger_ahead(tmp_path):
    """Eight episodes, four pairs: too few to decide at these error rates, enough to see negamax ahead."""
    ran = policybox(
        "versus", "kaggle:random", "kaggle:negamax", "--env", "kaggle:connectx", "--max-episodes", "8",
        "--seed", "1", "--out", tmp_path / "ab",
    )  # fmt: skip
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert (tmp_path / "ab" / "results.jsonl").read_text().count("\n") == 8
    assert "B − A = +" in ran.stdout and "agents failed: kaggle:random 0, kaggle:negamax 0" in ran.stdout, ran.stdout


def test_a_policy_holding_two_geese_plays_them_in_one_cell_as_in_two(play, tmp_path):
    """``--cells per-policy``: the two geese of each submission share one cell -- one network namespace, as
    the host reads it in /proc -- and play as they do in cells of their own."""
    turner = kaggle_agent(tmp_path / "turner", kaggle_bots.turner)
    climber = kaggle_agent(tmp_path / "climber", kaggle_bots.climber)
    specs, game = [turner, climber], {"agents": 4, "env": "kaggle:hungry_geese", "steps": 30}  # seat i plays i mod 2
    apart, together = play(specs, **game), play(specs, **game, cells="per-policy")
    cell = [agent.sandbox["network"] for agent in together.agents]
    assert cell[0] == cell[2] != cell[1] == cell[3], cell
    assert len({agent.sandbox["network"] for agent in apart.agents}) == 4
    assert [(a.action_digest, a.reward, a.status) for a in together.agents] == [
        (a.action_digest, a.reward, a.status) for a in apart.agents
    ]


def test_agents_that_draw_from_random_play_the_same_inline_and_in_cells(play):
    """negamax breaks ties with random.choice: each agent's stream is seeded from the episode's seed."""
    inline = play(["kaggle:negamax", "kaggle:random"], agents=2, env="kaggle:connectx", mode="inline", seed=5)
    cells = play(["kaggle:negamax", "kaggle:random"], agents=2, env="kaggle:connectx", seed=5)
    assert [a.action_digest for a in inline.agents] == [a.action_digest for a in cells.agents]
    assert inline.steps == cells.steps and [a.reward for a in inline.agents] == [a.reward for a in cells.agents]


def test_a_kaggle_ladder_takes_kaggles_submission_format_and_its_starter_qualifies(tmp_path):
    """A ladder of ConnectX: a built-in agent, a zip in Kaggle's format (main.py at its top, a module
    beside it) and the ladder's own starter zip each qualify and play; a match played again from its
    stamp ends as stored."""
    folder = tmp_path / "cup"
    assert policybox("ladder", "init", folder, "--env", "kaggle:connectx").returncode == 0
    bot = tmp_path / "bot.zip"
    with zipfile.ZipFile(bot, "w") as archive:
        archive.writestr(
            "helper.py", "def column(board, columns):\n    return next(c for c in range(columns) if board[c] == 0)\n"
        )
        archive.writestr(
            "main.py",
            "from helper import column\n\n\ndef agent(obs, config):\n    return column(obs.board, config.columns)\n",
        )
    with Ladder.open(folder) as ladder:
        starter = tmp_path / "starter.zip"
        starter.write_bytes(starter_zip(ladder))
    for name, spec in [("negamax", "kaggle:negamax"), ("bot", bot), ("starter", starter)]:
        submitted = policybox("ladder", "submit", folder, name, spec)
        assert submitted.returncode == 0, submitted.stdout + submitted.stderr
    ran = policybox("ladder", "run", folder, "--matches", "6", "--workers", "1")
    assert ran.returncode == 0, ran.stdout + ran.stderr
    with Ladder.open(folder, read_only=True) as ladder:
        rows = {row.name: row for row in ladder.standings().rows}
        assert {name: row.state for name, row in rows.items()} == dict.fromkeys(["negamax", "bot", "starter"], "active")
        assert sum(row.matches for row in rows.values()) == 12 and all(not row.forfeits for row in rows.values())
    again = policybox("run", "--ladder", folder, "--match", "1", "--log-dir", tmp_path / "logs")
    assert again.returncode == 0, again.stdout + again.stderr
    assert "match 1 played again: every reward and status as stored" in again.stdout
    final = policybox("ladder", "final", folder, "--rounds", "1", "--workers", "1")
    assert final.returncode == 0, final.stdout + final.stderr
    assert "negamax" in final.stdout and "starter" in final.stdout, final.stdout


def test_a_tar_gz_in_kaggles_format_plays_with_its_other_files_beside_its_main_py(play, tmp_path):
    """Kaggle's other submission format: main.py at the top of a tar.gz, a module and a data file beside it."""
    bot = tmp_path / "bot.tar.gz"
    files = {
        "helper.py": b"def column(board, columns):\n    return next(c for c in range(columns) if board[c] == 0)\n",
        "opening.txt": b"3",
        "main.py": b"from pathlib import Path\n\nfrom helper import column\n\n"
        b"OPENING = int((Path(__file__).parent / 'opening.txt').read_text())\n\n\n"
        b"def agent(obs, config):\n    return OPENING if obs.step < 2 else column(obs.board, config.columns)\n",
    }
    with tarfile.open(bot, "w:gz") as archive:
        for name, content in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(content)
            archive.addfile(info, io.BytesIO(content))
    replay = tmp_path / "moves.json.z"
    result = play([str(bot), "kaggle:negamax"], agents=2, env="kaggle:connectx", replay=str(replay))
    assert result.agents[0].status == AgentStatus.OK, result.agents[0].failure
    assert [move["action"] for move in moves(replay) if move["agent"] == "player_0"][:2] == [3, 0]


def hostile(folder: Path, function, **names: str) -> str:
    """An agent file of ``function`` from tests/policies/kaggle_bots.py, with module-level ``names`` above it."""
    path = Path(kaggle_agent(folder, function))
    path.write_text("".join(f"{name} = {value!r}\n" for name, value in names.items()) + path.read_text())
    return str(path)


def test_hostile_kaggle_agents_are_contained_and_the_other_plays_its_game(play, tmp_path):
    """Judged from outside the cells: the other team's file never reaches the snoop's log, no file
    appears where the writer wrote, the flood's log stays under its cap, the forker's child is gone
    (the leftover guard), and each opponent ends its game as it would."""
    teams = tmp_path / "teams"
    victim = kaggle_agent(teams / "victim", kaggle_bots.leftmost)
    Path(victim).write_text(Path(victim).read_text() + "\nSECRET = 'VICTIMS-WINNING-STRATEGY'\n")
    teams.chmod(0o700)  # as a ladder keeps submissions: a folder only root may enter
    escape = tmp_path / "open" / "escaped.txt"
    escape.parent.mkdir()
    escape.parent.chmod(0o777)
    attackers = {
        "snoop": hostile(teams / "snoop", kaggle_bots.snoop, SNOOP_PATH=victim),
        "writer": hostile(teams / "writer", kaggle_bots.writer, ESCAPE_PATH=str(escape)),
        "flood": hostile(teams / "flood", kaggle_bots.flood),
        "forker": hostile(teams / "forker", kaggle_bots.forker),
    }
    limits = Limits(log_limit_mb=1)
    for name, attacker in attackers.items():
        result = play([attacker, victim], agents=2, env="kaggle:connectx", limits=limits)
        attacking, defending = result.agents
        assert defending.status == AgentStatus.OK and defending.stats == {"status.DONE": 1.0}, (name, result)
        text = Path(attacking.log_path).read_text(errors="replace")
        assert "VICTIMS-WINNING-STRATEGY" not in text
        if name == "snoop":
            assert "refused:" in text
        if name == "writer":
            assert not escape.exists() and "write: refused" in text
        if name == "flood":
            assert Path(attacking.log_path).stat().st_size <= 1.1 * 1024 * 1024 and "log limit reached" in text


@pytest.mark.parametrize(("game", "seats"), [("rps", 2), ("hungry_geese", 2)])
def test_the_starter_plays_as_one_of_the_games_own_agents_in_a_game_without_a_random_one_too(
    play, tmp_path, game, seats
):
    """RPS has no ``random`` agent (the starter plays ``rock``), a goose's takes no argument."""
    folder = tmp_path / "cup"
    assert policybox("ladder", "init", folder, "--env", f"kaggle:{game}", "--agents", str(seats)).returncode == 0
    with Ladder.open(folder) as ladder:
        zipfile.ZipFile(io.BytesIO(starter_zip(ladder))).extractall(tmp_path / "starter")
    result = play([str(tmp_path / "starter" / "main.py")] * seats, agents=seats, env=f"kaggle:{game}", steps=10)
    assert [agent.status for agent in result.agents] == [AgentStatus.OK] * seats


@pytest.mark.parametrize(
    ("bot", "reason"),
    [("deep", "nests JSON arrays and objects more than 32 deep"), ("not_a_number", "NaN is not a JSON number")],
)
def test_an_action_the_host_cannot_check_is_that_agents_invalid_action_never_a_void_match(play, tmp_path, bot, reason):
    """An action 400 lists deep once made the game's schema check raise RecursionError in the host: the
    episode ended as the game's fault, no one blamed -- a match voided by one action."""
    crafted = kaggle_agent(tmp_path / bot, getattr(kaggle_bots, bot))
    result = play([crafted, "kaggle:random"], agents=2, env="kaggle:connectx")
    bad, good = result.agents
    assert result.aborted is None and result.game_fault is None, result.aborted
    assert bad.status == AgentStatus.INVALID_ACTION and reason in bad.failure.message, bad.failure
    assert bad.stats == {"status.ERROR": 1.0} and good.status == AgentStatus.OK  # no action the game could see


def test_an_action_that_makes_the_game_raise_is_its_agents_alone_and_the_others_play_on(play, tmp_path):
    """Kore's schema takes any text as a launch; its rules assert on a bad flight plan, and the step raised
    for all four players at once: one entrant's action ended the match, no one blamed. The step is played
    again to find whose action it was; that agent fails, the three others play the game to its end."""
    crasher = kaggle_agent(tmp_path / "crasher", kaggle_bots.kore_crasher)
    result = play(
        [crasher, "kaggle:random", "kaggle:random", "kaggle:random"], agents=4, env="kaggle:kore_fleets", steps=20
    )
    bad, *others = result.agents
    assert result.aborted is None and result.game_fault is None, (result.aborted, result.game_fault)
    assert bad.status == AgentStatus.INVALID_ACTION and bad.failure.step == 1, bad.failure
    assert (
        "its action made the game raise AssertionError" in bad.failure.message and "LAUNCH_2_NZ" in bad.failure.message
    )
    assert bad.stats == {"status.ERROR": 1.0} and bad.reward == 0.0
    assert result.steps == 19 and all(agent.status == AgentStatus.OK for agent in others), result.agents


def test_the_hosts_schema_check_is_kaggles_own_again_once_the_last_game_leaves_it():
    """Games stepped in threads open and close ``fast_schemas`` interleaved (one in, another in, the first
    out): Kaggle's own ``process_schema`` is back only when the last leaves, and it is back."""
    from kaggle_environments import core

    from policybox.envs.kaggle_schemas import fast_schemas, process_schema

    shipped = core.process_schema
    first, second = fast_schemas(), fast_schemas()
    first.__enter__()
    second.__enter__()
    first.__exit__(None, None, None)
    assert core.process_schema is process_schema  # the second game still steps
    second.__exit__(None, None, None)
    assert core.process_schema is shipped
