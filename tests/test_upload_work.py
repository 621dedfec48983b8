"""A live ``ladder serve`` never waits on an upload's work: its unpacking, build check and storing run
in a pool of threads of their own, a few uploads at a time (``policybox.league.web.checks``).

An upload whose policy module would hold the host's parser for seconds (one f-string of 256 KiB: 11 s
for CPython 3.11 on this machine, holding the GIL -- the host used to parse it to tell whether the
policy imports torch) is answered while another client polls ``/api/standings``, each poll within 2 s.
Past the cap (two uploads being processed), a third is answered at once -- 503, with Retry-After --
and taken when sent again. Judged from outside: HTTP answers and their timing, the server's processes.
"""

from __future__ import annotations

import json
import threading
import time
import zipfile

import httpx
import psutil
import pytest
from helpers.ladders import api_ladder, wait_until
from helpers.servers import serving, standings_seconds
from helpers.slow_uploads import INIT_TIMEOUT_S, ladder, slow_to_parse
from helpers.web import upload
from helpers.zips import SLOW_BOT, ZIGZAG, bot_zip

from policybox.ladder import Ladder
from policybox.league.web.checks import CHECKS_BUSY_RETRY_S, MAX_CHECKS

KiB = 1024


@pytest.mark.alone  # each standings answer within 2 s: a wall-clock time the other worker's test would share
def test_an_upload_the_host_would_parse_for_seconds_never_holds_the_standings(tmp_path, temp_folder):
    folder = ladder(tmp_path / "cup")
    with Ladder.open(folder) as opened:
        token = opened.token("gamma")
    slow = tmp_path / "slow.zip"
    with zipfile.ZipFile(slow, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("policy_spec.json", json.dumps({"class_path": "evil.Bot"}))
        archive.writestr("evil.py", slow_to_parse(256 * KiB))
    with serving(folder, tmp_path / "serve.log") as (url, _):
        answered: dict[str, httpx.Response] = {}
        api = httpx.Client(base_url=url, headers={"Authorization": f"Bearer {token}"}, timeout=180)
        sender = threading.Thread(target=lambda: answered.update(slow=upload(api, slow, "slow")))
        sender.start()
        timings: list[float | None] = []
        while sender.is_alive():
            timings.append(standings_seconds(url))
            assert timings[-1] is not None and timings[-1] < 2, timings
            time.sleep(0.2)
        sender.join()
    refused = answered["slow"]
    assert refused.status_code == 400, refused.text
    # Its cell is stopped at its start-up deadline while still compiling the module (11 s on a busy
    # machine) or, on a quiet one, compiles it within the deadline and fails on the f-string's name.
    reasons = (f"not ready within the init timeout of {INIT_TIMEOUT_S} s", "NameError at start-up")
    assert any(reason in refused.json()["error"] for reason in reasons), refused.text
    assert len(timings) >= 3, timings  # the standings were asked while the upload was processed
    print(f"standings while the upload was processed: {len(timings)} answers, max {max(timings):.2f} s")


def zygotes(pid: int) -> int:
    """How many zygotes ``pid`` has: one for each build check it is running."""
    found = 0
    for child in psutil.Process(pid).children():
        try:
            found += "policybox.cell.zygote" in child.cmdline()
        except psutil.NoSuchProcess:
            continue  # a check that ended since it was listed
    return found


def test_past_the_cap_an_upload_is_answered_at_once_with_503_and_retry_after(tmp_path, temp_folder):
    teams = ("alpha", "beta", "gamma")
    with api_ladder(tmp_path / "cup") as made:
        tokens = {team: made.token(team) for team in teams}
    slow = bot_zip(tmp_path / "slow.zip", "Slow", SLOW_BOT)  # 12 s in its constructor
    with serving(tmp_path / "cup", tmp_path / "serve.log") as (url, serve):
        clients = {
            team: httpx.Client(base_url=url, headers={"Authorization": f"Bearer {tokens[team]}"}, timeout=180)
            for team in teams
        }
        answered: dict[str, httpx.Response] = {}
        senders = []
        for count, team in enumerate(teams[:MAX_CHECKS], 1):  # the cap's worth, each building (its zygote up)
            sender = threading.Thread(
                target=lambda team=team: answered.update({team: upload(clients[team], slow, team)})
            )
            sender.start()
            senders.append(sender)
            wait_until(lambda count=count: zygotes(serve.pid) >= count, 120, f"{team}'s build check")
        start = time.monotonic()
        busy = upload(clients["gamma"], bot_zip(tmp_path / "zigzag.zip", "Zigzag", ZIGZAG), "gamma")
        assert all(sender.is_alive() for sender in senders), "the slow uploads ended before the third was sent"
        assert busy.status_code == 503 and "as many as it takes at once" in busy.json()["error"], busy.text
        assert busy.headers["retry-after"] == str(CHECKS_BUSY_RETRY_S)
        assert time.monotonic() - start < 10  # answered, not queued behind the 12 s builds
        for sender in senders:
            sender.join()
        assert [answered[team].status_code for team in teams[:MAX_CHECKS]] == [201] * MAX_CHECKS, answered
        again = upload(clients["gamma"], bot_zip(tmp_path / "zigzag.zip", "Zigzag", ZIGZAG), "gamma")
        assert again.status_code == 201, again.text
