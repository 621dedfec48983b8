"""What a team takes home, in a real browser (Debian's Chromium through Playwright) on a real
``policybox ladder serve``: team alpha, logged in, finds its seats' downloads on a match page under
"Take home" and downloads its seat's whole log and its version's zip; team beta sees none of alpha's;
the sandbox table is folded under "How this match was isolated" until opened; no organiser's command
is shown. At 1,280 and 390 px wide, the page fits its window, and the markup in every log line
(a ``<script>`` and an ``onerror=`` image) stays text.
Screenshots (whole pages with
POLICYBOX_WHOLE_PAGES=1) to test-artifacts/."""

from __future__ import annotations

import io
import zipfile
from collections.abc import Iterator

import pytest
from helpers.browser import FITS, WIDTHS, Live, serving_live
from helpers.take_home import BOT, Cup, secret

pytest.importorskip("playwright")
from playwright.sync_api import expect  # noqa: E402


@pytest.fixture
def live(take_home_cup: Cup, tmp_path, screenshots) -> Iterator[Live]:
    with serving_live(take_home_cup.folder, take_home_cup.tokens, tmp_path / "serve.log", screenshots) as live:
        yield live


def _alphas_match(live: Live) -> tuple[int, int, int]:
    """A match alphabot played: its id, alphabot's first seat in it, and how many seats it had there."""
    matches = live.api("/api/matches")["matches"]
    match = next(m for m in matches if any(s["name"] == "alphabot" for s in m["seats"]))
    seats = [s["seat"] for s in match["seats"] if s["name"] == "alphabot"]
    return match["id"], seats[0], len(seats)


def test_a_team_takes_home_its_log_and_files_from_the_match_page(browser, live, tmp_path):
    match, seat, seats = _alphas_match(live)
    for width in WIDTHS:
        contexts = {team: browser.new_context(viewport={"width": width, "height": 900}, accept_downloads=True)
                    for team in ("alpha", "beta")}  # fmt: skip
        for team, context in contexts.items():
            live.log_in(context, team)
        alpha = live.watch(contexts["alpha"].new_page())
        alpha.goto(f"{live.url}/matches/{match}")
        expect(alpha).to_have_title(f"match {match} · policybox ladder")
        take_home = alpha.locator("#take-home")
        expect(take_home).to_be_visible()
        expect(take_home.locator("tbody tr")).to_have_count(seats)  # its own seats: walker's, noop's, beta's are not
        expect(alpha.locator(".log-tail pre").first).to_contain_text("<script>")  # its log's markup, as text
        layers = alpha.locator("#layers")
        expect(layers).to_be_hidden()
        live.shot(alpha, f"take-home-{width}")
        alpha.locator("#isolation summary").click()
        expect(layers).to_be_visible()
        assert alpha.evaluate(FITS)[0] <= width, alpha.evaluate(FITS)
        live.shot(alpha, f"take-home-isolation-{width}")
        assert "policybox run" not in alpha.content()

        with alpha.expect_download() as log_download:
            take_home.locator(f'a[href="/matches/{match}/seats/{seat}/log"]').click()
        log = log_download.value
        assert log.suggested_filename == f"match-{match}-seat-{seat}-alphabot-v1.log"
        log.save_as(tmp_path / "log")
        text = (tmp_path / "log").read_text()
        assert text.startswith(secret("alpha")) and "<script>" in text
        with alpha.expect_download() as zip_download:
            take_home.locator('a[href="/names/alphabot/v1/files.zip"]').first.click()
        zip_download.value.save_as(tmp_path / "files.zip")
        with zipfile.ZipFile(io.BytesIO((tmp_path / "files.zip").read_bytes())) as archive:
            assert archive.read("bot.py").decode() == BOT

        beta = live.watch(contexts["beta"].new_page())
        beta.goto(f"{live.url}/matches/{match}")
        expect(beta.locator('a[href*="alphabot"][href$="files.zip"]')).to_have_count(0)
        expect(beta.locator(f'a[href="/matches/{match}/seats/{seat}/log"]')).to_have_count(0)
        answer = beta.goto(f"{live.url}/matches/{match}/seats/{seat}/log")  # typed in: refused
        assert answer is not None and answer.status == 403
        expect(beta.locator("main")).to_contain_text("log in with that team")
        assert beta.evaluate(FITS)[0] <= width
        live.shot(beta, f"take-home-refused-{width}")
        for page in (alpha, beta):
            assert page.title() != "pwned"
        for context in contexts.values():
            context.close()
    refused = "the server responded with a status of 403"  # beta's typed-in log, once per width: the only one
    problems = [line for line in live.console if ("error" in line.lower() and refused not in line) or "pwned" in line]
    assert not problems and sum(refused in line for line in live.console) == len(WIDTHS), live.console
