"""The pages in a real browser (Playwright's): a live ``ladder serve`` as the browser tests drive it
(``Live``, ``serving_live``), logging in and uploading through the form as a team does, and the widths
and checks the pages are judged at."""

from __future__ import annotations

import contextlib
import json
import re
import subprocess
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from conftest import keep_screenshot

from helpers.ladders import start_run
from helpers.servers import serving, stop
from helpers.web import auth
from policybox.league.web.viewer import COOKIE

pytest.importorskip("playwright")
from playwright.sync_api import BrowserContext, Page, expect  # noqa: E402

LONG_MS = 300_000  # a loaded 2-core machine qualifying and playing: wait for conditions, generously
WIDTHS = (1280, 390)  # a laptop's window and a phone's, in CSS pixels
# A page's width and its window's: no page is wider than its window.
FITS = "() => [document.documentElement.scrollWidth, window.innerWidth]"
# How many elements of the kinds a payload plants (an image, a frame, an inline script...) a page holds: none
# where the payload is shown as text.
INJECTED = "document.querySelectorAll('img, iframe, object, embed, script:not([src])').length"
# Whether the standings say ``count`` matches are played, for ``page.wait_for_function``: a function, not an
# expression, which Playwright would evaluate with eval, refused by the pages' Content-Security-Policy.
PLAYED_AT_LEAST = "count => Number(document.getElementById('played').textContent) >= count"


@dataclass
class Live:
    """A live ``ladder serve`` of a ladder (and the ``ladder run`` playing beside it, if any) as a browser
    test sees it: its URL, the teams' tokens, its screenshots' folder, what the browser reported."""

    url: str
    folder: Path
    tokens: dict[str, str]
    serve: subprocess.Popen
    run: subprocess.Popen | None  # a ladder run playing beside the pages, if any
    shots: Path
    console: list[str] = field(default_factory=list)

    def api(self, path: str, team: str | None = None) -> dict:
        request = urllib.request.Request(self.url + path, headers=auth(self.tokens, team))
        with urllib.request.urlopen(request, timeout=30) as answer:
            return json.load(answer)

    def shot(self, page: Page, name: str) -> None:
        path = self.shots / f"{name}.png"
        keep_screenshot(page, path)

    def watch(self, page: Page) -> Page:
        """Keep what the browser reports about ``page``: its console, and any script error in it."""
        page.on("console", lambda message: self.console.append(f"{message.type}: {message.text}"))
        page.on("pageerror", lambda error: self.console.append(f"pageerror: {error}"))
        return page

    def log_in(self, context: BrowserContext, team: str) -> None:
        log_in(context, self.url, self.tokens[team], team)

    def state(self, name: str) -> str:
        """The name's state in the standings (``active``, ``rejected``...)."""
        return next(row["state"] for row in self.api("/api/standings")["rows"] if row["name"] == name)


def log_in(context: BrowserContext, url: str, token: str, team: str) -> None:
    """Log ``context`` in at ``url`` with ``token`` through the form, as ``team``: its session cookie is
    HttpOnly and SameSite=Strict."""
    page = context.new_page()
    page.goto(url + "/login")
    page.locator("input[name=token]").fill(token)
    page.get_by_role("button", name="log in").click()
    expect(page.locator("#team")).to_have_text(team)
    cookie = next(c for c in context.cookies() if c["name"] == COOKIE)
    assert cookie["httpOnly"] and cookie["sameSite"] == "Strict"
    page.close()


def upload_through_the_form(live: Live, page: Page, name: str, zip_path: Path) -> None:
    page.goto(live.url + "/submit")
    page.locator("input[name=name]").fill(name)
    page.locator("input[name=file]").set_input_files(zip_path)
    page.get_by_role("button", name="submit").click()
    expect(page).to_have_url(re.compile(rf"/submit\?submitted={name}&version=\d+$"))
    expect(page.locator("#submitted")).to_contain_text(f"{name} v")  # and when it qualifies (test_pulse)
    page.locator("#submitted").get_by_role("link", name=re.compile(f"^{name} v")).click()
    expect(page).to_have_url(f"{live.url}/names/{name}")
    expect(page.locator("#versions")).to_contain_text(zip_path.name)
    live.shot(page, f"submitted-{name}")


@contextlib.contextmanager
def serving_live(folder: Path, tokens: dict[str, str], log: Path, shots: Path, run: bool = False) -> Iterator[Live]:
    """A ``ladder serve`` of ``folder`` (its output in ``log``), and with ``run`` a ``ladder run`` of one
    worker beside it until the end (one match at a time is all a page shows): the ``Live`` the browser
    tests drive."""
    with serving(folder, log) as (url, serve):
        playing = start_run(folder, "--workers", "1") if run else None
        try:
            yield Live(url, folder, tokens, serve, playing, shots)
        finally:
            if playing is not None:
                stop(playing)
