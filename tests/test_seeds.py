"""Nothing a policy sees tells a final, a qualification, a ladder test or a versus run from a rated
match: every seed is drawn the same way (at random, or derived from a secret base), in one form and
range, and every other input a cell can observe is the same.

The attack is a policy (``tests/policies/chameleon.py``) that re-derives every seed policybox once
derived from public offsets of a default seed 0, plays to win only when it finds it is in a final, and
prints all it can see. Judged from outside: its rewards as the ladder stored them, and the lines its
cells printed to the logs the host wrote.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from conftest import policy
from helpers.ladders import GAME, api_ladder
from sqlalchemy import select

from policybox.league.ladder.schema import final_matches, match_seats, matches, names, versions
from policybox.league.play.tournament import SEED_RANGE, draw_seed

CHAMELEON = policy("chameleon.py:Chameleon")
CHAMELEON_V2 = policy("chameleon.py:Chameleon", **{"kw.version": "2"}) + ",name=chameleon2"


def observations(folder: Path) -> list[dict]:
    """What the chameleon's cells printed under ``folder``, one dict a seat."""
    found = []
    for log in sorted(folder.glob("**/agent-*.log")):
        for line in log.read_text().splitlines():
            if line.startswith("observed "):
                found.append(json.loads(line.removeprefix("observed ")))
    return found


def _scratch_free(value: object) -> object:
    """``value`` with the parts every cell has of its own (its scratch folder's random name, numbers) as one."""
    return re.sub(r"policybox-scratch-[^/\"]+", "policybox-scratch-X", re.sub(r"[0-9]+", "#", json.dumps(value)))


def what_it_saw(seen: list[dict]) -> set[str]:
    """The distinct observations but for the seat (which a seating rule decides) and its seed's kind."""
    return {_scratch_free({k: v for k, v in one.items() if k not in ("agent", "seed_kind")}) for one in seen}


def chameleon_rewards(ladder) -> tuple[list[float], list[float]]:
    """Its agents' rewards in rated matches and in the final's matches, as the ladder stored them."""
    with ladder.engine.connect() as connection:
        ids = set(
            connection.execute(
                select(versions.c.id).join(names, names.c.id == versions.c.name_id).where(names.c.name == "chameleon")
            ).scalars()
        )
        rated = connection.execute(
            select(match_seats.c.reward)
            .join(matches, matches.c.id == match_seats.c.match_id)
            .where(matches.c.state == "played", match_seats.c.version_id.in_(ids))
        ).scalars()
        finals = connection.execute(select(final_matches.c.seats, final_matches.c.result)).all()
    in_finals = [
        agent["reward"] for seats, result in finals for agent in result["agents"] if seats[agent["agent_id"]] in ids
    ]
    return list(rated), in_finals


def test_a_chameleon_cannot_tell_a_final_a_test_or_a_qualification_from_a_rated_match(tmp_path):
    from policybox import versus

    folder = tmp_path / "cup"
    with api_ladder(folder) as ladder:
        ladder.submit("chameleon", CHAMELEON)
        ladder.submit("noop", "noop")
        assert ladder.run(matches=3, workers=2).played == 3
        ladder.submit("chameleon", CHAMELEON_V2)
        for _ in range(4):  # until its second version has played a rated match (then it is in the final's field)
            ladder.run(matches=1, workers=1)
            if next(row for row in ladder.standings().rows if row.name == "chameleon").version == 2 and (
                next(row for row in ladder.standings().rows if row.name == "chameleon").matches
            ):
                break
        ladder.final(rounds=1, workers=2)
        ladder.test("chameleon", max_episodes=2, workers=2)
        rated, in_finals = chameleon_rewards(ladder)
    versus(CHAMELEON, CHAMELEON_V2, ["noop"], max_episodes=2, out=tmp_path / "versus", env=GAME, steps=30, agents=4)

    assert rated and in_finals
    assert set(rated) == set(in_finals) == {0.0}  # it never believed it was in a final: it never walked
    seen = {
        "rated": [o for log in (folder / "logs").glob("match-*") for o in observations(log)],
        "qualification": [o for log in (folder / "logs").glob("qualify-*") for o in observations(log)],
        "final": [o for log in (folder / "logs").glob("final-*") for o in observations(log)],
        "ladder test": observations(folder / "tests"),
        "versus": observations(tmp_path / "versus" / "logs"),
    }
    assert all(seen.values()), {kind: len(found) for kind, found in seen.items()}
    for kind, found in seen.items():
        assert {one["seed_kind"] for one in found} == {None}, kind  # no seed it can derive from a public one
    ladder_kinds = ("rated", "qualification", "final", "ladder test")  # versus plays the operator's own files
    assert len({frozenset(what_it_saw(seen[kind])) for kind in ladder_kinds}) == 1, {
        kind: what_it_saw(seen[kind]) for kind in ladder_kinds
    }


def test_drawn_seeds_have_the_form_and_range_of_derived_ones():
    drawn = {draw_seed() for _ in range(1000)}
    assert len(drawn) > 990 and all(0 <= seed < SEED_RANGE for seed in drawn)
    assert max(drawn) > SEED_RANGE // 2 > min(drawn)
