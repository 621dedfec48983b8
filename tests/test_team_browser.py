"""A team's page and its scrimmages in a real browser (Debian's Chromium through Playwright) on a live
``policybox ladder serve``, at 1,280 and 390 CSS pixels wide.

Team alpha walks from the standings to its team's page (its names, their versions' rating plots),
asks for scrimmages through its name page's form, and once a ``ladder run`` has played them opens one
from its team's page: "unrated scrimmage", its own bot's log tail and failure message -- each carrying
a ``<script>`` and an ``onerror`` payload -- shown as text. A refused request shows the form again
with why. Anybody else sees the team's page without the scrimmages, and a scrimmage's page is a 404.
Team and name strings cannot carry markup (``[a-z0-9][a-z0-9_-]{0,39}``): a payload in a team's
URL is a 404 whose message shows it as text. No page is wider than the window. Screenshots (whole pages with
POLICYBOX_WHOLE_PAGES=1) go to $POLICYBOX_ARTIFACTS (else test-artifacts/).
"""

from __future__ import annotations

from collections.abc import Iterator
from urllib.parse import quote

import pytest
from helpers.browser import INJECTED, LONG_MS, WIDTHS, Live, serving_live
from helpers.ladders import ladder_command, two_teams
from helpers.web import PAYLOAD

from policybox.ladder import Ladder

pytest.importorskip("playwright")
from playwright.sync_api import Page, expect  # noqa: E402

URL_PAYLOAD = PAYLOAD.replace("</script>", "")  # a "/" would end the path's segment: no route, no message
FITS = "() => document.documentElement.scrollWidth <= window.innerWidth"


@pytest.fixture
def live(tmp_path, screenshots) -> Iterator[Live]:
    """The moves arena's ladder, with replays: the organiser's walker, team alpha's alphabot (logs its
    secret and markup, then raises with a payload at step 5 of every match) and alphawalk, team beta's
    betabot; having played two matches. Then ``ladder serve``; a ``ladder run --matches 1`` plays the
    scrimmages asked for (it plays those waiting before it ends), rather than a run playing throughout."""
    folder = tmp_path / "cup"
    tokens = two_teams(folder, replays=True, suspend_after=50)
    with Ladder.open(folder) as ladder:
        ladder.run(matches=2, workers=1)
    with serving_live(folder, tokens, tmp_path / "serve.log", screenshots) as live:
        yield live


def test_a_teams_page_and_its_scrimmages_in_a_browser(browser, live):
    for width in WIDTHS:
        viewport = {"width": width, "height": 900}
        alpha, anybody = browser.new_context(viewport=viewport), browser.new_context(viewport=viewport)
        try:
            live.log_in(alpha, "alpha")
            page = live.watch(alpha.new_page())
            walk_from_the_standings_to_the_team_page(live, page, width)
            asked = ask_through_the_name_pages_form(live, page, width)
            a_refusal_shows_the_form_again_with_why(live, page, width)
            played = ladder_command("run", str(live.folder), "--matches", "1", "--workers", "1")
            assert played.returncode == 0 and _played(live, asked), played.stderr
            open_a_played_scrimmage(live, page, width, min(asked))
            others_see_no_scrimmage(live, live.watch(anybody.new_page()), width, min(asked))
            a_payload_in_a_team_url_is_text(live, page, width)
        finally:
            alpha.close()
            anybody.close()
    errors = [line for line in live.console if line.startswith(("error", "pageerror"))]
    assert all("status of 4" in line for line in errors), errors  # the refusals asked for on purpose, nothing else


def _played(live: Live, ids: set[int]) -> bool:
    rows = live.api("/api/teams/alpha", "alpha")["scrimmages"]
    return all(row["state"] == "played" for row in rows if row["id"] in ids)


def _fits(live: Live, page: Page, shot: str, width: int) -> None:
    assert page.evaluate(FITS), f"{shot} is wider than {width} px"
    live.shot(page, f"{shot}-{width}")


def walk_from_the_standings_to_the_team_page(live: Live, page: Page, width: int) -> None:
    page.goto(live.url + "/")
    page.locator("#standings tr", has_text="alphabot").get_by_role("link", name="alpha", exact=True).click()
    expect(page).to_have_url(f"{live.url}/teams/alpha")
    expect(page.locator("#team-name")).to_have_text("alpha")
    expect(page.locator("#team-names tbody tr")).to_have_count(2)
    expect(page.locator("figure.rating-history svg").first).to_be_visible()  # each rated version's plot
    expect(page.locator("#submissions-left")).to_contain_text("of 10 left")
    expect(page.locator("#scrimmage-quota")).to_contain_text("of 20 left")
    _fits(live, page, "team", width)


def ask_through_the_name_pages_form(live: Live, page: Page, width: int) -> set[int]:
    before = {row["id"] for row in live.api("/api/teams/alpha", "alpha")["scrimmages"]}
    page.goto(live.url + "/names/alphabot")
    _fits(live, page, "name-with-scrimmage-form", width)
    form = page.locator("#scrimmage-form")
    form.locator("select[name=opponent]").select_option("betabot")
    form.locator("input[name=count]").fill("2")
    form.get_by_role("button", name="ask").click()
    expect(page).to_have_url(f"{live.url}/teams/alpha#scrimmages", timeout=LONG_MS)  # a loaded machine
    asked = {row["id"] for row in live.api("/api/teams/alpha", "alpha")["scrimmages"]} - before
    assert len(asked) == 2
    for scrimmage in asked:
        expect(page.locator(f"#scrimmage-list a[href='/scrimmages/{scrimmage}']")).to_be_visible()
    return asked


def a_refusal_shows_the_form_again_with_why(live: Live, page: Page, width: int) -> None:
    page.goto(live.url + "/names/alphabot")
    form = page.locator("#scrimmage-form")
    form.locator("select[name=opponent]").select_option("walker")
    form.locator("input[name=count]").evaluate("input => input.removeAttribute('max')")  # past the browser's check
    form.locator("input[name=count]").fill("21")
    form.get_by_role("button", name="ask").click()
    expect(page.locator("#message")).to_contain_text("count 21: ask for 1 to 20 scrimmages", timeout=LONG_MS)
    expect(page.locator("#scrimmage-form select[name=opponent]")).to_have_value("walker")
    expect(page.locator("#scrimmage-form input[name=count]")).to_have_value("21")
    _fits(live, page, "scrimmage-refused", width)


def open_a_played_scrimmage(live: Live, page: Page, width: int, scrimmage: int) -> None:
    page.goto(live.url + "/teams/alpha")
    page.locator(f"#scrimmage-list a[href='/scrimmages/{scrimmage}']").click()
    expect(page).to_have_url(f"{live.url}/scrimmages/{scrimmage}")
    expect(page.locator("#unrated")).to_contain_text("unrated scrimmage")
    seats = page.locator("#scrimmage-seats")
    expect(seats.locator("pre.log").first).to_contain_text("ALPHA-LOG-SECRET")  # its own bot's log tail
    expect(seats).to_contain_text(PAYLOAD)  # in its message and its log, as text
    expect(seats).to_contain_text("its team's only")  # betabot's log tail: beta's
    assert "BETA-LOG-SECRET" not in page.content() and "BETA-MESSAGE-SECRET" not in page.content()
    page.wait_for_timeout(1000)  # time for anything that would run to run
    assert page.title() == f"scrimmage {scrimmage} · policybox ladder" and page.evaluate(INJECTED) == 0
    expect(page.locator("#replay")).to_have_attribute("href", f"/scrimmages/{scrimmage}/replay")
    with page.expect_download() as download:
        page.locator("#replay").click()
    assert download.value.suggested_filename == f"scrimmage-{scrimmage:06d}.json.z"
    _fits(live, page, "scrimmage", width)


def others_see_no_scrimmage(live: Live, page: Page, width: int, scrimmage: int) -> None:
    page.goto(live.url + "/teams/alpha")
    expect(page.locator("#team-names")).to_be_visible()
    expect(page.locator("#scrimmage-list")).to_have_count(0)
    expect(page.locator("#scrimmage-quota")).to_have_count(0)
    page.goto(f"{live.url}/scrimmages/{scrimmage}")
    expect(page.locator("#message")).to_contain_text("only the team that asked for a scrimmage sees it")
    page.goto(live.url + "/names/alphabot")
    expect(page.locator("#scrimmage-form")).to_have_count(0)  # another team's name: no form
    _fits(live, page, "name-as-anybody", width)


def a_payload_in_a_team_url_is_text(live: Live, page: Page, width: int) -> None:
    page.goto(f"{live.url}/teams/{quote(URL_PAYLOAD, safe='')}")
    expect(page.locator("#message")).to_contain_text("this ladder has no team called")
    expect(page.locator("#message")).to_contain_text("<script>")
    page.wait_for_timeout(500)
    assert page.title() == "404 · policybox ladder" and page.evaluate(INJECTED) == 0
    _fits(live, page, "team-payload", width)
