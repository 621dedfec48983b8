"""Why a name lost (issue 43, "Why you lost"), judged on a real ladder that played real matches: the
board's row says what the forfeit rule did; the name page shows each head-to-head beside what the
ratings expect, and only the opponents it does worse against than expected as problems (or says there
are none); a team's traceback names its own files as its submission holds them (``bot.py``, never the
content hash of its unpacked zip), identical failures are one row with a count, empty logs are not
listed; every step a message or page shows is counted from 1; ``ladder final`` and ``/final`` suggest
``--until-separated N`` while a group holds several names, and ``/final`` lists its matches with their
replays; ``vs next`` says why it is what it is, and reads the head-to-head where intervals overlap.

The ladder: the organiser's walker; team alpha's crasher, a zip whose ``bot.py`` raises from a nested
function at its third step of every match with a planted ``<script>`` in its message and in every
line it logs; team beta's silent, which plays noop and never writes a line.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from conftest import policy
from helpers.ladders import TEXT_CONNECT_FOUR, activate, ladder_command
from helpers.losses import SCRIPT, Cup, make_cup
from helpers.web import auth
from starlette.testclient import TestClient

from policybox import EpisodeSettings, LadderSettings
from policybox.ladder import Ladder
from policybox.league import ranking
from policybox.league.ladder import final as finals
from policybox.league.stats.plackett_luce import FinalRanking, NameRank
from policybox.league.views import name_page
from policybox.league.web.app import make_app
from policybox.results import Failure, GameFault


@pytest.fixture(scope="module")
def cup(tmp_path_factory) -> Cup:
    return make_cup(tmp_path_factory.mktemp("losses"))


@pytest.fixture
def client(cup) -> Iterator[TestClient]:
    with TestClient(make_app(cup.folder)) as test_client:
        yield test_client


# ---------------------------------------------------------------------------------------------
# The board: what the forfeit rule did, and why vs next says what it says


def test_the_board_says_what_the_forfeit_rule_did_on_the_row(cup, client):
    rows = {row["name"]: row for row in client.get("/api/standings").json()["rows"]}
    crasher = rows["crasher"]
    assert crasher["forfeits"] == crasher["matches"] > 0  # it forfeits every match
    assert crasher["forfeit_note"].startswith(
        f"{crasher['forfeits']} forfeits: placed below every name without one in those matches"
    )
    assert rows["walker"]["forfeit_note"] is None and rows["silent"]["forfeit_note"] is None
    assert crasher["forfeit_note"] in client.get("/").text  # on its row, in the note column
    shown = ladder_command("status", str(cup.folder))
    assert f"crasher: {crasher['forfeits']} forfeits: placed below" in shown.stdout


def test_the_forfeit_note_names_who_a_forfeiting_row_still_ranks_above():
    assert ranking.forfeit_note(0, 10) is None
    assert ranking.forfeit_note(1, 10) == "1 forfeit: placed below every name without one in those matches, " + (
        "whatever its reward"
    )
    note = ranking.forfeit_note(22, 200, ["delta", "echo"])
    assert note.endswith(
        "; it still ranks above delta, echo, without forfeits: its rating counts its places in all 200 of its matches"
    )


def test_every_vs_next_says_why_and_an_overlap_reads_the_head_to_head(cup, client):
    ranked = [row for row in client.get("/api/standings").json()["rows"] if row["rank"] is not None]
    assert len(ranked) == 3
    for upper in ranked[:-1]:
        assert upper["versus_why"].startswith("its rating interval (μ ± 2σ) [")
        assert upper["versus_next"] in ("clear", "overlaps", "mixed")
        if "overlap" in upper["versus_why"]:
            assert "head-to-head" in upper["versus_why"] or "have not met" in upper["versus_why"]
    assert ranked[-1]["versus_next"] is None and ranked[-1]["versus_why"] is None
    page = client.get("/names/" + ranked[0]["name"]).text
    assert 'id="versus-next"' in page


def _entry(name: str, mu: float, reward: float) -> ranking.Entry:
    return ranking.Entry(name, ranking.MODEL.rating(mu=mu, sigma=5.0), ranking.Reward(mean=reward, ci95=(0, 1)))


def test_overlapping_intervals_are_clear_when_the_head_to_head_is_one_sided_and_else_say_why():
    upper, lower = _entry("a", 26.0, 0.5), _entry("b", 25.0, 0.4)  # mu ± 2 sigma: 16-36 and 15-35
    assert ranking.versus_next(upper, lower) == "overlaps"
    verdict, why = ranking.versus_meetings(upper, lower, ranking.Tally(wins=10))
    assert verdict == "clear" and "overlap, but it clearly beats the next row head-to-head 10-0-0" in why
    verdict, why = ranking.versus_meetings(upper, lower, ranking.Tally(wins=3))  # 3 wins prove nothing
    assert verdict == "overlaps" and "not one-sided enough to tell" in why
    verdict, why = ranking.versus_meetings(upper, lower, ranking.Tally(losses=10))
    assert verdict == "overlaps" and "the next row clearly beats it head-to-head 0-0-10" in why
    verdict, why = ranking.versus_meetings(upper, lower, None)
    assert verdict == "overlaps" and why.endswith("overlap, and the two have not met head-to-head")
    richer = _entry("b", 25.0, 0.9)  # one-sided, but the lower row's mean reward is higher: not clear
    assert ranking.versus_meetings(upper, richer, ranking.Tally(wins=10))[0] == "overlaps"
    apart = _entry("c", 0.0, 0.1)
    assert ranking.versus_meetings(upper, apart, ranking.Tally(losses=10)) == (
        "clear",
        "its rating interval (μ ± 2σ) [16.00, 36.00] and the next row's [-10.00, 10.00] are apart",
    )


# ---------------------------------------------------------------------------------------------
# The name page: the head-to-head beside the ratings, problem opponents


def test_the_head_to_head_stands_beside_what_the_ratings_expect(cup, client):
    page = client.get("/api/names/crasher").json()
    current = {row["name"]: row["rating"] for row in client.get("/api/standings").json()["rows"]}
    for opponent in page["head_to_head"]:
        mine = ranking.MODEL.rating(mu=current["crasher"]["mu"], sigma=current["crasher"]["sigma"])
        theirs = ranking.MODEL.rating(mu=current[opponent["name"]]["mu"], sigma=current[opponent["name"]]["sigma"])
        assert opponent["expected"] == pytest.approx(ranking.expected_share(mine, theirs))
        tally = ranking.Tally(wins=opponent["wins"], draws=opponent["draws"], losses=opponent["losses"])
        assert opponent["disagrees"] == ranking.disagrees(tally, opponent["expected"])
        assert (opponent["why"] is not None) == opponent["disagrees"]
    html = client.get("/names/crasher").text
    assert 'id="head-to-head"' in html and "expected" in html


def test_a_record_that_disagrees_with_the_ratings_is_explained():
    """51-1-52 against a name the ratings expect it to beat 9 times in 10: outside the record's 95%
    interval, so it disagrees, and the reasons say what each counts."""
    record = ranking.Tally(wins=51, draws=1, losses=52)
    assert ranking.disagrees(record, 0.9) and not ranking.disagrees(record, 0.5)
    assert not ranking.disagrees(ranking.Tally(wins=2), 0.5)  # two wins of an even pair: chance explains them
    why = name_page._why_it_disagrees(104, 30, 800, 4)
    assert "the ratings come from all 800 matches of its playing version, against every opponent" in why
    assert "30 of these 104 matches were played by other versions than the two playing now" in why
    assert "a match holds 4 policies: the ratings count its place among all of them" in why
    assert "other versions" not in name_page._why_it_disagrees(104, 0, 800, 2)


def test_problem_opponents_are_only_those_it_does_worse_against_than_expected(cup, client):
    crasher = client.get("/api/names/crasher").json()
    assert crasher["problems"]  # it loses every match: below what any rating expects
    assert all(p["actual"] < p["expected"] and p["problem"] < 0 for p in crasher["problems"])
    walker = client.get("/api/names/walker").json()  # it wins every match: no opponent is a problem
    assert all(o["losses"] == o["draws"] == 0 for o in walker["head_to_head"]), walker["head_to_head"]
    assert walker["problems"] == []
    said = "None: walker does at least as well as its rating expects against every opponent"
    assert said in client.get("/names/walker").text


# ---------------------------------------------------------------------------------------------
# A team's failures: its own paths, grouped, counted from 1; its logs without the empty ones


def test_a_zips_traceback_names_its_files_as_the_zip_holds_them(cup, client):
    failure = client.get("/api/names/crasher", headers=auth(cup.tokens, "alpha")).json()["failures"][0]
    frames = [line for line in failure["traceback"]["own"].splitlines() if line.startswith("  File ")]
    assert frames and all(frame.startswith('  File "bot.py", line ') for frame in frames), frames
    for team in (None, "alpha", "beta"):
        for path in ("/api/names/crasher", "/names/crasher"):
            assert cup.zip_digest not in client.get(path, headers=auth(cup.tokens, team)).text, (team, path)


def test_identical_failures_are_one_row_with_a_count_and_their_latest_match(cup, client):
    page = client.get("/api/names/crasher", headers=auth(cup.tokens, "alpha")).json()
    crashed = [
        m for m in client.get("/api/matches").json()["matches"] if any(s["name"] == "crasher" for s in m["seats"])
    ]
    seats = sum(1 for m in crashed for s in m["seats"] if s["name"] == "crasher")
    assert [f["count"] for f in page["failures"]] == [seats]  # the same traceback in every seat of every match
    assert page["failures"][0]["match"] == max(m["id"] for m in crashed)
    assert f"×{seats}</span>, last in <a" in client.get("/names/crasher", headers=auth(cup.tokens, "alpha")).text
    public = client.get("/api/names/crasher").json()["failures"]  # grouped by what the public sees too
    assert [f["count"] for f in public] == [seats]


def test_steps_are_counted_from_1_wherever_people_read_them(cup, client):
    """crasher raises on its third step: step index 2, stored as such, shown as step 3."""
    page = client.get("/api/names/crasher").json()
    failure = page["failures"][0]
    assert failure["step"] == 2  # the data: a step index
    html = client.get("/names/crasher").text
    assert '<td class="number">3</td><td>ValueError</td>' in html
    match = client.get(f"/api/matches/{failure['match']}").json()
    assert {a["step"] for a in match["agents"] if a["name"] == "crasher"} == {2}
    assert "ValueError at step 3" in client.get(f"/matches/{failure['match']}").text  # the replay's jump
    assert Failure(step=2, phase="step", kind="ValueError", message="m").one_line() == "ValueError at step 3: m"
    assert Failure(step=None, phase="init", kind="E", message="m").one_line() == "E at start-up: m"
    fault = GameFault(phase="step", step=0, kind="IllegalMove", message="no", agent=1)
    assert fault.one_line() == "the game raised IllegalMove at step 1 applying agent 1's action: no"
    shown = ladder_command("show", str(cup.folder), "crasher")
    assert "ValueError at step 3:" in shown.stdout, shown.stdout
    assert "score" in shown.stdout and "expected" in shown.stdout  # its head-to-head beside the ratings
    assert f"×{failure['count']}, last in match {failure['match']}" in shown.stdout


def test_empty_logs_are_not_listed(cup, client):
    silent = client.get("/api/names/silent", headers=auth(cup.tokens, "beta")).json()
    assert silent["logs"] == []  # it never writes a line: nothing to list
    assert "(empty)" not in client.get("/names/silent", headers=auth(cup.tokens, "beta")).text
    logs = client.get("/api/names/crasher", headers=auth(cup.tokens, "alpha")).json()["logs"]
    assert logs and all("LOSSES-LOG" in log["log_tail"] for log in logs)


# ---------------------------------------------------------------------------------------------
# The final: its suggestion, its matches and their replays


def _ranking(groups: list[int]) -> FinalRanking:
    names = [
        NameRank(
            name=f"n{i}", rank=i + 1, group=g, strength=0.0, low=0.0, high=0.0, rank_probabilities=[1.0] * len(groups)
        )
        for i, g in enumerate(groups)
    ]
    return FinalRanking(names=names, matches=10, resamples=100, level=0.95, rule="")


def test_a_final_suggests_until_separated_while_a_group_holds_several_names():
    assert finals.separate(_ranking([1, 2, 3])) is None
    said = finals.separate(_ranking([1, 1, 1, 2]))
    assert said.startswith("group 1 holds several names, whose order these matches do not settle")
    assert "--until-separated 40" in said and "the 2 pairs next to each other in one group" in said
    assert finals.separate(_ranking([1, 1, 2, 2])).startswith("groups 1, 2 hold several names")


def test_the_final_lists_its_matches_with_their_replays(cup, client):
    final = client.get("/api/final").json()["final"]
    assert final["matches"] and len(final["matches"]) == final["scheduled"]
    assert final["separate"] == finals.separate(finals.FinalRanking.model_validate(final["ranking"]))
    html = client.get("/final").text
    for match in final["matches"]:
        assert match["state"] == "played" and match["replay"] == f"final-{final['id']}-{match['number']:05d}.json.z"
        assert f'href="/final/matches/{match["number"]}/replay"' in html
        replay = client.get(f"/final/matches/{match['number']}/replay")
        assert replay.status_code == 200 and replay.content == (cup.folder / "replays" / match["replay"]).read_bytes()
    assert client.get("/final/matches/999/replay").status_code == 404
    shown = ladder_command("final", str(cup.folder), "--show")
    assert shown.returncode == 0 and ("--until-separated" in shown.stdout) == (final["separate"] is not None)
    assert (final["until_separated"] is None) == (final["separate"] is None)


def test_the_report_says_what_the_board_says(cup, tmp_path):
    from conftest import policybox

    made = policybox("report", cup.folder, "--out", tmp_path / "report.html")
    assert made.returncode == 0, made.stdout + made.stderr
    html = (tmp_path / "report.html").read_text()
    assert "forfeits: placed below every name without one in those matches" in html
    assert "its rating interval (μ ± 2σ) [" in html and SCRIPT not in html


def test_a_moves_replay_marks_where_an_agent_failed_and_numbers_its_steps_from_1(tmp_path):
    """A connect-four match whose crasher dies on its third turn: the match page's moves player has a
    button naming it, its status and the step it failed at, counted from 1, whose data-step is the step
    index the moves' rows hold; the moves' table numbers its steps from 1."""

    game = EpisodeSettings(env=TEXT_CONNECT_FOUR, env_kwargs={"render_mode": "ansi"}, steps=60)
    with Ladder.create(tmp_path / "cup", LadderSettings(settings=game, agents=2, placement_matches=0)) as ladder:
        ladder.submit("crasher", policy("pettingzoo_bots.py:CrashAt", **{"kw.at_step": "3"}))
        ladder.submit("yellow", "random")
        activate(ladder, "crasher")
        assert ladder.run(matches=1, workers=1).played == 1
    with TestClient(make_app(tmp_path / "cup")) as client:
        page = client.get("/api/matches/1").json()
        (crashed,) = [agent for agent in page["agents"] if agent["name"] == "crasher"]
        assert crashed["status"] == "crashed" and crashed["step"] is not None
        html = client.get("/matches/1").text
    step = crashed["step"]
    assert f'data-step="{step}" data-seat="{crashed["seat"]}" data-status="crashed">' in html
    assert f"(crasher) crashed, {crashed['cause']} at step {step + 1}</button>" in html
    assert any(move["step"] == step for move in page["moves"])  # the jump lands on a row of the moves
    assert '<tr data-step="0"><td class="number">1</td>' in html


def test_a_finals_match_has_its_page_with_its_replay_played(cup, client):
    final = client.get("/api/final").json()["final"]
    number = next(m["number"] for m in final["matches"] if any("crasher" in group for group in m["placing"]))
    page = client.get(f"/api/final/matches/{number}").json()
    assert page["final"] == final["id"] and page["state"] == "played" and page["family"] == "mettagrid"
    crashed = [seat for seat in page["seats"] if seat["name"] == "crasher"]
    assert crashed and all(seat["status"] == "error" and seat["step"] == 2 for seat in crashed)
    assert all(seat["message"] == f"{SCRIPT} gave up on its step 3" for seat in crashed)  # its first line, for all
    frames = client.get(f"/api/final/matches/{number}/replay").json()
    assert [agent["name"] for agent in frames["agents"]] == [seat["name"] for seat in page["seats"]]
    html = client.get(f"/final/matches/{number}").text
    assert f'data-src="/api/final/matches/{number}/replay"' in html and "ValueError at step 3</button>" in html
    assert SCRIPT not in html and "&lt;script&gt;" in html
    assert f'href="/final/matches/{number}"' in client.get("/final").text
    assert client.get("/final/matches/999").status_code == 404
    assert client.get("/api/final/matches/999/replay").status_code == 404
