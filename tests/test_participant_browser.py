"""The participant's pages in a real browser (Debian's Chromium through Playwright) on a live
``policybox ladder serve`` beside ``ladder run``: anybody reads /rules and downloads the starter,
team alpha uploads it through the form and it qualifies as it is; alpha reads its own traceback
(its file's frames first, policybox's folded in a <details>) while team beta and the public see the
first line only; no page any of them opens shows a path of the organiser's machine. Screenshots (whole pages with
POLICYBOX_WHOLE_PAGES=1) go to $POLICYBOX_ARTIFACTS (else test-artifacts/).
"""

from __future__ import annotations

import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import POLICIES, keep_screenshot, policy
from helpers.browser import FITS, LONG_MS, Live, serving_live, upload_through_the_form
from helpers.ladders import GAME, WANDERER, activate, api_ladder, wait_until
from helpers.servers import serving

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
    with serving_live(folder, tokens, tmp_path / "serve.log", screenshots, run=True) as live:
        yield live


def test_the_participant_pages_in_a_browser(browser, live, tmp_path):
    contexts = {team: browser.new_context(viewport={"width": 1280, "height": 900}) for team in (None, "alpha", "beta")}
    try:
        for team in ("alpha", "beta"):
            live.log_in(contexts[team], team)
        pages = {team: live.watch(context.new_page()) for team, context in contexts.items()}
        starter = read_the_rules_and_download_the_starter(live, pages[None], tmp_path)
        upload_through_the_form(live, pages["alpha"], "starter", starter)
        wait_until(lambda: live.state("starter") == "active", LONG_MS / 1000, "the starter to qualify")
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


def test_the_rules_show_how_to_play_at_home_on_a_laptop_and_a_phone(browser, tmp_path, screenshots):
    """/rules at 1,280 and 390 px: the game by what it is, its versions, spaces and reward, the commands
    that play the starter against the ladder's own random bot; the game's file and the starter download
    as the commands name them; nothing is wider than the window."""
    folder = tmp_path / "cup"
    with api_ladder(folder) as ladder:
        ladder.submit("house", "random")
        activate(ladder, "house")
    with serving(folder, tmp_path / "serve.log") as (url, _):
        for width in (1280, 390):
            context = browser.new_context(viewport={"width": width, "height": 900}, accept_downloads=True)
            try:
                page = context.new_page()
                page.goto(url + "/rules")
                expect(page.locator("#game-name")).to_have_text("the MettaGrid game arena.moves, 4 agents, 30 steps")
                expect(page.locator("#packages")).to_contain_text(f"policybox {policybox.__version__}")
                expect(page.locator("#packages")).to_contain_text("mettagrid 0.")
                expect(page.locator("#spaces")).to_contain_text("uint8 array of 500 x 3")
                expect(page.locator("#action-names")).to_contain_text("move_north")
                expect(page.locator("#reward")).to_contain_text("action.move.success")
                expect(page.locator("#at-home")).to_contain_text("house (-p random)")
                commands = page.locator("#commands")
                expect(commands).to_contain_text("pip install policybox==")
                played = "policybox run --env game.yaml -p ./bot -p random --agents 4 --steps 30"
                expect(commands).to_contain_text(played)
                expect(commands).to_be_visible()
                assert GAME not in page.content() and "examples/" not in page.content()
                scroll_width, inner_width = page.evaluate(FITS)
                assert scroll_width <= inner_width, (width, scroll_width, inner_width)
                keep_screenshot(page, screenshots / f"rules-at-home-{width}.png")
                with page.expect_download() as game:
                    page.locator("#game-file").click()
                assert game.value.suggested_filename == "game.yaml"
                assert Path(game.value.path()).read_bytes() == Path(GAME).read_bytes()
                with page.expect_download() as starter:
                    page.locator("#starter").click()
                saved = tmp_path / f"starter-{width}.zip"
                starter.value.save_as(saved)
                with zipfile.ZipFile(saved) as archive:
                    assert "policybox run --env game.yaml -p ./bot" in archive.read("README.md").decode()
            finally:
                context.close()
