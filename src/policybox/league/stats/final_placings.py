"""A final's ranking: its episodes, each as a placing, ranked by a Plackett-Luce fit.

A final plays ``balanced`` seating's schedule (``policybox.league.play.seating``) in whole cycles
(``seating.cycle``). Each episode counts as its placing (groups of names, best first; a group is a shared place) by the
tournament's ranking rule (``ranking.episode_outcomes`` and ``ranking.places``), and the placings are
ranked by ``policybox.league.stats.plackett_luce.final_ranking``: strengths with intervals, rank
probabilities, and groups of names the data cannot order. ``evaluate --final`` and ``ladder final``
both rank this way.
"""

from __future__ import annotations

from collections.abc import Iterable

from policybox.league import ranking
from policybox.league.choices import RankBy
from policybox.league.stats.plackett_luce import FinalRanking, final_ranking
from policybox.results import EpisodeRecord

Placing = list[list[str]]


def placing(outcomes: dict[str, ranking.Outcome]) -> Placing:
    """An episode's placing: its policies in groups by place, best first (tied policies share a group)."""
    places = ranking.places(outcomes)
    return [sorted(key for key, at in places.items() if at == place) for place in sorted(set(places.values()))]


def record_placing(record: EpisodeRecord, rank_by: RankBy) -> Placing:
    """A results folder's episode as a placing, by the tournament's ranking rule."""
    seated = ((record.seats[agent.agent_id], agent) for agent in record.agents)
    return placing(ranking.episode_outcomes(seated, record.steps, rank_by))


def rank_placings(placings: Iterable[Placing]) -> FinalRanking:
    """The final ranking of these placings; an episode with a single policy in it tells no order and is left out."""
    return final_ranking([match for match in placings if sum(map(len, match)) > 1])


def rank_records(records: Iterable[EpisodeRecord], rank_by: RankBy) -> FinalRanking:
    """The final ranking of a results folder's episodes."""
    return rank_placings(record_placing(record, rank_by) for record in records)
