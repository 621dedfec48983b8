"""Who sits where: each episode's seat map (the policy in each seat), by one of three plans.

``rotate`` seating deals the policies round-robin over the seats of episode after episode (so each
episode holds as many different policies as it can), shifting by one after every P/gcd(K, P)
episodes so that each seat cycles through every policy: with N episodes of K seats over P
policies, every policy plays every seat equally often when P divides N, and otherwise no two
policies' plays of a seat, or in all, differ by more than one (``tests/test_tournament.py`` checks
all three properties over a grid of N, K and P). ``random`` seating deals the seats the same
round-robin way -- so over the tournament no two policies' seat counts differ by more than one,
and which policies take an episode's extra seats rotates -- then shuffles each episode's seats, as
MettaGrid's multi-episode runner does, from a generator seeded by that episode's seed.

``balanced`` is a final's schedule: every name plays equally often, in every seat equally often,
against every other name as equally often as the seats allow.

The design is cyclic. Names are the residues 0..P-1 (in an order shuffled by the seed, so that no
name's neighbours are fixed by the alphabet). A *base block* is K distinct residues, one per seat;
the P matches it develops put ``b[s] + t (mod P)`` in seat s of match t, for t = 0..P-1.
Over those P matches every residue takes every seat exactly once, so **after every P matches each
name has played K matches and each seat once** -- exactly, whatever the blocks.

Who meets whom is set by the blocks' differences: names x and y share a match of block b once for
each ordered pair of seats (i, j) with ``b[j] - b[i] = y - x (mod P)``. Blocks are chosen one after
another, each the candidate that leaves the counts of the P-1 differences most even (all blocks when
there are at most ``EXHAUSTIVE`` candidates, else that many drawn by the seed). So:

- two seats: block (0, d) meets the ordered pairs at distance d, and the blocks run through every d:
  **a double round robin every P(P-1) matches** -- every pair meets equally often, each name in each
  seat;
- K seats, K < P: pair meetings are as even as the greedy choice of blocks makes them; when a cyclic
  difference family exists (e.g. P = 7, K = 3: {0, 1, 3}) it is found and every pair meets equally
  often. ``tests/test_balanced.py`` measures the spread over a grid of P and K;
- K >= P (more seats than names): every match holds every name, its seats dealt in rotation
  (``rotate_seats``), so every pair meets in every match.

``paired`` is ``policybox versus``'s, never an operator's choice: its policies are the two versions
under test, A and B, then the opponents. Episodes come in pairs -- episode 2k holds A, episode 2k+1
the same seat map with B where A sat and A where B sat (its tournament gives both the seed of k),
so the two differ only in which version plays. ``paired_seats`` says how the seats rotate.
"""

from __future__ import annotations

import itertools
import math
import random
from collections.abc import Callable, Iterator

import numpy as np

from policybox.league.choices import Plan

EXHAUSTIVE = 500  # candidate blocks tried per choice: all of them up to this many, else this many drawn


def seat_maps(plan: Plan, policies: int, seats: int, episodes: int, seed: Callable[[int], int]) -> list[list[int]]:
    """For every episode, the index of the policy in each seat; ``seed(e)`` is episode e's seed (a
    balanced schedule takes episode 0's)."""
    if plan == "random":
        return [random_seats(policies, seats, e, seed(e)) for e in range(episodes)]
    if plan == "balanced":
        return balanced_seats(policies, seats, episodes, seed(0))
    if plan == "paired":
        return paired_seats(policies, seats, episodes, seed(0))
    return rotate_seats(policies, seats, episodes)


def rotate_seats(policies: int, seats: int, episodes: int) -> list[list[int]]:
    """Balanced, well-mixed seating (see the module docstring): seat s of episode e."""
    shift_every = policies // math.gcd(seats, policies)
    return [[(e * seats + s + e // shift_every) % policies for s in range(seats)] for e in range(episodes)]


def paired_seats(policies: int, seats: int, episodes: int, seed: int) -> list[list[int]]:
    """Paired seating (see the module docstring) of policies 0 (A) and 1 (B) and the opponents after
    them: the first episode of each pair, then the same with A and B swapped.

    With opponents, the first episodes are the ``balanced`` schedule of [subject, *opponents] with A
    as the subject, keeping the matches that hold the subject (there are matches without it when the
    policies outnumber the seats): in every cycle of P matches the subject takes every seat once, and
    meets the opponents as evenly as the schedule makes the pairs meet (in a game of two seats, each
    opponent in both seats: the subject's half of a double round robin). Without opponents, A and B
    play each other: the first episodes are ``rotate_seats`` over [A, B] and the second swaps them
    (the chess engines' game pair, each opening played with both colours). In a game of one seat each
    plays it alone."""
    pairs = (episodes + 1) // 2
    opponents = policies - 2
    if seats == 1:  # each version plays alone: there is no seat for an opponent
        firsts = [[0]] * pairs
    elif opponents == 0:
        firsts = rotate_seats(2, seats, pairs)
    else:  # the subject (0) is in `seats` of every `opponents + 1` matches (all of them when it is no more)
        schedule = balanced_seats(opponents + 1, seats, (pairs + 1) * (opponents + 1), seed)
        firsts = [[0 if index == 0 else index + 1 for index in seat_map] for seat_map in schedule if 0 in seat_map]
    swap = {0: 1, 1: 0}
    maps = [[first, [swap.get(index, index) for index in first]] for first in firsts[:pairs]]
    return [seat_map for pair in maps for seat_map in pair][:episodes]


def random_seats(policies: int, seats: int, episode: int, seed: int) -> list[int]:
    """Episode ``episode``'s seats dealt to the policies in turn, continuing where the previous episode's
    deal stopped, then shuffled by the episode's ``seed`` (MettaGrid deals every episode from the first
    policy, so with 3 policies on 4 seats the first always got two)."""
    dealt = [(episode * seats + seat) % policies for seat in range(seats)]
    random.Random(seed).shuffle(dealt)
    return dealt


def balanced_seats(policies: int, seats: int, episodes: int, seed: int) -> list[list[int]]:
    """For every episode, the index of the policy in each seat (see the module docstring)."""
    if seats >= policies or seats == 1:  # one seat: each match one name, in turn
        return rotate_seats(policies, seats, episodes)
    order = list(range(policies))
    random.Random(seed).shuffle(order)
    blocks = _blocks(policies, seats, seed)
    maps = []
    for episode in range(episodes):
        if episode % policies == 0:
            block = next(blocks)
        shift = episode % policies
        maps.append([order[(residue + shift) % policies] for residue in block])
    return maps


def cycle(policies: int, seats: int) -> int:
    """Episodes in one cycle of the balanced schedule: after it every policy has played equally often
    and taken every seat equally often -- P episodes of P policies -- or, in a game of two seats, the
    P(P - 1) episodes of a double round robin, after which every pair has also met equally often, in
    both seat orders. A final (``evaluate --final``, ``ladder final``) plays whole cycles."""
    return policies * (policies - 1) if seats == 2 and policies > 2 else policies


def whole_cycles(episodes: int, policies: int, seats: int) -> int:
    """``episodes`` rounded up to a whole number of cycles (at least one)."""
    length = cycle(policies, seats)
    return max(1, -(-episodes // length)) * length


def _blocks(policies: int, seats: int, seed: int) -> Iterator[list[int]]:
    """Base blocks, each the candidate that keeps the counts of differences most even (least sum of
    squares): first as meetings (either seat order), then by seat order (so that two seats' blocks
    run through d and -d, each pair's two seat orders); ties go to the first candidate."""
    rng = np.random.default_rng(seed)
    first, second = (np.array(side) for side in zip(*itertools.permutations(range(seats), 2), strict=True))
    met = np.zeros(policies, dtype=np.int64)  # met[d]: ordered pairs of seats at difference d so far
    ahead = np.zeros(policies, dtype=np.int64)  # ahead[d]: the same, the first seat before the second
    while True:
        blocks = _candidates(policies, seats, rng)
        differences = (blocks[:, second] - blocks[:, first]) % policies
        met_after = met + _counts(differences, policies)
        ahead_after = ahead + _counts(np.where(first < second, differences, 0), policies)
        met_after[:, 0] = ahead_after[:, 0] = 0
        best = np.lexsort(((ahead_after**2).sum(axis=1), (met_after**2).sum(axis=1)))[0]
        met, ahead = met_after[best], ahead_after[best]
        yield blocks[best].tolist()


def _candidates(policies: int, seats: int, rng: np.random.Generator) -> np.ndarray:
    """Blocks holding 0 (a block and its shifts develop the same matches), in each of their K turns
    (which seat comes first); one block per row."""
    if math.comb(policies - 1, seats - 1) <= EXHAUSTIVE:
        rests = np.array(list(itertools.combinations(range(1, policies), seats - 1)), dtype=np.int64)
    else:
        rests = np.array([rng.choice(np.arange(1, policies), seats - 1, replace=False) for _ in range(EXHAUSTIVE)])
    blocks = np.hstack([np.zeros((len(rests), 1), dtype=np.int64), rests.reshape(len(rests), seats - 1)])
    return np.vstack([np.roll(blocks, -turn, axis=1) for turn in range(seats)])


def _counts(differences: np.ndarray, policies: int) -> np.ndarray:
    """Per row, how many of its differences take each value 0..P-1."""
    rows = np.repeat(np.arange(len(differences)), differences.shape[1])
    counts = np.zeros((len(differences), policies), dtype=np.int64)
    np.add.at(counts, (rows, differences.ravel()), 1)
    return counts
