"""policybox ladder test as an organiser runs it: a name's better version found better than its
base against the ladder's other names, nothing rated, the test resumed by the same command; bad
input refused with one message. The test itself is versus's (tests/test_versus.py)."""

from __future__ import annotations

import json

from conftest import policybox
from helpers.ladders import WANDERER, activate, api_ladder

from policybox.league.ladder import match_store
from policybox.league.ladder.database import transaction


def ratings_and_matches(ladder) -> tuple[dict, int]:
    with transaction(ladder.engine) as connection:
        return match_store.live_ratings(connection), match_store.matches_scheduled(connection)


def test_a_better_version_is_found_better_than_its_base_and_nothing_is_rated(tmp_path):
    with api_ladder(tmp_path / "cup") as ladder:
        for name, source in (("walker", "noop"), ("rock", "random"), ("walker", WANDERER)):
            ladder.submit(name, source, check=False)
            activate(ladder, name)  # walker v2 supersedes v1
        assert ladder.run(matches=2, workers=2).played == 2
        before = ratings_and_matches(ladder)
        result = ladder.test("walker", max_episodes=60, workers=2)
        assert result.verdict == "B better" and result.low > 0 and result.episodes < 60, result
        assert (result.a, result.b, result.against) == ("walker@v1", "walker@v2", ["rock@v1"])
        assert ratings_and_matches(ladder) == before  # the test's episodes are no matches
    folder = tmp_path / "cup" / "tests" / "walker-v1-v2"
    assert json.loads((folder / "versus.json").read_text()) == json.loads(result.model_dump_json())
    tournament = json.loads((folder / "tournament.json").read_text())
    assert tournament["settings"]["steps"] == 30 and tournament["agents"] == 4  # the ladder's game
    # The same command, from the command line: the finished test is resumed, not played again.
    episodes = (folder / "results.jsonl").read_bytes()
    again = policybox("ladder", "test", str(tmp_path / "cup"), "walker", "--base", "v1", "--max-episodes", "60")
    assert again.returncode == 0, again.stdout + again.stderr
    assert again.stdout.startswith("B better: B − A = +") and "B = walker@v2, A = walker@v1;" in again.stdout
    assert f"results: {folder}" in again.stdout.replace("\n", "")
    assert (folder / "results.jsonl").read_bytes() == episodes


def test_bad_input_is_one_error_and_exit_2(tmp_path):
    with api_ladder(tmp_path / "cup") as ladder:
        for name, source in (("walker", "noop"), ("walker", "random"), ("rock", "random"), ("late", "noop")):
            ladder.submit(name, source, check=False)
            if name != "late":  # late's one version still qualifying
                activate(ladder, name)
    mistakes = {
        ("ghost",): "this ladder has no submission called 'ghost'",
        ("walker", "--base", "v9"): "walker has no version v9",
        ("walker", "--base", "first"): "--base 'first' names no version",
        ("walker", "--base", "v2"): "--base v2 is walker's playing version itself",
        ("rock",): "rock has one qualified version (v1)",
        ("late",): "late has no qualified version yet",
        ("walker", "--alpha", "0.5"): "--alpha must be between 0 and 0.5",
    }
    for args, message in mistakes.items():
        run = policybox("ladder", "test", tmp_path / "cup", *args, columns=300)
        output = run.stdout + run.stderr
        assert run.returncode == 2 and message in output, (args, output)
        assert len(output.strip().splitlines()) == 1, output
    assert not (tmp_path / "cup" / "tests").exists()
