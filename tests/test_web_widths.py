"""Every page fits a laptop's window and a phone's: at 1,280 and at 390 CSS pixels wide, no page is
wider than the window (``document.documentElement.scrollWidth <= innerWidth``); a table may scroll
inside its own box, long texts wrap, plots scale. On the phone the standings show each row's rank,
name and rating without scrolling sideways.

Judged in Debian's Chromium on a live ``ladder serve`` of a ladder whose text is chosen to be wide:
a 40-character name (the longest there is) whose class name is 200 characters long, whose agents
log and fail with one long token (a path and a digest, no space to wrap at); a version rejected
with such a reason; six seats a match, each with its replay playing in its page; the final it plays
after (``/final``). And on the static reports, opened from disk: the ladder's (``policybox
report``, its final's section too) and a tournament's (``evaluate --report``) with a 300-character
policy name. A screenshot of each page at each width goes to test-artifacts/ as ``<page>-<width>.png``.
"""

from __future__ import annotations

import json
import urllib.request
from pathlib import Path

import pytest
from conftest import Ran, keep_screenshot, policy, policybox
from helpers.ladders import EXAMPLES, WANDERER, activate
from helpers.servers import serving

from policybox import EpisodeSettings, LadderSettings
from policybox.ladder import Ladder

pytest.importorskip("playwright")
from helpers.browser import FITS, WIDTHS, log_in
from playwright.sync_api import expect  # noqa: E402

LONG_NAME = "a-name-of-forty-characters-to-test-width"  # a name's most: [a-z0-9][a-z0-9_-]{0,39}
REJECTED = "rejected-with-a-long-reason"
LONG_POLICY = "long" * 75  # a tournament's policy name is free text: 300 characters, no space
SEATS = 6
MOST_RUNS = 30  # of two matches each, for the suspension, the rejection and two ranked names
LONG_CLASS = "RaisesWithALongMessage" + "X" * 178  # tests/policies/wide.py's

# Every page, as a visitor reaches it: (its screenshot's name, its path). {name} and {match} are the
# long name and a match it failed in; a path that is not the site's is a report file on disk.
PAGES = [
    ("standings", "/"),
    ("name", "/names/{name}"),
    ("matches", "/matches"),
    ("match", "/matches/{match}"),
    ("queue", "/queue"),
    ("final", "/final"),
    ("rules", "/rules"),
    ("login", "/login"),
    ("submit", "/submit"),
    ("error", "/matches/999999"),
    ("report-ladder", "ladder-report.html"),
    ("report-tournament", "tournament/report.html"),
]

# Plots that do not scale: wider than the window, or than a box they would scroll (or be cut) in.
UNSCALED_PLOTS = """() => [...document.querySelectorAll('svg')].filter(svg =>
  svg.getBoundingClientRect().right > window.innerWidth || svg.parentElement.scrollWidth > svg.parentElement.clientWidth
).map(svg => svg.getAttribute('aria-label'))"""
# Where the standings' first row shows its rank, its name and its rating (the column whose header
# starts with "rating"): each cell's left and right edge, and whether it is shown at all.
FIRST_ROW_CELLS = """() => {
  const heads = [...document.querySelectorAll('#standings thead th')].map(th => th.textContent.trim());
  const row = document.querySelector('#standings tbody tr');
  return [0, 1, heads.findIndex(text => text.startsWith('rating'))].map(index => {
    const box = row.children[index].getBoundingClientRect();
    return {head: heads[index], left: box.left, right: box.right, width: box.width};
  });
}"""


def game(folder: Path) -> Path:
    """The moves arena for ``SEATS`` agents."""
    text = (EXAMPLES / "moves.yaml").read_text()
    path = folder / "moves6.yaml"
    path.write_text(text.replace("num_agents: 4", f"num_agents: {SEATS}").replace("agents: 4", f"agents: {SEATS}"))
    return path


def evaluate_with_a_long_name(folder: Path, env: Path) -> Ran:
    policies = [f"noop,name={LONG_POLICY}", WANDERER, "random"]
    picked = [word for spec in policies for word in ("-p", spec)]
    return policybox("evaluate", *picked, "--env", env, "--episodes", "2", "--steps", "30", "--out", folder, "--report")


def make_ladder(folder: Path, env: Path) -> str:
    """The wide ladder: the organiser's wanderer, random and noop; team alpha's long name (its class
    name 200 characters long), let in without qualifying so that it fails in its matches until it is
    suspended; and its version that its qualification rejects. Team alpha's token."""
    episodes = EpisodeSettings(env=str(env), steps=30)
    made = LadderSettings(settings=episodes, agents=SEATS, placement_matches=0, suspend_after=3, replays=True)
    with Ladder.create(folder, made, None) as ladder:
        token = ladder.token("alpha")
        for name, spec in [("wanderer", WANDERER), ("random", "random"), ("noop", "noop")]:
            ladder.submit(name, spec)
        ladder.submit(LONG_NAME, policy(f"wide.py:{LONG_CLASS}"), team="alpha")
        activate(ladder, LONG_NAME)
        ladder.submit(
            REJECTED, policy("wide.py:RejectedWithALongReason"), team="alpha", check=False
        )  # to its qualification
    return token


def api(url: str, path: str) -> dict:
    with urllib.request.urlopen(url + path, timeout=30) as answer:
        return json.load(answer)


def state(url: str, name: str) -> str | None:
    return next((row["state"] for row in api(url, "/api/standings")["rows"] if row["name"] == name), None)


def ranked(folder: Path) -> list[int]:
    """The versions a final opened now would play: waited for, since a fresh clone's run of the whole suite
    once had the suspension and the rejection before two names were ranked, and the final refused."""
    from policybox.league.ladder.final import frozen_field

    with Ladder.open(folder, read_only=True) as ladder, ladder.engine.connect() as connection:
        return frozen_field(connection)


def test_every_page_fits_a_laptop_and_a_phone(browser, tmp_path, screenshots):
    env = game(tmp_path)
    played = evaluate_with_a_long_name(tmp_path / "tournament", env)
    assert played.returncode == 0, played.stdout + played.stderr
    widths_of_every_page(browser, tmp_path, screenshots, env)


def widths_of_every_page(browser, tmp_path: Path, screenshots: Path, env: Path) -> None:
    folder = tmp_path / "cup"
    token = make_ladder(folder, env)
    with serving(folder, tmp_path / "serve.log") as (url, _):
        with Ladder.open(folder) as ladder:
            for _ in range(MOST_RUNS):  # two matches at a time, until the pages show what they are measured with
                if (
                    state(url, LONG_NAME) == "suspended"
                    and state(url, REJECTED) == "rejected"
                    and len(ranked(folder)) >= 2
                ):
                    break
                ladder.run(matches=2, workers=2)
            else:
                raise AssertionError(f"after {2 * MOST_RUNS} matches: {api(url, '/api/standings')}")
            ladder.final(rounds=1, workers=2)  # /final and the report's final section, measured too
        made = policybox("report", folder, "--out", tmp_path / "ladder-report.html")
        assert made.returncode == 0, made.stdout + made.stderr
        match = api(url, f"/api/names/{LONG_NAME}")["recent"][0]["id"]
        too_wide, hidden = [], []
        for width in WIDTHS:
            context = browser.new_context(viewport={"width": width, "height": 900})
            try:
                log_in(context, url, token, "alpha")  # its names' tracebacks and log tails: the widest pages
                page = context.new_page()
                for shot, path in PAGES:
                    where = path.format(name=LONG_NAME, match=match)
                    page.goto(url + where if where.startswith("/") else (tmp_path / where).as_uri())
                    if shot == "match":  # measured with its replay drawn
                        expect(page.locator("#replay-player .player-view")).to_be_visible()
                    keep_screenshot(page, screenshots / f"{shot}-{width}.png")
                    scroll_width, inner_width = page.evaluate(FITS)
                    if scroll_width > inner_width:
                        too_wide.append(f"{shot} at {width}: {scroll_width} px wide")
                    if unscaled := page.evaluate(UNSCALED_PLOTS):
                        too_wide.append(f"{shot} at {width}: plots wider than their box: {unscaled}")
                page.goto(url + "/")
                for cell in page.evaluate(FIRST_ROW_CELLS):
                    if cell["width"] == 0 or cell["left"] < 0 or cell["right"] > width:
                        hidden.append(f"standings at {width}: {cell}")
            finally:
                context.close()
    assert not too_wide, "\n".join(too_wide)
    assert not hidden, "\n".join(hidden)
