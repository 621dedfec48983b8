"""policybox evaluate as a user runs it: a tournament into a folder that survives SIGKILL, resumes,
refuses another tournament's folder, and gives the same episodes whatever the number of workers."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import unittest.mock
import zlib
from pathlib import Path

import psutil
from conftest import policy, policybox
from helpers.replays import load_replay
from helpers.workers import WorkerKiller

from policybox import process_names
from policybox.league.evaluate.journal import read_records
from policybox.league.evaluate.results_folder import load_summary, play_tournament
from policybox.league.play.tournament import Tournament, entrants
from policybox.settings import EpisodeSettings

SEEDED = policy("seeded_random.py:SeededRandom")
STATEFUL = policy("stateful.py:Stateful")


def outcomes(folder: Path) -> dict[int, tuple]:
    """What must be identical between runs: per episode, its seed, seats, rewards and action digests."""
    records, _ = read_records(folder / "results.jsonl")
    return {
        e: (r.seed, r.seats, [a.reward for a in r.agents], [a.action_digest for a in r.agents])
        for e, r in records.items()
    }


def test_random_against_noop_prints_a_leaderboard(tmp_path):
    out = tmp_path / "board"
    run = policybox(
        "evaluate", "-p", "random", "-p", "noop", "--episodes", "4", "--agents", "4", "--steps", "60", "--out", str(out)
    )
    assert run.returncode == 0, run.stdout + run.stderr
    assert "random" in run.stdout and "noop" in run.stdout and "ci95" not in run.stderr
    summary = json.loads((out / "summary.json").read_text())
    assert summary["episodes_done"] == 4
    by_policy = {row["policy"]: row for row in summary["policies"]}
    assert by_policy["random"]["seat_plays"] == by_policy["noop"]["seat_plays"] == 8
    assert by_policy["random"]["seats"] == by_policy["noop"]["seats"] == [2, 2, 2, 2]
    lines = (out / "results.jsonl").read_text().splitlines()
    assert sorted(json.loads(line)["episode"] for line in lines) == [0, 1, 2, 3]
    again = policybox("evaluate", "--summary", str(out))
    assert again.returncode == 0 and "random" in again.stdout


def test_sigkill_at_any_moment_then_resume_equals_an_uninterrupted_run(tmp_path):
    args = [
        "-p",
        SEEDED,
        "-p",
        STATEFUL,
        "-p",
        "noop",
        "--episodes",
        "6",
        "--agents",
        "3",
        "--steps",
        "80",
        "--seed",
        "5",
        "--workers",
        "2",
    ]
    whole = policybox("evaluate", *args, "--out", str(tmp_path / "whole"))
    assert whole.returncode == 0, whole.stderr
    folder = tmp_path / "killed"
    # A process of its own: the subject is a SIGKILL at any moment, which only a process can get.
    command = [sys.executable, "-m", "policybox", "evaluate", *args, "--out", str(folder)]
    victim = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    results = folder / "results.jsonl"
    give_up = time.monotonic() + 300
    while time.monotonic() < give_up and len(_lines(results)) < 2:
        time.sleep(0.02)
    victim.send_signal(signal.SIGKILL)
    victim.wait()
    with open(results, "ab") as torn:  # as if it died in the middle of a write
        torn.write(b'{"episode": 5, "half a line')
    resumed = policybox("evaluate", *args, "--out", str(folder))
    assert resumed.returncode == 0, resumed.stderr
    assert outcomes(folder) == outcomes(tmp_path / "whole")
    assert len(_lines(results)) == 6  # nothing counted twice, the torn line gone


def _lines(path: Path) -> list[str]:
    try:
        return [line for line in path.read_text().splitlines() if line.endswith("}")]
    except OSError:
        return []


def test_another_tournament_into_the_same_folder_is_refused_untouched(tmp_path):
    out = tmp_path / "board"
    first = policybox("evaluate", "-p", "noop", "--episodes", "1", "--agents", "2", "--steps", "5", "--out", str(out))
    assert first.returncode == 0, first.stderr
    before = {path: path.read_bytes() for path in out.rglob("*") if path.is_file()}
    second = policybox("evaluate", "-p", "noop", "--episodes", "1", "--agents", "2", "--steps", "6", "--out", str(out))
    assert second.returncode == 2 and "another tournament" in second.stderr
    assert {path: path.read_bytes() for path in out.rglob("*") if path.is_file()} == before


def tournament(workers_seed: int = 3, episodes: int = 4) -> Tournament:
    return Tournament(
        entrants=entrants([SEEDED, STATEFUL]),
        episodes=episodes,
        agents=3,
        settings=EpisodeSettings(steps=50, seed=workers_seed),
    )


def test_one_worker_and_two_give_the_same_episodes(tmp_path):
    play_tournament(tournament(), tmp_path / "one", workers=1)
    play_tournament(tournament(), tmp_path / "two", workers=2)
    assert outcomes(tmp_path / "one") == outcomes(tmp_path / "two")
    assert load_summary(tmp_path / "one").model_dump(exclude={"policies"}) == load_summary(tmp_path / "two").model_dump(
        exclude={"policies"}
    )


def test_a_lost_worker_is_replaced_and_its_episode_counted_once(tmp_path):
    """SIGKILL a worker process mid-tournament: its episode is played again elsewhere, once."""
    killer = WorkerKiller(after_s=0.3)
    killer.start()
    summary = play_tournament(tournament(episodes=6), tmp_path / "board", workers=2)
    killer.join()
    assert killer.killed, "no worker was found to kill"
    assert summary.episodes_done == 6 and not summary.incomplete
    assert sorted(outcomes(tmp_path / "board")) == list(range(6))
    assert outcomes(tmp_path / "board") == {e: o for e, o in outcomes(_reference(tmp_path)).items()}


def _reference(tmp_path: Path) -> Path:
    play_tournament(tournament(episodes=6), tmp_path / "reference", workers=1)
    return tmp_path / "reference"


def test_a_tournament_file_with_options_the_command_line_overrides(tmp_path):
    (tmp_path / "bots").mkdir()
    (tmp_path / "bots" / "memo.py").write_text((Path(STATEFUL.split(":")[0])).read_text())
    (tmp_path / "cup.yaml").write_text(
        "policies: [noop, bots/memo.py:Stateful]\n"
        "episodes: 4\nagents: 2\nsteps: 20\nseed: 9\nout: results\nact_timeout_ms: 700\n"
    )
    run = policybox("evaluate", str(tmp_path / "cup.yaml"), "--episodes", "2", cwd="/")
    assert run.returncode == 0, run.stdout + run.stderr
    stored = json.loads((tmp_path / "results" / "tournament.json").read_text())
    assert stored["episodes"] == 2  # the command line wins
    assert stored["settings"]["limits"]["act_timeout_ms"] == 700 and stored["settings"]["seed"] == 9
    assert [e["key"] for e in stored["entrants"]] == ["noop", "Stateful"]
    bad = tmp_path / "bad.yaml"
    bad.write_text("policies: [noop]\nout: x\nepisods: 3\n")
    run = policybox("evaluate", str(bad))
    assert run.returncode == 2 and "unknown keys ['episods']" in run.stderr


def test_the_python_api(tmp_path):
    import policybox

    summary = policybox.evaluate(["random", "noop"], out=tmp_path / "board", episodes=2, agents=2, steps=20, seed=1)
    assert isinstance(summary, policybox.Summary) and summary.episodes_done == 2
    assert policybox.load_summary(tmp_path / "board") == summary


def test_replays_are_written_per_episode(tmp_path):
    run = policybox("evaluate", "-p", "random", "-p", "noop", "--episodes", "2", "--agents", "2", "--steps", "15",
                    "--out", str(tmp_path / "board"), "--replays")  # fmt: skip
    assert run.returncode == 0, run.stderr
    for episode in (0, 1):
        replay = load_replay(tmp_path / "board" / "replays" / f"episode-{episode:05d}.json.z")
        assert replay["num_agents"] == 2 and replay["max_steps"] == 15


def test_user_mistakes_found_by_the_workers_are_exit_2_and_touch_nothing(tmp_path):
    for mistake in (["--preload", "policybox_no_such_module"], ["-p", "no_such_shorthand"]):
        out = tmp_path / mistake[1]
        run = policybox("evaluate", "-p", "random", *mistake, "--episodes", "1", "--steps", "2", "--out", str(out))
        assert run.returncode == 2 and mistake[1] in run.stderr and "Traceback" not in run.stderr
        assert not out.exists()


def test_a_policy_that_cannot_be_built_is_refused_before_any_episode(tmp_path):
    """A misspelt class is refused with exit 2, naming the policy, the class and what the file defines;
    no episode is played and no folder made."""
    (tmp_path / "bots").mkdir()
    (tmp_path / "bots" / "greedy.py").write_text(
        "from mettagrid.policy.noop import NoopPolicy\n\nclass Greedy(NoopPolicy):\n    pass\n\n"
        "class GreedyAgent:\n    pass\n"
    )
    out = tmp_path / "board"
    args = ["evaluate", "-p", "random", "-p", "./bots/greedy.py:Greedyy", "--episodes", "4", "--steps", "5"]
    run = policybox(*args, "--out", str(out), cwd=tmp_path)
    assert run.returncode == 2, run.stdout + run.stderr
    assert "Greedyy cannot be built: AttributeError at start-up: no class 'Greedyy' in " in run.stderr
    assert "greedy.py; it defines Greedy, GreedyAgent" in run.stderr and "Traceback" not in run.stderr
    assert not out.exists()


def test_more_episodes_grow_the_tournament_and_keep_the_first(tmp_path):
    out = tmp_path / "board"
    base = ["evaluate", "-p", "random", "-p", "noop", "--agents", "2", "--steps", "5", "--out", str(out)]
    assert policybox(*base, "--episodes", "3").returncode == 0
    first = (out / "results.jsonl").read_text().splitlines()
    grown = policybox(*base, "--episodes", "5")
    assert grown.returncode == 0, grown.stderr
    assert "3 of 5 episodes already done" in grown.stdout
    lines = (out / "results.jsonl").read_text().splitlines()
    assert lines[:3] == first and len(lines) == 5
    assert json.loads((out / "tournament.json").read_text())["episodes"] == 5
    fewer = policybox(*base, "--episodes", "4")
    assert fewer.returncode == 2 and "holds 5 episodes of this tournament" in fewer.stderr


def test_a_changed_setting_is_refused_naming_what_differs(tmp_path):
    out = tmp_path / "board"
    base = ["evaluate", "-p", "noop", "--episodes", "1", "--agents", "2", "--out", str(out)]
    assert policybox(*base, "--steps", "5").returncode == 0
    before = {path: path.read_bytes() for path in out.rglob("*") if path.is_file()}
    changed = policybox(*base, "--steps", "6", "--seating", "random")
    assert changed.returncode == 2
    assert (
        "settings.steps (6 here; 5 there)" in changed.stderr
        and 'seating ("random" here; "rotate" there)' in changed.stderr
    )
    other_policy = policybox("evaluate", "-p", "random", *base[3:], "--steps", "5")
    assert other_policy.returncode == 2 and "policies (random here; noop there)" in other_policy.stderr
    assert {path: path.read_bytes() for path in out.rglob("*") if path.is_file()} == before


def test_command_line_paths_are_relative_to_the_current_folder_and_the_files_to_the_file(tmp_path):
    """``evaluate cups/t.yaml --out o1 -p ./bots/x.py:X``: o1 and bots/ are the current folder's; the
    file's own out: and policies: would be the file's folder's."""
    (tmp_path / "cups").mkdir()
    (tmp_path / "bots").mkdir()
    (tmp_path / "bots" / "x.py").write_text("from mettagrid.policy.noop import NoopPolicy as X\n")
    (tmp_path / "cups" / "t.yaml").write_text("policies: [noop]\nepisodes: 1\nagents: 2\nsteps: 5\nout: from-file\n")
    run = policybox("evaluate", "cups/t.yaml", "--out", "o1", "-p", "./bots/x.py:X", cwd=tmp_path)
    assert run.returncode == 0, run.stdout + run.stderr
    assert (tmp_path / "o1" / "results.jsonl").is_file() and not (tmp_path / "cups" / "o1").exists()
    stored = json.loads((tmp_path / "o1" / "tournament.json").read_text())
    assert stored["entrants"][0]["spec"]["class_path"] == f"{tmp_path / 'bots' / 'x.py'}:X"
    from_file = policybox("evaluate", "cups/t.yaml", cwd=tmp_path)
    assert from_file.returncode == 0 and (tmp_path / "cups" / "from-file" / "results.jsonl").is_file()


def test_replays_of_a_pettingzoo_game_are_its_moves(tmp_path):
    out = tmp_path / "board"
    game = "pettingzoo:pettingzoo.classic.connect_four_v3:env"
    run = policybox("evaluate", "-p", "random", "--env", game, "--episodes", "2", "--replays", "--out", out)
    assert run.returncode == 0, run.stderr
    files = sorted((out / "replays").glob("*.json.z"))
    assert len(files) == 2
    for file in files:
        document = json.loads(zlib.decompress(file.read_bytes()))
        assert document["format"] == "policybox-moves" and document["agents"] == ["player_0", "player_1"]
        assert document["moves"] and {move["agent"] for move in document["moves"]} == {"player_0", "player_1"}


def test_kept_workers_play_every_run_of_their_block_and_end_with_it(tmp_path):
    """Within kept_workers(), tournaments given no pool play on the same two worker processes (forking
    their cells from this process's kept zygote), whatever test pytest says it runs (PYTEST_CURRENT_TEST);
    a changed environment variable starts them anew, since episodes may read it; when the block ends
    every worker is gone.
    Judged from outside: this process's worker processes, and the results."""
    from policybox.league.play.worker_pool import kept_workers

    def workers() -> set[int]:
        return {p.pid for p in psutil.Process().children(recursive=True) if p.name() == process_names.WORKER}

    before = workers()
    seen = []
    with kept_workers() as kept:
        for turn, environment in enumerate(({}, {"PYTEST_CURRENT_TEST": "another"}, {"UV_INDEX_URL": "x"})):
            with unittest.mock.patch.dict(os.environ, environment):
                board = play_tournament(tournament(episodes=2), tmp_path / str(turn), workers=2)
            assert board.episodes_done == 2
            seen.append(workers() - before)
        ((_, pool),) = kept.items()
        assert seen[0] == seen[1] and seen[2] == pool.pids and len(pool.pids) == 2 and not seen[1] & seen[2]
    assert workers() == before
