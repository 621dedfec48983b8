"""The web page in a real browser (Debian's Chromium, headless, driven by Playwright) on a ladder that
plays live: a real ``policybox ladder serve`` beside a real ``ladder run``, each a process of its own,
on ``examples/moves.yaml``.

One story, as people would live it: anybody watches the standings change without reloading and walks
from them to a name and on to a match; team alpha logs in and uploads zips through the form (and is
refused without its token), one of them hostile -- its first step raises with a script and an
onerror attribute -- which the ladder rejects; that traceback, shown whole to alpha and cut to its
first line for others, runs nothing (judged from the DOM and the title); each team sees its own log
tails and never the other's.
Screenshots (whole pages with
POLICYBOX_WHOLE_PAGES=1) go to $POLICYBOX_ARTIFACTS (else test-artifacts/ in the
checkout).
"""

from __future__ import annotations

import http.client
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest
from conftest import POLICIES, policy
from helpers.browser import INJECTED, LONG_MS, PLAYED_AT_LEAST, Live, serving_live, upload_through_the_form
from helpers.ladders import WANDERER, activate, api_ladder, wait_until
from helpers.servers import serving, stop
from helpers.web import PAYLOAD
from helpers.zips import bot_zip

from policybox.league.views.templating import fixed

pytest.importorskip("playwright")
from playwright.sync_api import BrowserContext, Page, expect  # noqa: E402

SECRET = {"alpha": "ALPHA-LOG-SECRET", "beta": "BETA-LOG-SECRET"}


@pytest.fixture
def live(tmp_path, screenshots) -> Iterator[Live]:
    """The moves arena's ladder with the organiser's wanderer, random and noop, and team alpha's and
    team beta's bots (each logs its team's secret, then raises at step 5 of every match; let in
    without qualifying, so that they fail in matches). ``ladder serve`` and ``ladder run`` (one
    worker, until stopped) beside it."""
    folder = tmp_path / "cup"
    with api_ladder(folder) as ladder:
        tokens = {team: ladder.token(team) for team in SECRET}
        for name, spec in [("wanderer", WANDERER), ("random", "random"), ("noop", "noop")]:
            ladder.submit(name, spec)
        for team in tokens:
            ladder.submit(f"{team}bot", policy("web_bots.py:LogsThenRaises", **{"kw.team": team}), team=team)
            activate(ladder, f"{team}bot")
    with serving_live(folder, tokens, tmp_path / "serve.log", screenshots, run=True) as live:
        yield live


def test_a_live_ladder_in_a_browser(browser, live, tmp_path):
    anybody = browser.new_context(viewport={"width": 1280, "height": 900})
    alpha, beta = (browser.new_context(viewport={"width": 1280, "height": 900}) for _ in range(2))
    try:
        page = live.watch(anybody.new_page())
        watch_the_standings_change_without_a_reload(live, page)
        walk_from_the_standings_to_a_name_and_a_match(live, page)

        live.log_in(alpha, "alpha")
        live.log_in(beta, "beta")
        owner = live.watch(alpha.new_page())
        upload_through_the_form(live, owner, "alphawalker", bot_zip(tmp_path / "walker.zip"))
        refused_without_a_token(live, anybody, bot_zip(tmp_path / "walker2.zip"))
        hostile = bot_zip(tmp_path / "hostile.zip", "HostileInStep", (POLICIES / "web_bots.py").read_text())
        upload_through_the_form(live, owner, "hostile", hostile)
        wait_until(lambda: live.state("hostile") == "rejected", LONG_MS / 1000, "hostile to be rejected")

        the_hostile_traceback_runs_nothing(live, owner, whole=True, shot="hostile-as-its-team")
        the_hostile_traceback_runs_nothing(live, live.watch(beta.new_page()), whole=False, shot="hostile-as-another")
        the_standings_show_it_inert_too(live, page)

        wait_until(lambda: all(_matches(live, f"{team}bot") for team in SECRET), LONG_MS / 1000, "both bots to play")
        for team, other in (("alpha", "beta"), ("beta", "alpha")):
            each_team_sees_its_own_log_tail_only(
                live, live.watch((alpha if team == "alpha" else beta).new_page()), team, other
            )
        nobody_sees_a_log_tail(live, page)

        the_web_server_keeps_its_own_oom_score_adj_and_address(live)
        stop(live.run)  # the standings are still: the live table must now read as a reload does
        the_live_table_reads_as_the_page_does(live, page)
    finally:
        for context in (anybody, alpha, beta):
            context.close()
    errors = [line for line in live.console if line.startswith(("error", "pageerror"))]
    assert not errors, errors  # no script failed, nothing the policy wrote tried to run (CSP reports it)


# ---------------------------------------------------------------------------------------------
# The steps


def watch_the_standings_change_without_a_reload(live: Live, page: Page) -> None:
    page.goto(live.url + "/")
    expect(page).to_have_title("standings · policybox ladder")
    page.evaluate("window.sameDocument = true")  # gone if the page reloads
    before = int(page.locator("#played").inner_text())
    table_before = page.locator("#standings tbody").inner_text()
    wait_for_played(page, before + 2)
    assert page.evaluate("window.sameDocument") is True
    assert page.locator("#standings tbody").inner_text() != table_before
    expect(page.locator("#standings tbody tr")).to_have_count(len(live.api("/api/standings")["rows"]), timeout=LONG_MS)
    live.shot(page, "standings")


def walk_from_the_standings_to_a_name_and_a_match(live: Live, page: Page) -> None:
    name = live.api("/api/standings")["rows"][0]["name"]  # the leader: it has played, and met others
    page.locator("#standings").get_by_role("link", name=name, exact=True).click()
    expect(page).to_have_url(f"{live.url}/names/{name}")
    expect(page.locator("#name")).to_have_text(name)
    expect(page.locator("figure svg")).to_have_count(3)  # rating with its band, reward interval, head-to-head
    assert page.locator("h2", has_text="Head-to-head").is_visible()
    live.shot(page, "name")
    link = page.locator("table.matches a[href^='/matches/']").first
    match_id = int(link.inner_text())
    link.click()
    expect(page).to_have_url(f"{live.url}/matches/{match_id}")
    match = live.api(f"/api/matches/{match_id}")
    expect(page.locator("#seed")).to_have_text(str(match["seed"]))
    expect(page.locator("#agents tbody tr")).to_have_count(4)
    expect(page.locator("#layers")).to_be_hidden()  # folded: "How this match was isolated"
    page.locator("#isolation summary").click()
    expect(page.locator("#layers")).to_contain_text("seccomp")
    live.shot(page, "match")


def refused_without_a_token(live: Live, context: BrowserContext, zip_path: Path) -> None:
    page = context.new_page()
    page.goto(live.url + "/submit")
    expect(page.locator("#submit")).to_have_count(0)  # no form: a link to log in
    expect(page.get_by_role("link", name="Log in", exact=True)).to_be_visible()
    upload = {
        "name": "intruder",
        "file": {"name": zip_path.name, "mimeType": "application/zip", "buffer": zip_path.read_bytes()},
    }
    form = context.request.post(live.url + "/submit", multipart=upload, headers={"Origin": live.url})
    assert form.status == 401 and "log in with your team" in form.text()
    api = context.request.post(live.url + "/api/submit", multipart=upload)
    assert api.status == 401 and "a team's token is needed" in api.json()["error"]
    wrong = context.request.post(live.url + "/api/submit", multipart=upload, headers={"Authorization": "Bearer guess"})
    assert wrong.status == 401
    assert "intruder" not in {row["name"] for row in live.api("/api/standings")["rows"]}  # nothing stored
    page.close()


def _matches(live: Live, name: str) -> int:
    return next(row["matches"] for row in live.api("/api/standings")["rows"] if row["name"] == name)


def wait_for_played(page: Page, count: int) -> None:
    """Until the page's standings say ``count`` matches are played. A function, not an expression:
    Playwright evaluates an expression with eval, which the page's Content-Security-Policy refuses."""
    page.wait_for_function(PLAYED_AT_LEAST, arg=count, timeout=LONG_MS, polling=500)


def the_hostile_traceback_runs_nothing(live: Live, page: Page, whole: bool, shot: str) -> None:
    """On the queue and on hostile's own page the payload is text: the title is the page's own, no
    element of the payload's is in the DOM, and its text is there to read."""
    for path, title, reason in (("/queue", "queue", "#rejected pre"), ("/names/hostile", "hostile", ".reason pre")):
        page.goto(live.url + path)
        expect(page.locator(reason).first).to_contain_text(PAYLOAD)
        page.wait_for_timeout(1000)  # time for anything that would run to run
        assert page.title() == f"{title} · policybox ladder"
        assert page.evaluate(INJECTED) == 0 and page.evaluate("document.scripts.length") == 0
        text = page.locator(reason).first.inner_text()
        assert ("Traceback (most recent call last)" in text) is whole, text
        live.shot(page, f"{shot}{path.replace('/', '-')}")


def the_standings_show_it_inert_too(live: Live, page: Page) -> None:
    """The standings' note on hostile, written by the live table's script: text, as the template's."""
    page.goto(live.url + "/")
    note = page.locator("#standings tr", has_text="hostile").locator("td.note")
    expect(note).to_contain_text(PAYLOAD)
    played = int(page.locator("#played").inner_text())
    wait_for_played(page, played + 1)
    expect(note).to_contain_text(PAYLOAD)  # rewritten by standings.js since
    assert page.title() == "standings · policybox ladder" and page.evaluate(INJECTED) == 0


def each_team_sees_its_own_log_tail_only(live: Live, page: Page, team: str, other: str) -> None:
    page.goto(f"{live.url}/names/{team}bot")
    expect(page.locator("#failures pre.log").first).to_contain_text(SECRET[team])
    live.shot(page, f"{team}bot-as-{team}")
    page.goto(f"{live.url}/names/{other}bot")
    expect(page.locator("#failures")).to_contain_text("its team's only")
    assert SECRET[other] not in page.content() and page.locator("#failures pre.log").count() == 0
    live.shot(page, f"{other}bot-as-{team}")
    played = live.api(f"/api/names/{other}bot")["recent"][0]["id"]
    page.goto(f"{live.url}/matches/{played}")
    assert SECRET[other] not in page.content()
    page.close()


def nobody_sees_a_log_tail(live: Live, page: Page) -> None:
    for team in SECRET:
        page.goto(f"{live.url}/names/{team}bot")
        expect(page.locator("#failures")).to_contain_text("its team's only")
        assert not any(secret in page.content() for secret in SECRET.values())


def the_web_server_keeps_its_own_oom_score_adj_and_address(live: Live) -> None:
    """Only cells raise their oom_score_adj; the server runs none, and its own is this test's. It
    listens on 127.0.0.1 alone unless told otherwise."""
    assert Path(f"/proc/{live.serve.pid}/oom_score_adj").read_text() == Path("/proc/self/oom_score_adj").read_text()
    listening = [c.laddr for c in psutil.Process(live.serve.pid).net_connections("inet") if c.status == "LISTEN"]
    assert [address.ip for address in listening] == ["127.0.0.1"]


def the_live_table_reads_as_the_page_does(live: Live, page: Page) -> None:
    page.goto(live.url + "/")
    page.wait_for_timeout(5000)  # two turns of standings.js, on standings that no longer change
    written = page.locator("#standings tbody").inner_text()
    page.reload()
    assert page.locator("#standings tbody").inner_text() == written


def test_the_live_tables_numbers_are_the_pages(browser):
    """standings.js writes a number with toFixed, the template with ``fixed``: the same text, ties too."""
    values = [0.0625, -0.0625, 0.125, 2.5, 0.0005, 1e-7, -0.0, 0.0, 0.1 + 0.2, 123.4565, 1 / 3, -2 / 3]
    values += [i / 400 for i in range(-400, 401)]
    page = browser.new_page()
    for places in (2, 3):
        written = page.evaluate("([values, places]) => values.map(v => (v + 0).toFixed(places))", [values, places])
        assert written == [fixed(value, places) for value in values]


def test_behind_a_tls_proxy_on_this_machine_the_login_cookie_is_secure(tmp_path):
    """What docs/web.md's nginx snippet sends: uvicorn believes X-Forwarded-Proto from 127.0.0.1, so the
    app knows the visitor came over HTTPS (a Secure cookie) and the form's origin is the proxy's."""
    folder = tmp_path / "cup"
    with api_ladder(folder) as ladder:
        token = ladder.token("alpha")
    with serving(folder, tmp_path / "serve.log") as (url, _):
        port = int(url.rsplit(":", 1)[1])
        proxied = {"Host": "ladder.example.org", "X-Forwarded-Proto": "https", "X-Forwarded-For": "203.0.113.9"}
        cookies = {}
        for name, headers in [
            ("proxied", {**proxied, "Origin": "https://ladder.example.org"}),
            ("direct", {"Origin": url}),
        ]:
            connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
            body = f"token={token}"
            form = {"Content-Type": "application/x-www-form-urlencoded", "Content-Length": str(len(body))}
            connection.request("POST", "/login", body=body, headers={**headers, **form})
            answer = connection.getresponse()
            assert answer.status == 303, answer.read()
            cookies[name] = answer.getheader("set-cookie")
            connection.close()
    assert "Secure" in cookies["proxied"] and "HttpOnly" in cookies["proxied"]
    assert "Secure" not in cookies["direct"]
