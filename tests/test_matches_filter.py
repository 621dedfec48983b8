"""``/matches?name=NAME`` lists one name's matches, ``&opponent=OTHER`` only those it played against
OTHER, ``before=ID`` pages them the same way; an unknown parameter is refused with a 400 that names
the ones it takes, an unknown name with a 404 (issue 43, must-have 9)."""

from __future__ import annotations


def names_in(match: dict) -> set[str]:
    return {seat["name"] for seat in match["seats"]}


def test_matches_of_one_name_and_against_one_opponent(take_home_client):
    every = take_home_client.get("/api/matches").json()["matches"]
    for name in ("alphabot", "walker"):
        page = take_home_client.get("/api/matches", params={"name": name}).json()
        assert page["name"] == name and page["matches"] == [m for m in every if name in names_in(m)]
    against = take_home_client.get("/api/matches", params={"name": "alphabot", "opponent": "betabot"}).json()["matches"]
    assert against == [m for m in every if {"alphabot", "betabot"} <= names_in(m)]
    newest = every[0]["id"]
    older = take_home_client.get("/api/matches", params={"name": "walker", "before": newest}).json()["matches"]
    assert [m["id"] for m in older] == [m["id"] for m in every if m["id"] < newest and "walker" in names_in(m)]
    html = take_home_client.get("/matches", params={"name": "alphabot", "opponent": "betabot"}).text
    assert '<span id="filter-name">alphabot</span>' in html and '<span id="filter-opponent">betabot</span>' in html
    assert 'href="/matches?name=alphabot"' in take_home_client.get("/names/alphabot").text


def test_an_unknown_parameter_or_name_is_refused_saying_what_is_taken(take_home_client):
    answer = take_home_client.get("/api/matches", params={"nmae": "alphabot"})
    assert answer.status_code == 400
    known = "it takes before=, name=, opponent= (e.g. name=alphabot)"
    assert answer.json() == {"error": f"/matches takes no 'nmae': {known}"}
    page = take_home_client.get("/matches?team=alpha")
    assert page.status_code == 400 and "it takes before=, name=, opponent=" in page.text
    assert take_home_client.get("/api/matches", params={"name": "nobody"}).json() == {
        "error": "this ladder has no submission called 'nobody'"
    }
    assert take_home_client.get("/api/matches", params={"name": "alphabot", "opponent": "<script>"}).status_code == 404
    assert take_home_client.get("/api/matches", params={"opponent": "alphabot"}).status_code == 400
