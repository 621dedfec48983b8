"""The participant's side of a ladder (issue #25): the rules and the starter submission, a team's
own traceback, setup output and log tails, no path of the organiser's machine on any page, and the
reproduce command, which names versions that ``policybox run --ladder DIR`` resolves.

Judged from outside: HTTP answers (JSON and HTML) to the public and to each team's token, the
ladder's stored states, and the exit code and result file of ``policybox run``.
"""

from __future__ import annotations

import io
import json
import shlex
import subprocess
import sys
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from importlib.metadata import version
from pathlib import Path
from unittest.mock import ANY

import pytest
from conftest import POLICIES, policy, policybox
from helpers.environments import submission, trojan_sdist
from helpers.ladders import EXAMPLES, GAME, WANDERER, activate
from helpers.setups import BUILD, team
from helpers.web import auth, everything_seen
from starlette.testclient import TestClient

import policybox as package
from policybox import EpisodeSettings, LadderSettings
from policybox.ladder import Ladder
from policybox.league.web.app import make_app
from policybox.limits import Limits

CONNECT_FOUR = "pettingzoo:pettingzoo.classic.connect_four_v3:env"
OWN_FILE = "own_traceback.py"
OWN_FRAME = f"policies/{OWN_FILE}"  # its own file in a traceback's frame: its path inside its submission
LOG_LINE = "OWN-TRACEBACK-BOT-LOG"


@dataclass
class Cup:
    folder: Path
    tokens: dict[str, str]
    sdists: Path  # the organiser's wheelhouse, which alpha's unbuildable version's build output names


@pytest.fixture(scope="module")
def cup(tmp_path_factory) -> Iterator[Cup]:
    """A ladder that has played 3 matches: the organiser's walker; team alpha's nested, which raises
    from a nested function of its own file at its 3rd step of every match, and its built, whose
    setup script prints where it runs; team beta's chatty, which logs every step and never fails;
    alpha's hostile, rejected (its reason a traceback through its own file); beta's unbuildable,
    rejected as its requirement's sdist fails to build (its build output naming the wheelhouse)."""
    root = tmp_path_factory.mktemp("participant")
    folder = root / "cup"
    sdists = trojan_sdist(root, build="raise SystemExit('this build needs a compiler it cannot have')")
    settings = EpisodeSettings(env=GAME, steps=30, find_links=[str(sdists)], sdists=True)
    made = LadderSettings(settings=settings, agents=4, placement_matches=0, suspend_after=10)
    with Ladder.create(folder, made) as ladder:
        tokens = {name: ladder.token(name) for name in ("alpha", "beta")}
        ladder.submit("built", str(team(root / "built", BUILD)), team="alpha")
        ladder.submit("unbuildable", str(submission(root / "unbuildable", "1.0", "trojan==1.0")), team="beta")
        ladder.submit("hostile", policy("web_bots.py:HostileInInit"), team="alpha", check=False)
        # These three qualify first, alone: with fewer than two versions that can play, the run ends once
        # none is qualifying -- not at its matches' end, which stops the setups still running.
        assert ladder.run(matches=1, workers=2).played == 0
        ladder.submit("walker", WANDERER)
        ladder.submit("nested", policy("own_traceback.py:NestedRaise"), team="alpha")
        ladder.submit("chatty", policy("own_traceback.py:Chatty"), team="beta")
        for name in ("walker", "nested", "chatty"):
            activate(ladder, name)
        ladder.run(matches=3, workers=2)
        rows = {row.name: row for row in ladder.standings().rows}
    assert rows["hostile"].state == rows["unbuildable"].state == "rejected", rows
    assert rows["built"].state == "active", rows
    yield Cup(folder, tokens, sdists)


@pytest.fixture
def client(cup) -> Iterator[TestClient]:
    with TestClient(make_app(cup.folder)) as test_client:
        yield test_client


def _played_by(client: TestClient, name: str) -> list[dict]:
    return [m for m in client.get("/api/matches").json()["matches"] if any(s["name"] == name for s in m["seats"])]


# ---------------------------------------------------------------------------------------------
# A team's own traceback, setup output and log tails


def test_a_team_sees_its_own_frames_first_and_others_see_the_first_line_only(cup, client):
    own = client.get("/api/names/nested", headers=auth(cup.tokens, "alpha")).json()
    failure = own["failures"][0]
    traceback = failure["traceback"]
    frames = [line for line in traceback["own"].splitlines() if line.startswith("  File ")]
    assert frames and all(f'"policies/{OWN_FILE}"' in frame for frame in frames), traceback
    assert frames[-1].endswith("in _deep_inside") and "ValueError: own code gave up" in traceback["own"]
    assert traceback["folded_frames"] >= 1 and '"policybox/cell/' in traceback["folded"]
    assert "OWN-SECOND-LINE" in failure["message"]
    page = client.get("/names/nested", headers=auth(cup.tokens, "alpha")).text
    assert page.index(OWN_FRAME) < page.index("<details") < page.index("policybox/cell/")

    match_id = failure["match"]
    seats = client.get(f"/api/matches/{match_id}", headers=auth(cup.tokens, "alpha")).json()["agents"]
    assert all((seat["traceback"] is not None) == (seat["name"] == "nested") for seat in seats)

    for viewer in (None, "beta"):
        other = client.get("/api/names/nested", headers=auth(cup.tokens, viewer)).json()
        shown = other["failures"][0]
        assert shown["traceback"] is None and shown["log_tail"] is None and other["logs"] == []
        assert shown["message"] == "own code gave up at step 3"  # its first line only
        for path in ("/names/nested", f"/matches/{match_id}", f"/api/matches/{match_id}"):
            text = client.get(path, headers=auth(cup.tokens, viewer)).text
            assert OWN_FRAME not in text and "Traceback" not in text and "OWN-SECOND-LINE" not in text, path


def test_a_team_sees_the_log_tail_of_every_match_it_played_and_its_setup_output(cup, client):
    played = _played_by(client, "chatty")
    assert played
    logs = client.get("/api/names/chatty", headers=auth(cup.tokens, "beta")).json()["logs"]
    assert {log["match"] for log in logs} == {m["id"] for m in played}
    assert all(log["status"] == "ok" and f"{LOG_LINE} ok" in log["log_tail"] for log in logs), logs
    assert f"{LOG_LINE} ok" in client.get("/names/chatty", headers=auth(cup.tokens, "beta")).text
    seats = client.get(f"/api/matches/{played[0]['id']}", headers=auth(cup.tokens, "beta")).json()["agents"]
    assert all((LOG_LINE in (seat["log_tail"] or "")) == (seat["name"] == "chatty") for seat in seats)
    for viewer in (None, "alpha"):
        assert client.get("/api/names/chatty", headers=auth(cup.tokens, viewer)).json()["logs"] == []
        page = client.get(f"/matches/{played[0]['id']}", headers=auth(cup.tokens, viewer)).text
        assert f"{LOG_LINE} ok" not in page  # chatty's line (alpha's nested, in a match with it, logs its own)

    setups = client.get("/api/names/built", headers=auth(cup.tokens, "alpha")).json()["setups"]
    assert [s["version"] for s in setups] == [1] and "setting up in" in setups[0]["output"]
    assert "setting up in" in client.get("/names/built", headers=auth(cup.tokens, "alpha")).text
    for viewer in (None, "beta"):
        assert client.get("/api/names/built", headers=auth(cup.tokens, viewer)).json()["setups"] == []
        assert "setting up in" not in client.get("/names/built", headers=auth(cup.tokens, viewer)).text


# ---------------------------------------------------------------------------------------------
# No path of the organiser's machine


def test_no_page_or_json_shows_a_path_on_the_organisers_machine(cup, client):
    """Every GET route (each name, each match, files too), to the public and to each team: neither
    the ladder's folder nor a version's stored files, nor where the organiser's sources or policybox
    are, appear -- though the rejected version's reason and nested's traceback name their files. A
    rejected build's output, which names the organiser's wheelhouse, is its team's alone: the others
    see one line of reason, in plain words."""
    folder = cup.folder
    forbidden = {
        str(folder),
        str(folder.resolve()),
        "versions/files",
        str(POLICIES),
        str(EXAMPLES),
        str(Path(package.__file__).parent),
        "policybox-scratch-",  # a cell's scratch folder, which the sandbox layers name
    }
    for viewer in (None, "alpha", "beta"):
        seen = everything_seen(client, auth(cup.tokens, viewer))
        assert (OWN_FRAME in seen) == (viewer == "alpha")  # its own traceback names its file, relative
        assert (str(cup.sdists) in seen) == (viewer == "beta")  # its own build's output
        found = {path for path in forbidden if path in seen}
        assert not found, (viewer, found)
    for viewer in (None, "alpha"):
        standing = client.get("/api/names/unbuildable", headers=auth(cup.tokens, viewer)).json()["standing"]
        assert standing["reason"] == "its requirements need a package built from source, and the build failed"


# ---------------------------------------------------------------------------------------------
# The reproduce command


def test_the_reproduce_command_names_versions_and_run_ladder_plays_the_same_episode(cup, client, tmp_path):
    match = _played_by(client, "nested")[0]
    page = client.get(f"/api/matches/{match['id']}").json()
    command = page["replay_command"]
    seats = [f"{seat['name']}@v{seat['version']}" for seat in page["agents"]]
    assert command == shlex.join(["policybox", "run", "--ladder", "DIR", "--seed", str(page["seed"])]) + "".join(
        f" -p {seat}" for seat in seats
    )
    words = shlex.split(command.replace("DIR", shlex.quote(str(cup.folder))))
    out = tmp_path / "again.json"
    args = [*words[1:], "--out", str(out), "--log-dir", str(tmp_path / "logs")]
    ran = policybox(*args)
    assert ran.returncode == 1, ran.stderr  # nested fails again, as it did
    again = json.loads(out.read_text())
    assert [a["reward"] for a in again["agents"]] == [a["reward"] for a in page["agents"]]
    assert [a["status"] for a in again["agents"]] == [a["status"] for a in page["agents"]]
    assert again["steps"] == page["steps"]


def test_run_names_what_is_wrong_with_a_version_it_cannot_resolve(cup, tmp_path):
    cases = [
        (["-p", "walker@v1"], "names a ladder's version: give --ladder DIR"),
        (["--ladder", str(cup.folder), "-p", "walker@v9"], "this ladder has no version walker@v9"),
        (["--ladder", str(tmp_path), "-p", "walker@v1"], "is not a ladder"),
    ]
    for args, message in cases:
        ran = policybox("run", *args)
        assert ran.returncode == 2 and message in ran.stderr, (args, ran.stderr)
        assert len(ran.stderr.strip().splitlines()) == 1, ran.stderr


# ---------------------------------------------------------------------------------------------
# The rules and the starter


def test_the_rules_say_the_game_the_limits_the_ranking_and_the_submission(cup, client):
    rules = client.get("/api/rules").json()
    game = rules["game"]
    assert {key: game[key] for key in ("spaces", "reward", "packages", "action_names")} == {
        "spaces": [{"seats": "every agent", "observation": game["spaces"][0]["observation"], "action": ANY}],
        "reward": [
            'moves: {"reward": {"values": [{"name": "action.move.success", "delta": true}], "weights": [0.01]}}',
            "each agent's reward is summed over the episode; a version's episode score is the mean of its agents' "
            "rewards",
        ],
        "packages": {"policybox": version("policybox"), "mettagrid": version("mettagrid")},
        "action_names": ["noop", "move_north", "move_south", "move_west", "move_east"],
    }
    assert "uint8 array of 500 x 3" in game["spaces"][0]["observation"]
    assert game["spaces"][0]["action"].startswith("one of its 5 actions, by name")
    assert {
        key: value for key, value in game.items() if key not in ("spaces", "reward", "packages", "action_names")
    } == {
        "family": "mettagrid",
        "name": "the MettaGrid game arena.moves, 4 agents, 30 steps",
        "env": "game.yaml",
        "env_kwargs": {},
        "agents": 4,
        "steps": 30,
        "versions_per_match": 2,
        "seating": "rotate",
        "on_agent_failure": "continue",
        "cells": "your agents each run in a process of their own, forked from one loader of your submission: they "
        "share one copy of its network, its uid and its sandbox, and can reach each other; other submissions "
        "cannot reach them",  # a MettaGrid game's default
    }
    assert rules["game_file"] == "/rules/game" and rules["at_home"]["game_file"] == "game.yaml"
    assert (
        rules["at_home"]["install"]
        == f"pip install policybox=={version('policybox')} mettagrid=={version('mettagrid')}"
    )
    assert rules["at_home"]["opponents"] == []  # the walker plays a file: no shorthand to offer
    limits = {limit["name"]: limit["value"] for limit in rules["limits"]}
    assert {
        "act_timeout_ms",
        "time_bank_ms",
        "init_timeout_s",
        "memory_limit_mb",
        "cpu_limit_s",
        "max_processes",
    } <= set(limits)
    assert limits["act_timeout_ms"] == 1000 and rules["episode_limit_s"] > 0
    assert rules["rank_by"] == "forfeit" and "forfeits its episode" in rules["ranking_rule"]
    assert rules["placement_matches"] == 0 and rules["suspend_after"] == 10  # as the fixture made it
    assert rules["submission"]["max_entries"] == 10_000 and rules["submission"]["max_upload_mb"] == 256
    assert any("policy_spec.json" in line for line in rules["submission"]["formats"])
    assert any("cogames.toml" in line for line in rules["submission"]["formats"])
    assert any("requirements.txt beside the spec" in line for line in rules["submission"]["formats"])
    assert any("or in the one folder it holds" in line for line in rules["submission"]["formats"])
    page = client.get("/rules").text
    assert 'href="/rules/starter.zip"' in page and "forfeits its episode" in page and 'href="/rules"' in page


@pytest.mark.parametrize(
    ("env", "agents"), [(str(EXAMPLES / "moves.yaml"), 4), (CONNECT_FOUR, 2)], ids=["mettagrid", "connect-four"]
)
def test_the_starter_submission_qualifies_as_it_is(tmp_path, env, agents):
    from policybox import EpisodeSettings, LadderSettings
    from policybox.ladder import Ladder

    settings = LadderSettings(settings=EpisodeSettings(env=env, steps=30), agents=agents, placement_matches=0)
    with Ladder.create(tmp_path / "cup", settings) as ladder:
        token = ladder.token("gamma")
        ladder.submit("house", "random")
    with TestClient(make_app(tmp_path / "cup")) as client:
        family = "pettingzoo" if env.startswith("pettingzoo:") else "mettagrid"
        assert client.get("/api/rules").json()["game"]["family"] == family
        starter = client.get("/rules/starter.zip")
        assert starter.status_code == 200 and starter.headers["content-type"] == "application/zip"
        assert set(zipfile.ZipFile(io.BytesIO(starter.content)).namelist()) == {
            "policy_spec.json",
            "bot.py",
            "README.md",
        }
        made = client.post(
            "/api/submit",
            data={"name": "starter"},
            files={"file": ("starter.zip", starter.content, "application/zip")},
            headers={"Authorization": f"Bearer {token}"},
        )
        assert made.status_code == 201, made.text
    with Ladder.open(tmp_path / "cup") as ladder:
        ladder.run(matches=1, workers=1)
        rows = {row.name: row for row in ladder.standings().rows}
    assert rows["starter"].state == "active" and rows["starter"].matches == 1, rows["starter"]
    assert rows["starter"].statuses == {"ok": agents // 2}  # its seats of the match, every one ok


@pytest.mark.parametrize(
    ("env", "agents", "game_file"),
    [("examples/moves.yaml", 4, "game.yaml"), (CONNECT_FOUR, 2, "env_kwargs.json")],
    ids=["mettagrid", "connect-four"],
)
def test_the_starters_readme_plays_it_at_home_from_a_fresh_folder(tmp_path, monkeypatch, env, agents, game_file):
    """The starter zip and the game's file, downloaded into a folder of their own, and the README's command
    run there as a participant runs it: it plays the starter against the ladder's own shorthand bots, in
    the ladder's settings, and writes its result. No page, answer or README names the organiser's file."""
    monkeypatch.chdir(EXAMPLES.parent)  # where the organiser made the ladder: --env examples/moves.yaml
    settings = EpisodeSettings(env=env, steps=20, limits=Limits(act_timeout_ms=3000))
    with Ladder.create(tmp_path / "cup", LadderSettings(settings=settings, agents=agents)) as ladder:
        for name, spec in [("house", "random"), ("walker", "random,kw.seed=3"), ("zero", "noop")]:
            ladder.submit(name, spec)
            activate(ladder, name)
    with TestClient(make_app(tmp_path / "cup")) as client:
        rules = client.get("/api/rules").json()
        pages = client.get("/rules").text + client.get("/api/rules").text
        starter, game = client.get("/rules/starter.zip"), client.get("/rules/game")
    assert game.status_code == 200 and game.headers["content-disposition"] == f'attachment; filename="{game_file}"'
    home = tmp_path / "home"  # a participant's own folder: nothing of the organiser's in it
    home.mkdir()
    (home / game_file).write_bytes(game.content)
    zipfile.ZipFile(io.BytesIO(starter.content)).extractall(home / "bot")
    readme = (home / "bot" / "README.md").read_text()
    assert "examples/" not in pages + readme and str(EXAMPLES) not in pages + readme
    assert rules["at_home"]["opponents"] == [{"name": "house", "policy": "random"}, {"name": "zero", "policy": "noop"}]
    command = next(line for line in readme.splitlines() if line.startswith("policybox run "))
    assert command == rules["at_home"]["play"] and rules["at_home"]["install"] in readme and command in pages
    assert f"--agents {agents} --steps 20 --act-timeout-ms 3000 --play-share 0.5" in command and "-p random" in command
    ran = subprocess.run(
        [sys.executable, "-m", *shlex.split(command)], cwd=home, capture_output=True, text=True, timeout=600
    )
    assert ran.returncode == 0, ran.stderr
    result = json.loads((home / "result.json").read_text())
    assert [agent["status"] for agent in result["agents"]] == ["ok"] * agents
    played = [agent["spec"]["class_path"] for agent in result["agents"]]
    assert played[0] == f"{home / 'bot' / 'bot.py'}:Starter" and played[1] == "random"


def test_the_games_own_text_is_escaped_on_the_rules_page(tmp_path):
    """The game's label and reward names come from its config file: shown as text, never as markup."""
    payload = '<script>alert("label")</script>'
    game = tmp_path / "moves.yaml"
    game.write_text(Path(GAME).read_text().replace("label: arena.moves", f"label: '{payload}'"))
    with Ladder.create(tmp_path / "cup", LadderSettings(settings=EpisodeSettings(env=str(game), steps=20), agents=4)):
        pass
    with TestClient(make_app(tmp_path / "cup")) as client:
        page = client.get("/rules").text
        assert client.get("/api/rules").json()["game"]["name"] == f"the MettaGrid game {payload}, 4 agents, 20 steps"
    assert payload not in page and "&lt;script&gt;alert(&#34;label&#34;)&lt;/script&gt;" in page
    assert str(tmp_path) not in page


def test_ladder_show_gives_the_organiser_every_names_own_traceback(cup):
    ran = policybox("ladder", "show", cup.folder, "nested")
    assert ran.returncode == 0, ran.stderr
    assert f'File "{OWN_FRAME}", line 13, in _deep_inside' in ran.stdout and "of policybox folded" in ran.stdout
    assert "versions/files" not in ran.stdout and 'File "policybox/cell' not in ran.stdout


def test_a_game_file_gone_under_the_ladder_is_one_clear_503_on_the_rules_pages(tmp_path, capfd):
    """The rules pages open the game; its file removed under a served ladder (the organiser's mistake) is
    a 503 saying the game cannot be read -- never a 500, never the organiser's path -- on every route that
    opens it, and the organiser reads which file on the server's stderr. Put back, the pages answer again."""
    game = tmp_path / "game.yaml"
    game.write_bytes(Path(GAME).read_bytes())
    with Ladder.create(tmp_path / "cup", LadderSettings(settings=EpisodeSettings(env=str(game), steps=30), agents=4)):
        pass
    routes = ["/rules", "/api/rules", "/rules/game", "/rules/starter.zip"]
    with TestClient(make_app(tmp_path / "cup"), raise_server_exceptions=False) as client:
        assert all(client.get(route).status_code == 200 for route in routes)
        game.rename(tmp_path / "moved.yaml")
        gone = [client.get(route) for route in routes]
        assert [answer.status_code for answer in gone] == [503] * len(routes)
        assert all("game cannot be read at the moment" in answer.text for answer in gone)
        assert not any(str(tmp_path) in answer.text for answer in gone)
        assert gone[1].json() == {"error": "the ladder's game cannot be read at the moment: try again later"}
        assert f"the ladder's game {game} cannot be opened" in capfd.readouterr().err
        (tmp_path / "moved.yaml").rename(game)
        assert all(client.get(route).status_code == 200 for route in routes)
