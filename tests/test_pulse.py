"""The ladder's pulse, as a participant and the organiser read it: whether ``ladder run`` is playing,
idle, or stopped since when; the queue's places and ETAs from the rate it plays at; the matches in
flight; and the small things of the run's command line (its progress line, ``ladder final`` during a
run, ``ladder status``'s last line, ``ladder show`` printed to a file).

Judged from what a person reads -- ``ladder status``, ``/api/queue``, the submit answer, the terminal
text -- of a real ``ladder run`` process stopped by SIGTERM or killed by SIGKILL; the ETAs from a
heartbeat written with a known rate, and the rate's measure with a clock the test turns.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import psutil
import pytest
from conftest import policy
from helpers.ladders import WANDERER, api_ladder, ladder_command, process_tree, start_run, wait_until
from helpers.servers import stop
from helpers.web import upload
from helpers.zips import bot_zip
from starlette.testclient import TestClient

from policybox.cli.ladder_play import progress_line
from policybox.ladder import Ladder
from policybox.league.ladder import heartbeat, reads
from policybox.league.ladder.database import reading, transaction
from policybox.league.ladder.final import play_final
from policybox.league.ladder.run_loop import Progress
from policybox.league.views import queue_page
from policybox.league.views.pulse import FINAL_ETA, STOPPED_ETA
from policybox.league.web.app import make_app

NAMES = [("wanderer", WANDERER), ("random", "random"), ("noop", "noop")]
# a title longer than 80 columns, which every name with a match shows
HEAD_TO_HEAD = "head-to-head: W-D-L, score per match and what the ratings expect, mean score margin"


def pulse_of(folder: Path) -> dict:
    """The pulse ``ladder status --json`` gives."""
    status = ladder_command("status", str(folder), "--json")
    assert status.returncode == 0, status.stderr
    return json.loads(status.stdout)["pulse"]


def beat_of(folder: Path) -> heartbeat.Beat:
    with Ladder.open(folder, read_only=True) as ladder, reading(ladder.engine) as connection:
        found = heartbeat.read(reads.beat(connection))
    assert found is not None
    return found


def write_beat(folder: Path, beat: heartbeat.Beat) -> None:
    with Ladder.open(folder) as ladder, transaction(ladder.engine) as connection:
        heartbeat.write_beat(connection, beat.model_dump_json())


@pytest.fixture
def three(tmp_path) -> Path:
    """A ladder of three names, to qualify and play."""
    folder = tmp_path / "cup"
    with api_ladder(folder) as ladder:
        for name, spec in NAMES:
            ladder.submit(name, spec)
    return folder


def test_a_run_reads_as_playing_with_its_matches_in_flight_then_as_stopped_after_sigterm(three):
    assert pulse_of(three)["line"] == "stopped: no ladder run is playing it"
    run = start_run(three)
    try:
        wait_until(lambda: pulse_of(three)["in_flight"], 300, "matches in flight")
        status = ladder_command("status", str(three))
        assert status.stdout.startswith("ladder playing: "), status.stdout
        with TestClient(make_app(three)) as client:
            queue = client.get("/api/queue").json()
            page = client.get("/queue").text
        seated = {seat for match in queue["pulse"]["in_flight"] for seat in match["seats"]}
        assert seated and seated <= {f"{name} v1" for name, _ in NAMES}, queue
        assert (
            '<p class="pulse playing" id="pulse">' in page
        )  # its in-flight table is the moment's: test_pulse_browser reads it
        # While it runs, ladder final (and a second run) is refused, naming the run to stop.
        for refused in (ladder_command("final", str(three)), ladder_command("run", str(three), "--matches", "1")):
            assert refused.returncode == 2
            assert f"a policybox ladder run (pid {run.pid}, since " in refused.stderr, refused.stderr
            assert f"stop it first (Ctrl-C where it runs, or kill {run.pid})" in refused.stderr
    finally:
        stop(run)  # SIGTERM
    assert run.returncode == 143
    stopped = pulse_of(three)
    assert stopped["state"] == "stopped" and stopped["in_flight"] == []
    assert re.fullmatch(r"stopped \d+ seconds? ago \(since \d{4}-\d\d-\d\d \d\d:\d\d UTC\)", stopped["line"]), stopped
    assert ladder_command("status", str(three)).stdout.startswith("ladder stopped ")


def test_a_killed_run_reads_as_stopped_since_its_last_beat_once_that_is_stale(three):
    run = start_run(three)
    try:
        wait_until(lambda: pulse_of(three)["state"] == "playing", 300, "the run to play")
        cells = process_tree(run.pid)
    finally:
        os.killpg(run.pid, signal.SIGKILL)  # kill -9: it says nothing more
        run.communicate(timeout=60)
    wait_until(lambda: not [p for p in cells if p.is_running() and p.status() != psutil.STATUS_ZOMBIE], 60, "cells")
    assert pulse_of(three)["state"] == "playing"  # its last beat is fresh: nobody can tell yet
    last = beat_of(three)
    ago = (datetime.now(UTC) - timedelta(minutes=10)).isoformat(timespec="seconds")
    write_beat(three, last.model_copy(update={"beat_at": ago}))  # as if ten minutes had passed since
    stopped = pulse_of(three)
    assert stopped["state"] == "stopped" and stopped["since"] == ago
    assert stopped["line"].startswith(f"stopped 10 minutes ago (since {ago[:10]} {ago[11:16]} UTC; ")
    assert "it did not say it was stopping: killed, or its machine lost" in stopped["line"]
    # A version submitted now hears that it qualifies when the ladder runs again.
    with Ladder.open(three) as ladder:
        ladder.submit("seeded", policy("seeded_random.py:SeededRandom"))
    with TestClient(make_app(three)) as client:
        queued = client.get("/api/queue").json()["qualifying"]
        assert queued[-1]["name"] == "seeded"  # behind any the kill left qualifying
        assert [row["eta"] for row in queued] == [
            {"place": place, "minutes": None, "line": f"place {place} in the queue; {STOPPED_ETA}"}
            for place in range(1, len(queued) + 1)
        ]
        assert "No match is in flight: the ladder is stopped." in client.get("/queue").text


def test_the_queue_gives_each_version_its_place_and_an_eta_from_the_measured_rate(tmp_path):
    folder = tmp_path / "cup"
    with api_ladder(folder, placement_matches=3) as ladder:
        for name, spec in [*NAMES, ("seeded", policy("seeded_random.py:SeededRandom"))]:
            ladder.submit(name, spec)
        ladder.retire("noop")  # its version waits in the queue until the name is back: no place, no ETA
    now = datetime.now(UTC).isoformat(timespec="seconds")
    beat = heartbeat.Beat(
        pid=1,
        host="h",
        command="ladder run",
        started_at=now,
        beat_at=now,
        state="playing",
        since=now,
        rate=2.0,  # matches a minute
        matches=[heartbeat.InFlight(match=7, seats=[1, 2, 1, 2])],
        qualifying=[1],
    )
    write_beat(folder, beat)
    with TestClient(make_app(folder)) as client:
        queue = client.get("/api/queue").json()
        page = client.get("/queue").text
    rows = queue["qualifying"]
    assert [(row["name"], row["eta"] and (row["eta"]["place"], row["eta"]["minutes"])) for row in rows] == [
        ("wanderer", (1, 0.5)),
        ("random", (2, 1.0)),
        ("noop", None),
        ("seeded", (3, 1.5)),
    ]
    assert [row["under_way"] for row in rows] == [True, False, False, False]
    assert "waits: its name is retired" in page
    assert rows[3]["eta"]["line"] == (
        "place 3 in the queue: qualifies in about 2 minutes, placed in about 3 minutes (at 2.0 matches a minute)"
    )
    assert queue["pulse"]["in_flight"] == [{"match": 7, "seats": ["wanderer v1", "random v1"] * 2}]
    assert queue["pulse"]["line"] == "playing: 1 match in flight, 1 qualifying, 2.0 matches a minute"
    assert "qualifying now · place 1 in the queue" in page
    # A team's submission hears its place and ETA, from the API and through the form.
    with Ladder.open(folder) as ladder:
        token = {"Authorization": f"Bearer {ladder.token('gamma')}"}
    with TestClient(make_app(folder)) as client:
        made = upload(client, bot_zip(tmp_path / "walker.zip"), "walker", token)
        assert made.status_code == 201, made.text
        assert made.json()["queue"] == {
            "place": 4,
            "minutes": 2.0,
            "line": "place 4 in the queue: qualifies in about 2 minutes, placed in about 4 minutes "
            "(at 2.0 matches a minute)",
        }
        answer = client.get("/submit?submitted=walker&version=1").text
        assert "place 4 in the queue: qualifies in about 2 minutes" in answer and 'href="/names/walker"' in answer
        for made_up in ("nobody&version=1", "walker&version=7", "%3Cscript%3E&version=1", "walker&version=x"):
            assert 'id="submitted"' not in client.get(f"/submit?submitted={made_up}").text  # says nothing of it
    # Idle, and no rate measured: no ETA, and why.
    write_beat(
        folder, beat.model_copy(update={"state": "idle", "rate": None, "note": "final 1 is open", "matches": []})
    )
    with TestClient(make_app(folder)) as client:
        line = client.get("/api/queue").json()["qualifying"][0]["eta"]["line"]
    assert line == "place 1 in the queue; no ETA yet: the ladder is idle (final 1 is open); then it plays its 3 " + (
        "placement matches first"
    )


def test_the_rate_counts_only_the_time_spent_playing(tmp_path, monkeypatch):
    clock = [1000.0]
    monkeypatch.setattr(heartbeat.time, "monotonic", lambda: clock[0])
    with api_ladder(tmp_path / "cup") as ladder:
        heart = heartbeat.Heart(ladder.engine, "ladder run")
        heart.beat("playing", "", [], [])
        assert heart.rate() is None  # nothing finished yet
        clock[0] += 30
        heart.finished(10)
        assert heart.rate() == pytest.approx(20.0)  # 10 in 30 s of play
        heart.beat("idle", "nothing to play: waiting for submissions", [], [])
        clock[0] += 3600  # an hour with nothing to play
        heart.beat("playing", "", [], [])
        clock[0] += 30
        heart.finished(5)
        assert heart.rate() == pytest.approx(15.0)  # 15 in 60 s of play: the idle hour is not counted
        clock[0] += heartbeat.RATE_WINDOW_S + 1
        heart.beat("playing", "", [], [])
        assert heart.rate() == 0.0  # none in the last window of play
        heart.stop()
        with reading(ladder.engine) as connection:
            stopped = heartbeat.read(reads.beat(connection))
        assert stopped is not None and stopped.state == "stopped" and stopped.pid == os.getpid()


def test_the_progress_line_says_the_runs_state_and_counts_versions_as_versions():
    line = progress_line(Progress(played=12, qualified=3, rejected=1, suspended=2, in_flight=2, started=0.0), 120.0)
    assert line == (
        "ladder run playing: 12 matches played, 6.0 a minute, 2 in flight · versions: 3 qualified, 1 rejected, "
        "2 suspended"
    )
    waiting = progress_line(Progress(note="waiting for two versions that can play", started=0.0), 60.0)
    assert waiting.startswith("ladder run idle: 0 matches played") and waiting.endswith(
        "· waiting for two versions that can play"
    )
    assert not re.search(r"(ladder|·) \d+ suspended", line)  # never "ladder: ... · 2 suspended"


def test_status_ends_its_last_line_and_show_printed_to_a_file_cuts_no_heading(tmp_path):
    folder = tmp_path / "cup"
    with api_ladder(folder, versions_per_match=2) as ladder:
        for name, spec in NAMES[:2]:
            ladder.submit(name, spec)
        ladder.run(matches=4, workers=1)
    for args in ([], ["--json"]):
        status = ladder_command("status", str(folder), *args, columns=80)
        assert status.returncode == 0 and status.stdout.endswith("\n") and not status.stdout.endswith("\n\n")
    # Printed to a file, with no COLUMNS (a shell does not export it): every heading whole.
    environment = {key: value for key, value in os.environ.items() if key != "COLUMNS"}
    command = [sys.executable, "-m", "policybox", "ladder", "show", str(folder), "wanderer"]
    with (tmp_path / "show.txt").open("w") as out:
        subprocess.run(command, stdout=out, env=environment, check=True, timeout=120)
    shown = (tmp_path / "show.txt").read_text()
    assert HEAD_TO_HEAD in shown.splitlines(), shown
    assert re.search(r"v +state +matches", shown) and "submitted" in shown and "reason" in shown and "…" not in shown
    # In a terminal of 40 columns the tables fit it: their titles wrap, whole, rather than being cut.
    narrow = ladder_command("show", str(folder), "wanderer", columns=40).stdout
    assert max(len(line) for line in narrow.splitlines()) <= 40
    assert HEAD_TO_HEAD in " ".join(narrow.split())


def test_a_final_reads_as_playing_the_final_then_as_stopped(tmp_path):
    """``ladder final`` beats as a run does: while it plays, the pulse says how far the final is and a
    queued version hears that it qualifies after it (not "stopped", as before it beat); once it ends,
    stopped."""
    folder = tmp_path / "cup"
    with api_ladder(folder) as ladder:
        for name, spec in NAMES:
            ladder.submit(name, spec)
        ladder.run(matches=3, workers=1)
        ladder.submit("seeded", policy("seeded_random.py:SeededRandom"))  # waits in the queue through the final
        seen: list[queue_page.Queue] = []

        def read_the_queue(stored: int) -> None:
            with Ladder.open(folder, read_only=True) as reader:
                seen.append(queue_page.queue(reader))

        play_final(ladder, rounds=1, workers=1, on_match=read_the_queue)
    assert seen
    for queue in seen:
        assert queue.pulse.state == "playing" and queue.pulse.final, queue.pulse
        assert re.fullmatch(r"playing the final: \d+ of \d+ matches played", queue.pulse.line), queue.pulse.line
        assert [row.eta.line for row in queue.qualifying if row.eta] == [f"place 1 in the queue; {FINAL_ETA}"]
    assert pulse_of(folder)["state"] == "stopped"
    assert beat_of(folder).command == "ladder final"
