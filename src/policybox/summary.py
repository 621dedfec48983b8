"""The leaderboard of a tournament, from its finished episodes: ratings, rewards, seats and failures.

Pure: it reads ``EpisodeRecord``s and plays nothing, so the same records always give the same
summary, whatever order they arrive in (they are sorted by episode index before anything that
depends on order).

The unit of every comparison is a policy's *episode score*: the mean reward of its agents in
that episode. An agent's reward depends on who else played, so the episode, not the agent, is
the independent sample.

- **Reward**: the mean of a policy's episode scores, with a 95% percentile bootstrap interval:
  its episode scores are resampled with replacement 2000 times, from a generator with a fixed
  seed, and the interval runs from the 2.5th to the 97.5th percentile of the resampled means.
- **Rating**: OpenSkill's Plackett-Luce model (default parameters), fed the episodes in index
  order; each episode is a match in which every policy present is a team of one, ranked by its
  episode score (scores within 1e-9 of each other tie). An episode with a single policy present
  tells nothing about skill and is skipped. Policies are ranked by ``ordinal = mu - 3 * sigma``,
  then by mean reward, then by key; a policy without a finished episode ranks last.
- **Head-to-head**: for each pair of policies that shared an episode, the episodes in which one's
  score was higher (a win), equal within 1e-9 (a draw) or lower (a loss) than the other's.
"""

from __future__ import annotations

import math
import statistics
from collections import Counter, defaultdict

import numpy as np
from openskill.models import PlackettLuce
from pydantic import BaseModel, Field
from rich.table import Table
from rich.text import Text

from policybox.inert import shown
from policybox.results import AgentResult, AgentStatus, EpisodeRecord
from policybox.spec import PolicySpec

BOOTSTRAP_RESAMPLES = 2000
BOOTSTRAP_BLOCK = 100  # resamples drawn at once: bounds memory to BLOCK x episodes indices
BOOTSTRAP_SEED = 20_261_130  # fixed, so the same episodes always give the same interval
STATS_SHOWN = 5
DRAW_TOLERANCE = 1e-9
INCOMPLETE_SHOWN = 5


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


class LatencySummary(BaseModel):
    p50_ms: float | None = Field(
        description="Median over its agent results of their latency.p50_ms (agents without one skipped)"
    )
    p99_ms: float | None = Field(
        description="Median over its agent results of their latency.p99_ms (agents without one skipped)"
    )


class HeadToHead(BaseModel):
    """One policy's record against another, over the episodes they both played in."""

    episodes: int = 0
    wins: int = 0
    draws: int = Field(default=0, description="Episode scores equal within 1e-9")
    losses: int = 0


class PolicySummary(BaseModel):
    policy: str = Field(description="The policy's tournament key")
    spec: PolicySpec = Field(description="Its spec, every env value shown as ***")
    episodes: int = Field(description="Finished episodes it had at least one seat in")
    seat_plays: int = Field(description="Seats it played, over all its episodes")
    seats: list[int] = Field(description="How often it played each seat (agent id)")
    reward: Reward | None = Field(description="None if it has no finished episode")
    rating: Rating
    statuses: dict[str, int] = Field(description="Its agent results per status")
    timeouts: int = Field(description="Step deadlines its agents missed, in total")
    invalid_actions: int = Field(description="Invalid actions its agents returned, in total")
    latency: LatencySummary
    stats: dict[str, float] = Field(
        default_factory=dict, description="Mean over its agent results of each per-agent stat the game reports"
    )


class Summary(BaseModel):
    """A tournament's leaderboard; the module docstring gives the methods."""

    episodes_expected: int
    episodes_done: int
    incomplete: dict[int, str] = Field(
        description="Episodes that could not be completed, and why; the others not done were not played"
    )
    ranking: list[str] = Field(description="Policy keys, best first")
    policies: list[PolicySummary] = Field(description="One per policy, in ranking order")
    head_to_head: dict[str, dict[str, HeadToHead]] = Field(
        description="head_to_head[a][b]: a's record against b, for every pair that shared an episode"
    )


def summarize(
    policies: list[tuple[str, PolicySpec]],
    records: list[EpisodeRecord],
    expected_episodes: int,
    incomplete: dict[int, str] | None = None,
) -> Summary:
    """The leaderboard of ``policies`` (key and spec, in tournament order) from their finished episodes.

    Raises ValueError for records that cannot be this tournament's: a seat naming an unknown key,
    an episode index twice, or agents that do not match the seats.
    """
    keys = [key for key, _ in policies]
    records = sorted(records, key=lambda record: record.episode)
    _check(keys, records)
    scores = [_episode_scores(record) for record in records]
    ratings = _ratings(keys, scores)
    seat_count = max((len(record.seats) for record in records), default=0)
    agents = _agents_by_policy(records)
    entries = [
        _policy_summary(key, spec, [s[key] for s in scores if key in s], agents[key], ratings[key], seat_count)
        for key, spec in policies
    ]
    entries.sort(key=_rank_key)
    ranking = [entry.policy for entry in entries]
    return Summary(
        episodes_expected=expected_episodes,
        episodes_done=len(records),
        incomplete=dict(sorted((incomplete or {}).items())),
        ranking=ranking,
        policies=entries,
        head_to_head=_head_to_head(ranking, scores),
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


def _episode_scores(record: EpisodeRecord) -> dict[str, float]:
    """Each policy's mean agent reward in this episode (fsum: the same rewards give the same score)."""
    rewards: dict[str, list[float]] = defaultdict(list)
    for agent in record.agents:
        rewards[record.seats[agent.agent_id]].append(agent.reward)
    return {key: math.fsum(values) / len(values) for key, values in rewards.items()}


def _agents_by_policy(records: list[EpisodeRecord]) -> dict[str, list[AgentResult]]:
    agents: dict[str, list[AgentResult]] = defaultdict(list)
    for record in records:
        for agent in record.agents:
            agents[record.seats[agent.agent_id]].append(agent)
    return agents


def _ratings(keys: list[str], scores: list[dict[str, float]]) -> dict[str, Rating]:
    """Plackett-Luce ratings from the episodes in order; each policy present is a one-player team."""
    model = PlackettLuce()
    current = {key: model.rating(name=key) for key in keys}
    for episode in scores:
        present = [key for key in keys if key in episode]
        if len(present) < 2:
            continue
        rated = model.rate([[current[key]] for key in present], scores=_tied([episode[key] for key in present]))
        current.update((key, team[0]) for key, team in zip(present, rated, strict=True))
    return {key: Rating(mu=r.mu, sigma=r.sigma, ordinal=r.ordinal()) for key, r in current.items()}


def _tied(values: list[float]) -> list[float]:
    """Values within DRAW_TOLERANCE above a smaller one take its value, so they tie as head-to-head draws do."""
    snapped: dict[float, float] = {}
    floor = -math.inf
    for value in sorted(set(values)):
        if value - floor > DRAW_TOLERANCE:
            floor = value
        snapped[value] = floor
    return [snapped[value] for value in values]


def _policy_summary(
    key: str, spec: PolicySpec, scores: list[float], agents: list[AgentResult], rating: Rating, seat_count: int
) -> PolicySummary:
    seats = Counter(agent.agent_id for agent in agents)
    statuses = Counter(agent.status for agent in agents)
    return PolicySummary(
        policy=key,
        spec=spec.redacted(),
        episodes=len(scores),
        seat_plays=len(agents),
        seats=[seats[seat] for seat in range(seat_count)],
        reward=_reward(scores),
        rating=rating,
        statuses={status.value: statuses[status] for status in AgentStatus if statuses[status]},
        timeouts=sum(agent.timeouts for agent in agents),
        invalid_actions=sum(agent.invalid_actions for agent in agents),
        latency=LatencySummary(
            p50_ms=_median([agent.latency.p50_ms for agent in agents]),
            p99_ms=_median([agent.latency.p99_ms for agent in agents]),
        ),
        stats=_mean_stats(agents),
    )


def _mean_stats(agents: list[AgentResult]) -> dict[str, float]:
    """Each stat's mean over the agents (a stat an agent does not report counts as 0 for it)."""
    names = sorted({name for agent in agents for name in agent.stats})
    return {name: math.fsum(agent.stats.get(name, 0.0) for agent in agents) / len(agents) for name in names}


def _reward(scores: list[float]) -> Reward | None:
    """Mean episode score and its percentile bootstrap interval (one episode: [mean, mean])."""
    if not scores:
        return None
    sample = np.asarray(scores, dtype=float)
    rng = np.random.default_rng(BOOTSTRAP_SEED)
    means = np.concatenate(
        [
            sample[rng.integers(0, len(sample), size=(BOOTSTRAP_BLOCK, len(sample)))].mean(axis=1)
            for _ in range(BOOTSTRAP_RESAMPLES // BOOTSTRAP_BLOCK)
        ]
    )
    low, high = np.percentile(means, [2.5, 97.5])
    return Reward(mean=float(sample.mean()), ci95=(float(low), float(high)))


def _median(values: list[float | None]) -> float | None:
    present = [value for value in values if value is not None]
    return statistics.median(present) if present else None


def _rank_key(entry: PolicySummary) -> tuple[bool, float, float, str]:
    """Sort key, best first: played before unplayed, then higher ordinal, then higher mean reward, then key."""
    mean = entry.reward.mean if entry.reward else -math.inf
    return (entry.reward is None, -entry.rating.ordinal, -mean, entry.policy)


def _head_to_head(ranking: list[str], scores: list[dict[str, float]]) -> dict[str, dict[str, HeadToHead]]:
    """Win, draw and loss counts for every ordered pair that shared an episode, rows and columns in rank order."""
    pairs: dict[tuple[str, str], HeadToHead] = defaultdict(HeadToHead)
    for episode in scores:
        for a, a_score in episode.items():
            for b, b_score in episode.items():
                if a != b:
                    _count(pairs[a, b], a_score - b_score)
    table = {a: {b: pairs[a, b] for b in ranking if (a, b) in pairs} for a in ranking}
    return {a: row for a, row in table.items() if row}


def _count(record: HeadToHead, margin: float) -> None:
    record.episodes += 1
    if abs(margin) <= DRAW_TOLERANCE:
        record.draws += 1
    elif margin > 0:
        record.wins += 1
    else:
        record.losses += 1


def render(summary: Summary) -> list[Table]:
    """The leaderboard table (incomplete episodes in its caption), then head-to-head if there are >= 2 policies."""
    tables = [_leaderboard(summary)]
    if len(summary.policies) >= 2:
        tables += [_head_to_head_table(summary), _behaviour_table(summary)]
    return tables


def _behaviour_table(summary: Summary, rows: int = STATS_SHOWN) -> Table:
    """What the policies did differently: the game's stats whose means differ most between them
    (relative to their size), so two policies with the same reward can still be told apart."""

    def spread(name: str) -> float:
        values = [entry.stats.get(name, 0.0) for entry in summary.policies]
        return (max(values) - min(values)) / (max(abs(v) for v in values) or 1.0)

    names = sorted({name for entry in summary.policies for name in entry.stats}, key=lambda n: (-spread(n), n))
    table = Table(title="what they did: the game stats that differ most between them, mean per agent")
    table.add_column("stat")
    for entry in summary.policies:
        table.add_column(shown(entry.policy), justify="right")
    for name in [name for name in names if spread(name) > 0][:rows]:
        table.add_row(shown(name), *(f"{entry.stats.get(name, 0.0):.4g}" for entry in summary.policies))
    return table


def _leaderboard(summary: Summary) -> Table:
    table = Table(
        title=f"leaderboard · {summary.episodes_done}/{summary.episodes_expected} episodes",
        caption=_incomplete_line(summary),
    )
    for column in ("rank", "policy", "rating", "reward", "episodes", "seat plays", "statuses", "p50 ms", "p99 ms"):
        table.add_column(column, justify="left" if column in ("policy", "statuses") else "right")
    for rank, entry in enumerate(summary.policies, start=1):
        rating = entry.rating
        table.add_row(
            str(rank),
            shown(entry.policy),
            f"{rating.ordinal:.2f} ({rating.mu:.2f} ± {rating.sigma:.2f})",
            _reward_cell(entry.reward),
            str(entry.episodes),
            str(entry.seat_plays),
            _statuses_cell(entry.statuses),
            _ms(entry.latency.p50_ms),
            _ms(entry.latency.p99_ms),
        )
    return table


def _incomplete_line(summary: Summary) -> Text | None:
    """Which episodes could not be completed (the first few, with why), and how many were not played."""
    parts = []
    if summary.incomplete:
        first = [f"{episode} ({why})" for episode, why in list(summary.incomplete.items())[:INCOMPLETE_SHOWN]]
        more = len(summary.incomplete) - len(first)
        parts.append(f"incomplete: {', '.join(first)}" + (f" and {more} more" if more else ""))
    not_played = summary.episodes_expected - summary.episodes_done - len(summary.incomplete)
    if not_played > 0:
        parts.append(f"not played: {not_played}")
    return shown(" · ".join(parts)) if parts else None


def _reward_cell(reward: Reward | None) -> str:
    if reward is None:
        return "—"
    low, high = reward.ci95
    return f"{reward.mean:.4g} [{low:.4g}, {high:.4g}]"


def _statuses_cell(statuses: dict[str, int]) -> Text:
    return Text(" · ").join(
        Text(f"{status} {count}", style="" if status == AgentStatus.OK else "red") for status, count in statuses.items()
    )


def _ms(value: float | None) -> str:
    return "—" if value is None else f"{value:.2f}"


def _head_to_head_table(summary: Summary) -> Table:
    table = Table(title="head-to-head: row vs column, W-D-L")
    table.add_column("policy")
    for key in summary.ranking:
        table.add_column(shown(key), justify="right")
    for a in summary.ranking:
        row = summary.head_to_head.get(a, {})
        table.add_row(shown(a), *(_head_to_head_cell(row.get(b)) for b in summary.ranking))
    return table


def _head_to_head_cell(record: HeadToHead | None) -> str:
    return "—" if record is None else f"{record.wins}-{record.draws}-{record.losses}"
