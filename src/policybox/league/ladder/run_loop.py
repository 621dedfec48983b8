"""``ladder run``: qualify what is queued, choose matches, play them, store each with its ratings.

The loop, until stopped (or until ``matches`` have been played):

1. **Recover.** Matches scheduled but not stored by a run that was killed are played first, with
   the seed and seats they were given.
2. **Qualify.** Each queued version runs its setup script in a cell (if it has one) and plays a
   validation episode with a copy of itself in every seat, under the ladder's settings (as Kaggle
   does). It qualifies when every agent ends ``ok`` and the game raised nothing; otherwise it is
   ``rejected`` with the reason (``life.verdict``: status, step, the traceback or log tail). A failure of the
   machinery is retried, ``MAX_ATTEMPTS`` plays in all; a version whose qualification it fails every
   time is rejected saying so (``life.platform_failed``), never left to fail again at every turn.
   Setup scripts, and the builds of versions'
   environments (``files.environments``: a version that declares requirements), run beside play, in
   worker processes of their own (``setup_workers`` of them, started when the first is to run:
   ``files.setup_scripts.prepare_version``): matches go on being played and stored while a script
   runs or uv builds. A team has one setup or build at a time, so that its slow builds (each may
   take ``BUILD_TIMEOUT_S``) never keep other teams' versions waiting behind them. A script that
   fails or a build that cannot be made rejects the version with a reason whose first line, all the
   public sees, says why in plain words (``EnvironmentRefused.public``: no host path, no uv output);
   what the script printed and uv's words are its setup output, which only its team sees. A run that
   stops stops the scripts still running (their cells with them); their versions stay queued, for
   the next run.
3. **Match.** While a worker is free: ``matchmaking.choose`` picks the versions and seats from the
   database's state, the match is stored as scheduled with a seed drawn at random (``draw_seed``, as
   every qualification's and final's is: a policy cannot tell them apart; a kill cannot lose it), then
   played. With
   ``max_matches_per_hour`` N, no match is scheduled while N were in the last hour (counted from the
   stored matches, so a run that restarts counts those of the one before): the run waits, and says so.
4. **Store.** Each match is stored with every rating it changed in one transaction, in the order
   matches were scheduled (a result that arrives early waits for the ones before it), so the
   ratings are a replay of the stored results in id order -- what ``ladder rerate`` recomputes.
   A match the machinery fails ``MAX_ATTEMPTS`` times is void: it counts for nobody. So is a match
   whose data the database refuses (the run goes on: that is the match's fault, not the machine's;
   a database that cannot be used at all stops the run with its one message), and a match that
   seats a retired name (a retired name never plays: a killed run's match is voided, not replayed).
   What a policy does is never a void: everything a cell sends is that agent's data or its failure
   (``policybox.host.process_pool``), and every text it controls is stored as it is
   (``schema.storable``). Still, a version with ``suspend_after`` void matches in a row is suspended
   (``life.void_suspension``): one that is in every void match is the likeliest cause.

**Scrimmages** (``policybox.league.ladder.scrimmage``: unrated matches a team asked for) are played
beside the rated ones, oldest first, one at a time, in a slot of their own: the rated matches keep
every other slot (a worker takes ``IN_FLIGHT_PER_WORKER`` in flight, so at least one), and so never
wait behind more than one scrimmage. A scrimmage's result is stored alone -- no rating, counter or
streak changes, and ``max_matches_per_hour`` and ``--matches`` count rated matches only (a run with
``--matches`` plays the scrimmages waiting before it ends). One that seats a retired name is void, as
is one the machinery fails ``MAX_ATTEMPTS`` times. While a final is open, they wait too.

Submissions that arrive while it runs (``ladder submit`` from another process) are picked up at the
next turn of the loop. At every turn the run tells the others what it does -- playing or idle, the
matches in flight, its rate -- through its heartbeat (``heartbeat``), which also says when it stopped.

**While a final is open** (``ladder final``, ``policybox.league.ladder.final``: opened, not yet
finished), the run neither qualifies nor schedules: no rated match is played and new submissions
wait in the queue, so the field the final froze is the field that plays, until the final is done.
"""

from __future__ import annotations

import contextlib
import time
from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, wait
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from sqlalchemy import Connection
from sqlalchemy.exc import DataError, IntegrityError

from policybox.files.setup_scripts import SetupOutcome
from policybox.files.version_files import Stored
from policybox.league import ranking
from policybox.league.choices import Backend
from policybox.league.ladder import (
    final_store,
    heartbeat,
    life,
    match_store,
    matchmaking,
    retention,
    scrimmage,
    scrimmage_store,
    stamp,
    team_store,
    version_store,
)
from policybox.league.ladder.database import LadderError, transaction
from policybox.league.ladder.folder import HOUR, LOGS, REPLAYS, LadderFolder
from policybox.league.ladder.settings import LadderSettings
from policybox.league.play.backends import open_runner, shared_budget
from policybox.league.play.runner import (
    IN_FLIGHT_PER_WORKER,
    MAX_ATTEMPTS,
    EpisodeJob,
    EpisodeRunner,
    failure,
    play_again,
)
from policybox.league.play.tournament import draw_seed
from policybox.league.play.worker_pool import LocalWorkers, local_workers
from policybox.lines import clip, first_line
from policybox.results import EpisodeResult
from policybox.settings import REPLAY_SUFFIX
from policybox.spec import PolicySpec

# What a database raises when it refuses one match's or version's data (a value it cannot hold, a
# constraint or trigger of the operator's): that record is given up, the run goes on. Anything else
# it raises (a lost server, a read-only file, a full disk) stops the run.
REFUSALS = (DataError, IntegrityError)
POLL_S = 1.0  # how often an idle run looks for new submissions
COMMAND = "ladder run"  # what its lock and its heartbeat say runs


@dataclass
class Progress:
    """What a progress line shows, updated as the run goes."""

    played: int = 0  # matches stored by this run
    void: int = 0  # matches this run voided (the machinery failed them, the database refused them, ...)
    qualified: int = 0
    rejected: int = 0
    suspended: int = 0
    in_flight: int = 0
    started: float = field(default_factory=time.monotonic)
    note: str = ""  # what the run is waiting for, if it is idle


@dataclass
class _Match:
    id: int
    seed: int
    seats: list[int]
    attempts: int = 0


@dataclass
class _Scrimmage:
    id: int
    seed: int
    seats: list[int]
    attempts: int = 0


@dataclass(frozen=True)
class _Void:
    """Why a match is void, and whether it counts in its versions' void streaks (a retired name's
    does not: the organiser's decision, nobody's fault)."""

    why: str
    counted: bool = True


@dataclass
class _Setup:
    version: version_store.Version
    stored: Stored  # as submitted: its setup script still to run, its environment still to build
    out: Path  # where what it makes is kept
    team: str | None  # whose it is (None: the organiser's): a team has one setup or build at a time
    attempts: int = 0


@dataclass
class _Qualification:
    version: version_store.Version
    stored: Stored  # what its cells are given: after its setup script, if it has one
    setup_output: str | None
    attempts: int = 0


def run(
    ladder: LadderFolder,
    matches: int | None = None,
    workers: int | None = None,
    backend: Backend = "local",
    ray_address: str | None = None,
    on_progress: Callable[[Progress], None] | None = None,
) -> Progress:
    """Run the ladder until stopped, or until ``matches`` more matches are stored (played, or void); how it went."""
    if ladder.settings.writes_replays and backend == "ray":
        raise LadderError(
            "this ladder writes replays, which --backend ray cannot: they would be written on the nodes "
            "(a ladder made with --no-replays writes none)"
        )
    with (
        ladder.running(COMMAND),
        open_runner(backend, workers, ray_address, ladder.settings.settings) as runner,
        heartbeat.beating(ladder.engine, COMMAND) as heart,  # once its workers are up: a Ray cluster's may take long
    ):
        loop = _Loop(ladder, runner, matches, on_progress or (lambda progress: None), heart)
        with loop.setup_workers():
            loop.run()
        return loop.progress


def matchmaking_rules(settings: LadderSettings) -> matchmaking.Rules:
    """The rules ``matchmaking.choose`` follows for a ladder with these settings."""
    return matchmaking.Rules(
        seats=settings.agents,
        versions_per_match=settings.versions_per_match,
        placement=settings.placement_matches,
        seating=settings.seating,
        seed=settings.settings.seed,
    )


class _Loop:
    def __init__(
        self,
        ladder: LadderFolder,
        runner: EpisodeRunner,
        limit: int | None,
        report: Callable[[Progress], None],
        heart: heartbeat.Heart | None = None,
    ) -> None:
        self.ladder, self.runner, self.limit, self.report = ladder, runner, limit, report
        self.heart = heart or heartbeat.Heart(ladder.engine, COMMAND)  # a loop driven alone beats as a run's does
        self.settings = ladder.settings
        self.progress = Progress()
        self.in_flight: dict[Future[str], _Match | _Qualification | _Scrimmage] = {}
        self.order: deque[int] = deque()  # matches in flight or waiting to be stored, in id order
        self.finished: dict[int, EpisodeResult | _Void] = {}  # played (the result) or void, not yet stored
        self.matches: dict[int, _Match] = {}
        self.qualifying: set[int] = set()  # versions whose qualification is under way
        self.scheduled = 0  # matches this run has scheduled
        self.setups: dict[Future[SetupOutcome], _Setup] = {}  # setup scripts running
        self.setup_pool: LocalWorkers | None = None  # their workers, started with the first

    @contextlib.contextmanager
    def setup_workers(self) -> Iterator[None]:
        """Stop the setup workers when the run ends: asked to, or at once (SIGTERM: a script's cell is
        stopped with it) when the run is interrupted or a script still runs -- its version stays
        queued, for the next run."""
        interrupted = True
        try:
            yield
            interrupted = bool(self.setups)
        finally:
            if self.setup_pool is not None:
                self.setup_pool.close(interrupted)

    @property
    def capacity(self) -> int:
        return IN_FLIGHT_PER_WORKER * self.runner.count

    def run(self) -> None:
        with transaction(self.ladder.engine) as connection:
            left = match_store.scheduled(connection)
        for match_id, seed, seats in left:  # a killed run's: played again, as they were (and counted)
            with transaction(self.ladder.engine) as connection:
                if why := _retired_in(connection, seats):  # a retired name never plays: voided instead
                    match_store.void(connection, match_id, why)
                    self.progress.void += 1
                    continue
            self.scheduled += 1
            self._play(_Match(match_id, seed, seats))
        while not self._done():
            self._qualify()
            self._scrimmage()
            self._schedule()
            stored = self.progress.played + self.progress.void
            self._wait()
            self._beat(force=self.progress.played + self.progress.void > stored)
            self.report(self.progress)

    def _beat(self, force: bool) -> None:
        """Tell readers what the run does (``heartbeat``): playing while anything is under way, else idle."""
        works = list(self.in_flight.values())
        matches = [heartbeat.InFlight(match=w.id, seats=w.seats) for w in works if isinstance(w, _Match)]
        qualifying = [w.version.id for w in [*works, *self.setups.values()] if isinstance(w, _Qualification | _Setup)]
        state: heartbeat.State = "playing" if works or self.setups else "idle"
        note = self.progress.note or ("" if state == "playing" else "nothing to play: waiting for submissions")
        self.heart.beat(state, note, matches, qualifying, force)

    def _done(self) -> bool:
        if self.in_flight or self.order:
            return False
        if self.limit is not None and self._in_final():
            return True
        if self.limit is not None and self._next_scrimmage() is not None:
            return False
        if self.limit is not None and self.scheduled >= self.limit:  # each one played or void
            return True
        if self.limit is not None and not self._waiting_for_more():
            self.progress.note = "fewer than two versions can play, and none is qualifying"
            return True
        return False

    def _in_final(self) -> bool:
        """Whether a final is open (see the module's docstring): then the run waits, and says so."""
        with transaction(self.ladder.engine) as connection:
            final = final_store.open_final(connection)
        if final is not None:
            self.progress.note = f"final {final.id} is open: ladder final finishes it; until then no match is played"
        return final is not None

    def _waiting_for_more(self) -> bool:
        """Whether anything may still come of waiting: a version qualifying, or two that can play."""
        with transaction(self.ladder.engine) as connection:
            return (
                bool(version_store.qualifying(connection))
                or len(match_store.candidates(connection, self.settings.agents)) >= 2
            )

    # ---------------------------------------------------------------------------------------------

    def _qualify(self) -> None:
        """Start the qualification of each queued version there is room for: its setup script or build
        in a setup worker (``setup_workers`` at once, one per team: a team's slow builds never keep
        another's versions waiting behind them), or its validation episode in an episode worker."""
        if self._in_final():
            return
        with transaction(self.ladder.engine) as connection:
            waiting = [v for v in version_store.qualifying(connection) if v.id not in self.qualifying]
            teams = {version.name: team_store.owner_of(connection, version.name) for version in waiting}
        for version in waiting:
            if len(self.setups) >= self.settings.setup_workers and len(self.in_flight) >= self.capacity:
                return  # no room for either
            stored = self.ladder.stored(version.id)
            to_prepare = bool(stored.spec.setup_script or stored.spec.requirements)
            team = teams[version.name]  # None: the organiser's
            if to_prepare and len(self.setups) < self.settings.setup_workers and self._free(team):
                out = self.ladder.folder / "versions" / "setup" / f"{version.name}-v{version.number}"
                self.qualifying.add(version.id)
                self._set_up(_Setup(version, stored, out, team))
            elif not to_prepare and len(self.in_flight) < self.capacity:
                self.qualifying.add(version.id)
                self._submit(_Qualification(version, stored, None))

    def _free(self, team: str | None) -> bool:
        """Whether ``team`` may start a setup or build: a team has one at a time; the organiser (None),
        whose submissions are not limited either, any number."""
        return team is None or all(work.team != team for work in self.setups.values())

    def _set_up(self, work: _Setup) -> None:
        if self.setup_pool is None:
            count = self.settings.setup_workers
            self.setup_pool = local_workers(count, shared_budget(self.settings.settings, count), "setup")
        work.attempts += 1
        settings, timeout_s = self.settings.settings, self.settings.setup_timeout_s
        environments = self.ladder.environments.absolute()
        future = self.setup_pool.set_up(work.stored, settings, work.out, timeout_s, environments, work.version.label)
        self.setups[future] = work

    def _set_up_done(self, work: _Setup, future: Future[SetupOutcome]) -> None:
        """A setup script ended: its version is rejected, or plays its validation episode. A failure of
        the machinery runs it again (``MAX_ATTEMPTS`` in all; then the version is rejected, saying so)."""
        try:
            outcome = future.result()
        except Exception as exc:
            if play_again(exc, work.attempts):
                self._set_up(work)
            else:
                self._given_up(work.version, "setup", exc)
            return
        script = work.stored.spec.setup_script is not None
        if not outcome.ok:  # in public its reason's first line; what its script printed and uv said, its team's alone
            reason = outcome.refused or f"its setup script failed: {outcome.output}"
            self._qualified(work.version, False, reason, outcome.output, None)
            return
        setup_output = outcome.output if script else None
        assert outcome.spec is not None  # a preparation that succeeded made one
        files = work.out if script else work.stored.files
        self._submit(_Qualification(work.version, Stored(outcome.spec, work.stored.digest, files), setup_output))

    def _schedule(self) -> None:
        """Choose and store new matches while a worker is free (and the limit is not reached)."""
        if self._in_final():
            return
        rules = matchmaking_rules(self.settings)
        while len(self.in_flight) < self.capacity and (self.limit is None or self.scheduled < self.limit):
            with transaction(self.ladder.engine) as connection:
                if throttled := _throttled(connection, self.settings.max_matches_per_hour):
                    self.progress.note = throttled
                    return
                index = match_store.matches_scheduled(connection)
                seats = matchmaking.choose(match_store.candidates(connection, self.settings.agents), rules, index)
                if seats is None:
                    self.progress.note = "waiting for two versions that can play"
                    return
                seed = draw_seed()  # as every ladder episode's: no policy can tell which kind it plays
                match_id = match_store.schedule(connection, seed, seats)
            self.scheduled += 1
            self.progress.note = ""
            self._play(_Match(match_id, seed, seats))

    def _scrimmage(self) -> None:
        """Start the oldest scrimmage waiting, unless one is in flight already or no slot is free (see
        the module's docstring); one that seats a retired name is void instead."""
        if any(isinstance(work, _Scrimmage) for work in self.in_flight.values()) or self._in_final():
            return
        if len(self.in_flight) >= self.capacity or (found := self._next_scrimmage()) is None:
            return
        work = _Scrimmage(*found)
        with transaction(self.ladder.engine) as connection:
            if why := _retired_in(connection, work.seats):
                scrimmage_store.void_scrimmage(connection, work.id, why)
                return
        self._submit(work)

    def _next_scrimmage(self) -> tuple[int, int, list[int]] | None:
        playing = [work.id for work in self.in_flight.values() if isinstance(work, _Scrimmage)]
        with transaction(self.ladder.engine) as connection:
            return scrimmage_store.next_scrimmage(connection, playing)

    def _scrimmage_played(self, work: _Scrimmage, result: EpisodeResult | None, why: str = "") -> None:
        """Store a scrimmage's result (or why it is void): nothing else changes. Data the database
        refuses makes it void, as a rated match's does."""
        try:
            with transaction(self.ladder.engine) as connection:
                if result is None:
                    scrimmage_store.void_scrimmage(connection, work.id, why)
                else:
                    scrimmage_store.record_scrimmage(connection, work.id, result)
        except REFUSALS as exc:
            with transaction(self.ladder.engine) as connection:
                scrimmage_store.void_scrimmage(connection, work.id, _refused("this scrimmage's data", exc))

    def _play(self, match: _Match) -> None:
        self.matches[match.id] = match
        self.order.append(match.id)
        self._submit(match)

    def _submit(self, work: _Match | _Qualification | _Scrimmage) -> None:
        work.attempts += 1
        self.in_flight[self.runner.submit(self._job(work))] = work
        self.progress.in_flight = len(self.in_flight)

    def _job(self, work: _Match | _Qualification | _Scrimmage) -> EpisodeJob:
        if isinstance(work, _Match | _Scrimmage):
            seats = [(version_id, self.ladder.stored(version_id).spec) for version_id in work.seats]
            name = f"match-{work.id:06d}" if isinstance(work, _Match) else scrimmage.episode_name(work.id)
            return episode_job(self.ladder, name, work.seed, seats, replay=True)
        name = f"qualify-{work.version.name}-v{work.version.number}-{work.attempts}"
        seed = draw_seed()
        seats = [(work.version.id, work.stored.spec)] * self.settings.agents
        return episode_job(self.ladder, name, seed, seats, replay=False)

    # ---------------------------------------------------------------------------------------------

    def _wait(self) -> None:
        if not self.in_flight and not self.setups:
            if not self._done():
                time.sleep(POLL_S)  # idle: new submissions are looked for at the next turn
            return
        futures: list[Future[Any]] = [*self.in_flight, *self.setups]
        done, _ = wait(futures, timeout=POLL_S, return_when=FIRST_COMPLETED)
        self.heart.finished(sum(future in self.in_flight for future in done))  # the rate it plays at
        for future in done:
            if future in self.setups:
                self._set_up_done(self.setups.pop(future), future)
                continue
            work = self.in_flight.pop(future)
            try:
                result = EpisodeResult.model_validate_json(future.result())
            except Exception as exc:
                self._failed(work, exc)
                continue
            if isinstance(work, _Match):
                self.finished[work.id] = result
            elif isinstance(work, _Scrimmage):
                self._scrimmage_played(work, result)
            else:
                self._qualification_played(work, result)
        played = self.progress.played
        self._store_in_order()
        if self.progress.played > played:
            retention.prune(self.ladder)  # the files of matches older than the latest kept ones
        self.progress.in_flight = len(self.in_flight)

    def _failed(self, work: _Match | _Qualification | _Scrimmage, exc: Exception) -> None:
        """Its future raised ``exc``: the user's error is raised (``play_again``); the machinery's (a
        lost worker, a zygote that died) plays it again, or after ``MAX_ATTEMPTS`` makes a void match
        -- rated for nobody, and counted in its versions' void streaks -- or rejects the version
        qualifying, saying why."""
        if play_again(exc, work.attempts):
            self._submit(work)
        elif isinstance(work, _Match):
            self.finished[work.id] = _Void(failure(exc))
        elif isinstance(work, _Scrimmage):
            self._scrimmage_played(work, None, failure(exc))
        else:
            self._given_up(work.version, "validation episode", exc)

    def _given_up(self, version: version_store.Version, what: str, exc: Exception) -> None:
        """The machinery failed ``version``'s ``what`` ``MAX_ATTEMPTS`` times: rejected, with a reason that
        says so (its team may submit it again) and no word of the machinery's (the organiser's note has
        it) -- not left queued, to fail again at every turn."""
        self.progress.note = f"{version.label}'s {what} failed {MAX_ATTEMPTS} times: {failure(exc)}"
        self._qualified(version, False, life.platform_failed(what, MAX_ATTEMPTS), None, None)

    def _store_in_order(self) -> None:
        while self.order and self.order[0] in self.finished:
            match_id = self.order.popleft()
            outcome = self.finished.pop(match_id)
            match = self.matches.pop(match_id)
            void = outcome if isinstance(outcome, _Void) else self._store(match, outcome)
            if void is not None:
                self._void(match_id, void)

    def _void(self, match_id: int, void: _Void) -> None:
        """Store match ``match_id`` as void; each of its versions with ``suspend_after`` void matches in a
        row is suspended (unless the void is a retired name's: nobody's doing)."""
        counted = self.settings.suspend_after if void.counted else None
        with transaction(self.ladder.engine) as connection:
            suspended = match_store.void(connection, match_id, void.why, counted)
        self.progress.void += 1
        self.progress.suspended += len(suspended)

    def _store(self, match: _Match, result: EpisodeResult) -> _Void | None:
        """The match, its ratings and its versions' counters: one transaction. Or why it is void
        instead: a name it seats was retired while it played, or the database refused its data."""
        seated = ((match.seats[agent.agent_id], agent) for agent in result.agents)
        outcomes = ranking.episode_outcomes(seated, result.steps, self.settings.rank_by)
        try:
            with transaction(self.ladder.engine) as connection:
                if why := _retired_in(connection, match.seats):
                    return _Void(why, counted=False)
                rated = ranking.rate(match_store.ratings_of(connection, outcomes), outcomes)
                suspended = match_store.record_match(
                    connection, match.id, match.seats, result, outcomes, rated, self.settings.suspend_after
                )
        except REFUSALS as exc:
            return _Void(_refused("this match's data", exc))
        self.progress.played += 1
        self.progress.suspended += len(suspended)
        return None

    def _qualification_played(self, work: _Qualification, result: EpisodeResult) -> None:
        reason = life.verdict(result)
        self._qualified(work.version, reason is None, reason, work.setup_output, result, work.stored)

    def _qualified(
        self,
        version: version_store.Version,
        ok: bool,
        reason: str | None,
        setup_output: str | None,
        result: EpisodeResult | None,
        stored: Stored | None = None,
    ) -> None:
        """Store how its qualification went -- unless its name was retired meanwhile (it stays queued
        until the name is back). A record the database refuses is replaced by a rejection with the
        platform's reason alone, so that no version stays queued for good."""
        self.qualifying.discard(version.id)
        shown, played = None, None
        if ok and stored is not None:
            self.ladder.keep(version.id, stored)  # later cells are given what its setup script made, if it has one
            shown = stored.spec.redacted().model_dump(mode="json")
            played = stamp.played_digest(stored.spec, self.ladder.folder / "versions")  # what its stamps compare
        try:
            with transaction(self.ladder.engine) as connection:
                if _retired_in(connection, [version.id]):
                    return
                version_store.finish_qualification(connection, version, ok, reason, setup_output, result, shown, played)
        except REFUSALS as exc:
            ok, reason = False, _refused("this version's qualification record", exc)
            with transaction(self.ladder.engine) as connection:
                version_store.finish_qualification(connection, version, False, reason, None, None)
        if ok:
            self.progress.qualified += 1
        else:
            self.progress.rejected += 1


def episode_job(
    ladder: LadderFolder, name: str, seed: int, seats: list[tuple[int, PolicySpec]], replay: bool
) -> EpisodeJob:
    """One episode of the ladder as a job: each seat's version (by id) and the spec it plays, its
    settings (with the ladder's episode limit) and this seed, its logs in ``logs/name``, and its replay
    in ``replays/`` when ``replay`` and the ladder writes replays (a match's and a final's, not a
    qualification's). Each seat plays for its version: two versions never share a cell, even when
    two teams uploaded the same bytes."""
    update: dict[str, object] = {"seed": seed}
    if ladder.settings.writes_replays and replay:
        (replays := ladder.folder / REPLAYS).mkdir(mode=0o700, exist_ok=True)  # the host's alone
        update["replay"] = str(replays / f"{name}{REPLAY_SUFFIX}")
    (logs := ladder.folder / LOGS).mkdir(mode=0o700, exist_ok=True)  # an episode makes the folder in it 0700
    settings = ladder.settings.episode_settings.model_copy(update=update)
    specs, entrants = [spec for _, spec in seats], [f"version-{version_id}" for version_id, _ in seats]
    return EpisodeJob(name=name, specs=specs, entrants=entrants, settings=settings, log_dir=str(logs / name))


def _throttled(connection: Connection, most: int | None) -> str | None:
    """What the run waits for when ``most`` matches were scheduled in the last hour (the throttle); none otherwise."""
    if most is None:
        return None
    now = datetime.now(UTC)
    recent = match_store.scheduled_since(connection, (now - HOUR).isoformat(timespec="seconds"))
    if len(recent) < most:
        return None
    frees = datetime.fromisoformat(recent[len(recent) - most]) + HOUR
    return (
        f"waiting for the throttle: {len(recent)} matches in the last hour (max_matches_per_hour {most}); "
        f"the next at {frees:%H:%M:%S} UTC"
    )


def _retired_in(connection: Connection, seats: list[int]) -> str | None:
    """Why a match (or a qualification) with these versions is not played: the retired names, if any."""
    retired = version_store.retired_among(connection, seats)
    return f"{', '.join(retired)} retired: a retired name never plays" if retired else None


def _refused(what: str, exc: Exception) -> str:
    """The platform's reason for a record the database refused: the first line of its message."""
    orig = getattr(exc, "orig", None) or exc
    line = first_line(str(orig).strip()) or type(orig).__name__
    return f"the database refused {what}: {clip(line, 300)}"
