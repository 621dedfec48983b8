"""``policybox versus``: is B better than A? Paired episodes, played until a sequential test decides.

**Paired episodes.** A versus run is a tournament with ``paired`` seating
(``policybox.league.play.seating``), whose entrants are A, B and the opponents (``against``). Pair k is two episodes
with the same seed (from the run's seed and k) and the same seat map, except that the seats A holds
in the first are B's in the second. Over pairs the seat maps follow the subject's matches in the
``balanced`` schedule of [subject, *against], so that it takes every seat equally often and meets
the opponents as evenly as the seats allow. Without opponents A and B play each other, and the
second episode of a pair swaps their seats: the chess engines' game pair, each opening played with
both colours (in a game of one seat, each plays it alone).

**The paired difference** of pair k is B's score minus A's: a side's score is the mean reward of
the agents it held in the pair's episodes (the summary's episode score). Every reward counts as the
game gave it: an agent of A or B that failed scores what it earned before it failed, and the
verdict says how many agents of each failed. The seed's luck and the opponents are the same on
both sides, so the difference measures the version alone.

**Sequentially.** Episodes are played in pair order, as many at once as the workers take. The test
(``policybox.league.stats.sequential``) reads the longest prefix of finished pairs, in pair order
-- never in the order episodes finish, which would favour the side whose episodes end sooner --
pair after pair, and the run stops at the first pair whose prefix gives a verdict (``B better`` or
``B not better``), or with every pair of ``max_episodes`` played (``undecided at the cap``).
Episodes already in flight when the verdict comes finish and are kept in the folder, but the verdict
is the one at its pair. So the verdict is a function of the pairs' results alone, which are a
function of their seeds: the number of workers, a kill and a resume change nothing in it.

**The folder** is ``evaluate``'s -- ``tournament.json``, ``results.jsonl``, ``summary.json``, logs
-- played and resumed by the same driver (``results_folder.play_tournament``), plus ``versus.json``:
the test's levels and its state, written as the prefix grows (another terminal may follow it) and
at the end with the verdict. Running the same call again resumes: no finished pair is played again,
and a larger ``max_episodes`` continues a run that was undecided at its cap. A test's levels are
fixed when it starts: a resume at other levels is refused.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field

from policybox.errors import SpecError
from policybox.league.choices import Backend
from policybox.league.evaluate import VERSUS_FILE
from policybox.league.evaluate.journal import RESULTS, read_records
from policybox.league.evaluate.results_folder import TOURNAMENT_FILE, load_tournament, play_tournament
from policybox.league.play.tournament import Tournament, draw_seed, entrants
from policybox.league.stats.sequential import SequentialTest, TestState
from policybox.results import AgentResult, EpisodeRecord
from policybox.settings import DEFAULT_AGENTS, EpisodeSettings, agent_count
from policybox.spec import PolicySpec
from policybox.storage import write_atomically

Verdict = Literal["B better", "B not better", "undecided at the cap", "undecided"]


class VersusResult(BaseModel):
    """Where a versus run stands: its verdict, and the test's state at the pair it rests on."""

    a: str = Field(description="A's name (its label)")
    b: str = Field(description="B's name")
    against: list[str] = Field(description="The opponents' names; none: A and B played each other")
    verdict: Verdict = Field(
        description="B better, B not better, undecided at the cap (every pair of max_episodes played), or "
        "undecided (still playing, or some episodes could not be played: run the same command again)"
    )
    pairs: int = Field(description="The pairs the verdict rests on")
    episodes: int = Field(description="The episodes the verdict rests on: two per pair")
    played: int = Field(description="Episodes in the folder: those of the verdict and any that were in flight")
    max_episodes: int
    estimate: float | None = Field(description="Mean difference B - A of the pairs' scores; null before a pair")
    low: float | None = Field(description="The interval of B - A (anytime-valid); null: unbounded as yet")
    high: float | None
    alpha: float
    beta: float
    effect: float = Field(description="The effect the test finds with probability 1 - beta, in sds of B - A")
    statistic: float | None = Field(description="The test statistic; null: infinite (every difference the same)")
    bounds: tuple[float, float] = Field(
        description="The statistic's bounds: B not better at or below the first, B better at or above the second"
    )
    failures: dict[str, int] = Field(description="Agents of A and of B that did not end ok, in the verdict's pairs")
    incomplete: int = Field(description="Episodes that could not be played (their pairs wait for the next run)")
    scored: int | None = Field(
        default=None,
        description="Agents of the verdict's pairs (A's, B's and the opponents') whose reward was not 0: none "
        "means the game rewarded nobody, and B - A says nothing (null: written before policybox counted them)",
    )


class Watch:
    """The sequential test over a versus tournament's finished episodes, as they come."""

    def __init__(self, tournament: Tournament, test: SequentialTest, on_state: Callable[[TestState], None] | None):
        self.a, self.b = tournament.keys[:2]
        self.test = test
        self.pairs = tournament.episodes // 2
        self.on_state = on_state
        self.played = 0  # finished episodes, in pairs or not
        self.diffs: list[float] = []
        self.failures = {self.a: 0, self.b: 0}  # agents that did not end ok, in the prefix's pairs
        self.scored = 0  # agents of the prefix's pairs, any seat's, whose reward was not 0
        self.state = test.state([])

    @property
    def decided(self) -> bool:
        return self.state.verdict != "undecided"

    def enough(self, records: Mapping[int, EpisodeRecord]) -> bool:
        """Extend the prefix of finished pairs, pair after pair, up to the first verdict; whether there is one."""
        self.played = len(records)
        grown = False
        while not self.decided and self.has_pair(records, len(self.diffs)):
            episodes = [records[2 * len(self.diffs)], records[2 * len(self.diffs) + 1]]
            self.diffs.append(difference(episodes, self.a, self.b))
            for key in self.failures:
                self.failures[key] += sum(agent.status != "ok" for agent in agents_of(episodes, key))
            self.scored += sum(agent.reward != 0 for record in episodes for agent in record.agents)
            self.state = self.test.state(self.diffs)
            grown = True
        if grown and self.on_state:
            self.on_state(self.state)
        return self.decided

    def has_pair(self, records: Mapping[int, EpisodeRecord], pair: int) -> bool:
        return pair < self.pairs and 2 * pair in records and 2 * pair + 1 in records


def difference(pair: Sequence[EpisodeRecord], a: str, b: str) -> float:
    """B's score minus A's over a pair's episodes: each the mean reward of the agents it held."""
    return score(pair, b) - score(pair, a)


def score(episodes: Sequence[EpisodeRecord], key: str) -> float:
    rewards = [agent.reward for agent in agents_of(episodes, key)]
    return math.fsum(rewards) / len(rewards)


def agents_of(episodes: Sequence[EpisodeRecord], key: str) -> list[AgentResult]:
    """The agents ``key`` held in these episodes."""
    return [
        agent for record in episodes for seat, agent in zip(record.seats, record.agents, strict=True) if seat == key
    ]


def versus_tournament(
    a: str | PolicySpec | dict[str, Any],
    b: str | PolicySpec | dict[str, Any],
    against: Sequence[str | PolicySpec | dict[str, Any]],
    max_episodes: int,
    settings: EpisodeSettings,
    agents: int | None = None,
) -> Tournament:
    """The tournament of a versus run: A, B and the opponents, paired seating, ``max_episodes`` rounded
    down to whole pairs. Two entrants of one name are refused (a copy of A needs ``,name=...``)."""
    if max_episodes < 2:
        raise SpecError(f"--max-episodes must be at least 2 (one pair), not {max_episodes}")
    sources = [p.model_dump() if isinstance(p, PolicySpec) else p for p in (a, b, *against)]
    seats = agent_count(settings, agents, DEFAULT_AGENTS)
    if seats == 1 and against:
        raise SpecError("a game of one agent has no seat for an opponent: leave out --against (A and B each play it)")
    return Tournament(
        entrants=entrants(sources),
        episodes=max_episodes // 2 * 2,
        agents=seats,
        seating="paired",
        settings=settings,
        rank_by="reward",
    )


def versus(
    a: str | PolicySpec | dict[str, Any],
    b: str | PolicySpec | dict[str, Any],
    against: Sequence[str | PolicySpec | dict[str, Any]] = (),
    alpha: float = 0.05,
    beta: float = 0.05,
    effect: float = 0.2,
    max_episodes: int = 2000,
    workers: int | None = None,
    out: str | Path = "versus-results",
    agents: int | None = None,
    backend: Backend = "local",
    ray_address: str | None = None,
    on_state: Callable[[TestState], None] | None = None,
    **settings: Any,
) -> VersusResult:
    """Is B better than A: the Python form of ``policybox versus`` (see the module's docstring).

    ``a``, ``b`` and ``against`` are ``-p`` strings, PolicySpecs or spec mappings; ``settings`` are
    the options of ``policybox run`` by name (``env="arena"``, ``steps=200``, ``seed=3``). Without a
    ``seed`` (or with None), the run's is secret (``secret_seed``).
    ``alpha``: the chance of ``B better`` when B is not; ``beta``: of ``B not better`` when B is
    better by ``effect`` standard deviations of the paired difference. ``on_state`` is called with
    the test's state each time the prefix of finished pairs grows. Calling it again with the same
    arguments resumes into ``out``; the result is also written to ``out/versus.json``."""
    test = sequential_test(alpha, beta, effect)
    if settings.get("seed") is None:
        settings["seed"] = secret_seed(Path(out))
    tournament = versus_tournament(a, b, against, max_episodes, EpisodeSettings.from_options(settings), agents)
    return play_versus(tournament, test, Path(out), workers, backend, ray_address, on_state)


def secret_seed(folder: Path) -> int:
    """The seed of the versus run kept in ``folder`` (a resume plays the same pairs), or for a new run a
    seed drawn at random, which no policy can know: its pairs' seeds then look like every ladder
    match's (``draw_seed``), and a policy cannot tell a test from a rated match by them, as it could
    from seeds derived from a public default."""
    return load_tournament(folder).settings.seed if (folder / TOURNAMENT_FILE).is_file() else draw_seed()


def play_versus(
    tournament: Tournament,
    test: SequentialTest,
    folder: Path,
    workers: int | None = None,
    backend: Backend = "local",
    ray_address: str | None = None,
    on_state: Callable[[TestState], None] | None = None,
) -> VersusResult:
    """Play a versus tournament (``versus_tournament``) into ``folder`` until ``test`` decides, or
    resume it there: what ``versus`` and ``ladder test`` both run."""
    check_same_test(folder, test, tournament.episodes)

    def grown(state: TestState) -> None:  # versus.json always holds the state so far
        write_atomically(
            folder / VERSUS_FILE, versus_result(tournament, watch, watch.played, 0).model_dump_json(indent=2)
        )
        if on_state:
            on_state(state)

    watch = Watch(tournament, test, grown)
    summary = play_tournament(
        tournament, folder, workers, backend=backend, ray_address=ray_address, enough=watch.enough
    )
    watch.enough(read_records(folder / RESULTS)[0])  # the episodes that finished after the last one started
    result = versus_result(tournament, watch, summary.episodes_done, len(summary.incomplete))
    write_atomically(folder / VERSUS_FILE, result.model_dump_json(indent=2))
    return result


def check_same_test(folder: Path, test: SequentialTest, episodes: int) -> None:
    """Refuse to resume a test at other levels (chosen after seeing its pairs, they would void its
    error rates) or with a lower cap than it has: ``versus.json`` holds what it started with."""
    path = folder / VERSUS_FILE
    if not path.is_file():
        return
    try:
        held = VersusResult.model_validate_json(path.read_text())
    except (OSError, ValueError):
        raise SpecError(f"{path} is not a versus result this policybox can read") from None
    if (held.alpha, held.beta, held.effect) != (test.alpha, test.beta, test.effect):
        raise SpecError(
            f"{folder} holds a test at alpha {held.alpha:g}, beta {held.beta:g}, effect {held.effect:g}: a test's "
            "levels are fixed when it starts (changed after seeing its pairs, they void its error rates). "
            "Give the same levels to resume it, or another --out"
        )
    if episodes < held.max_episodes:
        raise SpecError(
            f"{folder} holds a test of up to {held.max_episodes} episodes: --max-episodes must be at least that"
        )


def sequential_test(alpha: float, beta: float, effect: float) -> SequentialTest:
    """The test at these levels; a level or effect out of range is the user's mistake, named."""
    if not 0 < alpha < 0.5:
        raise SpecError(f"--alpha must be between 0 and 0.5, not {alpha}")
    if not 0 < beta < 0.5:
        raise SpecError(f"--beta must be between 0 and 0.5, not {beta}")
    if not effect > 0:
        raise SpecError(f"--effect must be above 0 (in standard deviations of B - A), not {effect}")
    return SequentialTest(alpha=alpha, beta=beta, effect=effect)


def versus_result(tournament: Tournament, watch: Watch, played: int, incomplete: int) -> VersusResult:
    """The run's result from its watch: the state at its verdict's pair, or at the last pair."""
    state = watch.state
    verdict: Verdict = state.verdict
    if not watch.decided:  # every pair played, or some that could not be: the next run plays them
        verdict = "undecided at the cap" if state.pairs == watch.pairs else "undecided"
    return VersusResult(
        a=watch.a,
        b=watch.b,
        against=tournament.keys[2:],
        verdict=verdict,
        pairs=state.pairs,
        episodes=2 * state.pairs,
        played=played,
        max_episodes=tournament.episodes,
        estimate=finite(state.estimate),
        low=finite(state.low),
        high=finite(state.high),
        alpha=watch.test.alpha,
        beta=watch.test.beta,
        effect=watch.test.effect,
        statistic=finite(state.statistic),
        bounds=(state.lower, state.upper),
        failures=watch.failures,
        incomplete=incomplete,
        scored=watch.scored,
    )


def finite(value: float) -> float | None:
    """A number for JSON: None for an unbounded end or an infinite statistic (and nan)."""
    return value if math.isfinite(value) else None
