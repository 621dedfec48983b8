"""policybox versus as a user runs it: paired episodes (the same seed and seats, A's then B's) until
the sequential test decides; a better bot found better, a copy never; a SIGKILL then a resume
ending in the uninterrupted run's verdict; bad input refused, touching nothing.

The test's error rates themselves are measured on simulated streams (tests/test_stats_sequential.py);
these play real episodes, in real cells, with short games."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest
from conftest import policy
from conftest import policybox as policybox_cli  # the name policybox is the package's here

import policybox
from policybox.league.evaluate.journal import read_records
from policybox.league.play.seating import paired_seats
from policybox.league.play.tournament import Tournament, entrants
from policybox.settings import EpisodeSettings

EXAMPLES = Path(__file__).parents[1] / "examples"
MOVES = str(EXAMPLES / "moves.yaml")  # 0.01 a step moved: Wanderer keeps walking, noop never moves
WANDERER = f"{EXAMPLES / 'wanderer.py'}:Wanderer"
CONNECT_FOUR = "pettingzoo:pettingzoo.classic.connect_four_v3:env"
SEEDED = policy("pettingzoo_bots.py:Seeded")


@pytest.mark.parametrize("opponents", [0, 1, 2, 3])
@pytest.mark.parametrize("seats", [1, 2, 3, 4, 6])
def test_a_pair_is_one_seat_map_with_b_where_a_sat_and_the_subject_takes_every_seat(opponents, seats):
    pairs = 60
    maps = paired_seats(2 + opponents, seats, 2 * pairs, seed=7)
    assert len(maps) == 2 * pairs
    swap = {0: 1, 1: 0}
    for first, second in zip(maps[::2], maps[1::2], strict=True):
        assert second == [swap.get(index, index) for index in first]
        assert 0 in first and 1 in second
        if opponents or seats == 1:  # against opponents (or alone), each episode holds one version only
            assert 1 not in first and 0 not in second
    for version in (0, 1):
        held = Counter(seat for seat_map in maps for seat, index in enumerate(seat_map) if index == version)
        assert set(held) == set(range(seats))
        assert max(held.values()) - min(held.values()) <= 1, (version, held)


@pytest.mark.parametrize("opponents", [1, 2, 3, 4])
def test_in_a_two_seat_game_the_subject_meets_every_opponent_in_both_seats_equally_often(opponents):
    policies = opponents + 1  # the subject's half of a double round robin: 2(P - 1) of every P(P - 1) matches
    maps = paired_seats(2 + opponents, 2, 2 * 2 * (policies - 1) * 3, seed=11)
    met = Counter((seat, first[1 - seat]) for first in maps[::2] for seat in (0, 1) if first[seat] == 0)
    assert set(met) == {(seat, opponent) for seat in (0, 1) for opponent in range(2, 2 + opponents)}
    assert len(set(met.values())) == 1, met


def test_both_episodes_of_a_pair_play_its_seed():
    tournament = Tournament(
        entrants=entrants(["noop", "random"]), episodes=6, agents=2, seating="paired", settings=EpisodeSettings(seed=4)
    )
    seeds = [tournament.episode_seed(episode) for episode in range(6)]
    assert seeds[0::2] == seeds[1::2] and len(set(seeds)) == 3


def test_a_better_bot_is_found_better_in_a_mettagrid_arena(tmp_path):
    out = tmp_path / "ab"
    args = ["noop", WANDERER, "--env", MOVES, "--steps", "30", "--max-episodes", "60", "--workers", "2"]
    run = policybox_cli("versus", *args, "--out", str(out))
    assert run.returncode == 0, run.stdout + run.stderr
    assert run.stdout.startswith("B better: B − A = +") and "reward per agent, 90% interval [" in run.stdout
    assert "B = Wanderer, A = noop;" in run.stdout and "alpha 0.05, beta 0.05" in run.stdout
    result = policybox.VersusResult.model_validate_json((out / "versus.json").read_text())
    assert result.verdict == "B better" and result.low > 0 and result.episodes == 2 * result.pairs < 60
    assert result.failures == {"noop": 0, "Wanderer": 0} and result.played >= result.episodes
    # The folder is evaluate's: its tournament (paired seating), journal and summary, which evaluate reads.
    assert json.loads((out / "tournament.json").read_text())["seating"] == "paired"
    records, _ = read_records(out / "results.jsonl")
    for pair in range(result.pairs):
        first, second = records[2 * pair], records[2 * pair + 1]
        assert first.seed == second.seed
        assert second.seats == ["Wanderer" if key == "noop" else "noop" for key in first.seats]
    summary = policybox_cli("evaluate", "--summary", str(out))
    assert summary.returncode == 0 and "Wanderer" in summary.stdout


def test_a_test_in_which_no_agent_scored_says_so_and_evaluate_summary_says_it_is_a_versus_folder(tmp_path):
    out = tmp_path / "still"
    args = ["noop", "noop,name=statue", "--env", MOVES, "--steps", "10", "--max-episodes", "4", "--workers", "2"]
    run = policybox_cli("versus", *args, "--out", str(out))
    assert run.returncode == 0, run.stdout + run.stderr
    said = " ".join(run.stdout.split())
    assert "no agent scored: every reward in its 4 episodes was 0, so B − A says nothing of A and B." in said
    assert policybox.VersusResult.model_validate_json((out / "versus.json").read_text()).scored == 0
    summary = policybox_cli("evaluate", "--summary", str(out))
    assert summary.returncode == 0, summary.stderr
    said = " ".join(summary.stdout.split())
    assert said.startswith(f"{out} is a versus folder: its answer is the paired test's verdict, kept in {out}/versus")
    assert "undecided at the cap: B − A = +0 reward per agent" in said and "statue" in said  # then its leaderboard
    scoring = policybox_cli("versus", "noop", WANDERER, *args[2:], "--out", str(tmp_path / "moving"))
    assert scoring.returncode == 0 and "no agent scored" not in scoring.stdout, scoring.stdout


def test_a_copy_is_never_found_better_in_a_two_player_pettingzoo_game(tmp_path):
    result = policybox.versus(
        SEEDED,
        f"{SEEDED},name=copy",
        against=["random"],
        env=CONNECT_FOUR,
        max_episodes=40,
        workers=2,
        out=tmp_path / "copy",
    )
    assert result.verdict in ("B not better", "undecided at the cap"), result
    assert (result.a, result.b, result.against) == ("Seeded", "copy", ["random"])
    assert json.loads((tmp_path / "copy" / "versus.json").read_text()) == json.loads(result.model_dump_json())


def test_sigkill_then_resume_ends_in_the_uninterrupted_runs_verdict(tmp_path):
    args = [SEEDED, "random", "--env", CONNECT_FOUR, "--max-episodes", "24", "--seed", "3"]
    whole = policybox.versus(
        SEEDED, "random", env=CONNECT_FOUR, max_episodes=24, seed=3, workers=1, out=tmp_path / "whole"
    )
    folder = tmp_path / "killed"
    # A process of its own: the subject is a SIGKILL in the middle, which only a process can get.
    command = [sys.executable, "-m", "policybox", "versus", *args, "--workers", "2", "--out", str(folder)]
    victim = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    results = folder / "results.jsonl"
    give_up = time.monotonic() + 300
    while time.monotonic() < give_up and _whole_lines(results).count(b"\n") < 7:
        time.sleep(0.02)
    victim.send_signal(signal.SIGKILL)
    victim.wait()
    kept = _whole_lines(results)
    resumed = policybox_cli("versus", *args, "--workers", "2", "--out", str(folder), "--json")
    assert resumed.returncode == 0, resumed.stderr
    result = policybox.VersusResult.model_validate_json(resumed.stdout)
    assert result.model_dump(exclude={"played"}) == whole.model_dump(exclude={"played"})
    assert results.read_bytes().startswith(kept)  # no finished episode was played again
    assert len(read_records(results)[0]) == result.played


def _whole_lines(path: Path) -> bytes:
    try:
        data = path.read_bytes()
    except OSError:
        return b""
    return data[: data.rfind(b"\n") + 1]


def versus_here(*args: str) -> tuple[int, str]:
    """``policybox versus ARGS`` in this process: its exit code and output (errors included)."""
    run = policybox_cli("versus", *args, columns=300)
    return run.returncode, run.stdout + run.stderr


def test_bad_input_is_one_error_and_exit_2_touching_nothing(tmp_path):
    out = tmp_path / "ab"
    mistakes = {
        ("noop", "noop"): "two policies are both called 'noop'",
        ("noop", "random", "--against", "noop"): "two policies are both called 'noop'",
        ("noop", "random", "--alpha", "0.5"): "--alpha must be between 0 and 0.5",
        ("noop", "random", "--beta", "0"): "--beta must be between 0 and 0.5",
        ("noop", "random", "--effect", "0"): "--effect must be above 0",
        ("noop", "random", "--max-episodes", "1"): "--max-episodes",
        ("noop", "random", "--agents", "1", "--against", "random,name=r"): "no seat for an opponent",
    }
    for args, message in mistakes.items():
        code, output = versus_here(*args, "--steps", "5", "--out", str(out))
        assert code == 2 and message in output, (args, output)
        assert not out.exists(), args


def test_a_test_resumed_at_other_levels_or_a_lower_cap_is_refused(tmp_path):
    out = tmp_path / "ab"
    out.mkdir()
    held = {
        "a": "noop", "b": "random", "against": [], "verdict": "undecided", "pairs": 0, "episodes": 0, "played": 0,
        "max_episodes": 100, "estimate": None, "low": None, "high": None, "alpha": 0.05, "beta": 0.05,
        "effect": 0.2, "statistic": 0.0, "bounds": [-13.0, 13.0], "failures": {"noop": 0, "random": 0}, "incomplete": 0,
    }  # fmt: skip
    (out / "versus.json").write_text(json.dumps(held))
    code, output = versus_here("noop", "random", "--alpha", "0.1", "--out", str(out))
    assert code == 2 and "alpha 0.05, beta 0.05, effect 0.2" in output, output
    code, output = versus_here("noop", "random", "--max-episodes", "50", "--out", str(out))
    assert code == 2 and "--max-episodes must be at least that" in output, output
    assert [path.name for path in out.iterdir()] == ["versus.json"]
