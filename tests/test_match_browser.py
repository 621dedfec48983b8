"""A match's replay and moves, played in a real browser (Debian's Chromium through Playwright) on a
real ``policybox ladder serve`` beside a real ``ladder run``.

MettaGrid: the grid is drawn on the canvas, the slider and play/pause change the shown step and the
followed agent's panel, each agent is listed by its seat's name. Connect-four: the slider moves the
highlighted row of the moves and the board in its ``<pre>``. Replays whose names and moves carry
markup (a game's item and action names, a move's text) stay text: no element is made, the title is
unchanged, and the browser reports no script error and no CSP violation.
Screenshots (whole pages with
POLICYBOX_WHOLE_PAGES=1) to test-artifacts/.
"""

from __future__ import annotations

import json
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from conftest import keep_screenshot
from helpers.ladders import TEXT_CONNECT_FOUR, WANDERER, activate, api_ladder, start_run
from helpers.servers import serving, stop
from helpers.web import PAYLOAD

from policybox import EpisodeSettings, LadderSettings
from policybox.ladder import Ladder as PublicLadder

pytest.importorskip("playwright")
from playwright.sync_api import Page, expect  # noqa: E402

LONG_MS = 120_000
COLOURS_DRAWN = """() => {
  const canvas = document.getElementById('replay-canvas');
  const data = canvas.getContext('2d').getImageData(0, 0, canvas.width, canvas.height).data;
  const seen = new Set();
  for (let i = 0; i < data.length; i += 4) seen.add(`${data[i]},${data[i + 1]},${data[i + 2]}`);
  return seen.size;
}"""


@dataclass
class Served:
    url: str
    folder: Path


@pytest.fixture
def arena(tmp_path) -> Iterator[Served]:
    """A MettaGrid ladder writing replays (wanderer and noop), its first match played; then served
    beside its ``ladder run``."""
    folder = tmp_path / "cup"
    with api_ladder(folder, replays=True) as ladder:
        ladder.submit("wanderer", WANDERER)
        ladder.submit("noop", "noop")
        for name in ("wanderer", "noop"):
            activate(ladder, name)
        assert ladder.run(matches=1, workers=1).played == 1
    yield from _served(folder, tmp_path)


@pytest.fixture
def zoo(tmp_path) -> Iterator[Served]:
    """A connect-four ladder (its board as text), two random players, two matches played; then served
    beside its ``ladder run``."""
    folder = tmp_path / "cup"
    game = EpisodeSettings(env=TEXT_CONNECT_FOUR, env_kwargs={"render_mode": "ansi"}, steps=60)
    with PublicLadder.create(folder, LadderSettings(settings=game, agents=2, placement_matches=0)) as ladder:
        ladder.submit("red", "random")
        ladder.submit("yellow", "random")
        assert ladder.run(matches=2, workers=2).played == 2
    yield from _served(folder, tmp_path)


def _served(folder: Path, tmp_path: Path) -> Iterator[Served]:
    with serving(folder, tmp_path / "serve.log") as (url, _):
        run = start_run(folder, "--workers", "1")  # one match at a time is all a page shows
        try:
            yield Served(url, folder)
        finally:
            stop(run)


def watched(page: Page) -> list[str]:
    seen: list[str] = []
    page.on("console", lambda message: seen.append(f"{message.type}: {message.text}"))
    page.on("pageerror", lambda error: seen.append(f"pageerror: {error}"))
    return seen


def _text(page: Page, selector: str) -> str:
    return page.locator(selector).text_content() or ""


def _slide(page: Page, box: str, step: int) -> None:
    page.locator(f"{box} input.step").fill(str(step))
    expect(page.locator(f"{box} output.step-shown")).to_have_text(str(step + 1))  # a step index, shown from 1


def _rewrite(path: Path, change) -> None:
    document = json.loads(zlib.decompress(path.read_bytes()))
    change(document)
    path.write_bytes(zlib.compress(json.dumps(document).encode()))


def _fits_a_phone(page: Page, player: str, shot: Path) -> None:
    """At 390 px the player stays inside the window (its own box scrolls, the canvas scales)."""
    page.set_viewport_size({"width": 390, "height": 844})
    right = page.evaluate(f"() => document.querySelector('{player}').getBoundingClientRect().right")
    width = page.evaluate("() => window.innerWidth")
    keep_screenshot(page, shot)
    assert right <= width, (right, width)
    page.set_viewport_size({"width": 1280, "height": 900})


def _inert(page: Page, title: str) -> None:
    assert page.title() == title and page.locator("main img, main script").count() == 0


def test_a_mettagrid_replay_plays_in_the_match_page(browser, arena, screenshots):
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    seen = watched(page)
    try:
        page.goto(arena.url + "/matches/1")
        expect(page.locator("#replay-player .player-view")).to_be_visible(timeout=LONG_MS)
        # the grid is drawn: the canvas has the walls' grey and the agents' colours, not only white
        colours = page.evaluate(COLOURS_DRAWN)
        assert colours >= 3
        names = page.locator("#agent-select option").all_text_contents()
        assert {name.split(": ", 1)[1] for name in names} == {"wanderer", "noop"}
        wanderer = next(name for name in names if name.endswith("wanderer"))
        page.locator("#agent-select").select_option(label=wanderer)
        _slide(page, "#replay-player", 0)
        start = [_text(page, f"#agent-{field}") for field in ("seat", "action", "reward", "inventory")]
        assert start[0].endswith("wanderer")
        _slide(page, "#replay-player", 20)
        assert _text(page, "#agent-reward") != start[2]  # it has moved, and been paid for it, by step 20
        keep_screenshot(page, screenshots / "match-replay-mettagrid.png")
        _fits_a_phone(page, "#replay-player", screenshots / "match-replay-mettagrid-390.png")
        page.locator("#replay-player button.play").click()
        expect(page.locator("#replay-player output.step-shown")).not_to_have_text("21", timeout=LONG_MS)
        page.locator("#replay-player button.play").click()  # pause

        replay = arena.folder / "replays" / "match-000001.json.z"
        _rewrite(replay, lambda d: d.update(action_names=[PAYLOAD] * len(d["action_names"])))
        page.reload()
        expect(page.locator("#replay-player .player-view")).to_be_visible(timeout=LONG_MS)
        expect(page.locator("#agent-action")).to_have_text(PAYLOAD)  # the name as text, not markup
        _inert(page, "match 1 · policybox ladder")
    finally:
        context.close()
    problems = [line for line in seen if line.startswith(("error", "pageerror")) or "Content Security" in line]
    assert not problems, problems


def test_a_connect_four_matchs_moves_and_board_follow_the_slider(browser, zoo, screenshots):
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    seen = watched(page)
    try:
        page.goto(zoo.url + "/matches/1")
        expect(page.locator("#moves-player .controls")).to_be_visible(timeout=LONG_MS)
        rows = page.locator("#moves tbody tr").count()
        assert rows >= 7  # connect-four's shortest game
        for step in (0, 3, rows - 1):
            _slide(page, "#moves-player", step)
            expect(page.locator("#moves tr.current")).to_have_attribute("data-step", str(step))
            board = _text(page, "#board")
            assert board.count("X") + board.count("O") == step + 1, board  # one token a move
        keep_screenshot(page, screenshots / "match-moves-connect-four.png")
        _fits_a_phone(page, "#moves-player", screenshots / "match-moves-connect-four-390.png")
        _slide(page, "#moves-player", 0)
        page.locator("#moves-player button.play").click()
        expect(page.locator("#moves-player output.step-shown")).not_to_have_text("1", timeout=LONG_MS)

        def hostile(document: dict) -> None:
            document["moves"][0].update(action=PAYLOAD, board=PAYLOAD)

        _rewrite(zoo.folder / "replays" / "match-000002.json.z", hostile)
        page.goto(zoo.url + "/matches/2")
        expect(page.locator("#moves-player .controls")).to_be_visible(timeout=LONG_MS)
        _slide(page, "#moves-player", 0)
        expect(page.locator("#board")).to_have_text(PAYLOAD)
        expect(page.locator('#moves tr[data-step="0"] td.action')).to_have_text(PAYLOAD)
        _inert(page, "match 2 · policybox ladder")
    finally:
        context.close()
    problems = [line for line in seen if line.startswith(("error", "pageerror")) or "Content Security" in line]
    assert not problems, problems
