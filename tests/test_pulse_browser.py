"""The ladder's pulse in a real browser (Debian's Chromium through Playwright) on a live ``ladder serve``
beside a live ``ladder run``: the standings and ``/queue`` say the ladder is playing, ``/queue`` lists
the matches in flight with their seats and the version qualifying with its place and ETA; after
SIGTERM the open standings say, without a reload, that the ladder is stopped. At 1,280 and 390 px,
each page fits the window.

Two names hold a ``<script>`` payload (as if one had got past the name check: renamed in the
database): one plays, so that it is in the matches in flight, the other qualifies -- its setup script
sleeps -- so that it is in the queue with its ETA. Both are shown as text, and run nothing (the title
stays, no element is added).
Screenshots (whole pages with
POLICYBOX_WHOLE_PAGES=1) go to $POLICYBOX_ARTIFACTS (else test-artifacts/).
"""

from __future__ import annotations

import json
import os
import re
import signal
import time
import urllib.request
from pathlib import Path

import pytest
from conftest import keep_screenshot, policy
from helpers.browser import FITS, LONG_MS, WIDTHS
from helpers.ladders import WANDERER, api_ladder, start_run, wait_until
from helpers.servers import serving, stop
from helpers.setups import sleeper, unique_marker

from policybox.ladder import Ladder
from policybox.league.ladder.database import transaction
from policybox.league.ladder.schema import names

pytest.importorskip("playwright")
from playwright.sync_api import Browser, Page, expect  # noqa: E402

PLAYING = "<script>document.title='pwned'</script>"  # 39 characters: a name's column holds 40
QUEUED = "<img src=x onerror=\"document.title='pwned'\">"
INJECTED = "() => document.querySelectorAll('img, main script').length"


def rename(folder: Path, renamed: dict[str, str]) -> None:
    """Names no submission could take (the name check refuses them), put in the database directly."""
    with Ladder.open(folder) as ladder, transaction(ladder.engine) as connection:
        for old, new in renamed.items():
            connection.execute(names.update().where(names.c.name == old).values(name=new))


def queue_now(url: str) -> dict:
    with urllib.request.urlopen(url + "/api/queue", timeout=30) as answer:
        return json.load(answer)


def frozen_with_the_payload_in_flight(url: str, group: int) -> dict:
    """Stop the run (SIGSTOP to its group) at a moment its heartbeat has the playing payload in a match
    in flight, a measured rate and the queued one under way: the pages read that beat, unchanging, until
    SIGCONT (well within the ``STALE_S`` a reader waits before calling it stopped)."""
    give_up = time.monotonic() + LONG_MS / 1000
    while time.monotonic() < give_up:
        os.killpg(group, signal.SIGSTOP)
        queue = queue_now(url)
        seated = {seat for match in queue["pulse"]["in_flight"] for seat in match["seats"]}
        if f"{PLAYING} v1" in seated and queue["pulse"]["rate"] and queue["pulse"]["qualifying"]:
            return queue
        os.killpg(group, signal.SIGCONT)
        time.sleep(0.5)
    raise AssertionError("the playing payload was never in flight")


def check_inert(page: Page, title: str) -> None:
    expect(page).to_have_title(title)
    assert page.evaluate(INJECTED) == 0  # no img, no script in the page's body: the names are text


def check_fits(page: Page) -> None:
    scroll_width, inner_width = page.evaluate(FITS)
    assert scroll_width <= inner_width, (page.url, scroll_width, inner_width)


def look_at_the_queue(browser: Browser, url: str, queue: dict, shots: Path) -> None:
    for width in WIDTHS:
        context = browser.new_context(viewport={"width": width, "height": 900})
        page = context.new_page()
        page.goto(url + "/queue")
        check_inert(page, "queue · policybox ladder")
        expect(page.locator("#pulse")).to_have_class("pulse playing")
        expect(page.locator("#pulse")).to_contain_text("Ladder playing: ")
        seats = page.locator("#in-flight .seat").all_inner_texts()
        assert f"{PLAYING} v1" in seats, seats
        row = page.locator("#qualifying tbody tr", has_text=QUEUED)
        eta = next(r["eta"] for r in queue["qualifying"] if r["name"] == QUEUED)
        expect(row.locator("td.eta")).to_have_text(f"qualifying now · {eta['line']}")
        assert re.search(r"qualifies in about (a minute|\d+ minutes|\d+ hours)", eta["line"]), eta
        check_fits(page)
        keep_screenshot(page, shots / f"pulse-queue-{width}.png")
        page.goto(url + "/")
        check_inert(page, "standings · policybox ladder")
        expect(page.locator("#pulse")).to_have_class("pulse playing")
        expect(page.locator("#standings")).to_contain_text(PLAYING)
        check_fits(page)
        keep_screenshot(page, shots / f"pulse-standings-{width}.png")
        context.close()


def test_the_board_and_the_queue_say_the_ladder_plays_then_that_it_stopped(browser, tmp_path, screenshots):
    folder = tmp_path / "cup"
    with api_ladder(folder) as ladder:
        for name, spec in [("wanderer", WANDERER), ("random", "random"), ("noop", "noop")]:
            ladder.submit(name, spec)
        ladder.submit("seeded", policy("seeded_random.py:SeededRandom"))
        ladder.submit("slow", str(sleeper(tmp_path / "team", 600, unique_marker())))
    rename(folder, {"seeded": PLAYING, "slow": QUEUED})
    with serving(folder, tmp_path / "serve.log") as (url, _):
        context = browser.new_context(viewport={"width": 1280, "height": 900})
        standings = context.new_page()
        standings.goto(url + "/")
        expect(standings.locator("#pulse")).to_have_class("pulse stopped")  # no run yet
        standings.evaluate("window.sameDocument = true")  # gone if the page reloads
        run = start_run(folder, "--workers", "1")
        try:
            expect(standings.locator("#pulse")).to_have_class("pulse playing", timeout=LONG_MS)  # live
            queue = frozen_with_the_payload_in_flight(url, run.pid)
            try:
                look_at_the_queue(browser, url, queue, screenshots)
            finally:
                os.killpg(run.pid, signal.SIGCONT)
        finally:
            stop(run)
        wait_until(lambda: queue_now(url)["pulse"]["state"] == "stopped", 60, "the pulse to say stopped")
        expect(standings.locator("#pulse")).to_have_class("pulse stopped", timeout=30_000)
        expect(standings.locator("#pulse-line")).to_have_text(re.compile(r"^stopped \d+ seconds? ago \(since "))
        assert standings.evaluate("window.sameDocument") is True
        check_inert(standings, "standings · policybox ladder")
        keep_screenshot(standings, screenshots / "pulse-stopped.png")
        context.close()
