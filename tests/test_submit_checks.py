"""The organiser's controls and what a submission is told, judged from outside.

A submission whose policy cannot be built (a misspelt class) is refused by ``ladder submit`` (exit 2,
one line) and by the web upload (400, JSON or the form page) before anything is stored: no version
row, no file under DIR/versions. The check runs in a cell while ``ladder serve`` goes on answering; a
team has one check at a time, and its refused builds count against ``submissions_per_hour``. A spec
with a setup script (its class made by the script) is accepted: it is built at qualification.
``--max-matches-per-hour`` holds ``ladder run`` (matches in the database, the run waiting and saying
so); ``--db postgresql://`` without the driver, ``ladder serve`` on a port in use and a malformed
team name are each one message and exit 2; a non-zip upload is named as it was sent (escaped in the
page); the submit page and its errors name a PettingZoo ladder's game.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import psutil
import pytest
from conftest import POLICIES
from helpers.ladders import GAME, api_ladder, ladder_command, wait_until
from helpers.ports import free_port
from helpers.servers import answer_within
from helpers.web import upload
from helpers.zips import SLOW_BOT, ZIGZAG, bot_zip
from sqlalchemy import func, select
from starlette.testclient import TestClient

from policybox.ladder import Ladder
from policybox.league.ladder.schema import matches, versions
from policybox.league.web.app import make_app

CONNECT_FOUR = "pettingzoo:pettingzoo.classic.connect_four_v3:env"
MARKUP_NAME = "<img src=x onerror=alert(1)>.tar.gz"


def version_count(folder: Path) -> int:
    with Ladder.open(folder, read_only=True) as ladder, ladder.engine.connect() as connection:
        return connection.execute(select(func.count()).select_from(versions)).scalar()


def files_kept(folder: Path) -> list[str]:
    """Every file under DIR/versions (folders aside)."""
    return sorted(str(path) for path in (folder / "versions").rglob("*") if not path.is_dir())


def test_ladder_submit_refuses_a_policy_that_cannot_be_built(tmp_path, database_url):
    folder = tmp_path / "cup"
    with api_ladder(folder, database_url):
        pass
    misspelt = bot_zip(tmp_path / "zigzog.zip", "Zigzog", ZIGZAG)
    refused = ladder_command("submit", str(folder), "zigzag", str(misspelt))
    assert refused.returncode == 2, refused.stdout + refused.stderr
    line = refused.stderr.strip()
    assert "\n" not in line and "no class 'Zigzog' in bot.py; it defines" in line and "Zigzag" in line, line
    assert str(folder) not in line  # the unpacked copy's folder is the organiser's, not named
    assert version_count(folder) == 0 and files_kept(folder) == []

    accepted = ladder_command("submit", str(folder), "zigzag", str(bot_zip(tmp_path / "zigzag.zip", "Zigzag", ZIGZAG)))
    assert accepted.returncode == 0, accepted.stderr
    assert version_count(folder) == 1

    # A class its setup script makes: not built at submit (scripts run at qualification), accepted.
    team = tmp_path / "team"
    team.mkdir()
    (team / "setup.py").write_text(f"from pathlib import Path\nPath('made.py').write_text({ZIGZAG!r})\n")
    (team / "cogames.toml").write_text('[policy]\nclass_path = "made.Zigzag"\nsetup_script = "setup.py"\n')
    scripted = ladder_command("submit", str(folder), "scripted", str(team))
    assert scripted.returncode == 0, scripted.stderr
    # The organiser may store one unchecked: its qualification rejects it instead.
    unchecked = ladder_command("submit", str(folder), "unchecked", str(misspelt), "--no-check")
    assert unchecked.returncode == 0, unchecked.stderr
    assert version_count(folder) == 3


@pytest.fixture
def live(tmp_path) -> Iterator[tuple[str, str, Path, int]]:
    """A live ``ladder serve`` of a ladder whose teams may make 2 submissions an hour: (its URL,
    team gamma's token, its folder, its pid)."""
    folder = tmp_path / "cup"
    with api_ladder(folder, submissions_per_hour=2) as ladder:
        token = ladder.token("gamma")
    port = free_port()
    command = [sys.executable, "-m", "policybox", "ladder", "serve", str(folder), "--port", str(port)]
    with (tmp_path / "serve.err").open("wb") as errors:
        process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=errors)
    try:
        assert answer_within(port, 120) is not None, (tmp_path / "serve.err").read_text()
        yield f"http://127.0.0.1:{port}", token, folder, process.pid
    finally:
        process.terminate()
        process.wait(30)


def test_the_web_upload_builds_it_in_a_cell_while_the_page_answers(live, tmp_path):
    url, token, folder, pid = live
    api = httpx.Client(base_url=url, headers={"Authorization": f"Bearer {token}"}, timeout=180)
    form = httpx.Client(base_url=url, headers={"Origin": url}, timeout=180, follow_redirects=True)
    assert form.post("/login", data={"token": token}).status_code == 200  # 303 to /, followed

    # A slow build (12 s in its constructor): the server answers others meanwhile, and gamma's next
    # upload waits its turn (429).
    slow: dict[str, httpx.Response] = {}
    sending = threading.Thread(
        target=lambda: slow.update(made=upload(api, bot_zip(tmp_path / "s.zip", "Slow", SLOW_BOT), "zigzag"))
    )
    sending.start()
    wait_until(lambda: psutil.Process(pid).children(recursive=True), 60, "the check's cell to start")
    assert httpx.get(f"{url}/api/standings", timeout=30).status_code == 200
    busy = upload(api, bot_zip(tmp_path / "zigzag.zip", "Zigzag", ZIGZAG), "other")
    assert sending.is_alive(), "the slow upload was answered before the check of it could have ended"
    assert busy.status_code == 429 and "still being checked" in busy.json()["error"], busy.text
    assert busy.headers["retry-after"]
    sending.join()
    assert slow["made"].status_code == 201, slow["made"].text
    before = files_kept(folder)

    # A misspelt class: 400 with the cell's reason, over the API and the form; nothing stored.
    misspelt = bot_zip(tmp_path / "zigzog.zip", "Zigzog", ZIGZAG)
    refused = upload(api, misspelt, "zigzag")
    assert refused.status_code == 400 and "no class 'Zigzog' in bot.py" in refused.json()["error"], refused.text
    assert str(folder) not in refused.text
    page = upload(form, misspelt, "zigzag", url="/submit")
    assert (
        page.status_code == 400 and 'id="message"' in page.text and "no class &#39;Zigzog&#39; in bot.py" in page.text
    )
    assert version_count(folder) == 1 and files_kept(folder) == before

    # Not a zip: named as it was sent, escaped in the page; not a build check, so not counted.
    notes = tmp_path / "policy.tar.gz"
    notes.write_bytes(b"neither a zip nor a tar.gz")
    sent = upload(api, notes, "zigzag")
    refusal = "policy.tar.gz is not a zip or tar.gz file"
    assert sent.status_code == 400 and sent.json()["error"].startswith(refusal), sent.text
    marked = upload(form, notes, "zigzag", url="/submit", sent_as=MARKUP_NAME)
    escaped = "&lt;img src=x onerror=alert(1)&gt;.tar.gz is not a zip or tar.gz file"
    assert marked.status_code == 400 and escaped in marked.text
    assert "<img src=x" not in marked.text

    # Two refused builds in the hour (the limit, 2): the next upload is not checked, even a good one.
    flooded = upload(api, bot_zip(tmp_path / "good.zip", "Zigzag", ZIGZAG), "good")
    assert flooded.status_code == 429 and "could not be built" in flooded.json()["error"], flooded.text
    assert int(flooded.headers["retry-after"]) > 3000
    assert version_count(folder) == 1 and files_kept(folder) == before


def test_a_pettingzoo_ladder_names_its_game(tmp_path):
    from policybox import EpisodeSettings, LadderSettings
    from policybox.ladder import Ladder as PublicLadder

    folder = tmp_path / "four"
    made = LadderSettings(settings=EpisodeSettings(env=CONNECT_FOUR, steps=50), agents=2)
    with PublicLadder.create(folder, made) as ladder:
        token = ladder.token("gamma")
    game = "PettingZoo game pettingzoo.classic.connect_four_v3:env"
    gamma = {"Authorization": f"Bearer {token}"}
    with TestClient(make_app(folder)) as client:
        assert client.post("/login", data={"token": token}, headers={"Origin": "http://testserver"}).status_code == 200
        hint = client.get("/submit").text
        assert game in hint and "MettaGrid" not in hint
        missing = client.post("/api/submit", data={"name": "x"}, headers=gamma)
        assert missing.status_code == 400 and game in missing.json()["error"]
        (tmp_path / "notes.txt").write_text("not a zip")
        with (tmp_path / "notes.txt").open("rb") as file:
            refused = client.post("/api/submit", data={"name": "x"}, files={"file": ("notes.txt", file)}, headers=gamma)
        assert (
            refused.status_code == 400
            and refused.json()["error"]
            == f"notes.txt is not a zip or tar.gz file: send a submission zip for this {game}"
        )
        misspelt = bot_zip(tmp_path / "seedd.zip", "Seedd", (POLICIES / "pettingzoo_bots.py").read_text())
        with misspelt.open("rb") as file:
            unbuilt = client.post("/api/submit", data={"name": "x"}, files={"file": ("seedd.zip", file)}, headers=gamma)
        assert unbuilt.status_code == 400 and "no class 'Seedd' in bot.py" in unbuilt.json()["error"], unbuilt.text
        good = bot_zip(tmp_path / "seeded.zip", "Seeded", (POLICIES / "pettingzoo_bots.py").read_text())
        with good.open("rb") as file:
            made = client.post("/api/submit", data={"name": "x"}, files={"file": ("seeded.zip", file)}, headers=gamma)
        assert made.status_code == 201, made.text


def test_max_matches_per_hour_holds_the_run(tmp_path):
    folder = tmp_path / "cup"
    refused = ladder_command("init", str(folder), "--env", GAME, "--max-matches-per-hour", "0")
    assert refused.returncode == 2 and not folder.exists()
    made = ladder_command("init", str(folder), "--env", GAME, "--steps", "10", "--max-matches-per-hour", "2")
    assert made.returncode == 0, made.stderr
    for name in ("random", "noop"):
        assert ladder_command("submit", str(folder), name, name).returncode == 0
    command = [sys.executable, "-m", "policybox", "ladder", "run", str(folder), "--matches", "3", "--workers", "1"]
    env = {**os.environ, "TTY_COMPATIBLE": "1", "COLUMNS": "400"}  # the status line, as a terminal shows it
    run = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, start_new_session=True)
    shown: list[bytes] = []
    reader = threading.Thread(target=lambda: shown.extend(iter(lambda: run.stdout.read1(4096), b"")), daemon=True)
    reader.start()
    try:
        wait_until(lambda: b"waiting for the throttle" in b"".join(shown), 300, "the run to wait for the throttle")
        time.sleep(5)  # a run that ignored the throttle would schedule its third match meanwhile
        assert run.poll() is None, b"".join(shown).decode(errors="replace")
        with Ladder.open(folder, read_only=True) as ladder, ladder.engine.connect() as connection:
            assert connection.execute(select(func.count()).select_from(matches)).scalar() == 2
        assert b"max_matches_per_hour 2" in b"".join(shown)
    finally:
        os.killpg(run.pid, signal.SIGINT)
        run.wait(60)
    assert run.returncode == 130


def test_a_postgresql_url_without_its_driver_leaves_no_folder(tmp_path):
    missing = tmp_path / "no-driver"
    missing.mkdir()
    (missing / "psycopg.py").write_text("raise ImportError('no psycopg here')\n")
    folder = tmp_path / "cup"
    # A process of its own: PYTHONPATH hides the driver from a fresh interpreter (this one may have it imported).
    command = [sys.executable, "-m", "policybox", "ladder", "init", str(folder), "--env", GAME]
    command += ["--db", "postgresql://ladder:secret@127.0.0.1:9/ladder"]
    env = {**os.environ, "PYTHONPATH": str(missing), "COLUMNS": "300"}
    run = subprocess.run(command, capture_output=True, text=True, timeout=300, env=env)
    assert run.returncode == 2, run.stdout + run.stderr
    assert "pip install 'policybox[postgresql]'" in run.stderr and len(run.stderr.strip().splitlines()) == 1
    assert "from a clone of policybox, in it: pip install -e '.[postgresql]'" in " ".join(run.stderr.split())
    assert "secret" not in run.stderr and not folder.exists()


def test_serve_on_a_port_in_use_says_so_and_announces_nothing(tmp_path):
    folder = tmp_path / "cup"
    with api_ladder(folder):
        pass
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
        run = ladder_command("serve", str(folder), "--port", str(port))
    assert run.returncode == 2, run.stdout + run.stderr
    assert f"port {port} on 127.0.0.1 is in use" in run.stderr and "http://" not in run.stdout + run.stderr


def test_a_bad_team_name_is_called_a_team_name(tmp_path):
    folder = tmp_path / "cup"
    with api_ladder(folder):
        pass
    for args in (["token", str(folder), "Bad Team"], ["token", str(folder), "Bad Team", "--revoke"]):
        run = ladder_command(*args)
        assert run.returncode == 2 and "team name 'Bad Team' is not allowed" in run.stderr, run.stderr
    run = ladder_command("submit", str(folder), "bot", "random", "--team", "Bad Team")
    assert run.returncode == 2 and "team name 'Bad Team' is not allowed" in run.stderr, run.stderr
    assert "submission name" not in run.stderr and version_count(folder) == 0
