"""The ranking the board stands behind, and a version's life, judged from outside: ``ladder status``
(its table at 80 columns and its JSON), ``/api/standings``, the name page's JSON, ``policybox report``,
the CLI's exit codes, the HTTP answers and the database's rows.

One ladder, built once per worker (``helpers.played``'s ``board``), holds every state a name can be in:
three names that play (one of them with a v2 that superseded its v1), a suspended one (it segfaults in
every match), a retired one (it played first) and a rejected one (it raises in its validation episode).
The rules that write (retire, reinstate, a rejected new version, the migration) each get a ladder of
their own; the migration's, on SQLite and on a real PostgreSQL server.
"""

from __future__ import annotations

import json
import shutil
from html.parser import HTMLParser
from pathlib import Path

import pytest
from conftest import policy, policybox
from helpers.ladders import WANDERER, activate, api_ladder
from helpers.played import PLAYING, UNRANKED
from helpers.zips import bot_zip
from sqlalchemy import func, select
from starlette.testclient import TestClient

from policybox.ladder import Ladder
from policybox.league import ranking, report
from policybox.league.ladder import life, migrations, schema
from policybox.league.ladder.schema import names, versions
from policybox.league.web.app import make_app
from policybox.lines import FULL_TEXT, MARKER, clip, first_line


def status_json(folder: Path) -> dict:
    shown = policybox("ladder", "status", str(folder), "--json")
    assert shown.returncode == 0, shown.stderr
    return json.loads(shown.stdout)


def check_rows(rows: list[dict]) -> None:
    """The rows of any view: the playing names ranked first, in the order of the number shown; every
    other below, unranked, with its state and why."""
    ranked = [row for row in rows if row["rank"] is not None]
    assert {row["name"] for row in ranked} == PLAYING
    assert rows[: len(ranked)] == ranked  # no unranked row above a ranked one
    shown = [row["rating"]["ordinal"] for row in ranked]
    assert shown == sorted(shown, reverse=True)
    assert [row["rank"] for row in ranked] == [1, 2, 3]
    assert ranked[-1]["versus_next"] is None
    below = {row["name"]: row for row in rows[len(ranked) :]}
    assert {name: row["state"] for name, row in below.items()} == UNRANKED
    assert all(row["reason"] and row["versus_next"] is None for row in below.values())
    assert "failed in 3 matches in a row" in below["crasher"]["reason"]
    assert "ladder reinstate" in below["retiree"]["reason"]
    assert "ValueError at start-up" in below["broken"]["reason"]


def test_only_active_names_are_ranked_in_the_json_and_the_others_follow_with_why(board):
    standings = status_json(board)
    check_rows(standings["rows"])
    assert {row["name"]: row["state"] for row in standings["rows"] if row["rank"]} == dict.fromkeys(PLAYING, "active")


def test_the_api_serves_the_same_ranking_with_reasons_cut_to_their_first_line(board):
    with TestClient(make_app(board)) as client:
        rows = client.get("/api/standings").json()["rows"]
        page = client.get("/names/random")
        named = client.get("/api/names/random").json()
    check_rows(rows)
    broken = next(row for row in rows if row["name"] == "broken")
    assert "\n" not in broken["reason"]  # the public sees the first line, which says where the rest is
    assert broken["reason"].endswith(f"{MARKER} {FULL_TEXT}")
    assert [(v["version"], v["state"]) for v in named["versions"]] == [(1, "superseded"), (2, "active")]
    assert named["standing"]["superseded"] == [1] and named["standing"]["version"] == 2
    assert page.status_code == 200 and "superseded" in page.text


def test_superseded_is_stored_and_listed(board):
    with Ladder.open(board, read_only=True) as ladder, ladder.engine.connect() as connection:
        states = connection.execute(
            select(versions.c.number, versions.c.state)
            .join(names, names.c.id == versions.c.name_id)
            .where(names.c.name == "random")
            .order_by(versions.c.number)
        ).all()
    assert [tuple(row) for row in states] == [(1, "superseded"), (2, "active")]
    random = next(row for row in status_json(board)["rows"] if row["name"] == "random")
    assert random["superseded"] == [1] and random["version"] == 2 and random["state"] == "active"


class _Cells(HTMLParser):
    """The cells of the report's standings table, row by row."""

    def __init__(self) -> None:
        super().__init__()
        self.rows: list[list[str]] = []
        self.inside = False
        self.depth = 0

    def handle_starttag(self, tag, attrs):
        if tag == "table" and ("id", "standings") in attrs:
            self.inside = True
        elif self.inside and tag == "tr":
            self.rows.append([])
        elif self.inside and tag == "td":
            self.rows[-1].append("")
            self.depth += 1

    def handle_endtag(self, tag):
        if tag == "table":
            self.inside = False
        elif tag == "td" and self.depth:
            self.depth -= 1

    def handle_data(self, data):
        if self.inside and self.depth and self.rows and self.rows[-1]:
            self.rows[-1][-1] += data


def test_the_report_ranks_as_the_board_does_and_shows_the_sort_key(board, tmp_path):
    data = report.report_data(board)
    rows = [row.model_dump(mode="json") | {"reason": row.note} for row in data.rows]
    check_rows(rows)
    out = tmp_path / "report.html"
    made = policybox("report", str(board), "--out", str(out))
    assert made.returncode == 0, made.stderr
    html = out.read_text()
    assert "rating (μ−3σ)" in html and "vs next (rating)" in html
    parsed = _Cells()
    parsed.feed(html)
    cells = [[" ".join(cell.split()) for cell in row] for row in parsed.rows if row]
    by_name = {row[1]: row for row in cells}
    for row in data.rows:
        if row.rank is not None:  # the rating cell starts with the number the rows are sorted by
            assert by_name[row.name][4].startswith(f"{row.rating.ordinal:.2f}")
    assert [row[1] for row in cells][:3] == [row.name for row in data.rows[:3]]


def test_ladder_status_fits_80_columns_with_a_name_in_every_state(board, tmp_path):
    """Names active, qualifying, rejected, suspended and retired, each but the active with its reason, and
    a name whose newer version is queued: every line within 80 characters (not bytes: the dashes and
    μ are one character each), the reasons wrapped at a word."""
    copy = tmp_path / "cup"
    shutil.copytree(board, copy)
    with Ladder.open(copy) as ladder:
        ladder.submit("queued", "noop")
        ladder.submit("walker", "random")
    shown = policybox("ladder", "status", str(copy), columns=80)
    assert shown.returncode == 0, shown.stderr
    assert {row["state"] for row in status_json(copy)["rows"]} == {
        "active", "qualifying", "rejected", "suspended", "retired"
    }  # fmt: skip
    assert "walker v2 is qualifying" in shown.stdout
    assert max(len(line) for line in shown.stdout.splitlines()) <= 80, shown.stdout


def test_the_table_at_80_columns_keeps_every_column_and_ranks_the_same(board):
    shown = policybox("ladder", "status", str(board), columns=80)
    assert shown.returncode == 0, shown.stderr
    lines = shown.stdout.split("ranked by ")[0].splitlines()  # the table (the reasons below wrap as terminals do)
    assert max(len(line) for line in lines) <= 80, shown.stdout
    json_rows = status_json(board)["rows"]
    table = {}
    for line in lines:
        words = line.split()
        if len(words) >= 4 and words[1] in {row["name"] for row in json_rows}:
            table[words[1]] = words
    assert list(table) == [row["name"] for row in json_rows]  # the same order
    for row in json_rows:
        rank, _, version, state, *rest = table[row["name"]]
        assert rank == ("—" if row["rank"] is None else str(row["rank"]))
        assert version == str(row["version"]) and state == row["state"]
        if row["rank"] is not None:
            assert rest[0] == f"{row['rating']['ordinal']:.2f}"  # the number it is sorted by
    assert lines[0].startswith("ladder stopped ")  # whether ladder run plays it, first (test_pulse)
    assert "rating" in lines[2] and "μ−3σ" in lines[3] and " v " in lines[3]


def test_vs_next_never_says_clear_when_the_lower_row_has_the_higher_reward():
    """The issue's case: row 2 with reward 1.43 [1.31, 1.53] above row 3 with 1.78 [1.74, 1.82] (a forfeit
    ranking can do that), their ratings far apart: mixed, never clear; with the rewards the other way
    round, clear; with ratings that overlap, overlaps."""
    upper = ranking.MODEL.rating(mu=40.0, sigma=1.0)
    lower = ranking.MODEL.rating(mu=30.0, sigma=1.0)
    near = ranking.MODEL.rating(mu=38.0, sigma=1.0)
    low_reward = ranking.Reward(mean=1.43, ci95=(1.31, 1.53))
    high_reward = ranking.Reward(mean=1.78, ci95=(1.74, 1.82))

    def versus(above, below) -> list[str | None]:
        return [p.versus_next for p in ranking.place([ranking.Entry("a", *above), ranking.Entry("b", *below)])]

    assert versus((upper, low_reward), (lower, high_reward)) == ["mixed", None]
    assert versus((upper, high_reward), (lower, low_reward)) == ["clear", None]
    assert versus((upper, high_reward), (near, low_reward)) == ["overlaps", None]


def test_a_reason_is_cut_at_a_word_with_a_marker_and_its_first_line_says_where_the_rest_is():
    message = "no class 'Zigzg' in bots.py; it defines " + ", ".join(["Zigzag"] * 60)
    cut = clip(message, 200)
    assert len(cut) <= 200 and cut.endswith(MARKER) and cut[:-1].endswith("Zigzag")
    assert clip("short", 200) == "short"
    assert first_line("agent 0 ended error: X\nTraceback ...", "(full text: there)") == (
        f"agent 0 ended error: X {MARKER} (full text: there)"
    )
    assert first_line("one line only", "(full text: there)") == "one line only"


# ---------------------------------------------------------------------------------------------
# The rules that write, over SQLite and PostgreSQL


def version_rows(folder: Path) -> int:
    with Ladder.open(folder, read_only=True) as ladder, ladder.engine.connect() as connection:
        return connection.execute(select(func.count()).select_from(versions)).scalar()


def test_a_retired_name_refuses_submissions_until_reinstated(tmp_path, database_url):
    folder = tmp_path / "cup"
    with api_ladder(folder, database_url) as ladder:
        token = ladder.token("alpha")
        ladder.submit("walker", WANDERER, team="alpha")
        ladder.submit("idle", "noop")
    assert policybox("ladder", "retire", str(folder), "walker").returncode == 0
    before = version_rows(folder)
    refused = policybox("ladder", "submit", str(folder), "walker", "random")
    assert refused.returncode == 2, refused.stdout + refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 1 and "policybox ladder reinstate" in refused.stderr
    zipped = bot_zip(tmp_path / "bot.zip")
    with TestClient(make_app(folder)) as client:
        answer = client.post(
            "/api/submit",
            data={"name": "walker"},
            files={"file": ("bot.zip", zipped.read_bytes(), "application/zip")},
            headers={"Authorization": f"Bearer {token}"},
        )
    assert answer.status_code == 409, answer.text
    assert "policybox ladder reinstate" in answer.text
    assert version_rows(folder) == before  # nothing stored
    back = policybox("ladder", "reinstate", str(folder), "walker")
    assert back.returncode == 0, back.stderr
    again = policybox("ladder", "reinstate", str(folder), "walker")
    assert again.returncode == 2 and "nothing to reinstate" in again.stderr
    accepted = policybox("ladder", "submit", str(folder), "walker", "random")
    assert accepted.returncode == 0, accepted.stderr
    assert version_rows(folder) == before + 1


def test_a_rejected_new_version_leaves_its_names_state_and_playing_version(tmp_path, database_url):
    folder = tmp_path / "cup"
    with api_ladder(folder, database_url) as ladder:
        ladder.submit("walker", WANDERER)
        ladder.submit("idle", "noop")
        for name in ("walker", "idle"):
            activate(ladder, name)
        ladder.run(matches=1, workers=1)
        ladder.submit("walker", policy("faults.py:RaiseInInit"), check=False)  # to its qualification
        for _ in range(5):  # until its qualification is over (a run stops at its matches, not at it)
            ladder.run(matches=1, workers=1)
            walker = next(row for row in ladder.standings().rows if row.name == "walker")
            if walker.latest is not None and walker.latest.state != "qualifying":
                break
    assert (walker.version, walker.state, walker.rank is not None) == (1, "active", True)
    assert walker.latest is not None and (walker.latest.version, walker.latest.state) == (2, "rejected")
    with Ladder.open(folder, read_only=True) as ladder, ladder.engine.connect() as connection:
        retired = connection.execute(select(names.c.retired).where(names.c.name == "walker")).scalar()
        first = connection.execute(
            select(versions.c.state).join(names).where(names.c.name == "walker", versions.c.number == 1)
        ).scalar()
    assert (retired, first) == (False, "active")


def test_a_retired_name_stays_retired_and_unranked_whatever_was_queued(tmp_path, database_url):
    """Retired with a v2 queued: the v2 waits, v1 never plays again, and the name is listed unranked."""
    folder = tmp_path / "cup"
    with api_ladder(folder, database_url) as ladder:
        ladder.submit("walker", WANDERER)
        ladder.submit("idle", "noop")
        ladder.submit("other", "random")
        for name in ("walker", "idle", "other"):
            activate(ladder, name)
        ladder.run(matches=2, workers=1)
        ladder.submit("walker", policy("stateful.py:Stateful"))
        ladder.retire("walker")
        before = next(row for row in ladder.standings().rows if row.name == "walker").matches
        ladder.run(matches=2, workers=1)
        walker = next(row for row in ladder.standings().rows if row.name == "walker")
    assert (walker.state, walker.rank, walker.version, walker.matches) == ("retired", None, 1, before)
    assert walker.latest is not None and walker.latest.state == "qualifying"


@pytest.mark.storage
def test_an_old_schema_ladder_is_migrated_to_superseded(tmp_path, database_url):
    """A ladder of schema version 3, whose replaced versions stayed active or suspended: opened, the
    replaced ones are superseded, the newest untouched; status and matchmaking work as before."""
    folder = tmp_path / "cup"
    with api_ladder(folder, database_url) as ladder:
        ladder.submit("walker", WANDERER)
        activate(ladder, "walker")
        ladder.submit("walker", "random")
        activate(ladder, "walker")
        ladder.submit("walker", "noop")
        activate(ladder, "walker")
        ladder.submit("idle", "noop")
        activate(ladder, "idle")
    with Ladder.open(folder) as ladder, ladder.engine.begin() as connection:  # as schema 3 left it
        walker = select(names.c.id).where(names.c.name == "walker").scalar_subquery()
        for number, state in [(1, "suspended"), (2, "active")]:
            connection.execute(
                versions.update().where(versions.c.name_id == walker, versions.c.number == number).values(state=state)
            )
        connection.execute(schema.meta.update().where(schema.meta.c.key == "schema_version").values(value="3"))
    rows = status_json(folder)["rows"]  # a reader: the database is migrated first
    with Ladder.open(folder) as ladder, ladder.engine.connect() as connection:
        version = connection.execute(select(schema.meta.c.value).where(schema.meta.c.key == "schema_version"))
        assert version.scalar() == str(migrations.SCHEMA_VERSION) == "8"
        states = connection.execute(
            select(names.c.name, versions.c.number, versions.c.state)
            .join(names, names.c.id == versions.c.name_id)
            .order_by(names.c.name, versions.c.number)
        ).all()
        from policybox.league.ladder import match_store

        candidates = {c.version_id for c in match_store.candidates(connection, 4)}
    assert [tuple(row) for row in states] == [
        ("idle", 1, "active"),
        ("walker", 1, "superseded"),
        ("walker", 2, "superseded"),
        ("walker", 3, "active"),
    ]
    walker_row = next(row for row in rows if row["name"] == "walker")
    assert walker_row["version"] == 3 and walker_row["superseded"] == [1, 2]
    assert len(candidates) == 2


def test_every_version_state_is_one_of_the_enums():
    assert set(life.VersionState) == {"qualifying", "active", "rejected", "suspended", "superseded"}
