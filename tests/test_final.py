"""Finals (issue 28): ``evaluate --final`` and ``ladder final`` play the balanced schedule, with real
episodes of the moves arena (examples/moves.yaml: 0.01 a step moved, so the wanderer beats
``random``, which beats ``noop``), and rank by the Plackett-Luce fit with groups.

Judged from outside: the summary and results files, the commands' output, the ladder's database.
"""

from __future__ import annotations

import itertools
import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest
from conftest import policybox as policybox_cli  # the name policybox is the package's here
from helpers.ladders import api_ladder, ladder_command
from sqlalchemy import func, select
from starlette.testclient import TestClient

import policybox
from policybox.ladder import Ladder
from policybox.league import report
from policybox.league.ladder.final import final_schedule, separating_match
from policybox.league.ladder.schema import final_matches, finals, matches, versions
from policybox.league.play.seating import cycle, whole_cycles
from policybox.league.web.app import make_app

EXAMPLES = Path(__file__).parents[1] / "examples"
GAME = str(EXAMPLES / "moves.yaml")
WANDERER = f"{EXAMPLES / 'wanderer.py'}:Wanderer"


def test_a_final_rounds_up_to_whole_cycles():
    assert cycle(5, 4) == 5 and cycle(3, 4) == 3 and cycle(5, 2) == 20 and cycle(2, 2) == 2
    assert whole_cycles(1, 5, 4) == 5 and whole_cycles(11, 5, 4) == 15 and whole_cycles(20, 5, 2) == 20


def test_evaluate_final_ranks_the_mover_first_alone_and_copies_together(tmp_path):
    out = tmp_path / "final"
    policies = [WANDERER, "random", "noop", "noop,name=idle", "noop,name=still"]
    summary = policybox.evaluate(policies, out, episodes=6, final=True, env=GAME, steps=80, workers=2)
    assert summary.episodes_expected == summary.episodes_done == 10  # 6 rounded up to cycles of 5 names
    final = summary.final
    assert final is not None and final.matches == 10
    by_name = {entry.name: entry for entry in final.names}
    assert final.names[0].name == "Wanderer" and final.names[0].group == 1
    assert all(entry.group > 1 for entry in final.names[1:])  # the mover's group is its own
    assert by_name["random"].group < by_name["noop"].group == by_name["idle"].group == by_name["still"].group
    assert sum(final.names[0].rank_probabilities) == 1.0
    stored = json.loads((out / "summary.json").read_text())
    assert stored["final"]["names"][0]["name"] == "Wanderer"
    # The balanced schedule in the stored episodes: every name equally many, every seat equally often.
    records = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert Counter(key for record in records for key in set(record["seats"])) == dict.fromkeys(summary.ranking, 8)
    seats = Counter((key, seat) for record in records for seat, key in enumerate(record["seats"]))
    assert set(seats.values()) == {2} and len(seats) == 5 * 4


def test_evaluate_without_final_has_no_final_key(tmp_path):
    summary = policybox.evaluate(["random", "noop"], tmp_path / "plain", episodes=1, env=GAME, steps=10, workers=1)
    assert summary.final is None
    assert "final" not in json.loads((tmp_path / "plain" / "summary.json").read_text())


def test_evaluate_final_on_the_command_line_says_so_and_shows_the_table(tmp_path):
    args = ["evaluate", "-p", WANDERER, "-p", "noop", "--env", GAME, "--steps", "20", "--episodes", "3", "--final"]
    done = policybox_cli(*args, "--workers", "2", "--out", tmp_path / "cli", columns=100)
    assert done.returncode == 0, done.stderr
    assert "final: balanced seating, 4 episodes (whole cycles of 2)" in done.stdout
    assert "final ranking · Plackett-Luce over 4 matches" in done.stdout and "likely places" in done.stdout


def test_a_separating_match_seats_the_pair_together_in_turn():
    field = [10, 11, 12, 13, 14]
    plays = {10: 5, 11: 3, 12: 4, 13: 3, 14: 9}
    seat_maps = [separating_match((12, 14), field, plays, 3, 3, turn) for turn in range(3)]
    assert all({12, 14} <= set(seats) and len(set(seats)) == 3 for seats in seat_maps)
    assert all(11 in seats for seats in seat_maps)  # the least played other, first in the field
    assert {seats.index(12) for seats in seat_maps} == {0, 1, 2}  # the pair takes every seat in turn
    # A ladder of two versions a match (4 seats): the pair alone, each in every other seat, in turn.
    two = [separating_match((12, 14), field, plays, 4, 2, turn) for turn in range(2)]
    assert two == [[12, 14, 12, 14], [14, 12, 14, 12]]


def test_a_ladder_final_plays_the_ladders_format_balanced():
    """Four seats, two versions a match (a ladder's default): the final's matches hold two versions,
    two seats each; one cycle is the double round robin; every version takes every seat equally often."""
    schedule = final_schedule(versions=4, seats=4, places=2, rounds=1, seed=3)
    assert len(schedule) == 12 == cycle(4, 2)
    assert all(len(set(seats)) == 2 and seats[0] == seats[2] and seats[1] == seats[3] for seats in schedule)
    assert Counter(frozenset(seats) for seats in schedule) == dict.fromkeys(
        (frozenset(pair) for pair in itertools.combinations(range(4), 2)), 2
    )
    assert set(Counter((version, seat) for seats in schedule for seat, version in enumerate(seats)).values()) == {3}
    # As many places as seats: every seat a different version, as evaluate --final plays.
    assert all(len(set(seats)) == 4 for seats in final_schedule(versions=5, seats=4, places=4, rounds=1, seed=3))


# ---------------------------------------------------------------------------------------------
# ladder final


def _ratings(folder: Path) -> dict[int, tuple[float, float, int]]:
    with Ladder.open(folder, read_only=True) as opened, opened.engine.connect() as connection:
        rows = connection.execute(select(versions.c.id, versions.c.mu, versions.c.sigma, versions.c.matches))
        return {row.id: (row.mu, row.sigma, row.matches) for row in rows}


def _final_rows(folder: Path) -> list:
    with Ladder.open(folder, read_only=True) as opened, opened.engine.connect() as connection:
        return connection.execute(select(final_matches).order_by(final_matches.c.number)).all()


def _played_final(folder: Path) -> int:
    return sum(row.state == "played" for row in _final_rows(folder))


def make_ladder(folder: Path) -> None:
    # Deadlines are not this file's subject: a machine loaded by the rest of the suite must not disable a
    # bot (its play limit is steps x deadline x 0.5) and so reorder the final's ranking.
    args = ["--steps", "30", "--placement-matches", "1", "--seed", "5", "--versions-per-match", "4"]
    args += ["--act-timeout-ms", "5000"]
    made = ladder_command("init", str(folder), "--env", GAME, *args)  # four versions a match: its final's too
    assert made.returncode == 0, made.stderr
    for name, spec in [("wanderer", WANDERER), ("random", "random"), ("noop", "noop"), ("idle", "noop,name=idle")]:
        assert ladder_command("submit", str(folder), name, spec).returncode == 0
    for _ in range(5):  # until every name has played (then each is ranked, so in the final's field)
        assert ladder_command("run", str(folder), "--matches", "4", "--workers", "2").returncode == 0
        if all(played for _, _, played in _ratings(folder).values()):
            return
    raise AssertionError("a name never played")


def test_ladder_final_freezes_is_unrated_resumes_and_lets_nothing_else_play(tmp_path):
    folder = tmp_path / "cup"
    make_ladder(folder)
    before = _ratings(folder)
    with Ladder.open(folder, read_only=True) as opened, opened.engine.connect() as connection:
        rated_matches = connection.execute(select(func.count()).select_from(matches)).scalar()

    # A process of its own: the subject is a final killed (SIGKILL) in the middle, then resumed.
    command = [sys.executable, "-m", "policybox", "ladder", "final", str(folder), "--rounds", "4", "--workers", "1"]
    run = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    try:
        give_up = time.monotonic() + 300
        while time.monotonic() < give_up and _played_final(folder) < 3:
            time.sleep(0.2)
    finally:
        os.killpg(run.pid, signal.SIGKILL)  # a final killed in the middle
        run.wait(timeout=60)
    rows = _final_rows(folder)
    kept = {row.number: row.result for row in rows if row.state == "played"}
    assert 3 <= len(kept) < len(rows) == 16  # 4 rounds of 4 names (every match seats all 4)

    # While it is open: a new version and a new name wait in the queue, and no rated match is played.
    assert ladder_command("submit", str(folder), "late", "random").returncode == 0
    assert ladder_command("submit", str(folder), "noop", WANDERER).returncode == 0
    waited = ladder_command("run", str(folder), "--matches", "2", "--workers", "1")
    assert waited.returncode == 0, waited.stderr
    assert "0 matches played" in waited.stdout and "final 1 is open" in waited.stdout

    resumed = ladder_command("final", str(folder), "--workers", "2", "--until-separated", "3", "--json")
    assert resumed.returncode == 0, resumed.stderr
    shown = json.loads(resumed.stdout)
    assert shown["state"] == "done" and shown["versions"] == ["idle v1", "noop v1", "random v1", "wanderer v1"]
    rows = _final_rows(folder)
    assert {row.number: row.result for row in rows if row.number in kept} == kept  # the kept matches, untouched
    assert [row.state for row in rows] == ["played"] * len(rows)
    # noop and its copy idle always tie: an uncertain pair, so --until-separated spent all 3 matches on it.
    assert len(rows) == 16 + 3 and all(len(set(row.seats)) == 4 for row in rows[16:])
    assert shown["played"] == 19 and shown["ranking"]["matches"] == 19
    ranked = shown["ranking"]["names"]
    assert ranked[0]["name"] == "wanderer" and ranked[0]["group"] == 1 and ranked[1]["group"] == 2
    assert ranked[2]["group"] == ranked[3]["group"] and {ranked[2]["name"], ranked[3]["name"]} == {"noop", "idle"}
    assert all(len(entry["rank_probabilities"]) == 4 for entry in ranked)
    # Every version plays equally often in the scheduled part, in every seat equally often.
    seats = Counter((version, seat) for row in rows[:16] for seat, version in enumerate(row.seats))
    assert set(seats.values()) == {4} and len(seats) == 16

    after = _ratings(folder)
    assert {i: after[i] for i in before} == before  # the final rated nothing
    with Ladder.open(folder, read_only=True) as opened, opened.engine.connect() as connection:
        assert connection.execute(select(func.count()).select_from(matches)).scalar() == rated_matches
        assert connection.execute(select(finals.c.state)).scalars().all() == ["done"]

    _check_page_and_report(folder, shown)

    # The final done, the ladder goes on: the waiting versions qualify and play.
    assert ladder_command("run", str(folder), "--matches", "2", "--workers", "2").returncode == 0
    assert len(_ratings(folder)) == len(before) + 2
    assert sum(row[2] for row in _ratings(folder).values()) > sum(row[2] for row in before.values())


@pytest.mark.storage
def test_a_final_from_the_api_on_either_database(tmp_path, database_url):
    """``Ladder.final`` and ``Ladder.latest_final`` on SQLite and on PostgreSQL: the finals' tables
    (their JSON seats and placings) written and read back on both, the ratings untouched."""
    folder = tmp_path / "cup"
    with api_ladder(folder, database_url) as opened:
        for name, spec in [("wanderer", WANDERER), ("random", "random"), ("noop", "noop")]:
            opened.submit(name, spec)
        assert opened.latest_final() is None
        for _ in range(5):  # until every name has played (then each is ranked, so in the final's field)
            opened.run(matches=2, workers=2)
            if all(played for _, _, played in _ratings(folder).values()):
                break
        else:
            raise AssertionError("a name never played")
        before = _ratings(folder)
        done = opened.final(rounds=1, workers=2)
        assert opened.latest_final() == done
    # Two versions a match, as the ladder plays (its default): one cycle is a double round robin.
    assert (done.state, done.played, done.scheduled) == ("done", 6, 6)
    assert done.versions == ["noop v1", "random v1", "wanderer v1"]  # who wins six short matches is not the subject
    assert sorted(placed.name for placed in done.ranking.names) == ["noop", "random", "wanderer"]
    rows = _final_rows(folder)
    assert [row.state for row in rows] == ["played"] * 6 and all(len(set(row.seats)) == 2 for row in rows)
    assert Counter(frozenset(row.seats) for row in rows) == dict.fromkeys(
        (frozenset(pair) for pair in itertools.combinations(before, 2)), 2
    )  # every pair of the three, twice
    assert all(row.stamp["policybox"] == policybox.__version__ and len(row.stamp["versions"]) == 2 for row in rows)
    # A final's match played again from its stamp, as a rated match is (run --ladder DIR --match ID).
    again = policybox_cli("run", "--ladder", folder, "--final", "1", "--match", "5", "--log-dir", tmp_path / "logs")
    assert again.returncode == 0, again.stderr
    assert "final 1's match 5 played again: every reward and status as stored" in again.stdout
    unknown = policybox_cli("run", "--ladder", str(folder), "--final", "1", "--match", "6")
    assert unknown.returncode == 2 and "final 1 of this ladder has no played match 6" in unknown.stderr
    without = policybox_cli("run", "--ladder", str(folder), "--final", "1")
    assert without.returncode == 2 and "--final F plays a match of the ladder's final F again: give --match N" in (
        without.stderr
    )
    assert _ratings(folder) == before
    assert done.retired == []
    with TestClient(make_app(folder)) as client:
        assert client.get("/api/final").json() == {"final": json.loads(done.model_dump_json())}
        assert 'id="final-retired"' not in client.get("/final").text

    # A name retired after the final: still in its ranking (the field is frozen), and every view says so.
    with Ladder.open(folder) as opened:
        opened.retire("noop")
        retired = opened.latest_final()
    assert retired is not None and retired.retired == ["noop"] and retired.ranking == done.ranking
    with TestClient(make_app(folder)) as client:
        assert client.get("/api/final").json()["final"]["retired"] == ["noop"]
        assert "Retired since it opened: noop." in client.get("/final").text
    assert "retired since it opened: noop" in report.write_report(folder).read_text()
    shown = ladder_command("final", str(folder), "--show")
    assert shown.returncode == 0 and "retired since it opened (still in its ranking: the field is frozen): noop" in (
        shown.stdout
    )


def _check_page_and_report(folder: Path, shown: dict) -> None:
    """/final and /api/final show what ``ladder final --json`` did; the nav links to it; the report has its section."""
    with TestClient(make_app(folder)) as client:
        assert client.get("/api/final").json() == {"final": shown}
        page = client.get("/final")
        assert page.status_code == 200 and "Final 1" in page.text and page.text.count('<td class="name">') == 4
        assert '<a href="/final">final</a>' in client.get("/").text
    written = report.write_report(folder)
    assert "Final ranking" in written.read_text() and 'id="final"' in written.read_text()


def test_a_ladder_without_a_final_has_no_final_page(tmp_path):
    folder = tmp_path / "empty"
    assert ladder_command("init", str(folder), "--env", GAME, "--steps", "10").returncode == 0
    with TestClient(make_app(folder)) as client:
        assert client.get("/api/final").json() == {"final": None}
        assert "has had no final yet" in client.get("/final").text
        assert '<a href="/final">' not in client.get("/").text
    shown = ladder_command("final", str(folder), "--show")
    assert shown.returncode == 2 and "has had no final" in shown.stderr
    refused = ladder_command("final", str(folder))
    assert refused.returncode != 0 and "at least two ranked names" in refused.stderr
