"""``policybox report`` and ``evaluate --report``: a results folder or a ladder as one self-contained
HTML page, judged from the file written (parsed as HTML: which tags and attributes it really holds)
and from what a real headless Chromium built of it, opened from disk. The pages are played for real:
a tournament with a policy whose name and failure message are HTML, and a small ladder."""

from __future__ import annotations

import json
import re
import shutil
import stat
from html.parser import HTMLParser
from pathlib import Path

import pytest
from conftest import policy, policybox
from helpers.ladders import EXAMPLES, GAME, WANDERER, activate, api_ladder

from policybox.league.report import Rejection, render, report_data
from policybox.league.stats.plackett_luce import final_ranking
from policybox.lines import FULL_TEXT

INJECTOR = policy("html_injection.py:InjectHtml")
HOSTILE = "<script>document.title='PWNED-NAME'</script><img src=x onerror=\"document.title='PWNED-NAME'\">"
FETCHING_TAGS = {"script", "link", "img", "iframe", "object", "embed", "audio", "video", "source", "base", "a"}
SVG_NAMESPACE = "http://www.w3.org/2000/svg"
VOID = {"meta", "br", "hr", "img", "input", "link", "wbr"}  # elements without an end tag


@pytest.fixture(scope="module")
def tournament(tmp_path_factory) -> Path:
    """A played tournament written with --report: the walker, two noops (always tied: they share a
    rank) and a policy called by HTML whose agents fail at step 2 with an HTML message (it forfeits)."""
    folder = tmp_path_factory.mktemp("report") / "board"
    played = policybox(*_tournament_args(folder), "--report")
    assert played.returncode == 0, played.stdout + played.stderr
    assert f"report: {folder / 'report.html'}" in played.stdout
    return folder


def _tournament_args(folder: Path) -> list[str]:
    policies = [WANDERER, "noop", "noop,name=statue", f"{INJECTOR},name={HOSTILE}"]
    settings = ["--env", GAME, "--episodes", "4", "--steps", "30"]
    return ["evaluate", *(arg for spec in policies for arg in ("-p", spec)), *settings, "--out", str(folder)]


class Page(HTMLParser):
    """A page as an HTML parser reads it: its tags with their attributes, its text, its style, and
    the cells of each table by the table's id."""

    def __init__(self, html: str) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.text: list[str] = []
        self.style = ""
        self.tables: dict[str, list[list[str]]] = {}
        self._open: list[str] = []
        self._table: list[list[str]] = []
        self.feed(html)
        self.close()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))
        if tag not in VOID:
            self._open.append(tag)
        if tag == "table":
            self._table = self.tables.setdefault(dict(attrs).get("id") or "", [])
        elif tag == "tr":
            self._table.append([])
        elif tag in ("td", "th"):
            self._table[-1].append("")

    def handle_endtag(self, tag: str) -> None:
        if tag in self._open:
            del self._open[len(self._open) - 1 - self._open[::-1].index(tag) :]

    def handle_data(self, data: str) -> None:
        self.text.append(data)
        if self._open and self._open[-1] == "style":
            self.style += data
        elif {"td", "th"} & set(self._open):
            self._table[-1][-1] += data

    def rows(self, table: str) -> list[list[str]]:
        """A table's body rows, each cell's text with its white space collapsed."""
        return [[" ".join(cell.split()) for cell in row] for row in self.tables[table][1:]]


def check_self_contained(html: str) -> Page:
    """Nothing in the page fetches or runs anything; every policy's text in it is data."""
    page = Page(html)
    tags = {tag for tag, _ in page.tags}
    assert not tags & FETCHING_TAGS, tags & FETCHING_TAGS
    for tag, attrs in page.tags:
        assert not {name for name in attrs if name.startswith("on") or name in ("src", "href", "srcset")}, (tag, attrs)
    assert "url(" not in page.style and "@import" not in page.style
    assert set(re.findall(r"https?://[^\s\"'<>]*", html)) <= {SVG_NAMESPACE}  # the SVG's namespace, never fetched
    assert all(attrs.get("xmlns") == SVG_NAMESPACE for tag, attrs in page.tags if tag == "svg")
    assert "<script" not in html.lower()
    return page


def open_from_disk(browser, file: Path, name: str, screenshots: Path):
    """The page opened from disk in Chromium, with a full-page screenshot saved as a test artefact;
    the page and every URL it asked for."""
    context = browser.new_context(viewport={"width": 1100, "height": 900})
    page = context.new_page()
    requested: list[str] = []
    page.on("request", lambda request: requested.append(request.url))
    page.goto(file.as_uri())
    shot = screenshots / f"report-{name}.png"
    page.screenshot(path=str(shot), full_page=True)
    print(f"screenshot: {shot}")
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    return page, requested


def check_inert(page, title: str) -> None:
    """No payload ran (each would set the title): the title is the page's own, and the DOM holds no
    element a payload would add."""
    assert page.title() == title
    assert page.evaluate("document.querySelectorAll('script, img, iframe, [onerror], [onload]').length") == 0


def check_plots_show(page, figures: dict[str, str]) -> None:
    """Each plot (figure id: a mark it draws) is laid out with a size, and its marks are drawn on top
    where they are: what a screenshot shows."""
    for figure, mark in figures.items():
        svg = page.locator(f"#{figure} svg")
        box = svg.bounding_box()
        assert svg.is_visible() and box and box["width"] > 100 and box["height"] > 30, figure
        marks = page.locator(f"#{figure} svg {mark}")
        assert marks.count() > 0, figure
        marks.first.scroll_into_view_if_needed()
        for index in range(marks.count()):
            box = marks.nth(index).bounding_box()
            assert box and box["width"] > 0 and box["height"] > 0, (figure, index)
        middle = page.evaluate(
            "([selector, mark]) => { const r = document.querySelector(selector).getBoundingClientRect();"
            " return document.elementFromPoint(r.x + r.width / 2, r.y + r.height / 2).tagName; }",
            [f"#{figure} svg {mark}", mark],
        )
        assert middle == mark, (figure, middle)


def test_the_report_of_a_tournament_is_one_self_contained_page_in_standings_order(tournament):
    html = (tournament / "report.html").read_text()
    page = check_self_contained(html)
    ranks_and_names = [row[:2] for row in page.rows("standings")]
    assert ranks_and_names == [["1", "Wanderer"], ["2", "noop"], ["2", "statue"], ["4", HOSTILE]]
    # vs next compares rating intervals (mu ± 2 sigma): four episodes leave every pair's overlapping.
    assert [row[4] for row in page.rows("standings")] == ["overlaps", "overlaps", "overlaps", ""]
    assert "ranked by forfeit" in " ".join(page.text).lower()
    assert [row[1:] for row in page.rows("seats")] == [["1", "1", "1", "1"]] * 4  # every seat once each
    (failure,) = page.rows("failures")
    assert failure[:4] == [HOSTILE, "error", "RuntimeError", "4"]
    assert failure[4].startswith("RuntimeError at step 2: policy says: </td></tr></table><script>")
    assert "onerror=\"document.title='PWNED-ONERROR'\"" in failure[4]  # shown whole, as text
    assert HOSTILE not in html and "&lt;script&gt;" in html
    assert html.count("<svg") == 4  # intervals, head-to-head, p50 and p99 latency
    assert "action.move.success" in " ".join(cell for row in page.rows("stats") for cell in row[:1])


def test_the_report_opened_from_disk_shows_its_plots_and_runs_nothing(tournament, browser, screenshots):
    page, requested = open_from_disk(browser, tournament / "report.html", "tournament", screenshots)
    assert requested == [(tournament / "report.html").as_uri()]
    check_inert(page, "policybox report · board")
    check_plots_show(
        page, {"intervals": "circle", "head-to-head": "rect", "latency-p50": "rect", "latency-p99": "rect"}
    )
    assert page.locator("#head-to-head svg rect").count() == 16  # 4 x 4
    shown = page.locator("#failures").inner_text()
    assert "<script>document.title='PWNED-SCRIPT'</script>" in shown and "onerror=" in shown


def test_every_kind_of_text_a_policy_controls_is_inert(tournament, browser, tmp_path, screenshots):
    """The same page with every other text an entrant or a game controls made hostile: stat names,
    incomplete episodes, a ladder's notes and rejections, the game and the folder, the final ranking's
    names and its note, and a rock-paper-scissors cycle's names."""
    data = report_data(tournament)
    rows = [row.model_copy(update={"stats": {HOSTILE: 1.0}, "note": HOSTILE}) for row in data.rows]
    final = final_ranking([[[HOSTILE], ["noop"]], [["noop"], [HOSTILE]]], resamples=20)
    hostile = data.model_copy(
        update={
            "kind": "ladder",
            "folder": HOSTILE,
            "game": HOSTILE,
            "rows": rows,
            "stats": [HOSTILE],
            "incomplete": {3: HOSTILE},
            "rejections": [Rejection(name=HOSTILE, version=1, reason=HOSTILE)],
            "final": final,
            "final_note": HOSTILE,
            "cycles": [[HOSTILE, "noop", "statue"]],
        }
    )
    for kind in ("tournament", "ladder"):
        file = tmp_path / f"{kind}.html"
        file.write_text(render(hostile.model_copy(update={"kind": kind})))
        page = check_self_contained(file.read_text())
        assert sum(text.count(HOSTILE) for text in page.text) >= 9
        assert HOSTILE in [cell for row in page.rows("final") for cell in row]  # the final's table, as text
        opened, _ = open_from_disk(browser, file, f"hostile-{kind}", screenshots)
        check_inert(opened, f"policybox report · {HOSTILE}")
        assert HOSTILE in opened.locator("body").inner_text()


def test_evaluate_report_writes_it_again_when_resuming_and_report_writes_it_anywhere(tournament, tmp_path):
    (tournament / "report.html").unlink()
    resumed = policybox(*_tournament_args(tournament), "--report")
    assert resumed.returncode == 0 and "resuming: 4 of 4 episodes" in resumed.stdout, resumed.stderr
    assert (tournament / "report.html").is_file()
    written = policybox("report", str(tournament), "--out", str(tmp_path / "cup.html"))
    assert written.returncode == 0 and written.stdout.splitlines()[0] == f"report: {tmp_path / 'cup.html'}"
    same = [Page(path.read_text()).rows("standings") for path in (tournament / "report.html", tmp_path / "cup.html")]
    assert same[0] == same[1]


def test_the_report_is_readable_by_others_unless_private_and_a_closed_folder_is_named(tournament, tmp_path):
    assert stat.S_IMODE((tournament / "report.html").stat().st_mode) == 0o644  # evaluate --report's
    shared, closed = tmp_path / "shared", tmp_path / "closed"
    shared.mkdir(mode=0o755)
    closed.mkdir(mode=0o700)
    tmp_path.chmod(0o755)
    for parent in tmp_path.parents:  # pytest's own folders are 0700: open them as a web server's would be
        if not parent.stat().st_mode & stat.S_IXOTH:
            parent.chmod(parent.stat().st_mode | stat.S_IXOTH)
    open_run = policybox("report", str(tournament), "--out", str(shared / "r.html"))
    assert open_run.returncode == 0 and open_run.stdout.strip() == f"report: {shared / 'r.html'}"
    assert stat.S_IMODE((shared / "r.html").stat().st_mode) == 0o644
    private = policybox("report", str(tournament), "--out", str(shared / "p.html"), "--private")
    assert private.returncode == 0 and stat.S_IMODE((shared / "p.html").stat().st_mode) == 0o600
    inside = policybox("report", str(tournament), "--out", str(closed / "r.html"))
    assert inside.returncode == 0 and stat.S_IMODE((closed / "r.html").stat().st_mode) == 0o644
    assert f"its folder {closed} is closed to other users: to share it, copy it out or use --out FILE" in " ".join(
        inside.stdout.split()
    )


def test_the_incomplete_episodes_its_last_run_listed_are_shown_while_still_not_done(tournament, tmp_path):
    folder = tmp_path / "board"
    shutil.copytree(tournament, folder)
    journal = folder / "results.jsonl"
    lines = journal.read_text().splitlines(keepends=True)
    journal.write_text("".join(line for line in lines if json.loads(line)["episode"] != 2))
    summary = json.loads((folder / "summary.json").read_text())
    summary["incomplete"] = {"1": "done since: not shown", "2": "worker lost <b>3</b> times"}
    (folder / "summary.json").write_text(json.dumps(summary))
    data = report_data(folder)
    assert data.incomplete == {2: "worker lost <b>3</b> times"} and data.played == 3 and data.not_played == 0
    page = Page(render(data))
    assert page.rows("incomplete") == [["2", "worker lost <b>3</b> times"]]
    assert not any(tag == "b" for tag, _ in page.tags)


def test_a_folder_that_is_no_results_folder_or_an_unwritable_out_is_one_message(tournament, tmp_path):
    (tmp_path / "empty").mkdir()
    (tmp_path / "a-file").write_text("")
    for folder, says in [
        (tmp_path / "empty", "is neither a results folder nor a ladder: it should hold the tournament.json"),
        (tmp_path / "missing", "there is no folder"),
        (tmp_path / "a-file", "there is no folder"),
    ]:
        run = policybox("report", str(folder))
        assert run.returncode == 2 and says in run.stderr and "Traceback" not in run.stderr, run.stderr
        assert not (folder / "report.html").exists()
    for out, says in [(tmp_path / "no" / "such" / "r.html", "does not exist"), (tmp_path, "is a folder")]:
        run = policybox("report", str(tournament), "--out", str(out))
        assert run.returncode == 2 and says in run.stderr and "Traceback" not in run.stderr, run.stderr


def test_the_report_of_a_ladder(tmp_path, browser, database_url, screenshots):
    """A ladder's report, on SQLite and on PostgreSQL: its standings, each name's rating history, failure
    causes from its matches and the rejected versions with the first line of why -- never a traceback."""
    folder = tmp_path / "cup"
    with api_ladder(folder, database_url) as ladder:
        ladder.submit("wanderer", WANDERER)
        ladder.submit("noop", "noop")
        ladder.submit("injector", INJECTOR)  # fails its qualification with HTML: rejected
        ladder.submit("broken", f"{EXAMPLES / 'broken.py'}:Broken", check=False)  # rejected at qualification
        ladder.submit("trickster", INJECTOR)
        activate(ladder, "trickster")  # plays without its qualification, and fails with HTML in its matches
        assert ladder.run(matches=3, workers=1).played == 3
    written = policybox("report", str(folder))
    assert written.returncode == 0, written.stderr
    html = (folder / "report.html").read_text()
    page = check_self_contained(html)
    standings = page.rows("standings")
    assert [row[1] for row in standings if row[0] != "—"][0] == "wanderer"
    assert {row[1]: row[3] for row in standings if row[0] == "—"} == {"injector": "rejected", "broken": "rejected"}
    rejected = {row[0]: row[2] for row in page.rows("rejections")}
    broken = "agent 0 ended error: RuntimeError at start-up: this bot was submitted with a bug: it cannot even be built"
    assert rejected["broken"] == f"{broken} … {FULL_TEXT}"  # its first line, saying where the rest is
    assert rejected["injector"].startswith("agent 0 ended error: RuntimeError at step 2: policy says: </td>")
    assert "Traceback" not in html  # first lines only: the rest is the teams'
    assert any(row[0] == "trickster" and row[1] == "error" for row in page.rows("failures"))
    played = [row[1] for row in standings if row[0] != "—"]
    assert html.count('class="history"') == len(played)
    database = database_url.split(":")[0].split("+")[0]  # sqlite or postgresql
    opened, requested = open_from_disk(browser, folder / "report.html", f"ladder-{database}", screenshots)
    assert requested == [(folder / "report.html").as_uri()]
    check_inert(opened, "policybox report · cup")
    check_plots_show(opened, {"intervals": "circle", "head-to-head": "rect", "latency-p99": "rect"})
    histories = opened.locator("figure.history svg")
    assert histories.count() == len(played)
    for index in range(len(played)):
        box = histories.nth(index).bounding_box()
        assert box and box["width"] > 100 and box["height"] > 100
        assert histories.nth(index).locator("circle").count() > 0  # a point per match it played
