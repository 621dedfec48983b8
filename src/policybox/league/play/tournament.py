"""A tournament: which policies play how many episodes of what, and who sits where in each episode.

Everything an episode needs is a pure function of the tournament and the episode's index, so any
episode can be played again alone, by any worker, in any order, and come out the same:

* its seed is derived from the tournament seed and its index only (``episode_seed``);
* its seat map (the policy playing each agent) is fixed by the seating plan.

Every seed a policy sees has one form and range, whoever draws it: a number below ``SEED_RANGE``,
either derived by ``episode_seed`` from a base a policy cannot know (a versus run's secret seed, the
organiser's own ``--seed``) or drawn at random by ``draw_seed`` (a ladder's matches, qualifications
and finals), so that no policy can tell a final, a test or a qualification from a rated match by its
seed.

Who sits where is ``policybox.league.play.seating``'s: ``rotate``, ``random`` or ``balanced``, or
``paired`` for ``policybox versus``, whose pairs of episodes share a seed: pair k's two play the seed
of k.
"""

from __future__ import annotations

import hashlib
import json
import secrets
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from policybox.errors import SpecError
from policybox.league.choices import Episodes, Plan, Ranking
from policybox.league.play.seating import seat_maps
from policybox.settings import Agents, EpisodeSettings, read_mapping
from policybox.spec import PolicySpec, parse_policy_arg


class Entrant(BaseModel):
    """One policy of the tournament: its key (how every result names it), what the operator gave, its spec."""

    key: str
    source: str | dict[str, Any] = Field(description="The -p argument or spec mapping as the operator gave it")
    spec: PolicySpec

    def public(self) -> Entrant:
        """Without secrets: the spec's env values masked, and a -p string that may hold one inline
        (``env.TOKEN=...``) replaced by the key."""
        source = self.source
        if isinstance(source, str) and "env." in source:
            source = self.key
        elif isinstance(source, dict) and source.get("env"):
            source = {**source, "env": dict.fromkeys(source["env"], "***")}
        return self.model_copy(update={"spec": self.spec.redacted(), "source": source})


class Tournament(BaseModel):
    """What to play. Stored in the output folder; a run into a folder of another tournament is refused."""

    model_config = ConfigDict(extra="forbid")

    entrants: list[Entrant]
    episodes: Episodes
    agents: Agents
    seating: Plan = "rotate"
    settings: EpisodeSettings = Field(description="How each episode is played; its seed is the tournament's seed")
    rank_by: Ranking = "forfeit"  # the summary's ranking rule (see policybox.league.ranking)

    @property
    def keys(self) -> list[str]:
        return [entrant.key for entrant in self.entrants]

    def digest(self) -> str:
        """A hash of the whole tournament (secrets included, never shown): equal digests, equal episodes."""
        return _sha256(self.model_dump(mode="json"))

    def entrants_fingerprint(self) -> str:
        """A hash of the entrants as played (secrets included, never shown): the one part of a
        tournament its stored ``tournament.json`` cannot show in full."""
        return _sha256([entrant.model_dump(mode="json") for entrant in self.entrants])

    def differences(self, other: Tournament) -> list[str]:
        """What differs, as both show (secrets masked), between the episodes of this tournament and
        ``other``'s, each as ``field (this value; other value)``: its policies, seats and every setting.
        Neither the number of episodes (a tournament may grow) nor the ranking rule (it changes no
        episode) counts. Secrets that differ behind the same mask are ``entrants_fingerprint``'s to tell."""
        mine, theirs = self.public(), other.public()
        found = []
        if mine["entrants"] != theirs["entrants"]:
            keys = f"{', '.join(self.keys)} here; {', '.join(other.keys)} there"
            found.append(f"policies ({keys})" if self.keys != other.keys else "policies (the same names, other specs)")
        flat_mine, flat_theirs = _flat(mine, ""), _flat(theirs, "")
        for name in sorted(set(flat_mine) | set(flat_theirs)):
            if name in ("episodes", "rank_by") or name.startswith("entrants"):
                continue
            if flat_mine.get(name) != flat_theirs.get(name):
                found.append(f"{name} ({_shown(flat_mine.get(name))} here; {_shown(flat_theirs.get(name))} there)")
        return found

    def public(self) -> dict[str, Any]:
        """The tournament as stored and shown: every secret a spec passes its cells replaced by ``***``."""
        entrants = [entrant.public() for entrant in self.entrants]
        return self.model_copy(update={"entrants": entrants}).model_dump(mode="json")

    def episode_seed(self, episode: int) -> int:
        """Its seed; under paired seating, its pair's: both episodes of a pair play the same game."""
        return episode_seed(self.settings.seed, episode // 2 if self.seating == "paired" else episode)

    def seat_maps(self) -> list[list[int]]:
        """For every episode, the index of the entrant in each seat."""
        return seat_maps(self.seating, len(self.entrants), self.agents, self.episodes, self.episode_seed)


def _sha256(value: Any) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True).encode()).hexdigest()


def _flat(value: Any, prefix: str) -> dict[str, Any]:
    """A nested mapping as ``{"settings.limits.act_timeout_ms": 1000.0, ...}``."""
    if not isinstance(value, dict):
        return {prefix: value}
    flat: dict[str, Any] = {}
    for key, item in value.items():
        flat.update(_flat(item, f"{prefix}.{key}" if prefix else key))
    return flat


def _shown(value: Any) -> str:
    return "unset" if value is None else json.dumps(value)


SEED_RANGE = 1 << 31  # every episode seed is below it: episode_seed's 32 bits shifted, and draw_seed's


def episode_seed(seed: int, episode: int) -> int:
    """Episode ``episode``'s seed: from the tournament seed and the index only (never the order played)."""
    return int(np.random.SeedSequence([seed, episode]).generate_state(1)[0] >> 1)


def draw_seed() -> int:
    """A seed no policy can predict, of the form and range ``episode_seed`` gives: what a ladder plays
    its matches, qualifications and finals with (each stored where it is played again from)."""
    return secrets.randbelow(SEED_RANGE)


def entrants(sources: Sequence[str | dict[str, Any]], base_dir: Path | None = None) -> list[Entrant]:
    """Parse the policies; each must have its own key (its label), or results could not tell them apart."""
    if isinstance(sources, (str, dict)) or not all(isinstance(source, (str, dict)) for source in sources):
        raise SpecError(f"policies must be a list of -p strings or spec mappings, not {sources!r}")
    found = [Entrant(key="", source=source, spec=_parse(source, base_dir)) for source in sources]
    for entrant in found:
        entrant.key = entrant.spec.display_name
    keys = [entrant.key for entrant in found]
    for key in keys:
        if keys.count(key) > 1:
            raise SpecError(f"two policies are both called {key!r}: give one of them another name (,name=NAME)")
    if not found:
        raise SpecError("give at least one policy (-p SPEC)")
    return found


def _parse(source: str | dict[str, Any], base_dir: Path | None) -> PolicySpec:
    if isinstance(source, str):
        return parse_policy_arg(source, base_dir)
    from policybox.spec import check_spec

    try:
        return check_spec(PolicySpec.model_validate(source), (base_dir or Path.cwd()).resolve())
    except ValidationError as exc:
        raise SpecError(f"policy {source!r} is not a valid spec: {exc.errors()[0]['msg']}") from None


def game_file_relative_to(env: str, folder: Path) -> str:
    """An ``--env`` value from a tournament file, its game file (a MettaGrid config, a PettingZoo
    ``.py`` game) made absolute against the file's ``folder``; other games unchanged."""
    from policybox.envs import split_env

    family, target = split_env(env)
    module, sep, factory = target.rpartition(":") if family == "pettingzoo" else (target, "", "")
    if not module.endswith((".yaml", ".yml", ".json", ".py")) or Path(module).is_absolute():
        return env
    prefix = env[: len(env) - len(target)]
    return f"{prefix}{folder.resolve() / module}{sep}{factory}"


def load_tournament_file(path: Path) -> dict[str, Any]:
    """A tournament file (YAML or JSON) as a mapping (policies, episodes, agents, ...); its relative paths
    are relative to its folder."""
    if not path.is_file():
        raise SpecError(f"tournament file {path} does not exist")
    return read_mapping(path, "tournament file")
