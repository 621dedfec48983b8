"""Placings as Plackett-Luce stages: a match's placing (groups of names, best first, a group being a
shared place) becomes one stage per group -- the group drawn, from the members placed at it or below.

The fit needs only the distinct stages (a set, the size of the group drawn from it) and how often
each occurs, which at 100,000 matches of a 16-name final are a few thousand rows; the bootstrap
needs each stage's match, so both are kept.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Stages:
    """The matches as Plackett-Luce stages: one stage per group of each match (the group drawn, from
    the members placed at it or below). Entries are (stage, name) pairs of a stage's set ``R``,
    sorted by stage. The fit needs only each distinct stage (its set and group size) and its count."""

    names: list[str]
    matches: int
    entry_stage: np.ndarray  # per entry: its stage
    entry_name: np.ndarray  # per entry: the name's index
    entry_won: np.ndarray  # per entry: 1.0 when the name is in the group drawn at this stage
    stage_match: np.ndarray  # per stage: its match
    stage_kind: np.ndarray  # per stage: its distinct stage
    wins: np.ndarray  # per name: the stages it was drawn at
    kind_entry: np.ndarray  # per entry of a distinct stage: the distinct stage
    kind_name: np.ndarray  # ... and the name
    kind_weight: np.ndarray  # per distinct stage: how often it occurs times its group size


def stages(matches: Sequence[Sequence[Sequence[str]]]) -> Stages:
    """Encode placings (each a list of groups of names, best first) as stages."""
    seen: dict[str, int] = {}
    first_seen = np.array([seen.setdefault(n, len(seen)) for match in matches for group in match for n in group])
    names = sorted(seen)
    name_of = np.argsort(np.argsort(list(seen)))[first_seen].astype(np.int64)  # ids by sorted name
    group_size = np.array([len(group) for match in matches for group in match], dtype=np.int64)
    groups = np.array([len(match) for match in matches], dtype=np.int64)
    first_stage = np.cumsum(groups) - groups
    stage_match = np.repeat(np.arange(len(matches)), groups)
    place_of = np.repeat(np.arange(len(group_size)) - first_stage[stage_match], group_size)
    match_of = np.repeat(stage_match, group_size)
    if (np.diff(np.sort(match_of * len(names) + name_of)) == 0).any():
        raise ValueError("a match places a name twice")
    # a member placed at p is in the sets of its match's stages 0..p; entries sorted by stage, then name
    repeat = place_of + 1
    member = np.repeat(np.arange(len(name_of)), repeat)
    stage = first_stage[match_of[member]] + np.arange(len(member)) - np.repeat(np.cumsum(repeat) - repeat, repeat)
    order = np.argsort(stage * len(names) + name_of[member], kind="stable")
    member, entry_stage = member[order], stage[order]
    entry_won = (entry_stage == first_stage[match_of[member]] + place_of[member]).astype(float)
    kinds, stage_kind, kind_count = distinct(entry_stage, name_of[member], entry_won, len(names))
    return Stages(
        names=names,
        matches=len(matches),
        entry_stage=entry_stage,
        entry_name=name_of[member],
        entry_won=entry_won,
        stage_match=stage_match,
        stage_kind=stage_kind,
        wins=np.bincount(name_of[member], entry_won, minlength=len(names)),
        kind_entry=np.nonzero(kinds[:, 1:] >= 0)[0],
        kind_name=kinds[:, 1:][kinds[:, 1:] >= 0],
        kind_weight=kind_count * kinds[:, 0],
    )


def distinct(
    entry_stage: np.ndarray, entry_name: np.ndarray, entry_won: np.ndarray, names: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The distinct stages, as rows (group size, the set's names ascending, -1 padding), each stage's
    row, and each row's count. Rows are compared as one integer each, built column by column (and
    renumbered densely whenever the next column would overflow it)."""
    size = np.bincount(entry_stage)
    start = np.cumsum(size) - size
    rows = np.full((len(size), 1 + size.max()), -1, dtype=np.int64)
    rows[:, 0] = np.bincount(entry_stage, entry_won).astype(np.int64)
    rows[entry_stage, 1 + np.arange(len(entry_stage)) - start[entry_stage]] = entry_name
    base = max(names, int(rows[:, 0].max())) + 2
    key = np.zeros(len(rows), dtype=np.int64)
    for column in rows.T:
        if key.max() >= np.iinfo(np.int64).max // base - 1:
            key = np.unique(key, return_inverse=True)[1].ravel()
        key = key * base + column + 1
    _, first, stage_kind, count = np.unique(key, return_index=True, return_inverse=True, return_counts=True)
    return rows[first], stage_kind.ravel(), count.astype(float)
