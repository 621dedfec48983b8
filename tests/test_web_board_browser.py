"""The standings in a real browser (Debian's Chromium through Playwright), on a live ``ladder serve``
beside a live ``ladder run``: a suspended, a retired and a rejected name listed unranked below the
ranked rows, with their state and why; the rating column shows the number the rows are sorted by;
the same after standings.js has rewritten the table; the name pages say so too. Judged from the DOM.
Screenshots (whole pages with
POLICYBOX_WHOLE_PAGES=1) go to $POLICYBOX_ARTIFACTS (else test-artifacts/ in the checkout).
"""

from __future__ import annotations

import pytest
from conftest import keep_screenshot
from helpers.browser import LONG_MS, PLAYED_AT_LEAST
from helpers.ladders import start_run
from helpers.played import PLAYING, UNRANKED
from helpers.servers import serving, stop

pytest.importorskip("playwright")
from playwright.sync_api import Page, expect  # noqa: E402


def rows_of(page: Page) -> list[dict]:
    """The standings table's rows as the visitor reads them."""
    cells = page.locator("#standings tbody tr").evaluate_all(
        "rows => rows.map(row => Array.from(row.cells, cell => cell.textContent.trim()))"
    )
    return [
        {"rank": c[0], "name": c[1], "version": c[2], "state": c[3], "rating": c[4], "versus": c[6], "note": c[10]}
        for c in cells
    ]


def check_table(rows: list[dict]) -> None:
    ranked = [row for row in rows if row["rank"] != "—"]
    assert {row["name"] for row in ranked} == PLAYING, rows
    assert rows[: len(ranked)] == ranked  # every unranked row below the ranked ones
    assert [row["rank"] for row in ranked] == ["1", "2", "3"]
    shown = [float(row["rating"].split(" ")[0]) for row in ranked]  # the rating cell starts with its ordinal
    assert shown == sorted(shown, reverse=True), rows
    assert all(" (μ " in row["rating"] for row in ranked)
    below = {row["name"]: row for row in rows[len(ranked) :]}
    assert {name: row["state"] for name, row in below.items()} == UNRANKED
    assert all(row["note"] and not row["versus"] for row in below.values())
    assert "ladder reinstate" in below["retiree"]["note"]


def test_the_standings_rank_only_active_names_by_the_number_they_show(browser, board, tmp_path, screenshots):
    with serving(board, tmp_path / "serve.log") as (url, _):
        run = start_run(board, "--workers", "1")  # the ranked ones play on: the table is rewritten while we read it
        try:
            context = browser.new_context(viewport={"width": 1280, "height": 900})
            page = context.new_page()
            errors: list[str] = []
            page.on("pageerror", lambda error: errors.append(str(error)))
            page.goto(url + "/")
            headers = page.locator("#standings thead").inner_text()
            assert "rating (μ−3σ)" in headers and "vs next (rating)" in headers
            check_table(rows_of(page))  # as the template wrote it
            played = int(page.locator("#played").inner_text())
            page.wait_for_function(PLAYED_AT_LEAST, arg=played + 1, timeout=LONG_MS)
            check_table(rows_of(page))  # as standings.js rewrote it
            expect(page.locator("#standings tbody tr.unranked")).to_have_count(len(UNRANKED))
            keep_screenshot(page, screenshots / "board-standings.png")

            page.goto(url + "/names/crasher")
            playing = page.locator("table.facts tr", has_text="playing").inner_text()
            assert "suspended" in playing and "(unranked)" in playing
            page.goto(url + "/names/random")
            states = page.locator("#versions tbody td.state").all_inner_texts()
            assert states == ["superseded", "active"]
            keep_screenshot(page, screenshots / "board-name-superseded.png")
            assert not errors, errors
            context.close()
        finally:
            stop(run)
