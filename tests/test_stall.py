"""No team can stall the ladder, and its files are given back -- each attacked as an entrant would:

- a setup script that sleeps runs beside play: matches are stored while it runs, and a run that
  stops (``matches=`` reached, SIGTERM) stops its cell;
- a burst of submissions cannot pass a team's limits (per hour, names), over HTTP and the CLI;
- a bot that thinks for most of its deadline at every step forfeits at the episode limit;
- logs and replays of all but the latest matches are deleted (``ladder run``, ``ladder prune``).

Judged from outside: the database's rows, HTTP statuses, exit codes, files on disk, /proc.
"""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from pathlib import Path

import psutil
import pytest
from conftest import policy
from helpers.ladders import GAME, WANDERER, activate, api_ladder, ladder_command, played, start_run, wait_until
from helpers.setups import BUILD, WAKE, sleeper, team, unique_marker
from helpers.web import upload
from helpers.zips import WANDERER_SOURCE, bot_zip
from sqlalchemy import select
from starlette.testclient import TestClient

from policybox.ladder import Ladder
from policybox.league.ladder import version_store
from policybox.league.ladder.database import transaction
from policybox.league.ladder.folder import TeamLimit
from policybox.league.ladder.schema import match_seats, matches, names, qualifications, versions
from policybox.league.ladder.settings import EPISODE_LIMIT_FORMULA, LadderSettings
from policybox.league.views import match_list, match_page
from policybox.league.web.app import make_app


def wake(marker: str) -> None:
    """End the sleep of ``sleeper``'s child now, once it catches ``WAKE`` (sent earlier, it would kill it)."""
    wait_until(lambda: any(map(catches_wake, leftovers(marker))), timeout=60, what="the sleep to catch its signal")
    for process in leftovers(marker):
        process.send_signal(WAKE)


def catches_wake(process: psutil.Process) -> bool:
    """Whether ``process`` has a handler for ``WAKE`` (the SigCgt mask of /proc/PID/status)."""
    try:
        status = Path(f"/proc/{process.pid}/status").read_text()
    except OSError:
        return False
    caught = int(next(line.split()[1] for line in status.splitlines() if line.startswith("SigCgt:")), 16)
    return bool(caught >> (WAKE - 1) & 1)


def stopped(run: subprocess.Popen, signum: int) -> str:
    """Send ``run`` the signal and wait for it to end; what it printed on stderr. One that does not end
    within two minutes fails the test, and is killed, with all it started, so that no later test finds
    it still running."""
    run.send_signal(signum)
    try:
        return run.communicate(timeout=120)[1]
    except subprocess.TimeoutExpired:
        os.killpg(run.pid, signal.SIGKILL)  # start_run gives it a session, so a group, of its own
        run.communicate()
        raise AssertionError(f"{signal.Signals(signum).name} did not stop the run within 120 s") from None


def leftovers(marker: str) -> list[psutil.Process]:
    found = []
    for process in psutil.process_iter(["cmdline"]):
        if any(marker in part for part in process.info["cmdline"] or ()):
            found.append(process)
    return found


# ---------------------------------------------------------------------------------------------
# Setup scripts beside play


def test_matches_are_stored_while_a_setup_script_runs(tmp_path, database_url):
    marker = unique_marker()
    with api_ladder(tmp_path / "cup", database_url, setup_timeout_s=240) as ladder:
        ladder.submit("slow-setup", str(sleeper(tmp_path / "team", 600, marker)))
        ladder.submit("walker", WANDERER)
        ladder.submit("noop", "noop")
    run = start_run(tmp_path / "cup")
    try:
        with Ladder.open(tmp_path / "cup", read_only=True) as ladder:

            def outcomes() -> dict[str, str]:
                with ladder.engine.connect() as connection:
                    return {
                        row.name: row.outcome
                        for row in connection.execute(
                            select(qualifications.c.outcome, names.c.name)
                            .join(versions, versions.c.id == qualifications.c.version_id)
                            .join(names, names.c.id == versions.c.name_id)
                        )
                    }

            # Three matches while the script sleeps (well within its 240 s), then it is woken to finish.
            # Judged at the moment before waking, not by timestamps (stored to the second, a match and
            # the setup's end can share one): the matches are stored and the setup has no outcome yet.
            wait_until(lambda: played(tmp_path / "cup") >= 3, timeout=200, what="3 matches during the setup")
            assert "slow-setup" not in outcomes()  # play went on while the script slept
            wake(marker)
            wait_until(lambda: len(outcomes()) == 3, timeout=400, what="the three qualifications")
            assert outcomes()["slow-setup"] == "qualified"
    finally:
        err = stopped(run, signal.SIGINT)
    assert run.returncode == 130, err[-3000:]
    assert not leftovers(marker)


def test_a_run_that_reaches_its_matches_stops_a_running_setup_script(tmp_path):
    marker = unique_marker()
    with api_ladder(tmp_path / "cup", setup_timeout_s=900) as ladder:
        ladder.submit("slow-setup", str(sleeper(tmp_path / "team", 600, marker)))
        ladder.submit("walker", WANDERER)
        ladder.submit("noop", "noop")
        assert ladder.run(matches=2, workers=1).played == 2  # not after the script's 600 s
        assert not leftovers(marker)  # its cell and the sleep it started are gone
        with transaction(ladder.engine) as connection:
            assert [v.name for v in version_store.qualifying(connection)] == ["slow-setup"]  # queued for the next run


def test_sigterm_stops_a_running_setup_script_and_leaves_nothing(tmp_path):
    marker = unique_marker()
    with api_ladder(tmp_path / "cup", setup_timeout_s=900) as ladder:
        ladder.submit("slow-setup", str(sleeper(tmp_path / "team", 600, marker)))
    run = start_run(tmp_path / "cup")
    try:
        wait_until(lambda: leftovers(marker), timeout=120, what="the setup script's sleep")
    finally:
        err = stopped(run, signal.SIGTERM)
    assert run.returncode == 143 and "Traceback" not in err
    wait_until(lambda: not leftovers(marker), timeout=30, what="the sleep to go")
    with Ladder.open(tmp_path / "cup") as ladder, transaction(ladder.engine) as connection:
        assert [v.name for v in version_store.qualifying(connection)] == ["slow-setup"]


def test_one_teams_slow_setups_never_keep_another_teams_version_waiting(tmp_path):
    """Team alpha's two versions have setup scripts that sleep until woken; team bravo's, one that takes
    a moment, submitted after both. Bravo's version qualifies while alpha's first sleeps, and alpha's
    second never starts while its first runs: a team has one setup at a time, and the others room.
    Judged from the machine's processes (each sleep's command line holds its marker) and the database."""
    first, second = unique_marker(), unique_marker()
    with api_ladder(tmp_path / "cup", setup_timeout_s=600) as ladder:
        for team_name in ("alpha", "bravo"):
            ladder.token(team_name)
        ladder.submit("alpha-one", str(sleeper(tmp_path / "one", 600, first)), team="alpha")
        ladder.submit("alpha-two", str(sleeper(tmp_path / "two", 600, second)), team="alpha")
        ladder.submit("bravo", str(team(tmp_path / "bravo", BUILD)), team="bravo")
    run = start_run(tmp_path / "cup")
    try:
        with Ladder.open(tmp_path / "cup", read_only=True) as ladder:

            def state(name: str) -> str:
                return next(row.state for row in ladder.standings().rows if row.name == name)

            wait_until(lambda: leftovers(first), timeout=120, what="alpha's first setup")
            wait_until(lambda: state("bravo") == "active", timeout=300, what="bravo's qualification")
            assert state("alpha-one") == state("alpha-two") == "qualifying"
            assert leftovers(first) and not leftovers(second)  # alpha's first still sleeps, its second waits
            wake(first)
            wait_until(lambda: leftovers(second), timeout=120, what="alpha's second setup, once its first ended")
    finally:
        err = stopped(run, signal.SIGTERM)
    assert run.returncode == 143, err[-3000:]
    wait_until(lambda: not leftovers(second), timeout=30, what="the second sleep to go")


# ---------------------------------------------------------------------------------------------
# Per-team limits


@pytest.mark.storage
def test_a_burst_of_parallel_submissions_cannot_pass_the_teams_limit(tmp_path, database_url):
    with api_ladder(tmp_path / "cup", database_url, submissions_per_hour=3, names_per_team=20) as ladder:
        ladder.token("gamma")
    outcomes: list[object] = []
    start = threading.Barrier(8)

    def submit(index: int) -> None:
        with Ladder.open(tmp_path / "cup") as ladder:
            start.wait()
            try:
                outcomes.append(ladder.submit(f"bot{index}", "noop", team="gamma"))
            except TeamLimit as exc:
                outcomes.append(exc)

    threads = [threading.Thread(target=submit, args=(i,)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    refused = [o for o in outcomes if isinstance(o, TeamLimit)]
    assert len(outcomes) == 8 and len(refused) == 5
    assert "submissions_per_hour 3" in str(refused[0]) and 3500 < refused[0].retry_after_s <= 3600
    with Ladder.open(tmp_path / "cup", read_only=True) as ladder, ladder.engine.connect() as connection:
        assert len(connection.execute(select(versions.c.id)).all()) == 3  # judged from the database
        assert len(ladder.names_of("gamma")) == 3


def test_over_a_limit_the_api_and_the_form_answer_429(tmp_path):
    with api_ladder(tmp_path / "cup", submissions_per_hour=3, names_per_team=1) as ladder:
        token = ladder.token("gamma")
    bearer = {"Authorization": f"Bearer {token}"}
    first = bot_zip(tmp_path / "walker.zip")
    with TestClient(make_app(tmp_path / "cup")) as client:
        assert upload(client, first, "walker", bearer).status_code == 201
        names = upload(client, first, "runner", bearer)  # a second name: over names_per_team
        assert names.status_code == 429 and "Retry-After" not in names.headers
        assert "owns 1 names, the ladder's limit (names_per_team 1" in names.json()["error"]
        for spec in ("noop", "random"):  # two more versions of its own name: three in the hour
            made = _zip_of(tmp_path, spec)
            assert upload(client, made, "walker", bearer).status_code == 201
        over = upload(client, _zip_of(tmp_path, "wanderer-again"), "walker", bearer)
        assert over.status_code == 429 and 3500 < int(over.headers["Retry-After"]) <= 3600
        assert "3 submissions in the last hour" in over.json()["error"] and "--submissions-per-hour" in over.text
        login = client.post("/login", data={"token": token}, headers={"Origin": "http://testserver"})
        assert login.status_code == 200
        form = upload(client, _zip_of(tmp_path, "form"), "walker", {"Origin": "http://testserver"}, url="/submit")
        assert form.status_code == 429 and int(form.headers["Retry-After"]) > 3500
        assert "submissions in the last hour" in form.text
    with Ladder.open(tmp_path / "cup", read_only=True) as ladder, ladder.engine.connect() as connection:
        assert len(connection.execute(select(versions.c.id)).all()) == 3


def _zip_of(tmp_path: Path, label: str) -> Path:
    """A submission zip whose content differs by ``label`` (a comment in its bot)."""
    return bot_zip(tmp_path / f"{label}.zip", source=WANDERER_SOURCE + f"\n# {label}\n")


def test_the_cli_submits_as_a_team_within_its_limits_and_the_organiser_without(tmp_path):
    folder = tmp_path / "cup"
    made = ladder_command("init", str(folder), "--env", GAME, "--steps", "20", "--submissions-per-hour", "1")
    assert made.returncode == 0, made.stderr
    assert ladder_command("token", str(folder), "gamma").returncode == 0
    assert ladder_command("submit", str(folder), "gbot", "noop", "--team", "gamma").returncode == 0
    over = ladder_command("submit", str(folder), "gbot", "random", "--team", "gamma")
    message = over.stdout + over.stderr
    assert over.returncode == 2 and len(message.strip().splitlines()) == 1, message
    assert "team gamma has made 1 submissions in the last hour" in message and "--submissions-per-hour" in message
    unknown = ladder_command("submit", str(folder), "xbot", "noop", "--team", "nobody")
    assert unknown.returncode == 2 and "no team 'nobody'" in unknown.stdout + unknown.stderr
    for index, spec in enumerate(("noop", "random", WANDERER)):  # the organiser's: no limit applies
        assert ladder_command("submit", str(folder), f"house{index}", spec).returncode == 0


# ---------------------------------------------------------------------------------------------
# The episode limit


def test_a_bot_that_thinks_for_most_of_its_deadline_forfeits_at_the_episode_limit(tmp_path):
    """20 steps x act timeout 0.5 s x 0.5: a limit of 5 s of play; the thinker spends 0.9 of its deadline
    on every step, 20 x 0.45 = 9 s. Start-up (its own limit: a minute, by default) pays for none of it."""
    from policybox import EpisodeSettings
    from policybox.limits import Limits

    limits = Limits(act_timeout_ms=500)
    settings = EpisodeSettings(env=GAME, steps=20, limits=limits)
    made = LadderSettings(settings=settings, agents=4, placement_matches=0)
    assert made.episode_limit_s == 20 * 0.5 * 0.5 and "0.5" in EPISODE_LIMIT_FORMULA
    from policybox.ladder import Ladder as PublicLadder

    with PublicLadder.create(tmp_path / "cup", made) as ladder:
        ladder.submit("thinker", policy("sleepy.py:Sleepy", **{"kw.sleep_s": "0.45"}))
        ladder.submit("noop", "noop")
        for name in ("thinker", "noop"):
            activate(ladder, name)  # its qualification would be the same story, four slow seats
        assert ladder.run(matches=1, workers=1).played == 1
        with ladder.engine.connect() as connection:
            [result] = connection.execute(select(matches.c.result).where(matches.c.state == "played")).scalars()
            seats = connection.execute(
                select(match_seats.c.status, match_seats.c.failure_kind, names.c.name)
                .join(versions, versions.c.id == match_seats.c.version_id)
                .join(names, names.c.id == versions.c.name_id)
            ).all()
    assert result["aborted"].startswith("episode time limit reached after") and result["steps"] < 20
    assert result["play_s"] < 5 + 10  # the limit, and slack for stopping
    for status, kind, name in seats:
        assert (status, kind) == (("disabled", "EpisodeTimeLimit") if name == "thinker" else ("ok", None))


def test_a_ladder_made_before_the_limit_existed_gets_the_derived_one(tmp_path):
    with api_ladder(tmp_path / "cup") as ladder:
        stored = ladder.settings.model_dump(mode="json")
    older = {key: value for key, value in stored.items() if key not in ("setup_workers", "keep_logs", "keep_replays")}
    settings = LadderSettings.model_validate(older)
    assert settings.settings.limits.episode_timeout_s is None
    assert settings.episode_settings.limits.play_limit_s(30) == 30 * 1.0 * 0.5
    older["settings"]["limits"]["episode_timeout_s"] = 7.0
    assert LadderSettings.model_validate(older).episode_limit_s == 7.0  # an explicit value wins
    made = ladder_command("init", str(tmp_path / "two"), "--env", GAME, "--steps", "100", "--episode-timeout-s", "9")
    assert made.returncode == 0 and "a match's limit 9 s" in made.stdout


# ---------------------------------------------------------------------------------------------
# Retention


def _on_disk(folder: Path) -> tuple[list[str], list[str]]:
    logs = sorted(p.name for p in (folder / "logs").iterdir() if p.name.startswith("match-"))
    replays = sorted(p.name for p in (folder / "replays").iterdir()) if (folder / "replays").exists() else []
    return logs, replays


def test_a_run_keeps_only_the_latest_matches_logs_and_replays(tmp_path):
    with api_ladder(tmp_path / "cup", replays=True, keep_logs=3, keep_replays=3, keep_logs_hours=0) as ladder:
        ladder.submit("walker", WANDERER)
        ladder.submit("noop", "noop")
        assert ladder.run(matches=6, workers=1).played == 6
        logs, replays = _on_disk(ladder.folder)
        assert logs == [f"match-{i:06d}" for i in (4, 5, 6)]
        assert replays == [f"match-{i:06d}.json.z" for i in (4, 5, 6)]
        old, new = match_page.match_page(ladder, 1), match_page.match_page(ladder, 6)
        assert old.replay_file is None and "no longer kept" in old.replay_note and "no longer kept" in old.logs_note
        assert new.replay_file and new.replay_note is None and new.logs_note is None
    with TestClient(make_app(tmp_path / "cup")) as client:
        page = client.get("/matches/1").text
        assert "no longer kept: this ladder keeps the latest 3 matches&#39; replays" in page
        assert client.get("/matches/1/replay").status_code == 404


def test_ladder_prune_frees_what_a_ladder_kept_and_says_how_much(tmp_path):
    with api_ladder(tmp_path / "cup", replays=True) as ladder:  # the defaults keep 100 and 1,000
        ladder.submit("walker", WANDERER)
        ladder.submit("noop", "noop")
        assert ladder.run(matches=6, workers=1).played == 6
    before = _size(tmp_path / "cup" / "logs") + _size(tmp_path / "cup" / "replays")
    assert _on_disk(tmp_path / "cup")[0] == [f"match-{i:06d}" for i in range(1, 7)]
    young = ladder_command("prune", str(tmp_path / "cup"), "--keep-logs", "0", "--keep-replays", "6")
    assert young.returncode == 0 and "0 log folders" in young.stdout  # a day's logs are kept, past the count
    pruned = ladder_command(
        "prune", str(tmp_path / "cup"), "--keep-logs", "2", "--keep-replays", "2", "--keep-logs-hours", "0"
    )
    assert pruned.returncode == 0, pruned.stderr
    logs, replays = _on_disk(tmp_path / "cup")
    assert logs == ["match-000005", "match-000006"] and replays == ["match-000005.json.z", "match-000006.json.z"]
    assert "4 log folders and 4 replays deleted" in pruned.stdout  # the two qualifications' are the latest 2
    freed = before - _size(tmp_path / "cup" / "logs") - _size(tmp_path / "cup" / "replays")
    assert freed > 0 and f"{freed / 1024 / 1024:.1f} MiB freed" in pruned.stdout
    everything = ladder_command(
        "prune", str(tmp_path / "cup"), "--keep-logs", "0", "--keep-replays", "0", "--keep-logs-hours", "0"
    )
    assert everything.returncode == 0 and "4 log folders and 2 replays deleted" in everything.stdout
    assert not any((tmp_path / "cup" / "logs").iterdir())
    with Ladder.open(tmp_path / "cup", read_only=True) as ladder:
        assert len(match_list.match_list(ladder, 50).matches) == 6  # every result is kept


def test_logs_are_kept_a_day_past_the_count_then_deleted(tmp_path):
    """Retention by age: a run that keeps 1 match's logs by count keeps every log folder younger than its
    keep_logs_hours (a day by default); once a folder is older than that, the next prune deletes it."""
    with api_ladder(tmp_path / "cup", keep_logs=1) as ladder:
        assert ladder.settings.keep_logs_hours == 24
        ladder.submit("walker", WANDERER)
        ladder.submit("noop", "noop")
        assert ladder.run(matches=3, workers=1).played == 3
        assert _on_disk(ladder.folder)[0] == [f"match-{i:06d}" for i in (1, 2, 3)]  # all younger than a day
        day_ago = time.time() - 25 * 3600
        os.utime(ladder.folder / "logs" / "match-000001", (day_ago, day_ago))
        assert ladder.prune().logs == 1
        assert _on_disk(ladder.folder)[0] == ["match-000002", "match-000003"]
        assert "and those of the last 24 hours" in match_page.match_page(ladder, 1).logs_note


def _size(folder: Path) -> int:
    return sum(os.lstat(Path(d) / f).st_size for d, _, files in os.walk(folder) for f in files)


@pytest.fixture(autouse=True)
def unpacked(tmp_path, monkeypatch):
    """Zips unpacked under this test's folder (as test_setup's are)."""
    import policybox.submission as submission

    monkeypatch.setattr(submission, "submissions_root", lambda: tmp_path / "unpacked")
