"""Which match a ladder plays next: a pure function of the candidates' state and the ladder's seed.

The rule (Halite's coordinator and Kaggle's rating-near matchmaking, made deterministic):

1. **Placement first.** A version with fewer than ``placement`` matches picks first: the one with
   the fewest, then the one that played least recently.
2. **No starvation.** Otherwise the version that played least recently picks (one that never
   played before the others).
3. **Opponents near its rating.** The other seats' versions are added one at a time, each from the
   candidates ordered by OpenSkill's predicted draw probability with those already chosen (the
   closer their ratings, the higher: the match tells the most; at equal quality, the less played
   first): uniformly among the first *w*, *w* drawn between 1 and half the candidates, at least 2
   (Halite's random-width window), so that close opponents are preferred without the same pairs
   always meeting.
4. **Seats.** The chosen versions share the game's seats as evenly as they can (the extra seats go
   to the versions with the fewest plays in all). ``rotate``: each seat goes to the version that has
   played it least, so that over time every version plays every seat equally often; ``random``:
   the seats are shuffled.

Randomness comes only from ``random.Random(f"{seed}:{index}")``: the same state, seed and match
index always give the same match.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field

from policybox.league import ranking
from policybox.league.choices import MatchSeating


@dataclass(frozen=True)
class Candidate:
    """A version that may play: its rating, how often and how recently it played, its plays per seat."""

    version_id: int
    mu: float
    sigma: float
    matches: int  # played or scheduled
    last_match: int | None  # the id of the last match it is in (None: none yet)
    seat_plays: tuple[int, ...] = field(default=())  # plays of each seat, played or scheduled


@dataclass(frozen=True)
class Rules:
    seats: int  # the game's seats (agents)
    versions_per_match: int
    placement: int
    seating: MatchSeating
    seed: int


def choose(candidates: list[Candidate], rules: Rules, index: int) -> list[int] | None:
    """The version in each seat of match number ``index`` (0-based), or None without two candidates."""
    if len(candidates) < 2 or rules.versions_per_match < 2:
        return None
    rng = random.Random(f"{rules.seed}:{index}")
    first = _first(candidates, rules.placement)
    chosen = [first]
    others = [c for c in candidates if c is not first]
    while len(chosen) < min(rules.versions_per_match, rules.seats, len(candidates)):
        pick = _opponent(chosen, others, rng)
        chosen.append(pick)
        others.remove(pick)
    return _seats(chosen, rules, rng)


def _first(candidates: list[Candidate], placement: int) -> Candidate:
    placing = [c for c in candidates if c.matches < placement]
    if placing:
        return min(placing, key=lambda c: (c.matches, _recency(c), c.version_id))
    return min(candidates, key=lambda c: (_recency(c), c.matches, c.version_id))


def _recency(candidate: Candidate) -> int:
    return -1 if candidate.last_match is None else candidate.last_match


def _opponent(chosen: list[Candidate], others: list[Candidate], rng: random.Random) -> Candidate:
    """From the candidates ordered by the quality of a match with those chosen, one of the first *w*."""
    teams = [[ranking.MODEL.rating(mu=c.mu, sigma=c.sigma)] for c in chosen]

    def quality(candidate: Candidate) -> float:
        return ranking.MODEL.predict_draw([*teams, [ranking.MODEL.rating(mu=candidate.mu, sigma=candidate.sigma)]])

    ordered = sorted(others, key=lambda c: (-quality(c), c.matches, _recency(c), c.version_id))
    width = min(len(ordered), rng.randint(1, max(2, math.ceil(len(ordered) / 2))))
    return ordered[rng.randrange(width)]


def _seats(chosen: list[Candidate], rules: Rules, rng: random.Random) -> list[int]:
    """Each seat's version: the seats shared evenly, the extra ones to the least played versions."""
    share, extra = divmod(rules.seats, len(chosen))
    by_plays = sorted(chosen, key=lambda c: (sum(c.seat_plays), c.version_id))
    quota = {c.version_id: share + (1 if rank < extra else 0) for rank, c in enumerate(by_plays)}
    if rules.seating == "random":
        dealt = [c.version_id for c in chosen for _ in range(quota[c.version_id])]
        rng.shuffle(dealt)
        return dealt
    plays = {c.version_id: list(c.seat_plays) + [0] * (rules.seats - len(c.seat_plays)) for c in chosen}
    seats: list[int] = []
    for seat in range(rules.seats):
        free = [c for c in chosen if quota[c.version_id] > 0]
        pick = min(free, key=lambda c: (plays[c.version_id][seat], -quota[c.version_id], c.version_id))
        quota[pick.version_id] -= 1
        seats.append(pick.version_id)
    return seats
