"""Episode records made by hand, with every required field filled, for the summaries and rankings built
from them; a summary's entry for one policy."""

from __future__ import annotations

from policybox.league.views.summary import Summary
from policybox.limits import Limits
from policybox.results import AgentResult, AgentStatus, EpisodeRecord, Latency
from policybox.spec import PolicySpec


def agent(agent_id: int, policy: str, reward: float, **fields) -> AgentResult:
    """An agent result with every required field filled; ``fields`` overrides any of them."""
    values = dict(
        agent_id=agent_id,
        policy=policy,
        spec=PolicySpec(class_path=policy),
        reward=reward,
        stats={},
        status=AgentStatus.OK,
        latency=Latency(count=10, p50_ms=1.0, p99_ms=5.0, max_ms=6.0),
        action_digest="0" * 64,
    )
    return AgentResult(**(values | fields))


def record(episode: int, seats: list[str], rewards: list[float], **agent_fields) -> EpisodeRecord:
    """A finished episode with one agent per seat; ``agent_fields`` maps an agent id to its overrides."""
    return EpisodeRecord(
        policybox_version="test",
        mode="inline",
        seed=episode,
        steps=10,
        env={},
        limits=Limits(),
        on_agent_failure="continue",
        sandbox="off",
        cleanup="inline",
        game_stats={},
        agents=[
            agent(seat, key, reward, **agent_fields.get(f"a{seat}", {}))
            for seat, (key, reward) in enumerate(zip(seats, rewards, strict=True))
        ],
        started_at="2026-01-01T00:00:00+00:00",
        duration_s=1.0,
        startup_s=0.1,
        play_s=0.9,
        episode=episode,
        seats=seats,
    )


def entry(summary: Summary, key: str):
    return next(policy for policy in summary.policies if policy.policy == key)
