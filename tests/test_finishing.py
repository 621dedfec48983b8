"""A worker stops a played episode's cells on a thread of its own while it starts the next
(``policybox.league.play.worker.Replies``): each result is still sent only once its cells are gone, the
episodes come out as they do one after another, and nothing of them -- process, cgroup, uid, scratch
folder -- outlives ``evaluate``, however it ends (its end, SIGTERM while an episode is being finished).
Judged by real cells and real processes, with psutil, ``/proc`` and ``/sys/fs/cgroup``."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
from multiprocessing import Pipe
from multiprocessing.connection import Connection
from pathlib import Path

import psutil
from conftest import policy
from helpers.processes import still_running, tree

from policybox.episode import run_episode
from policybox.host.cgroup import PREFIX
from policybox.host.sandbox import SCRATCH_PREFIX
from policybox.league.evaluate.journal import read_records
from policybox.league.play.runner import EpisodeJob
from policybox.league.play.worker import Player, Replies
from policybox.results import EpisodeResult
from policybox.settings import EpisodeSettings
from policybox.spec import parse_policy_arg

SCRATCH = re.compile(r"scratch (\S+)")
# At its 11th and last step a seat sleeps 3 s: the step's deadline passes (1 s), the episode ends, and its
# cell, still asleep, is killed after the stop's grace (1 s) -- a second a worker spends finishing each
# episode while it starts the next.
LATE_AT_THE_END = policy("faults.py:SleepOnceInStep", **{"kw.sleep_s": "3"})


def job(seed: int, log_dir: Path) -> EpisodeJob:
    settings = EpisodeSettings(steps=30, seed=seed)
    specs = [parse_policy_arg("random"), parse_policy_arg(policy("seeded_random.py:SeededRandom"))] * 2
    return EpisodeJob(name=f"episode-{seed}", specs=specs, entrants=["a", "b"] * 2, settings=settings,
                      log_dir=str(log_dir / str(seed)))  # fmt: skip


def live_uids() -> set[int]:
    """The uids of every process that still runs: ``policybox.host.uids.running_uids`` but for zombies, which
    run nothing (a forked seat's loader leaves its seats to the machine's init to reap)."""
    uids: set[int] = set()
    for process in psutil.process_iter():
        try:
            if process.status() != psutil.STATUS_ZOMBIE:
                uids.update(process.uids())
        except psutil.Error:
            continue
    return uids


def uids_of(result: EpisodeResult) -> set[int]:
    return {int(agent.sandbox["uid"].split()[-1]) for agent in result.agents}


def scratch_of(result: EpisodeResult) -> set[Path]:
    return {Path(SCRATCH.search(agent.sandbox["filesystem"]).group(1)) for agent in result.agents}


def test_a_result_is_sent_once_its_cells_are_gone_and_equals_the_episode_played_alone(tmp_path):
    ours, theirs = Pipe()
    player, replies = Player(), Replies(ours)
    try:
        replies.finish(1, player.played(job(1, tmp_path)))
        second = player.played(job(2, tmp_path))  # played while the first is being finished
        kind, key, sent = theirs.recv()
        assert (kind, key) == ("played", 1), sent
        first = EpisodeResult.model_validate_json(sent)
        assert not uids_of(first) & live_uids()  # its cells are gone as it is sent (a forked seat: a zombie at most)
        assert not any(path.exists() for path in scratch_of(first))  # and their scratch folders
        replies.finish(2, second)
        kind, key, sent = theirs.recv()
        assert (kind, key) == ("played", 2), sent
        overlapped = [first, EpisodeResult.model_validate_json(sent)]
    finally:
        replies.settle()
        player.close()
    for result, seed in zip(overlapped, (1, 2), strict=True):
        alone = job(seed, tmp_path / "alone")
        expected = run_episode(alone.specs, alone.settings, alone.log_dir, entrants=alone.entrants)
        assert [a.action_digest for a in result.agents] == [a.action_digest for a in expected.agents]
        assert [a.reward for a in result.agents] == [a.reward for a in expected.agents]
        assert result.cleanup == expected.cleanup == "cgroup+process-group"


def left_of(pids: set[int], uids: set[int]) -> list[str]:
    """What the processes ``pids`` (a run's workers among them) left: their cells' cgroups and scratch
    folders (both named after the worker's pid), and processes of the cells' ``uids``."""
    names = re.compile(rf"({re.escape(PREFIX)}|{re.escape(SCRATCH_PREFIX)})({'|'.join(map(str, pids))})-")
    found = [str(path) for path in Path(tempfile.gettempdir()).iterdir() if names.match(path.name)]
    for folder, subfolders, _ in os.walk("/sys/fs/cgroup"):
        found += [os.path.join(folder, name) for name in subfolders if names.match(name)]
    found += [f"a process of uid {uid}" for uid in uids & live_uids()]
    return found


def cell_uids(out: Path) -> set[int]:
    records, _ = read_records(out / "results.jsonl")
    return {uid for record in records.values() for uid in uids_of(EpisodeResult.model_validate(record))}


def evaluate(out: Path, episodes: int) -> list[str]:
    return [sys.executable, "-m", "policybox", "evaluate", "-p", "random", "-p", LATE_AT_THE_END, "--agents", "2",
            "--steps", "11", "--episodes", str(episodes), "--workers", "2", "--out", str(out)]  # fmt: skip


def test_nothing_of_the_episodes_outlives_evaluate(tmp_path):
    out = tmp_path / "board"
    process = subprocess.Popen(evaluate(out, 4), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    seen: dict[int, float] = {}
    while process.poll() is None:
        seen.update(tree(process.pid))
        time.sleep(0.05)
    stdout, stderr = process.communicate()
    assert process.returncode == 0, stdout + stderr
    records, _ = read_records(out / "results.jsonl")
    assert sorted(records) == [0, 1, 2, 3]
    assert still_running(seen) == []
    assert left_of(set(seen), cell_uids(out)) == []


def test_sigterm_while_an_episode_is_finished_keeps_every_result_and_leaves_nothing(tmp_path):
    out = tmp_path / "board"
    process = subprocess.Popen(evaluate(out, 8), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    results, seen = out / "results.jsonl", {}
    give_up = time.monotonic() + 120
    while not (results.exists() and results.read_text()) and time.monotonic() < give_up:
        seen.update(tree(process.pid))
        time.sleep(0.05)
    # A worker sends a result as it has finished an episode, a second into the next one (see
    # LATE_AT_THE_END): half a second on, it is finishing that one and starting a third.
    for _ in range(10):
        seen.update(tree(process.pid))
        time.sleep(0.05)
    written = results.read_text()
    process.send_signal(signal.SIGTERM)
    stdout, stderr = process.communicate(timeout=60)
    assert process.returncode == 143, stdout + stderr
    assert "Traceback" not in stderr, stderr
    gone_by = time.monotonic() + 10  # parent-death signals are delivered at once; reaping takes a moment
    while still_running(seen) and time.monotonic() < gone_by:  # more than half a second, on a loaded machine
        time.sleep(0.1)
    assert still_running(seen) == []
    kept = results.read_text()
    assert kept.startswith(written)  # every result written before the signal, as it was
    records, good = read_records(results)
    assert good == len(kept.encode()) and len(records) == kept.count("\n") < 8
    assert left_of(set(seen), cell_uids(out)) == []


def test_a_worker_stopped_while_it_finishes_an_episode_finishes_it_first(tmp_path):
    """SIGTERM to a worker playing one episode while it finishes the one before: it stops the one it
    plays, finishes the other -- its cells stopped, their cgroups and scratch removed, its result sent
    -- and only then exits."""
    ours, theirs = socket.socketpair()
    command = [sys.executable, "-I", "-m", "policybox.league.play.worker", "--fd", str(theirs.fileno()),
               "--parent-pid", str(os.getpid())]  # fmt: skip
    worker = subprocess.Popen(command, pass_fds=[theirs.fileno()], start_new_session=True)
    theirs.close()
    slow_to_stop = job(1, tmp_path).model_copy(update={"specs": [parse_policy_arg(LATE_AT_THE_END)] * 2,
                                                       "entrants": ["a", "b"]})  # fmt: skip
    playing = job(2, tmp_path)
    playing.settings.steps = 100_000  # still under way when the signal comes
    with Connection(ours.detach()) as connection:
        connection.send(("start", None, 0, dict(os.environ), str(tmp_path)))
        connection.send(("play", 1, slow_to_stop.model_dump_json()))
        connection.send(("play", 2, playing.model_dump_json()))
        give_up = time.monotonic() + 120
        while not list(Path(playing.log_dir).glob("*.log")) and time.monotonic() < give_up:
            time.sleep(0.02)  # the second starts as the first's last step is over and its cells are told to stop
        time.sleep(0.2)  # its cells start; the first's, asleep, are killed after the stop's grace (1 s)
        worker.send_signal(signal.SIGTERM)
        kind, key, sent = connection.recv()
        assert worker.wait(30) == 143
    assert (kind, key) == ("played", 1), sent
    first = EpisodeResult.model_validate_json(sent)
    assert left_of({worker.pid}, uids_of(first)) == []


def test_an_inline_episode_is_finished_on_the_thread_that_played_it(tmp_path):
    """Its policies live in the worker's own process: they are let go before the next episode's start."""
    inline = job(3, tmp_path)
    inline.settings.mode = "inline"
    ours, theirs = Pipe()
    player, replies = Player(), Replies(ours)
    try:
        replies.finish(3, player.played(inline))
        assert theirs.poll(0)  # sent as finish returned
        kind, key, sent = theirs.recv()
    finally:
        replies.settle()
        player.close()
    assert (kind, key) == ("played", 3), sent
    alone = run_episode(inline.specs, inline.settings, tmp_path / "alone", entrants=inline.entrants)
    result = EpisodeResult.model_validate_json(sent)
    assert [a.action_digest for a in result.agents] == [a.action_digest for a in alone.agents]
