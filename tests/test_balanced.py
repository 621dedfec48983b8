"""The final's balanced schedule (``policybox.league.play.seating``): its promises, over a grid of
names and seats -- every name equally many matches and every seat equally often after each cycle, a
double round robin for two seats, and pair meetings as even as measured here."""

import itertools
from collections import Counter

import pytest

from policybox.league.play.seating import balanced_seats


def meetings(maps: list[list[int]], policies: int) -> Counter:
    met: Counter = Counter({pair: 0 for pair in itertools.combinations(range(policies), 2)})
    for seats in maps:
        met.update(itertools.combinations(sorted(set(seats)), 2))
    return met


@pytest.mark.parametrize(("policies", "seats"), [(p, k) for p in range(2, 11) for k in range(2, 7)])
def test_every_name_plays_every_seat_equally_often_after_each_cycle(policies, seats):
    cycles = 3
    maps = balanced_seats(policies, seats, policies * cycles, seed=7)
    for seat in range(seats):
        held = Counter(seats_[seat] for seats_ in maps)
        if seats >= policies:  # every name in every match, seats dealt in rotation
            assert max(held.values()) - min(held.values()) <= 1
        else:
            assert held == {policy: cycles for policy in range(policies)}
    if seats < policies:
        assert all(len(set(seats_)) == seats for seats_ in maps), "a name holds one seat per match"


@pytest.mark.parametrize("policies", range(2, 10))
def test_two_seats_is_a_double_round_robin(policies):
    maps = balanced_seats(policies, 2, policies * (policies - 1), seed=3)
    assert Counter(tuple(m) for m in maps) == {pair: 1 for pair in itertools.permutations(range(policies), 2)}, (
        "every ordered pair exactly once: each pair meets twice, once in each seat order"
    )


@pytest.mark.parametrize(("policies", "seats"), [(7, 3), (13, 4), (16, 4), (16, 6), (9, 3)])
def test_pair_meetings_are_even(policies, seats):
    """Measured spread of how often two names meet, after enough blocks to cover every difference."""
    blocks = 2 * (policies - 1)
    met = meetings(balanced_seats(policies, seats, policies * blocks, seed=0), policies)
    mean = sum(met.values()) / len(met)
    assert min(met.values()) > 0
    assert max(met.values()) - min(met.values()) <= max(2, 0.25 * mean), met


def test_a_difference_family_is_found_when_one_exists():
    """P = 7, K = 3: {0, 1, 3} covers each difference once, so every pair meets exactly once a cycle."""
    met = meetings(balanced_seats(7, 3, 7, seed=0), 7)
    assert set(met.values()) == {1}


def test_the_schedule_is_a_function_of_its_arguments():
    assert balanced_seats(9, 4, 90, seed=5) == balanced_seats(9, 4, 90, seed=5)
    assert balanced_seats(9, 4, 90, seed=5) != balanced_seats(9, 4, 90, seed=6)
