"""The rules every leaderboard ranks by, in one place: who forfeits an episode, how an episode orders
the policies in it, head-to-head results, rating updates, and ranks in the standings.

``evaluate``'s summary, the ladder's online ratings, the web page and the static report all call
these functions; none recomputes a rule of its own.

- **Forfeits** (``rank_by="forfeit"``, the default). An agent forfeits its episode when it ended
  ``error``, ``crashed`` or ``disabled``, or when its timeouts and invalid actions together exceed
  ``FORFEIT_SHARE`` of the turns it was asked to act. A policy forfeits an episode when any of its
  agents did. In that episode it is placed below every policy that did not forfeit, whatever reward
  the game gave it (the reward is still reported as the game gave it); policies that forfeited
  share the last place. A broken entrant can never outrank one that played.
- ``rank_by="reward"`` orders every episode by the game's reward alone.
- **An episode's order**: by that rule, then by episode score (a policy's mean agent reward), higher
  first; scores within ``DRAW_TOLERANCE`` tie.
- **Head-to-head** (``head_to_head``): one side against another over the episodes both played, each
  a win, a draw or a loss by the episode's order (``compare``), and the mean margin of their scores.
- **Clearly beats** (``clearly_beats``): one side clearly beats another when the Wilson 95% interval
  of its score share over their meetings (a win 1, a draw ½, a loss 0: ``Tally.share``) lies above
  ½. **Cycles** (``cycles``): three sides each clearly beating the next, the last the first -- rock,
  paper, scissors -- which no rating can order.
- **Expected score** (``expected_share``): OpenSkill's predicted probability that one rating wins
  against another; a name's problem opponents are those it scores against below it. A record
  ``disagrees`` with it when the expected share lies outside the Wilson 95% interval of the record's.
- **Ratings**: OpenSkill's Plackett-Luce model (default parameters), one update per episode with
  every policy present as a team of one, placed as above. An episode with one policy present tells
  nothing about skill and changes nothing.
- **Reward**: a policy's mean episode score with a 95% percentile bootstrap interval: its episode
  scores resampled with replacement 2000 times from a generator with a fixed seed, the interval
  running from the 2.5th to the 97.5th percentile of the resampled means. Beyond
  ``BOOTSTRAP_MAX`` episodes it is the normal approximation, mean ± 1.96 s/√n -- what the bootstrap
  gives at that size -- which needs only the scores' sum and sum of squares (a ladder keeps those).
- **Standings** (``place``): ordered by rating ordinal (``mu - 3 * sigma``), then mean reward, then
  name; the ordinal is the number every view shows as the rating. Ordinals within ``DRAW_TOLERANCE``
  share a rank (1, 1, 3). Only a row that may be ranked (a ladder's name whose playing version is
  active, not retired) and has played (it has a reward: ``Entry.played``, the one test) is ranked;
  the others are listed below, unranked, by name. ``placed`` does it to the summary's and the
  board's rows alike; the report shows the ranks they were given.
- **vs next**: each ranked row against the next ranked one, on what the ranking compares, the
  rating: its interval mu ± 2 sigma. ``clear`` when the two intervals are separated and the upper
  row's mean reward is not below the lower's; ``overlaps`` when they overlap (the two are not shown
  to be ordered by their play); ``mixed`` when they are separated but the lower row's mean reward is
  higher -- a forfeit ranking places a policy that forfeits below one that played, whatever reward
  the game gave it. A ladder's standings (``versus_meetings``) also read the two rows' own matches
  where their intervals overlap: ``clear`` when the upper one clearly beats the lower one there and
  its mean reward is not below it; each verdict comes with its reason in words (``versus_why``).
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol, TypeVar

import numpy as np
from openskill.models import PlackettLuce, PlackettLuceRating
from pydantic import BaseModel, Field

from policybox.league.choices import RankBy
from policybox.results import AgentResult

FORFEIT_SHARE = 0.10  # timeouts + invalid actions above this share of an agent's turns forfeit its episode
DRAW_TOLERANCE = 1e-9
Z95 = 1.959963984540054  # the standard normal's 97.5% quantile: a two-sided 95% interval
MODEL = PlackettLuce()
# Whatever names a policy in an episode: a tournament's entrant key, or a ladder's version id.
Key = TypeVar("Key", str, int)
BOOTSTRAP_RESAMPLES = 2000
BOOTSTRAP_BLOCK = 100  # resamples drawn at once: bounds memory to BLOCK x episodes indices
BOOTSTRAP_SEED = 20_261_130  # fixed, so the same episodes always give the same interval
BOOTSTRAP_MAX = 500  # episodes; beyond, the normal approximation
Z95 = 1.959963984540054
RULES = {
    "forfeit": "an agent that ended error, crashed or disabled, or timed out or acted invalidly on more than "
    f"{FORFEIT_SHARE:.0%} of its turns, forfeits its episode: its policy is placed below every policy that did "
    "not; the others by episode score",
    "reward": "by the game's reward alone (failed agents are not penalised beyond what the game gave them)",
}


class Reward(BaseModel):
    """A policy's reward over its episodes; the unit is its episode score (its agents' mean reward)."""

    mean: float = Field(description="Mean of its episode scores")
    ci95: tuple[float, float] = Field(
        description="95% percentile bootstrap interval of the mean: 2000 resamples of its episodes, fixed seed"
    )


class Rating(BaseModel):
    """OpenSkill Plackett-Luce rating; initial values for a policy that never met another."""

    mu: float
    sigma: float
    ordinal: float = Field(description="mu - 3 * sigma: the conservative skill estimate the ranking uses")


@dataclass(frozen=True)
class Outcome:
    """How one policy did in one episode: its score (its agents' mean reward) and whether it forfeited."""

    score: float
    forfeited: bool = False


def forfeits(agent: AgentResult, steps: int) -> bool:
    """Whether this agent forfeits its episode (``steps``: the episode's, for results that predate ``turns``)."""
    if agent.status.is_terminal:
        return True
    turns = agent.turns if agent.turns is not None else steps
    return agent.timeouts + agent.invalid_actions > FORFEIT_SHARE * max(turns, 1)


def episode_outcomes(seated: Iterable[tuple[Key, AgentResult]], steps: int, rank_by: RankBy) -> dict[Key, Outcome]:
    """Each policy's outcome in one episode, from its agents (each given with its policy's key: a
    tournament's entrant key, or a ladder's version id)."""
    rewards: dict[Key, list[float]] = {}
    forfeited: dict[Key, bool] = {}
    for key, agent in seated:
        rewards.setdefault(key, []).append(agent.reward)
        forfeited[key] = forfeited.get(key, False) or (rank_by == "forfeit" and forfeits(agent, steps))
    return {key: Outcome(math.fsum(values) / len(values), forfeited[key]) for key, values in rewards.items()}


def places(outcomes: dict[Key, Outcome]) -> dict[Key, int]:
    """Each policy's place in its episode, 0 the best; tied policies share a place."""
    order = sorted(outcomes, key=lambda key: _order_key(outcomes[key]))
    placed: dict[Key, int] = {}
    for index, key in enumerate(order):
        previous = order[index - 1] if index else None
        tied = previous is not None and compare(outcomes[key], outcomes[previous]) == 0
        placed[key] = placed[previous] if tied and previous is not None else index
    return placed


def _order_key(outcome: Outcome) -> tuple[bool, float]:
    return outcome.forfeited, -outcome.score


def compare(a: Outcome, b: Outcome) -> int:
    """1 if ``a`` beat ``b`` in their episode, 0 for a draw, -1 if it lost: a forfeit loses to a
    policy that did not forfeit, two forfeits draw, and otherwise the higher score wins."""
    if a.forfeited or b.forfeited:
        return int(b.forfeited) - int(a.forfeited)
    margin = a.score - b.score
    return 0 if abs(margin) <= DRAW_TOLERANCE else (1 if margin > 0 else -1)


class Tally(BaseModel):
    """One side's record against another, over the episodes (a ladder's: matches) both played in, by the
    ranking rule (``head_to_head``)."""

    wins: int = 0
    draws: int = Field(default=0, description="Both forfeited, or episode scores equal within 1e-9")
    losses: int = 0
    margin: float = Field(default=0.0, description="Mean of its episode score minus the other's")

    @property
    def played(self) -> int:
        return self.wins + self.draws + self.losses

    @property
    def record(self) -> str:
        """Wins-draws-losses, as every view writes it: ``3-1-2``."""
        return f"{self.wins}-{self.draws}-{self.losses}"

    @property
    def balance(self) -> float:
        """Wins minus losses per meeting, from -1 (all lost) to 1 (all won): a head-to-head heat map's colour."""
        return (self.wins - self.losses) / self.played

    @property
    def share(self) -> float:
        """Its score per meeting: a win 1, a draw ½, a loss 0."""
        return (self.wins + self.draws / 2) / self.played


Side = TypeVar("Side", bound=Hashable)


def head_to_head(meetings: Iterable[tuple[Side, Outcome, Outcome]]) -> dict[Side, Tally]:
    """Each side's tally from its meetings, each given as (the side, its outcome, the other's outcome in
    that episode); the sides in the order they first met."""
    results: dict[Side, list[int]] = defaultdict(list)
    margins: dict[Side, list[float]] = defaultdict(list)
    for side, mine, theirs in meetings:
        results[side].append(compare(mine, theirs))
        margins[side].append(mine.score - theirs.score)
    return {
        side: Tally(
            wins=sum(result > 0 for result in found),
            draws=sum(result == 0 for result in found),
            losses=sum(result < 0 for result in found),
            margin=math.fsum(margins[side]) / len(found),
        )
        for side, found in results.items()
    }


def wilson_low(share: float, count: int, z: float = Z95) -> float:
    """The low end of the Wilson score interval of a share observed over ``count`` trials (95% by default)."""
    centre = share + z * z / (2 * count)
    spread = z * math.sqrt(share * (1 - share) / count + z * z / (4 * count * count))
    return (centre - spread) / (1 + z * z / count)


def wilson_high(share: float, count: int, z: float = Z95) -> float:
    """The high end of the Wilson score interval (``wilson_low`` of the complement, mirrored)."""
    return 1 - wilson_low(1 - share, count, z)


def clearly_beats(tally: Tally) -> bool:
    """Whether a side clearly beats the other, its ``tally`` against it: the Wilson 95% interval of its
    score share (a win 1, a draw ½, a loss 0; ``Tally.share``) lies above ½. All won, that takes 4
    meetings or more; fewer prove nothing."""
    return tally.played > 0 and wilson_low(tally.share, tally.played) > 0.5


def cycles(tallies: Mapping[tuple[Side, Side], Tally]) -> list[tuple[Side, Side, Side]]:
    """Every rock-paper-scissors cycle among the sides, from each ordered pair's tally: (a, b, c) when a
    clearly beats b, b clearly beats c and c clearly beats a -- each cycle once, from the side that
    comes first in ``tallies`` (the sides' first-met order), the cycles in that order too."""
    order = list(dict.fromkeys(side for pair in tallies for side in pair))
    rank = {side: index for index, side in enumerate(order)}
    beaten: dict[Side, list[Side]] = defaultdict(list)
    for (a, b), tally in tallies.items():
        if clearly_beats(tally):
            beaten[a].append(b)
    return [
        (a, b, c)
        for a in order
        for b in beaten[a]
        for c in beaten[b]
        if rank[b] > rank[a] and rank[c] > rank[a] and a in beaten[c]
    ]


class Rated(Protocol):
    mu: float
    sigma: float


def expected_share(mine: PlackettLuceRating, theirs: PlackettLuceRating) -> float:
    """The score per meeting (a win 1, a draw ½) a side of rating ``mine`` is expected to make against
    one of rating ``theirs``: OpenSkill's predicted probability that it wins."""
    return float(MODEL.predict_win([[mine], [theirs]])[0])


def disagrees(tally: Tally, expected: float) -> bool:
    """Whether a record disagrees with what the ratings expect of it: ``expected`` lies outside the Wilson
    95% interval of its score share (``Tally.share``) -- more than chance over that many meetings explains."""
    return tally.played > 0 and not wilson_low(tally.share, tally.played) <= expected <= wilson_high(
        tally.share, tally.played
    )


def forfeit_note(forfeits: int, matches: int, above: Sequence[str] = ()) -> str | None:
    """What the forfeit rule did to a standings row with ``forfeits`` of its ``matches`` forfeited (None for
    none): ``above``, the names without a forfeit ranked below it, which its other matches explain."""
    if not forfeits:
        return None
    plural = "s" if forfeits != 1 else ""
    note = f"{forfeits} forfeit{plural}: placed below every name without one in those matches, whatever its reward"
    if not above:
        return note
    return (
        f"{note}; it still ranks above {', '.join(above)}, without forfeits: its rating counts its places in all "
        f"{matches} of its matches"
    )


def rate(ratings: Mapping[Key, PlackettLuceRating], outcomes: dict[Key, Outcome]) -> dict[Key, PlackettLuceRating]:
    """The new ratings of the policies in one episode (the others are unchanged and not returned).

    ``ratings`` maps every key of ``outcomes`` to its current OpenSkill rating (``MODEL.rating()``).
    """
    present = sorted(outcomes)
    if len(present) < 2:
        return {}
    placed = places(outcomes)
    teams = [[ratings[key]] for key in present]
    rated = MODEL.rate(teams, ranks=[placed[key] for key in present])
    return {key: team[0] for key, team in zip(present, rated, strict=True)}


def ordinal(rating: Rated) -> float:
    """The conservative skill estimate the standings order by."""
    return rating.mu - 3 * rating.sigma


def rating(rated: Rated) -> Rating:
    return Rating(mu=rated.mu, sigma=rated.sigma, ordinal=ordinal(rated))


def reward(scores: Sequence[float]) -> Reward | None:
    """Mean episode score and its 95% interval: the percentile bootstrap (one episode: [mean, mean]),
    or beyond ``BOOTSTRAP_MAX`` episodes the normal approximation."""
    if not scores:
        return None
    sample = np.asarray(scores, dtype=float)
    if len(sample) > BOOTSTRAP_MAX:
        return reward_from_moments(len(sample), math.fsum(sample), math.fsum(sample * sample))
    rng = np.random.default_rng(BOOTSTRAP_SEED)
    means = np.concatenate(
        [
            sample[rng.integers(0, len(sample), size=(BOOTSTRAP_BLOCK, len(sample)))].mean(axis=1)
            for _ in range(BOOTSTRAP_RESAMPLES // BOOTSTRAP_BLOCK)
        ]
    )
    low, high = np.percentile(means, [2.5, 97.5])
    return Reward(mean=float(sample.mean()), ci95=(float(low), float(high)))


def reward_from_moments(count: int, total: float, squares: float) -> Reward | None:
    """Mean and normal-approximation 95% interval from ``count`` scores' sum and sum of squares."""
    if count == 0:
        return None
    mean = total / count
    variance = max(0.0, squares / count - mean * mean) * count / max(1, count - 1)  # the sample variance
    half = Z95 * math.sqrt(variance / count)
    return Reward(mean=mean, ci95=(mean - half, mean + half))


INTERVAL_SIGMAS = 2  # a rating's interval for ``vs next``: mu ± 2 sigma
CLEAR, OVERLAPS, MIXED = "clear", "overlaps", "mixed"
VERSUS_NEXT = (
    "its rating interval (mu ± 2 sigma) against the next ranked row's: clear -- separated, and its mean reward "
    "not below the next row's; overlaps -- the intervals overlap (the two are not shown to be ordered); mixed -- "
    "separated, but the next row's mean reward is higher (a forfeit ranking can do that); None for the last "
    "ranked row and every unranked one. A ladder's standings also read the two rows' head-to-head where the "
    "intervals overlap: clear when it clearly beats the next row in their own matches (versus_meetings)"
)


@dataclass(frozen=True)
class Entry:
    """What placing a standings row reads: its rating (None: not rated), its reward (None until it has
    played), and whether it may be ranked at all (a ladder's name whose playing version is not active
    may not)."""

    name: str
    rating: Rated | None
    reward: Reward | None
    rankable: bool = True

    @property
    def played(self) -> bool:
        """Whether it has played: the one test, for every view -- it has a reward, over at least one
        episode (a ladder's: a rated match)."""
        return self.reward is not None


@dataclass(frozen=True)
class Placed:
    """One row's place: ``index`` into the entries given, its rank (None: unranked) and ``vs next``."""

    index: int
    rank: int | None
    versus_next: str | None


def place(entries: Sequence[Entry]) -> list[Placed]:
    """The standings, best first: the ranked rows -- rankable and played -- by ordinal, then mean reward,
    then name, equal ordinals sharing a rank (1, 1, 3); then every other row, unranked, by name."""
    played = [i for i, e in enumerate(entries) if e.rankable and e.played and e.rating is not None]
    played.sort(key=lambda i: _rank_key(entries[i]))
    others = sorted(set(range(len(entries))) - set(played), key=lambda i: (entries[i].name, i))
    placed: list[Placed] = []
    for position, index in enumerate(played):
        previous = played[position - 1] if position else None
        tied = previous is not None and abs(_ordinal(entries[index]) - _ordinal(entries[previous])) <= DRAW_TOLERANCE
        rank = placed[-1].rank if tied else position + 1
        following = entries[played[position + 1]] if position + 1 < len(played) else None
        placed.append(Placed(index, rank, None if following is None else versus_next(entries[index], following)))
    return placed + [Placed(index, None, None) for index in others]


class Row(Protocol):
    """A standings row as ``placed`` reads and fills it: the summary's ``PolicySummary``, the board's
    ``Standing``."""

    rank: int | None
    versus_next: str | None

    @property
    def entry(self) -> Entry: ...


Placeable = TypeVar("Placeable", bound=Row)


def placed(rows: list[Placeable]) -> list[Placeable]:
    """``rows`` in standings order (``place``), each with its rank and ``vs next`` set."""
    order = place([row.entry for row in rows])
    for where in order:
        rows[where.index].rank, rows[where.index].versus_next = where.rank, where.versus_next
    return [rows[where.index] for where in order]


def _rank_key(entry: Entry) -> tuple[float, float, str]:
    """A ranked row's order: ordinal, then mean reward, then name."""
    assert entry.reward is not None  # ranked rows have played: they have a reward
    return -_ordinal(entry), -entry.reward.mean, entry.name


def _ordinal(entry: Entry) -> float:
    assert entry.rating is not None
    return ordinal(entry.rating)


def versus_next(upper: Entry, lower: Entry) -> str:
    """``upper``, ranked just above ``lower``, against it (``VERSUS_NEXT`` says how): it compares what the
    ranking compares -- ratings -- and never says clear when the lower row's mean reward is higher."""
    assert upper.rating is not None and lower.rating is not None and upper.reward and lower.reward
    bottom = upper.rating.mu - INTERVAL_SIGMAS * upper.rating.sigma
    top = lower.rating.mu + INTERVAL_SIGMAS * lower.rating.sigma
    if bottom <= top:
        return OVERLAPS
    return CLEAR if upper.reward.mean >= lower.reward.mean else MIXED


def _interval(rating: Rated) -> str:
    return f"[{rating.mu - INTERVAL_SIGMAS * rating.sigma:.2f}, {rating.mu + INTERVAL_SIGMAS * rating.sigma:.2f}]"


def versus_meetings(upper: Entry, lower: Entry, tally: Tally | None) -> tuple[str, str]:
    """``versus_next`` of ``upper`` over ``lower`` with their head-to-head taken into account, and why, in
    words. ``tally``: upper's record against lower in the matches both played (None: they never met).
    Where the rating intervals overlap, a one-sided record makes it ``clear`` after all: upper clearly
    beats lower (``clearly_beats``: its score share's 95% interval above ½), and its mean reward is not
    below lower's -- the order then rests on their own meetings. Else it stays ``overlaps``, and the
    reason says what the record shows."""
    verdict = versus_next(upper, lower)
    assert upper.rating is not None and lower.rating is not None and upper.reward and lower.reward
    intervals = f"its rating interval (μ ± 2σ) {_interval(upper.rating)} and the next row's {_interval(lower.rating)}"
    if verdict == CLEAR:
        return CLEAR, f"{intervals} are apart"
    if verdict == MIXED:
        rewards = f"{lower.reward.mean:.3f} against its {upper.reward.mean:.3f}"
        return MIXED, f"{intervals} are apart, but the next row's mean reward is higher ({rewards})"
    if tally is None or not tally.played:
        return OVERLAPS, f"{intervals} overlap, and the two have not met head-to-head"
    record = f"head-to-head {tally.record} (W-D-L) against {lower.name}"
    interval_holds = "its score share's 95% interval holds ½"
    if clearly_beats(tally):
        if upper.reward.mean >= lower.reward.mean:
            why = f"{intervals} overlap, but it clearly beats the next row {record}: its score share's 95% interval "
            return CLEAR, why + "lies above ½"
        return OVERLAPS, f"{intervals} overlap; it clearly beats the next row {record}, but its mean reward is lower"
    if clearly_beats(Tally(wins=tally.losses, draws=tally.draws, losses=tally.wins)):
        return OVERLAPS, f"{intervals} overlap, and the next row clearly beats it {record}"
    return OVERLAPS, f"{intervals} overlap, and {record} is not one-sided enough to tell ({interval_holds})"
