"""Why a name lost, read in a real browser (Debian's Chromium through Playwright) on a live ``policybox
ladder serve`` of the ladder test_losses reads too (``helpers/losses.py``), at 1,280 and 390 px: team
alpha reads crasher's page -- its forfeit note, its head-to-head beside the ratings (the table inside
a phone's window), its one grouped failure with ``bot.py`` frames, its logs -- and the public reads
the board, walker's page (no problem opponent), ``/final`` with its matches' replays, and a match
whose replay marks where crasher failed, the mark jumping the player to its step. Every text crasher
controls carries a ``<script>``: none runs (``window.pwned`` stays undefined, no dialog opens), each
shows as text.
Screenshots (whole pages with
POLICYBOX_WHOLE_PAGES=1) go to $POLICYBOX_ARTIFACTS (else test-artifacts/) as
``losses-<page>-<width>.png``.
"""

from __future__ import annotations

import re

import pytest
from conftest import keep_screenshot
from helpers.browser import FITS, WIDTHS, log_in
from helpers.losses import SCRIPT, Cup, make_cup
from helpers.servers import serving

pytest.importorskip("playwright")
from playwright.sync_api import Page, expect  # noqa: E402

# A table wider than its own box (which would scroll sideways): [its width, its box's].
TABLE_FITS = "(table) => [table.scrollWidth, table.parentElement.clientWidth]"
# The same, with a head-to-head row's cells as wide as they get: the longest name, a long record.
WIDEST = """(table) => {
  const cells = table.querySelector('tbody tr').children;
  cells[0].querySelector('a').textContent = 'a-name-of-forty-characters-to-test-width';
  [cells[1].textContent, cells[3].textContent, cells[4].textContent] = ['151-10-152', '0.91 ≠', '-10.185'];
  return [table.scrollWidth, table.parentElement.clientWidth];
}"""


@pytest.fixture(scope="module")
def cup(tmp_path_factory) -> Cup:
    return make_cup(tmp_path_factory.mktemp("losses-browser"))


def test_why_you_lost_in_a_browser(browser, cup, tmp_path, screenshots):
    with serving(cup.folder, tmp_path / "serve.log") as (url, _):
        failed = _crashers_latest_match(url, browser)
        for width in WIDTHS:
            context = browser.new_context(viewport={"width": width, "height": 900})
            try:
                log_in(context, url, cup.tokens["alpha"], "alpha")
                page = context.new_page()
                seen = _watched(page)
                for shot, path, read in [
                    ("standings", "/", _the_board_explains_the_forfeits),
                    ("crasher", "/names/crasher", _crashers_page_as_its_team),
                    ("walker", "/names/walker", _no_problem_opponent),
                    ("final", "/final", _the_final_and_its_replays),
                    ("match", f"/matches/{failed}", _the_replay_marks_the_failure),
                ]:
                    page.goto(url + path)
                    read(page, width)
                    keep_screenshot(page, screenshots / f"losses-{shot}-{width}.png")
                    scroll_width, inner_width = page.evaluate(FITS)
                    assert scroll_width <= inner_width, (shot, width, scroll_width)
                    assert page.evaluate("() => window.pwned") is None, (shot, width)
                errors = [line for line in seen if line.startswith(("error", "pageerror", "dialog"))]
                assert not errors, errors
            finally:
                context.close()


def _crashers_latest_match(url: str, browser) -> int:
    context = browser.new_context()
    try:
        answer = context.request.get(url + "/api/names/crasher")
        return answer.json()["failures"][0]["match"]
    finally:
        context.close()


def _watched(page: Page) -> list[str]:
    seen: list[str] = []
    page.on("console", lambda message: seen.append(f"{message.type}: {message.text}"))
    page.on("pageerror", lambda error: seen.append(f"pageerror: {error}"))
    page.on("dialog", lambda dialog: (seen.append(f"dialog: {dialog.message}"), dialog.dismiss()))
    return seen


def _the_board_explains_the_forfeits(page: Page, width: int) -> None:
    """As the page writes the rows, then as static/standings.js writes them anew from the JSON."""
    for _ in ("page", "script"):
        row = page.locator("#standings tbody tr", has_text="crasher")
        note = "forfeits: placed below every name without one in those matches"
        expect(row.locator("td.note")).to_contain_text(note)
        expect(row.locator("td.note")).to_be_visible()  # on a phone too
        first = page.locator("#standings tbody tr").first
        expect(first.locator("td").nth(6)).to_have_attribute("title", re.compile(r"^its rating interval \(μ ± 2σ\)"))
        page.evaluate("() => document.querySelector('#standings tbody tr').dataset.old = 'yes'")
        expect(page.locator("#standings tbody tr[data-old]")).to_have_count(0, timeout=30_000)  # rewritten


def _crashers_page_as_its_team(page: Page, width: int) -> None:
    expect(page.locator("#forfeit-note")).to_contain_text("placed below every name without one")
    table = page.locator("#head-to-head")
    expect(table.locator("tbody tr").first).to_contain_text("0-0-")
    expect(table.locator("thead")).to_contain_text("expected")
    table_width, box_width = table.evaluate(TABLE_FITS)
    assert table_width <= box_width, f"the head-to-head at {width} px: {table_width} px in a box of {box_width}"
    failures = page.locator("#failures tbody tr:not(.traceback)")
    expect(failures).to_have_count(1)  # the same failure in every seat of every match: one row
    grouped = page.request.get(page.url.replace("/names/", "/api/names/")).json()["failures"][0]["count"]
    assert grouped >= 2  # two seats a match
    expect(failures.locator(".count")).to_have_text(f"×{grouped}")
    expect(failures.locator("td").nth(4)).to_have_text("3")  # its third step
    expect(failures.locator("td.message")).to_contain_text(f"{SCRIPT} gave up on its step 3")  # as text
    own = page.locator("#failures pre.traceback.own")
    expect(own).to_contain_text('File "bot.py", line')
    expect(own).to_contain_text(SCRIPT)
    expect(page.locator("#logs pre.log").first).to_contain_text(f"LOSSES-LOG {SCRIPT}")
    assert page.locator("main script").count() == 0


def _no_problem_opponent(page: Page, width: int) -> None:
    expect(page.locator("#problems")).to_have_text(
        "None: walker does at least as well as its rating expects against every opponent."
    )
    table_width, box_width = page.locator("#head-to-head").evaluate(TABLE_FITS)
    assert table_width <= box_width, (width, table_width, box_width)
    table_width, box_width = page.locator("#head-to-head").evaluate(WIDEST)
    assert table_width <= box_width, ("the widest head-to-head", width, table_width, box_width)


def _the_final_and_its_replays(page: Page, width: int) -> None:
    """Its matches' list: a replay downloads; a match with crasher opens its page, whose player marks
    where crasher failed; then back to /final."""
    rows = page.locator("#final-matches tbody tr")
    expect(rows.first).to_contain_text("played")
    with page.expect_download() as download:
        rows.first.get_by_role("link", name="replay").click()
    assert download.value.suggested_filename.startswith("final-") and download.value.failure() is None
    rows.filter(has_text="crasher").first.locator("td").first.get_by_role("link").click()
    expect(page.locator("h1")).to_contain_text("Final 1, match")
    _the_replay_marks_the_failure(page, width)
    scroll_width, inner_width = page.evaluate(FITS)
    assert scroll_width <= inner_width, ("a final's match", width, scroll_width)
    page.goto(page.url.split("/final/")[0] + "/final")


def _the_replay_marks_the_failure(page: Page, width: int) -> None:
    expect(page.locator("#replay-player .player-view")).to_be_visible()
    jumps = page.locator("#replay-player button.jump")
    expect(jumps).to_have_count(2)  # crasher's two seats
    jump = jumps.first
    expect(jump).to_contain_text("(crasher) error, ValueError at step 3")
    seat = jump.get_attribute("data-seat")
    page.locator("#agent-select").select_option(seat)
    expect(page.locator("#agent-status")).to_have_text("playing")  # at step 1
    jump.click()
    expect(page.locator("#replay-player output.step-shown")).to_have_text("3")
    expect(page.locator("#replay-player input.step")).to_have_value("2")  # the step index
    expect(page.locator("#agent-status")).to_have_text("error at step 3: its fallback action since")
    right = page.evaluate("() => document.querySelector('#replay-player').getBoundingClientRect().right")
    assert right <= width, (width, right)
