"""What happened in a match, as its page's data says (``/api/matches/ID``, ``/api/matches/ID/replay``):
each seat's placing by the ladder's own order of the match (a forfeit placed below), a MettaGrid
match's replay projected for the page's player, a PettingZoo match's moves -- each judged against the
stored result and the replay file on disk -- and the moves kept, and pruned, as replays are."""

from __future__ import annotations

import json
import zlib
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import policy
from helpers.ladders import GAMES, TEXT_CONNECT_FOUR, WANDERER, activate, api_ladder, ladder_command
from starlette.testclient import TestClient

from policybox import EpisodeSettings, LadderSettings
from policybox.envs import moves as moves_file
from policybox.ladder import Ladder as PublicLadder
from policybox.league import ranking
from policybox.league.ladder.database import LadderError
from policybox.league.views import match_list
from policybox.league.web.app import make_app
from policybox.league.web.upload import game_of
from policybox.results import EpisodeResult

CRASHER = policy("faults.py:SegfaultInStep")  # noop until it dies at step 10: a forfeit, reward 0


@pytest.fixture(scope="module")
def arena(tmp_path_factory) -> Iterator[Path]:
    """A MettaGrid ladder writing replays, three policies a match: wanderer (moves: reward > 0), noop
    (reward 0) and crasher (reward 0 too, but it forfeits every match)."""
    folder = tmp_path_factory.mktemp("arena") / "cup"
    with api_ladder(folder, replays=True, versions_per_match=3, suspend_after=50) as ladder:
        ladder.submit("wanderer", WANDERER)
        ladder.submit("noop", "noop")
        ladder.submit("crasher", CRASHER)
        for name in ("wanderer", "noop", "crasher"):  # all three play from the first match
            activate(ladder, name)
        assert ladder.run(matches=2, workers=2).played == 2
    yield folder


@pytest.fixture(scope="module")
def zoo(tmp_path_factory) -> Iterator[Path]:
    """A connect-four ladder (PettingZoo's game, rendering its board as text), made with the defaults:
    two random players."""
    folder = tmp_path_factory.mktemp("zoo") / "cup"
    game = EpisodeSettings(env=TEXT_CONNECT_FOUR, env_kwargs={"render_mode": "ansi"}, steps=60)
    with PublicLadder.create(folder, LadderSettings(settings=game, agents=2, placement_matches=0)) as ladder:
        ladder.submit("red", "random")
        ladder.submit("yellow", "random")
        assert ladder.run(matches=3, workers=2).played == 3
    yield folder


def _get(folder: Path, path: str) -> dict:
    with TestClient(make_app(folder)) as client:
        answer = client.get(path)
        assert answer.status_code == 200, answer.text
        return answer.json()


def _stored(folder: Path, match_id: int) -> EpisodeResult:
    from sqlalchemy import select

    from policybox.league.ladder.schema import matches

    with PublicLadder.open(folder, read_only=True) as ladder, ladder.engine.connect() as connection:
        row = connection.execute(select(matches.c.result).where(matches.c.id == match_id)).scalar_one()
    return EpisodeResult.model_validate(row)


def test_each_seat_is_placed_by_the_ladders_order_and_a_forfeit_is_placed_below(arena):
    for match_id in (1, 2):
        page = _get(arena, f"/api/matches/{match_id}")
        placing = {agent["name"]: agent["placing"] for agent in page["agents"]}
        rewards = {agent["name"]: agent["reward"] for agent in page["agents"]}
        # crasher and noop both have reward 0: by reward they would share a place; crasher forfeited
        assert rewards["crasher"] == rewards["noop"] == 0 < rewards["wanderer"]
        assert placing == {"wanderer": "1st", "noop": "2nd", "crasher": "3rd"}, page["agents"]
        result = _stored(arena, match_id)
        seated = [(agent["name"], a) for agent, a in zip(page["agents"], result.agents, strict=True)]
        places = ranking.places(ranking.episode_outcomes(seated, result.steps, "forfeit"))
        assert places == {"wanderer": 0, "noop": 1, "crasher": 2}
    listed = _get(arena, "/api/matches")["matches"]
    assert {seat["name"]: seat["placing"] for seat in listed[0]["seats"]} == placing  # the list says the same
    shown = ladder_command("matches", str(arena))
    assert shown.returncode == 0 and "placing" in shown.stdout
    assert all(word in shown.stdout for word in ("1st", "2nd", "3rd")), shown.stdout


def test_policies_that_tie_share_a_place(arena):
    """Each seat its own policy: the seats of the two crashers forfeit, and share the last place."""
    result = _stored(arena, 1)
    crashed = [agent.agent_id for agent in result.agents if agent.status.value == "crashed"]
    names = [f"p{seat}" for seat in range(len(result.agents))]
    placed = dict(zip(names, match_list.placings(result, names, "forfeit"), strict=True))
    for seat in crashed:
        assert placed[f"p{seat}"] == ("=3rd" if len(crashed) == 2 else "4th"), (placed, crashed)
    # by reward alone, no forfeit: a crasher's reward of 0 ties the noop's
    by_reward = match_list.placings(result, names, "reward")
    assert len(set(by_reward)) < len(names) and any(label.startswith("=") for label in by_reward)


def test_a_mettagrid_replay_is_served_as_frames_the_page_can_draw(arena):
    page = _get(arena, "/api/matches/1")
    frames = _get(arena, "/api/matches/1/replay")
    with (arena / "replays" / "match-000001.json.z").open("rb") as file:
        stored = json.loads(zlib.decompress(file.read()))
    assert [frames["width"], frames["height"]] == stored["map_size"] and frames["steps"] == page["steps"]
    assert [a["name"] for a in frames["agents"]] == [a["name"] for a in page["agents"]]  # the seats' names
    walls = sum(1 for thing in stored["objects"] if thing["type_name"] == "wall")
    assert sum(1 for thing in frames["objects"] if thing["type"] == "wall") == walls
    wanderer = next(a for a in frames["agents"] if a["name"] == "wanderer")
    assert len({tuple(point) for _, point in wanderer["location"]}) > 1  # it moves, step by step
    assert wanderer["reward"][-1][1] == pytest.approx(page["agents"][wanderer["seat"]]["reward"], abs=1e-6)
    assert page["moves"] is None  # a MettaGrid match has no moves list: its replay plays instead


def test_a_replay_that_is_not_one_is_a_404_and_the_page_still_answers(arena, tmp_path):
    with TestClient(make_app(arena)) as client:
        assert client.get("/api/matches/99/replay").status_code == 404
        bomb = arena / "replays" / "match-000002.json.z"
        kept = bomb.read_bytes()
        try:
            bomb.write_bytes(zlib.compress(b"[" * 300 * 2**20))  # 300 MiB of JSON in a few hundred KiB
            answer = client.get("/api/matches/2/replay")
            assert answer.status_code == 404 and "unpacks to more than" in answer.json()["error"]
            bomb.write_bytes(b"not zlib")
            assert client.get("/api/matches/2/replay").status_code == 404
            assert client.get("/matches/2").status_code == 200
        finally:
            bomb.write_bytes(kept)


def test_a_connect_four_match_stores_its_moves_and_the_api_carries_them(zoo):
    for match_id in (1, 2, 3):
        page = _get(zoo, f"/api/matches/{match_id}")
        result = _stored(zoo, match_id)
        moves = page["moves"]
        assert [move["step"] for move in moves] == list(range(result.steps))  # one turn a step
        assert [move["agent"] for move in moves] == [["player_0", "player_1"][s % 2] for s in range(result.steps)]
        assert all(isinstance(move["action"], int) and 0 <= move["action"] < 7 for move in moves)
        final = moves[-1]["board"].splitlines()
        assert len(final) == 6 and sum(row.count("X") + row.count("O") for row in final) == result.steps
        placing = sorted(agent["placing"] for agent in page["agents"])
        assert placing in (["draw", "draw"], ["loss", "win"])
        winner = next((a for a in page["agents"] if a["placing"] == "win"), None)
        if winner is not None:  # the winning move is the last, and its reward is the winner's
            assert winner["reward"] == 1 and moves[-1]["agent"] == winner["agent"] and moves[-1]["reward"] == 1


def test_the_moves_are_kept_and_pruned_as_replays_are(zoo, tmp_path):
    import shutil

    folder = tmp_path / "copy"
    shutil.copytree(zoo, folder)  # the module's ladder is only read by the other tests
    with PublicLadder.open(folder) as ladder:
        freed = ladder.prune(keep_replays=1)
    assert freed.replays == 2 and sorted(p.name for p in (folder / "replays").iterdir()) == ["match-000003.json.z"]
    with TestClient(make_app(folder)) as client:
        old = client.get("/api/matches/1").json()
        assert old["moves"] is None and "no longer kept" in old["replay_note"]
        assert client.get("/api/matches/3").json()["moves"]
        assert "no longer kept" in client.get("/matches/1").text and 'id="moves"' not in client.get("/matches/1").text
    with PublicLadder.open(folder) as ladder, pytest.raises(LadderError, match="--no-replays"):
        ladder.run(matches=1, backend="ray")  # the moves are replays: the Ray rule holds for them too


def test_without_javascript_the_page_holds_the_moves_the_board_and_the_download(zoo, arena):
    with TestClient(make_app(zoo)) as client:
        html = client.get("/matches/1").text
        moves = client.get("/api/matches/1").json()["moves"]
    assert html.count("<tr data-step=") == len(moves) and 'href="/matches/1/replay" download' in html
    assert f'<pre id="board" class="board">{moves[-1]["board"]}</pre>' in html  # the final board
    with TestClient(make_app(arena)) as client:
        html = client.get("/matches/1").text
    assert 'data-src="/api/matches/1/replay"' in html and "download it above" in html
    assert '<script src="/static/replay.js" defer></script>' in html


def test_the_moves_file_is_capped(tmp_path):
    path = tmp_path / "moves.json.z"
    recorder = moves_file.MovesRecorder(str(path), ["a"])
    recorder.record(0, "a", 1, 0.0, "x" * 10_000)
    for step in range(1, 2000):  # 2000 boards of 4 KiB and long actions: past the cap
        recorder.record(step, "a", list(range(1000)), 0.0, "y" * 10_000)
    recorder.write()
    unpacked = zlib.decompress(path.read_bytes())
    document = json.loads(unpacked)
    assert document["format"] == "policybox-moves" and document["truncated"] is True
    first, second = document["moves"][:2]
    assert len(first["board"]) == moves_file.BOARD_MAX and first["board"].endswith("[cut]")
    assert isinstance(second["action"], str) and len(second["action"]) == moves_file.ACTION_MAX
    assert len(unpacked) <= moves_file.MOVES_MAX + 1000


def test_a_game_in_a_file_of_the_organisers_is_named_as_the_rules_download_names_it(zoo):
    """The match page names connect-four's file as /rules/game serves it (game.py), never where the
    organiser keeps it; so do the submit form and its refusals."""
    with TestClient(make_app(zoo)) as client:
        page, api = client.get("/matches/1").text, client.get("/api/matches/1").json()
        form = client.get("/submit").text
    with PublicLadder.open(zoo, read_only=True) as ladder:
        named = game_of(ladder.settings)  # as the submit form and its refusals name it
    assert api["env"]["label"] == "game.py:env" and named == "PettingZoo game game.py:env"
    for shown in (page, json.dumps(api), form):
        assert str(GAMES) not in shown
