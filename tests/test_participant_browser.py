"""The participant's pages in a real browser (Debian's Chromium through Playwright) on a live
``policybox ladder serve`` beside ``ladder run``: anybody reads /rules and downloads the starter,
team alpha uploads it through the form and it qualifies as it is; alpha reads its own traceback
(its file's frames first, policybox's folded in a <details>) while team beta and the public see the
first line only; no page any of them opens shows a path of the organiser's machine. Screenshots go
to $POLICYBOX_ARTIFACTS (else test-artifacts/).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import POLICIES, policy
from helpers.ladders import WANDERER, activate, api_ladder, start_run, wait_until
from test_web_browser import LONG_MS, Live, _state, log_in, serving, stop, upload_through_the_form

import policybox

pytest.importorskip("playwright")
from playwright.sync_api import Page, expect  # noqa: E402

OWN_FRAME = "policies/own_traceback.py"


@pytest.fixture
def live(tmp_path, screenshots) -> Iterator[Live]:
    """The moves arena's ladder with the organiser's walker and team alpha's nested (raises from its
    own nested function in every match), having played two matches; then ``ladder serve`` and
    ``ladder run`` beside it."""
    folder = tmp_path / "cup"
    with api_ladder(folder) as ladder:
        tokens = {team: ladder.token(team) for team in ("alpha", "beta")}
        ladder.submit("walker", WANDERER)
        ladder.submit("nested", policy("own_traceback.py:NestedRaise"), team="alpha")
        for name in ("walker", "nested"):
            activate(ladder, name)
        ladder.run(matches=2, workers=1)
    with serving(folder, tmp_path / "serve.log") as (url, serve):
        run = start_run(folder, "--workers", "1")  # one match at a time is all a page shows
        try:
            yield Live(url, folder, tokens, serve, run, screenshots)
        finally:
            stop(run)


def test_the_participant_pages_in_a_browser(browser, live, tmp_path):
    contexts = {team: browser.new_context(viewport={"width": 1280, "height": 900}) for team in (None, "alpha", "beta")}
    try:
        for team in ("alpha", "beta"):
            log_in(live, contexts[team], team)
        pages = {team: live.watch(context.new_page()) for team, context in contexts.items()}
        starter = read_the_rules_and_download_the_starter(live, pages[None], tmp_path)
        upload_through_the_form(live, pages["alpha"], "starter", starter)
        wait_until(lambda: _state(live, "starter") == "active", LONG_MS / 1000, "the starter to qualify")
        alpha_reads_its_own_traceback(live, pages["alpha"])
        for team in (None, "beta"):
            others_see_its_first_line_only(live, pages[team], team or "public")
        for team, page in pages.items():
            no_page_shows_a_host_path(live, page, team)
    finally:
        for context in contexts.values():
            context.close()
    errors = [line for line in live.console if line.startswith(("error", "pageerror"))]
    assert not errors, errors


def read_the_rules_and_download_the_starter(live: Live, page: Page, tmp_path: Path) -> Path:
    page.goto(live.url + "/")
    page.get_by_role("link", name="rules", exact=True).click()
    expect(page).to_have_url(live.url + "/rules")
    expect(page.locator("#game")).to_contain_text("mettagrid")
    expect(page.locator("#limits")).to_contain_text("act_timeout_ms")
    expect(page.locator("#ranking")).to_contain_text("forfeit")
    expect(page.locator("#suspension")).to_contain_text("3")  # suspend_after of the fixture's ladder
    live.shot(page, "rules")
    with page.expect_download() as download:
        page.locator("#starter").click()
    saved = tmp_path / "starter.zip"
    download.value.save_as(saved)
    return saved


def alpha_reads_its_own_traceback(live: Live, page: Page) -> None:
    page.goto(live.url + "/names/nested")
    own = page.locator("#failures pre.traceback.own").first
    expect(own).to_contain_text(f'File "{OWN_FRAME}"')
    first_frame = next(line for line in own.inner_text().splitlines() if line.strip().startswith("File "))
    assert OWN_FRAME in first_frame, first_frame
    folded = page.locator("#failures details.folded").first
    expect(folded.locator("pre")).not_to_be_visible()  # folded until opened
    folded.locator("summary").click()
    expect(folded.locator("pre")).to_contain_text("policybox/cell/")
    live.shot(page, "own-traceback")


def others_see_its_first_line_only(live: Live, page: Page, who: str) -> None:
    page.goto(live.url + "/names/nested")
    expect(page.locator("#failures")).to_contain_text("own code gave up at step 3")
    expect(page.locator("pre.traceback")).to_have_count(0)
    assert OWN_FRAME not in page.content() and "OWN-SECOND-LINE" not in page.content()
    live.shot(page, f"traceback-as-{who}")


def no_page_shows_a_host_path(live: Live, page: Page, team: str | None) -> None:
    forbidden = [str(live.folder), "versions/files", str(POLICIES), str(Path(policybox.__file__).parent)]
    match = live.api("/api/matches")["matches"][0]["id"]
    for path in ("/", "/names/nested", "/names/starter", "/matches", f"/matches/{match}", "/queue", "/rules"):
        page.goto(live.url + path)
        content = page.content()
        assert not [p for p in forbidden if p in content], (team, path)
