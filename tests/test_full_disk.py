"""A full disk, played through the real CLI onto small tmpfs mounts of the test's own, judged from
outside: the exit code, one clear message naming the folder and what ran out, no traceback, every
line written intact, and a resume with room again that completes the tournament."""

from __future__ import annotations

import errno
import json
import os
import pickle
import re
import zlib
from pathlib import Path

import psutil
import pytest
from conftest import Ran, policy, policybox, remount

from policybox import StorageFull, evaluate, run_episode
from policybox.host.cgroup import kill_cgroup_parent
from policybox.results import AgentStatus, EpisodeRecord, EpisodeResult
from policybox.settings import EpisodeSettings
from policybox.storage import Resource, what_ran_out

EPISODES = 20
TOURNAMENT = ["-p", "random", "-p", "noop", "--episodes", str(EPISODES), "--agents", "4", "--steps", "100"]
ROOMY = "size=8m,nr_inodes=4000"


def the_error(run: Ran) -> str:
    """The one error message of a failed run, with no traceback anywhere."""
    output = run.stdout + run.stderr
    assert "Traceback" not in output and "OSError" not in output, output
    lines = [line for line in run.stderr.splitlines() if line.startswith("Error:")]
    assert len(lines) == 1, run.stderr
    return lines[0]


def whole_lines(journal: Path) -> list[EpisodeRecord]:
    """Every line of results.jsonl, each a whole, valid record of its own episode."""
    data = journal.read_bytes()
    assert data.endswith(b"\n") or not data, "a torn last line"
    records = [EpisodeRecord.model_validate_json(line) for line in data.splitlines()]
    assert len({record.episode for record in records}) == len(records)
    return records


def read_result(path: Path) -> EpisodeResult:
    return EpisodeResult.model_validate_json(path.read_text())


def outcome(result: EpisodeResult) -> list[tuple]:
    return [(agent.status, agent.reward, agent.action_digest) for agent in result.agents]


def kept_count(message: str) -> int:
    match = re.search(rf"(\d+) of {EPISODES} episodes are kept", message)
    assert match, message
    return int(match.group(1))


def test_evaluate_out_of_space_stops_with_one_message_and_resumes(disk):
    point = disk("size=80k")
    board = point / "board"
    run = policybox("evaluate", *TOURNAMENT, "--out", str(board), columns=300)
    assert run.returncode == 1
    message = the_error(run)
    assert f"no space left on the filesystem of {board}/" in message
    assert "free space and run the same command to resume" in message
    before = board.joinpath("results.jsonl").read_bytes()
    kept = whole_lines(board / "results.jsonl")
    assert 0 < len(kept) == kept_count(message) < EPISODES
    assert "incomplete" not in message and not [name for name in os.listdir(board) if name.endswith(".tmp")]

    remount(point, ROOMY)
    again = policybox("evaluate", *TOURNAMENT, "--out", str(board), columns=300)
    assert again.returncode == 0, again.stdout + again.stderr
    after = board.joinpath("results.jsonl").read_bytes()
    assert after.startswith(before)  # every line written before, byte for byte
    assert sorted(record.episode for record in whole_lines(board / "results.jsonl")) == list(range(EPISODES))
    assert json.loads(board.joinpath("summary.json").read_text())["episodes_done"] == EPISODES


def test_evaluate_out_of_inodes_names_inodes_and_does_not_retry(disk):
    point = disk("size=8m,nr_inodes=40")  # the agents' log files run out of inodes
    board = point / "board"
    run = policybox("evaluate", *TOURNAMENT, "--out", str(board), columns=300)
    assert run.returncode == 1
    message = the_error(run)
    assert f"no inodes left on the filesystem of {board}/" in message and " logs/episode-" in message
    assert "delete files to free inodes" in message and "incomplete" not in message
    kept = whole_lines(board / "results.jsonl")
    assert len(kept) == kept_count(message) < EPISODES

    remount(point, ROOMY)
    again = policybox("evaluate", *TOURNAMENT, "--out", str(board), columns=300)
    assert again.returncode == 0, again.stdout + again.stderr
    assert sorted(record.episode for record in whole_lines(board / "results.jsonl")) == list(range(EPISODES))


def test_evaluate_replays_on_a_full_disk_leave_no_torn_replay(disk):
    board = disk("size=200k") / "board"
    run = policybox("evaluate", *TOURNAMENT, "--replays", "--out", str(board), columns=300)
    assert run.returncode == 1
    message = the_error(run)
    assert f"no space left on the filesystem of {board}/" in message
    kept = whole_lines(board / "results.jsonl")
    assert len(kept) == kept_count(message) < EPISODES
    replays = {path.name: path for path in (board / "replays").iterdir()}
    for record in kept:
        assert f"episode-{record.episode:05d}.json.z" in replays
    for path in replays.values():  # what is there is a whole replay, never a torn one
        assert json.loads(zlib.decompress(path.read_bytes()))["version"]


def test_run_out_on_a_full_disk_shows_the_episode_and_names_the_file(disk, tmp_path):
    point = disk("size=8k")
    point.joinpath("filler").write_bytes(b"x" * 4000)
    run = policybox(
        "run", "-p", "random", "-n", "4", "--steps", "100", "--out", str(point / "result.json"), columns=300
    )
    assert run.returncode == 1
    assert run.stdout.count(" ok ") >= 4  # the table: every agent's result
    message = the_error(run)
    assert f"no space left on the filesystem of {point}/ (writing result.json)" in message
    assert sorted(os.listdir(point)) == ["filler"]  # neither a torn result nor a temporary file


def test_run_replay_on_a_full_disk_keeps_the_result(disk, tmp_path):
    point = disk("size=8k")
    point.joinpath("filler").write_bytes(b"x" * 4000)
    out = tmp_path / "result.json"
    args = ["run", "-p", "random", "-n", "4", "--steps", "100", "--seed", "3", "--log-dir", str(tmp_path / "logs")]
    run = policybox(*args, "--replay", str(point / "x.json.z"), "--out", str(out), columns=300)
    assert run.returncode == 1
    message = the_error(run)
    assert f"no space left on the filesystem of {point}/ (writing x.json.z)" in message
    assert "replay:" not in run.stdout and sorted(os.listdir(point)) == ["filler"]
    result = read_result(out)
    assert result.steps == 100 and [agent.status for agent in result.agents] == [AgentStatus.OK] * 4

    both = policybox(*args, "--replay", str(point / "x.json.z"), "--out", str(point / "result.json"), columns=300)
    assert both.returncode == 1 and "Traceback" not in both.stdout + both.stderr
    errors = [line for line in both.stderr.splitlines() if line.startswith("Error:")]
    assert len(errors) == 2 and "(writing x.json.z)" in errors[0] and "(writing result.json)" in errors[1]


def test_agent_logs_on_a_full_disk_are_cut_short_and_the_episode_is_whole(disk, tmp_path):
    point = disk("size=16k")
    chatty = policy("chatty.py:Chatty")
    args = ["run", "-p", chatty, "-p", "random", "-n", "4", "--steps", "300", "--seed", "5"]
    run = policybox(*args, "--log-dir", str(point / "logs"), "--out", str(tmp_path / "full.json"), columns=300)
    assert run.returncode == 0, run.stdout + run.stderr
    assert f"agent logs cut short: no space left on the filesystem of {point / 'logs'}/" in run.stdout
    roomy = policybox(*args, "--log-dir", str(tmp_path / "logs"), "--out", str(tmp_path / "roomy.json"), columns=300)
    assert roomy.returncode == 0
    full, reference = (read_result(tmp_path / f"{name}.json") for name in ("full", "roomy"))
    assert outcome(full) == outcome(reference)
    assert full.agents[0].log_note.startswith("cut short: no space left") and reference.agents[0].log_note is None


def test_a_log_folder_out_of_inodes_plays_nothing_and_says_so(disk):
    point = disk("size=1m,nr_inodes=4")  # the folder, and one log file of four
    run = policybox("run", "-p", "random", "-n", "4", "--steps", "50", "--log-dir", str(point / "logs"), columns=300)
    assert run.returncode == 1
    message = the_error(run)
    assert "no inodes left on the filesystem of" in message and str(point) in message


def test_the_python_api_raises_storage_full(disk, tmp_path):
    point = disk("size=8k")
    point.joinpath("filler").write_bytes(b"x" * 4000)
    settings = EpisodeSettings(steps=50, replay=str(point / "x.json.z"))
    with pytest.raises(StorageFull) as caught:
        run_episode(["random"], settings, tmp_path / "logs", agents=2)
    assert caught.value.resource == Resource.SPACE and caught.value.result.steps == 50

    board = disk("size=24k") / "board"  # room for the tournament and a few of its 12 episodes
    with pytest.raises(StorageFull, match=r"of 12 episodes are kept") as stopped:
        evaluate(["random", "noop"], board, episodes=12, agents=2, steps=20, workers=1)
    assert str(stopped.value).startswith(f"no space left on the filesystem of {board}/")


def test_storage_full_survives_the_trip_from_a_worker_and_names_a_quota(tmp_path):
    full = StorageFull(tmp_path / "board" / "results.jsonl", what_ran_out(errno.EDQUOT, tmp_path))
    told = pickle.loads(pickle.dumps(full.with_outcome("3 of 9 episodes are kept", "resume", tmp_path / "board")))
    assert str(told) == (
        f"the disk quota is used up on the filesystem of {tmp_path / 'board'}/ (writing results.jsonl): "
        "3 of 9 episodes are kept; free space within the quota and resume"
    )
    assert what_ran_out(errno.ENOSPC, tmp_path / "not" / "made" / "yet") == Resource.SPACE


def test_a_log_file_that_cannot_be_made_leaks_nothing(disk):
    logs = disk("size=1m,nr_inodes=4") / "logs"  # two of the four agents' log files fit

    def start() -> None:
        with pytest.raises(StorageFull, match="no inodes left"):
            run_episode(["random"], EpisodeSettings(steps=20), logs, agents=4)

    start()  # the first also opens what stays open for the process's life (the uid lock folder)
    fds, cgroups = psutil.Process().num_fds(), cell_cgroups()
    start()
    assert psutil.Process().num_fds() == fds  # no uid lease, pipe or log file left open
    assert cell_cgroups() == cgroups  # nor the cgroup of the cell whose log could not be made


def cell_cgroups() -> set[Path]:
    """The cgroups this process made for its cells (others' test runs may share the parent)."""
    parent = kill_cgroup_parent()
    return set(parent.glob(f"policybox-{os.getpid()}-*")) if parent else set()
