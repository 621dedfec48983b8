"""Rock-paper-scissors cycles in the head-to-head, and problem opponents, from real games: PettingZoo's
``rps_v2`` played by bots that always play one move (tests/policies/rps_bots.py)."""

from __future__ import annotations

import json
from pathlib import Path

from conftest import Ran, policy, policybox
from helpers.ladders import RPS, rps_ladder
from starlette.testclient import TestClient

from policybox.league import ranking
from policybox.league.web.app import make_app


def evaluate(out: Path, *bots: str) -> Ran:
    picked = [word for bot in bots for word in ("-p", policy(f"rps_bots.py:{bot}"))]
    ran = policybox("evaluate", "--env", RPS, "--steps", "5", *picked, "--episodes", "18", "--out", str(out))
    assert ran.returncode == 0, ran.stderr
    return ran


def test_clearly_beats_takes_an_interval_above_half():
    assert ranking.clearly_beats(ranking.Tally(wins=4)) and not ranking.clearly_beats(ranking.Tally(wins=3))
    assert not ranking.clearly_beats(ranking.Tally(wins=30, losses=20))  # 0.6, yet its interval reaches below ½
    assert ranking.clearly_beats(ranking.Tally(wins=60, draws=10, losses=30))
    assert not ranking.clearly_beats(ranking.Tally(draws=40))


def test_a_tournament_of_rock_paper_and_scissors_finds_the_cycle(tmp_path):
    ran = evaluate(tmp_path / "out", "Rock", "Paper", "Scissors")
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert len(summary["cycles"]) == 1
    cycle = summary["cycles"][0]
    beats = {("Rock", "Scissors"), ("Scissors", "Paper"), ("Paper", "Rock")}
    assert {(cycle[i], cycle[(i + 1) % 3]) for i in range(3)} == beats
    assert "cycle: " + " beats ".join([*cycle, cycle[0]]) in ran.stdout
    made = policybox("report", str(tmp_path / "out"))
    assert made.returncode == 0, made.stderr
    page = (tmp_path / "out" / "report.html").read_text()
    assert 'id="cycles"' in page and " beats ".join([*cycle, cycle[0]]) in page


def test_a_transitive_tournament_has_no_cycle(tmp_path):
    ran = evaluate(tmp_path / "out", "Rock", "Stone", "Scissors")  # rock = stone > scissors
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["cycles"] == [] and "cycle:" not in ran.stdout
    assert summary["head_to_head"]["Rock"]["Scissors"]["wins"] == 6  # decisive, yet no cycle


def test_a_ladder_shows_each_name_the_cycles_it_is_in(tmp_path):
    folder = tmp_path / "cup"
    with rps_ladder(folder, matches=18):
        pass
    with TestClient(make_app(folder)) as client:
        page = client.get("/api/names/rock").json()
        html = client.get("/names/rock").text
    assert page["cycles"] == [["rock", "scissors", "paper"]], page["head_to_head"]
    assert 'id="cycles"' in html
    shown = policybox("ladder", "show", str(folder), "paper")
    assert shown.returncode == 0 and "cycle: paper beats rock beats scissors beats paper" in shown.stdout, shown.stdout


def test_a_problem_opponent_is_the_one_it_loses_to_despite_its_higher_rating(tmp_path):
    """Rock beats three scissors bots, so it rates high; then paper comes, which loses to them and
    rates below rock -- yet beats it."""
    folder = tmp_path / "cup"
    with rps_ladder(folder, ("rock",), matches=0) as ladder:
        for name in ("s1", "s2", "s3"):
            ladder.submit(name, policy("rps_bots.py:Scissors"))
        ladder.run(matches=20, workers=1)
        ladder.submit("paper", policy("rps_bots.py:Paper"))
        ladder.run(matches=10, workers=1)
        rows = {row.name: row for row in ladder.standings().rows}
        page = ladder.show("rock")
    assert rows["rock"].rank < rows["paper"].rank, rows
    worst = page.problems[0]
    assert worst.name == "paper" and worst.actual == 0 and worst.expected > 0.5 and worst.problem < 0, page.problems
    assert all(p.problem >= worst.problem for p in page.problems)
    shown = policybox("ladder", "show", str(folder), "rock")
    assert shown.returncode == 0 and "problem opponents" in shown.stdout, shown.stdout
    with TestClient(make_app(folder)) as client:
        assert 'id="problems"' in client.get("/names/rock").text
        assert client.get("/api/names/rock").json()["problems"][0]["name"] == "paper"
