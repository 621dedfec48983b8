"""Matchmaking is a pure choice: placement first, nobody starved, opponents near in rating, seats balanced."""

from __future__ import annotations

from collections import Counter
from dataclasses import replace

import pytest

from policybox.league.ladder.matchmaking import Candidate, Rules, choose

RULES = Rules(seats=2, versions_per_match=2, placement=3, seating="rotate", seed=7)


def candidate(version_id: int, mu: float = 25.0, matches: int = 10, last: int | None = 0, sigma: float = 3.0):
    return Candidate(version_id, mu, sigma, matches, last, (matches // 2, matches - matches // 2))


def play(pool: dict[int, Candidate], seats: list[int], match_id: int) -> None:
    """What the database would hold after the match is scheduled: its versions' counts updated."""
    for seat, version_id in enumerate(seats):
        c = pool[version_id]
        plays = list(c.seat_plays) + [0] * (len(seats) - len(c.seat_plays))
        plays[seat] += 1
        pool[version_id] = replace(c, seat_plays=tuple(plays))
    for version_id in set(seats):
        c = pool[version_id]
        pool[version_id] = replace(c, matches=c.matches + 1, last_match=match_id)


def test_the_same_state_and_seed_give_the_same_match_and_a_test_can_say_which():
    pool = [candidate(1, 30.0, last=5), candidate(2, 25.0, last=2), candidate(3, 24.0, last=9)]
    # Version 2 played least recently, so it picks; 3 is nearer its rating than 1, and seed 7 at match
    # 17 draws it from the window; both have played each seat 5 times, so the lower id takes seat 0.
    assert choose(pool, RULES, 17) == [2, 3]
    assert choose(list(reversed(pool)), RULES, 17) == [2, 3]  # the order of the candidates does not matter


def test_placement_first_then_the_least_recently_played():
    settled = [candidate(1, last=8), candidate(2, last=3), candidate(3, last=6)]
    newcomer = candidate(4, matches=1, last=9)
    assert 4 in choose([*settled, newcomer], RULES, 0)  # fewer than 3 matches: it picks first, every time
    assert all(4 in choose([*settled, newcomer], RULES, index) for index in range(50))
    assert all(2 in choose(settled, RULES, index) for index in range(50))  # least recent: 2 picks


def test_opponents_are_near_in_rating_and_the_farthest_never_meet():
    """Five settled versions spread in rating; the one picking at 25 meets the nearest ones, mostly the
    two nearest, and never the two farthest (its window holds at most the best three of five)."""
    picker = candidate(1, 25.0, last=0)
    others = [candidate(2, 26.0, last=50), candidate(3, 23.5, last=50), candidate(4, 35.0, last=50)]
    others += [candidate(5, 10.0, last=50), candidate(6, 45.0, last=50)]
    met = Counter()
    for index in range(200):
        seats = choose([picker, *others], RULES, index)
        met.update(v for v in seats if v != 1)
    assert not {5, 6} & set(met) and {2, 3} <= set(met)
    assert met[2] > met[4] and met[3] > met[4]  # the nearest two most often: the window is narrow more often than not


@pytest.mark.parametrize(("seats", "per_match", "versions"), [(2, 2, 3), (4, 2, 3), (4, 3, 5), (6, 2, 4), (3, 3, 3)])
def test_over_time_every_version_plays_every_seat_equally_often(seats, per_match, versions):
    rules = Rules(seats=seats, versions_per_match=per_match, placement=2, seating="rotate", seed=3)
    pool = {v: Candidate(v, 25.0, 8.3, 0, None, (0,) * seats) for v in range(1, versions + 1)}
    for match_id in range(1, 301):
        chosen = choose(list(pool.values()), rules, match_id - 1)
        assert len(chosen) == seats and len(set(chosen)) == min(per_match, versions)
        counts = Counter(chosen)
        assert max(counts.values()) - min(counts.values()) <= 1  # the chosen share the seats evenly
        play(pool, chosen, match_id)
    matches = [c.matches for c in pool.values()]
    assert max(matches) - min(matches) <= 2  # nobody starved
    for c in pool.values():
        assert max(c.seat_plays) - min(c.seat_plays) <= 2, (c.version_id, c.seat_plays)


def test_random_seating_is_a_seeded_shuffle_of_an_even_share():
    rules = replace(RULES, seats=4, seating="random")
    pool = [candidate(1, last=1), candidate(2, last=2)]
    seats = [tuple(choose(pool, rules, index)) for index in range(40)]
    assert all(sorted(Counter(s).values()) == [2, 2] for s in seats)
    assert len(set(seats)) > 2 and seats == [tuple(choose(pool, rules, index)) for index in range(40)]


def test_no_match_without_two_candidates():
    assert choose([candidate(1)], RULES, 0) is None and choose([], RULES, 0) is None
