"""The leaderboard of a tournament, from its finished episodes: ratings, rewards, seats and failures.

Pure: it reads ``EpisodeRecord``s and plays nothing, so the same records always give the same
summary, whatever order they arrive in (they are sorted by episode index before anything that
depends on order).

The unit of every comparison is a policy's *episode score*: the mean reward of its agents in
that episode. An agent's reward depends on who else played, so the episode, not the agent, is
the independent sample. The rules -- forfeits, ratings, standings, intervals -- are
``policybox.league.ranking``'s, the same for every view:

- **Reward**: the mean of a policy's episode scores, with its 95% bootstrap interval.
- **Rating**: OpenSkill Plackett-Luce, fed the episodes in index order, each episode placed by the
  ranking rule in force (``rank_by``: a failed agent forfeits, or the game's reward alone).
- **Standings**: ``ranking.place``: by ordinal, equal ratings sharing a rank; each row's rating
  interval compared with the next row's. A policy without a finished episode is listed last, unranked.
- **Head-to-head**: for each pair of policies that shared an episode, the episodes in which one beat
  the other under the same rule (a win), drew, or lost; and the mean difference of their scores.
- **Cycles**: rock-paper-scissors triples, each clearly beating the next (``ranking.cycles``:
  its score share's Wilson 95% interval above ½), the last the first.
- **Failures**: per policy, each (status, cause) its agents ended with, how often, and one example.
"""

from __future__ import annotations

import math
import statistics
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence

from pydantic import BaseModel, Field

from policybox.league import ranking
from policybox.league.choices import RankBy
from policybox.league.ranking import Rating, Reward
from policybox.league.stats.plackett_luce import FinalRanking
from policybox.results import AgentResult, AgentStatus, EpisodeRecord, Failure
from policybox.spec import PolicySpec

__all__ = ["FailureCause", "HeadToHead", "LatencySummary", "PolicySummary", "Rating", "Reward", "Summary", "summarize"]


class LatencySummary(BaseModel):
    p50_ms: float | None = Field(
        description="Median over its agent results of their latency.p50_ms (agents without one skipped)"
    )
    p99_ms: float | None = Field(
        description="Median over its agent results of their latency.p99_ms (agents without one skipped)"
    )


class HeadToHead(ranking.Tally):
    """One policy's record against another, over the episodes they both played in (by the ranking rule)."""

    episodes: int = 0


class FailureCause(BaseModel):
    """One way a policy's agents ended other than ok: how often, and the first example."""

    status: str
    cause: str = Field(description="The failure's kind: the exception type, Timeout, Crashed, InvalidAction, ...")
    count: int = Field(description="Agent results that ended this way")
    example: str = Field(description="The first such failure, in one line (text the policy controls)")
    episode: int = Field(description="The episode of that example (in a ladder: its match)")


class PolicySummary(BaseModel):
    rank: int | None = Field(default=None, description="Its place in the standings (shared by equal ratings)")
    policy: str = Field(description="The policy's tournament key")
    spec: PolicySpec = Field(description="Its spec, every env value shown as ***")
    episodes: int = Field(description="Finished episodes it had at least one seat in")
    seat_plays: int = Field(description="Seats it played, over all its episodes")
    seats: list[int] = Field(description="How often it played each seat (agent id)")
    reward: Reward | None = Field(description="None if it has no finished episode")
    versus_next: str | None = Field(default=None, description=ranking.VERSUS_NEXT)
    rating: Rating
    forfeits: int = Field(default=0, description="Episodes it forfeited (none under rank_by reward)")
    statuses: dict[str, int] = Field(description="Its agent results per status")
    failures: list[FailureCause] = Field(default_factory=list, description="How its agents failed, most often first")
    timeouts: int = Field(description="Step deadlines its agents missed, in total")
    invalid_actions: int = Field(description="Invalid actions its agents returned, in total")
    latency: LatencySummary
    stats: dict[str, float] = Field(
        default_factory=dict, description="Mean over its agent results of each per-agent stat the game reports"
    )

    @property
    def entry(self) -> ranking.Entry:
        """What placing it reads (``ranking.placed``)."""
        return ranking.Entry(self.policy, self.rating, self.reward)


class Summary(BaseModel):
    """A tournament's leaderboard; the module docstring gives the methods."""

    rank_by: RankBy = Field(default="forfeit", description="The ranking rule: forfeit or reward")
    rule: str = Field(default=ranking.RULES["forfeit"], description="The ranking rule in force, in words")
    episodes_expected: int
    episodes_done: int
    game_faults: int = Field(default=0, description="Finished episodes that the game itself ended by raising")
    incomplete: dict[int, str] = Field(
        description="Episodes that could not be completed, and why; the others not done were not played"
    )
    ranking: list[str] = Field(description="Policy keys, best first")
    policies: list[PolicySummary] = Field(description="One per policy, in ranking order")
    head_to_head: dict[str, dict[str, HeadToHead]] = Field(
        description="head_to_head[a][b]: a's record against b, for every pair that shared an episode"
    )
    cycles: list[list[str]] = Field(
        default_factory=list,
        description="Rock-paper-scissors cycles [a, b, c]: a clearly beats b, b c, and c a (ranking.cycles), "
        "each from its best-placed policy",
    )
    final: FinalRanking | None = Field(
        default=None,
        exclude_if=lambda value: value is None,
        description="A final's ranking (a tournament seated balanced: evaluate --final); absent otherwise",
    )


def summarize(
    policies: list[tuple[str, PolicySpec]],
    records: list[EpisodeRecord],
    expected_episodes: int,
    incomplete: dict[int, str] | None = None,
    rank_by: RankBy = "forfeit",
) -> Summary:
    """The leaderboard of ``policies`` (key and spec, in tournament order) from their finished episodes.

    Raises ValueError for records that cannot be this tournament's: a seat naming an unknown key,
    an episode index twice, or agents that do not match the seats.
    """
    keys = [key for key, _ in policies]
    records = sorted(records, key=lambda record: record.episode)
    _check(keys, records)
    outcomes = [_outcomes(record, rank_by) for record in records]
    ratings = _ratings(keys, outcomes)
    seat_count = max((len(record.seats) for record in records), default=0)
    agents = _agents_by_policy(records)
    entries = [
        _policy_summary(key, spec, [o[key] for o in outcomes if key in o], agents[key], ratings[key], seat_count)
        for key, spec in policies
    ]
    entries = ranking.placed(entries)
    order = [entry.policy for entry in entries]
    return Summary(
        rank_by=rank_by,
        rule=ranking.RULES[rank_by],
        episodes_expected=expected_episodes,
        episodes_done=len(records),
        game_faults=sum(record.game_fault is not None for record in records),
        incomplete=dict(sorted((incomplete or {}).items())),
        ranking=order,
        policies=entries,
        head_to_head=(table := _head_to_head(order, outcomes)),
        cycles=[list(cycle) for cycle in ranking.cycles({(a, b): r for a in table for b, r in table[a].items()})],
    )


def _check(keys: list[str], records: list[EpisodeRecord]) -> None:
    """Refuse records that cannot belong to this tournament, rather than summarise them wrongly."""
    if len(set(keys)) != len(keys):
        raise ValueError(f"policy keys are not unique: {keys}")
    episodes = [record.episode for record in records]
    if len(set(episodes)) != len(episodes):
        raise ValueError("an episode index appears in more than one record")
    for record in records:
        if unknown := set(record.seats) - set(keys):
            raise ValueError(f"episode {record.episode} seats unknown policies: {sorted(unknown)}")
        if sorted(agent.agent_id for agent in record.agents) != list(range(len(record.seats))):
            raise ValueError(f"episode {record.episode}: its agents do not match its {len(record.seats)} seats")


def _outcomes(record: EpisodeRecord, rank_by: RankBy) -> dict[str, ranking.Outcome]:
    """Each policy's outcome in this episode: its score and whether it forfeited."""
    seated = ((record.seats[agent.agent_id], agent) for agent in record.agents)
    return ranking.episode_outcomes(seated, record.steps, rank_by)


def _agents_by_policy(records: list[EpisodeRecord]) -> dict[str, list[tuple[int, AgentResult]]]:
    """Each policy's agent results, each with its episode's index."""
    agents: dict[str, list[tuple[int, AgentResult]]] = defaultdict(list)
    for record in records:
        for agent in record.agents:
            agents[record.seats[agent.agent_id]].append((record.episode, agent))
    return agents


def _ratings(keys: list[str], outcomes: list[dict[str, ranking.Outcome]]) -> dict[str, Rating]:
    """Plackett-Luce ratings from the episodes in order, by the ranking rules."""
    current = {key: ranking.MODEL.rating(name=key) for key in keys}
    for episode in outcomes:
        current.update(ranking.rate(current, episode))
    return {key: ranking.rating(rated) for key, rated in current.items()}


def _policy_summary(
    key: str,
    spec: PolicySpec,
    outcomes: list[ranking.Outcome],
    agents: list[tuple[int, AgentResult]],
    rating: Rating,
    seat_count: int,
) -> PolicySummary:
    results = [agent for _, agent in agents]
    seats = Counter(agent.agent_id for agent in results)
    statuses = Counter(agent.status for agent in results)
    return PolicySummary(
        policy=key,
        spec=spec.redacted(),
        episodes=len(outcomes),
        seat_plays=len(results),
        seats=[seats[seat] for seat in range(seat_count)],
        reward=ranking.reward([outcome.score for outcome in outcomes]),
        rating=rating,
        forfeits=sum(outcome.forfeited for outcome in outcomes),
        statuses={status.value: statuses[status] for status in AgentStatus if statuses[status]},
        failures=failure_causes(
            (episode, agent.status.value, agent.failure)
            for episode, agent in agents
            if agent.status != AgentStatus.OK and agent.failure is not None
        ),
        timeouts=sum(agent.timeouts for agent in results),
        invalid_actions=sum(agent.invalid_actions for agent in results),
        latency=latency([(agent.latency.p50_ms, agent.latency.p99_ms) for agent in results]),
        stats=_mean_stats(results),
    )


def failure_causes(failures: Iterable[tuple[int, str, Failure]]) -> list[FailureCause]:
    """Each (status, cause) of these failures -- each with its episode (or match) and its agent's status,
    in the order they happened -- most frequent first, with its first example."""
    causes: dict[tuple[str, str], FailureCause] = {}
    for episode, status, failure in failures:
        key = (status, failure.kind)
        if key in causes:
            causes[key].count += 1
        else:
            causes[key] = FailureCause(
                status=status, cause=failure.kind, count=1, example=failure.one_line(), episode=episode
            )
    return sorted(causes.values(), key=lambda cause: (-cause.count, cause.status, cause.cause))


def latency(times: Sequence[tuple[float | None, float | None]]) -> LatencySummary:
    """A policy's step latency from its agent results' (p50, p99) times: the median of each."""
    return LatencySummary(p50_ms=_median([p50 for p50, _ in times]), p99_ms=_median([p99 for _, p99 in times]))


def differing_stats(policies: list[PolicySummary], count: int) -> list[str]:
    """What the policies did differently: up to ``count`` game stats whose means differ most between
    them (relative to their size), so that policies with the same reward can still be told apart."""

    def spread(name: str) -> float:
        values = [entry.stats.get(name, 0.0) for entry in policies]
        return (max(values) - min(values)) / (max(abs(v) for v in values) or 1.0)

    stats = sorted({name for entry in policies for name in entry.stats}, key=lambda n: (-spread(n), n))
    return [name for name in stats if spread(name) > 0][:count]


def _mean_stats(agents: list[AgentResult]) -> dict[str, float]:
    """Each stat's mean over the agents (a stat an agent does not report counts as 0 for it)."""
    names = sorted({name for agent in agents for name in agent.stats})
    return {name: math.fsum(agent.stats.get(name, 0.0) for agent in agents) / len(agents) for name in names}


def _median(values: list[float | None]) -> float | None:
    present = [value for value in values if value is not None]
    return statistics.median(present) if present else None


def _head_to_head(order: list[str], outcomes: list[dict[str, ranking.Outcome]]) -> dict[str, dict[str, HeadToHead]]:
    """Every ordered pair that shared an episode (``ranking.head_to_head``), rows and columns in
    standings order."""
    pairs = ranking.head_to_head(
        ((a, b), mine, theirs)
        for episode in outcomes
        for a, mine in episode.items()
        for b, theirs in episode.items()
        if a != b
    )
    table = {a: {b: _record(pairs[a, b]) for b in order if (a, b) in pairs} for a in order}
    return {a: row for a, row in table.items() if row}


def _record(tally: ranking.Tally) -> HeadToHead:
    return HeadToHead(episodes=tally.played, **tally.model_dump())
