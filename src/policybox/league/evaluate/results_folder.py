"""Many isolated episodes of a tournament, played in parallel, into a results folder that survives crashes.

The driver (this process) owns the output folder: it stores the tournament (``tournament.json``),
appends each finished episode to ``results.jsonl`` (see ``policybox.league.evaluate.journal``) and writes
``summary.json``. Episodes are played by worker processes (``policybox.league.play.worker_pool``: fresh
interpreters, each holding one zygote for all its episodes and pinned to one CPU, so that its host
loop and its cells wake each other on the same core) or by Ray tasks. An episode is a pure function
of the tournament and its index (``policybox.league.play.tournament``): which worker plays it, and when, changes
nothing in its result.

An entrant with a setup script (``policybox.files.setup_scripts``) has it run once, in a cell, before any
episode, into ``setup/`` in the output folder; its episodes play the result, and a resume reuses it.

A policy's failure is part of its episode's result. A failure of the machinery -- a zygote that
dies, a worker process that is lost -- is retried, up to ``MAX_ATTEMPTS`` plays in all; an episode
that still fails is listed in the summary as incomplete and played again by the next run.

A full disk is no such failure: whether the driver cannot write the folder or a worker cannot
write an episode's logs or replay there, retrying would fail the same way. The tournament stops
with ``StorageFull``, saying how many episodes are kept (every line already in ``results.jsonl``
stays as it was) and whether ``summary.json`` could be written; with room again, the same call
resumes.

Interrupted (Ctrl-C, SIGTERM), the driver stops its workers within seconds; every episode already
in ``results.jsonl`` is kept, and the same call resumes.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from policybox.errors import SpecError
from policybox.files.environments import with_environments
from policybox.files.setup_scripts import prepared
from policybox.league.choices import Backend, RankBy, Seating
from policybox.league.evaluate.journal import RESULTS, ResultsJournal, read_records
from policybox.league.play.backends import open_runner
from policybox.league.play.runner import EpisodeJob, EpisodeRunner, play_all
from policybox.league.play.seating import whole_cycles
from policybox.league.play.tournament import Tournament, entrants
from policybox.league.stats.final_placings import rank_records
from policybox.league.views.summary import Summary, summarize
from policybox.results import EpisodeRecord, EpisodeResult
from policybox.settings import DEFAULT_AGENTS, EpisodeSettings, agent_count
from policybox.spec import PolicySpec
from policybox.storage import StorageFull, write_atomically, writing

TOURNAMENT_FILE = "tournament.json"
SUMMARY_FILE = "summary.json"
SETUP_FOLDER = "setup"  # what entrants' setup scripts made, by content: any tournament in the folder may use it
ENVIRONMENTS_FOLDER = "environments"  # entrants' requirements, built once each (policybox.files.environments)


class TournamentMismatch(SpecError):
    """The output folder holds another tournament's results; nothing in it was touched."""


@dataclass
class Progress:
    """What a progress display needs, updated by the driver after every episode."""

    total: int
    done: int = 0
    kept: int = 0  # episodes already in the folder when this run started
    failures: int = 0  # agents that ended in another status than ok, so far
    started: float = field(default_factory=time.monotonic)

    @property
    def rate(self) -> float | None:
        """Episodes played per second by this run, once it has played one."""
        elapsed = time.monotonic() - self.started
        return (self.done - self.kept) / elapsed if elapsed > 0 and self.done > self.kept else None


def evaluate(
    policies: Sequence[str | PolicySpec | dict[str, Any]],
    out: str | Path,
    episodes: int = 12,
    agents: int | None = None,
    seating: Seating = "rotate",
    workers: int | None = None,
    replays: bool = False,
    backend: Backend = "local",
    ray_address: str | None = None,
    rank_by: RankBy = "forfeit",
    final: bool = False,
    **settings: Any,
) -> Summary:
    """Play a tournament and return its leaderboard: the Python form of ``policybox evaluate``.

    ``policies`` are ``-p`` strings, PolicySpecs or spec mappings; ``settings`` are the options of
    ``policybox run`` by name (``steps=200``, ``seed=3``, ``act_timeout_ms=500``, ``sandbox="strict"``).
    ``agents``: the game's own number by default, 4 for games of any size (arena, navigation).
    ``backend="ray"`` plays the episodes on a Ray cluster (``ray_address``, or a Ray started for the
    run). ``rank_by``: ``forfeit`` (a failed agent forfeits its episode) or ``reward`` (the game's
    reward alone; see ``policybox.league.ranking``). ``final=True`` plays a final: balanced
    seating, ``episodes`` rounded up to whole cycles (``seating.cycle``), and the summary's ``final``
    ranking (``policybox.league.stats.final_placings``). Calling it again with the same arguments resumes into
    ``out``, whatever the backend; with more ``episodes``, it grows the tournament."""
    sources = [p.model_dump() if isinstance(p, PolicySpec) else p for p in policies]
    episode_settings = EpisodeSettings.from_options(settings)
    tournament = Tournament(
        entrants=entrants(sources),
        episodes=episodes,
        agents=agent_count(episode_settings, agents, DEFAULT_AGENTS),
        seating=seating,
        settings=episode_settings,
        rank_by=rank_by,
    )
    if final:
        tournament = as_final(tournament)
    return play_tournament(tournament, Path(out), workers, replays, backend=backend, ray_address=ray_address)


def as_final(tournament: Tournament) -> Tournament:
    """The tournament as a final: balanced seating, its episodes rounded up to whole cycles."""
    episodes = whole_cycles(tournament.episodes, len(tournament.entrants), tournament.agents)
    return tournament.model_copy(update={"seating": "balanced", "episodes": episodes})


def play_tournament(
    tournament: Tournament,
    out_dir: Path,
    workers: int | None = None,
    replays: bool = False,
    on_progress: Callable[[Progress], None] | None = None,
    backend: Backend = "local",
    ray_address: str | None = None,
    enough: Callable[[Mapping[int, EpisodeRecord]], bool] | None = None,
) -> Summary:
    """Play every episode of ``tournament`` not yet in ``out_dir`` and return the leaderboard.

    ``backend``: ``local`` (worker processes on this machine) or ``ray`` (each episode a Ray task on
    the cluster at ``ray_address``, or on a Ray started for the run); the results are the same.
    ``enough``, given the finished episodes, stops the tournament early: asked before each episode
    is started, once it says so no more are (those in flight finish and are kept; ``versus`` stops
    on a verdict so). StorageFull when the folder's filesystem is full (see the module's docstring)."""
    with open_runner(backend, workers, ray_address, tournament.settings, most=tournament.episodes) as runner:
        settings = tournament.settings
        if replays:  # a game without replays (or a backend that cannot keep them) refuses them here
            settings = settings.model_copy(update={"replay": str(out_dir / "replays" / "check.json.z")})
        playing = _set_up(tournament, out_dir)
        # A misspelt shorthand, a game or a policy that cannot be built: refused before anything is touched.
        runner.check(_still_to_play(playing, out_dir), settings, tournament.agents)
        try:
            folder = claim_folder(out_dir, tournament)
        except StorageFull as full:
            raise full.with_outcome("no episode was played", "run the same command", out_dir) from None
        try:
            records, incomplete = _play_into(runner, playing, folder, replays, on_progress, enough)
        except StorageFull as full:
            raise _stopped(full, tournament, folder) from None
    try:
        return _write_summary(tournament, folder, records, incomplete)
    except StorageFull as full:
        kept = f"all {len(records)} finished episodes are kept, but not their {SUMMARY_FILE}"
        raise full.with_outcome(kept, "run the same command to write it", folder) from None


def _set_up(tournament: Tournament, out_dir: Path) -> Tournament:
    """The tournament as its episodes play it: each entrant with a setup script given the spec of what
    its script made, once, in ``out_dir/setup/`` (PolicyRefused if it fails), and each with requirements
    its environment, built once in ``out_dir/environments/`` (EnvironmentRefused). What is stored and shown
    keeps the entrants as given. A folder the tournament cannot take is refused first, untouched."""
    specs = [entrant.spec for entrant in tournament.entrants]
    if not any(spec.setup_script or spec.requirements for spec in specs):
        return tournament
    _check_claimable(out_dir, tournament)
    ready = prepared(specs, tournament.settings, out_dir / SETUP_FOLDER)
    ready = with_environments(ready, tournament.settings, out_dir / ENVIRONMENTS_FOLDER)
    entrants = [
        entrant.model_copy(update={"spec": spec}) for entrant, spec in zip(tournament.entrants, ready, strict=True)
    ]
    return tournament.model_copy(update={"entrants": entrants})


def _still_to_play(tournament: Tournament, out_dir: Path) -> list[PolicySpec]:
    """The specs of the entrants with a seat in an episode the folder does not hold yet (all of them
    for a new folder): a finished tournament is summarised again without building any policy."""
    done = read_records(out_dir / RESULTS)[0] if (out_dir / TOURNAMENT_FILE).is_file() else {}
    seats = tournament.seat_maps()
    playing = sorted(
        {index for episode in range(tournament.episodes) if episode not in done for index in seats[episode]}
    )
    return [tournament.entrants[index].spec for index in playing]


def _play_into(
    runner: EpisodeRunner,
    tournament: Tournament,
    folder: Path,
    replays: bool,
    on_progress: Callable[[Progress], None] | None,
    enough: Callable[[Mapping[int, EpisodeRecord]], bool] | None,
) -> tuple[list[EpisodeRecord], dict[int, str]]:
    """Play the episodes not yet in ``folder``'s journal (until ``enough``): every finished one, and the incomplete."""
    seats = tournament.seat_maps()
    with ResultsJournal(folder) as journal:
        todo = [episode for episode in range(tournament.episodes) if episode not in journal.records]
        progress = Progress(total=tournament.episodes, done=len(journal.records), kept=len(journal.records))
        progress.failures = sum(_failures(record) for record in journal.records.values())
        if on_progress:
            on_progress(progress)

        def finished(episode: int, result: EpisodeResult) -> None:
            keys = [tournament.entrants[index].key for index in seats[episode]]
            record = EpisodeRecord(**result.model_dump(), episode=episode, seats=keys)
            if journal.append(record):
                progress.done += 1
                progress.failures += _failures(record)
            if on_progress:
                on_progress(progress)

        jobs = {episode: episode_job(tournament, seats[episode], folder, episode, replays) for episode in todo}
        incomplete = play_all(runner, jobs, finished, lambda: enough is not None and enough(journal.records))
        return list(journal.records.values()), incomplete


def episode_job(tournament: Tournament, seats: list[int], folder: Path, episode: int, replays: bool) -> EpisodeJob:
    """Episode ``episode`` of the tournament as a job: its seats' specs, its own seed, its logs (and
    replay) under ``folder``."""
    name = f"episode-{episode:05d}"
    update: dict[str, Any] = {"seed": tournament.episode_seed(episode)}
    if replays:
        update["replay"] = str(folder / "replays" / f"{name}.json.z")
    return EpisodeJob(
        name=name,
        specs=[tournament.entrants[index].spec for index in seats],
        entrants=[tournament.entrants[index].key for index in seats],
        settings=tournament.settings.model_copy(update=update),
        log_dir=str(folder / "logs" / name),
    )


def _write_summary(
    tournament: Tournament, folder: Path, records: list[EpisodeRecord], incomplete: dict[int, str]
) -> Summary:
    summary = _with_final(
        tournament,
        records,
        summarize(
            [(e.key, e.spec) for e in tournament.entrants], records, tournament.episodes, incomplete, tournament.rank_by
        ),
    )
    write_atomically(folder / SUMMARY_FILE, summary.model_dump_json(indent=2))
    return summary


def _stopped(full: StorageFull, tournament: Tournament, folder: Path) -> StorageFull:
    """The error a tournament stopped by a full disk ends with: how many episodes are kept, and
    whether their summary could be written too."""
    records, _ = read_records(folder / RESULTS)
    kept = f"{len(records)} of {tournament.episodes} episodes are kept"
    try:
        _write_summary(tournament, folder, list(records.values()), {})
    except StorageFull:
        kept += f" ({SUMMARY_FILE} could not be updated)"
    else:
        kept += f" ({SUMMARY_FILE} is up to date)"
    return full.with_outcome(kept, "run the same command to resume", folder)


def load_summary(out_dir: Path) -> Summary:
    """The leaderboard of a results folder, computed again from its files (with the episodes its last
    run could not complete that are still not done)."""
    tournament = load_tournament(out_dir)
    records, _ = read_records(out_dir / RESULTS)
    try:
        entries = [(e.key, e.spec) for e in tournament.entrants]
        incomplete = _still_incomplete(out_dir, set(records))
        board = summarize(entries, list(records.values()), tournament.episodes, incomplete, tournament.rank_by)
        return _with_final(tournament, list(records.values()), board)
    except ValueError as exc:  # results that do not belong to this tournament (edited by hand?)
        raise SpecError(f"{out_dir / RESULTS} does not match its {TOURNAMENT_FILE}: {exc}") from None


def _with_final(tournament: Tournament, records: list[EpisodeRecord], summary: Summary) -> Summary:
    """The summary, with the final ranking of its episodes when the tournament is a final (seated balanced)."""
    if tournament.seating != "balanced":
        return summary
    return summary.model_copy(update={"final": rank_records(records, tournament.rank_by)})


def load_tournament(out_dir: Path) -> Tournament:
    """The tournament a results folder holds (its entrants with secrets shown as ***)."""
    path = out_dir / TOURNAMENT_FILE
    if not path.is_file():
        raise SpecError(f"{out_dir} holds no tournament (no {TOURNAMENT_FILE})")
    try:
        return Tournament.model_validate_json(path.read_text())
    except (OSError, ValueError):
        raise SpecError(f"{path} is not a tournament this policybox can read") from None


def _still_incomplete(out_dir: Path, done: set[int]) -> dict[int, str]:
    """The episodes the last run's summary lists as incomplete, and why, that the journal still lacks
    (the journal alone says which episodes finished, not why one could not)."""
    try:
        listed = json.loads((out_dir / SUMMARY_FILE).read_text()).get("incomplete") or {}
        return {int(episode): str(why) for episode, why in listed.items() if int(episode) not in done}
    except (OSError, ValueError, AttributeError):  # no summary yet, or one this policybox cannot read
        return {}


def claim_folder(out_dir: Path, tournament: Tournament) -> Path:
    """The output folder for this tournament: new, or holding this same tournament (a resume), or
    holding its first episodes (it grows: more episodes of the same tournament are appended).

    The stored ``tournament.json`` shows specs with secrets masked; the fingerprint beside it, a hash
    of the entrants in full, decides whether they are the same. Anything else that differs is named
    in the refusal, and nothing in the folder is touched."""
    stored = out_dir / TOURNAMENT_FILE
    if _check_claimable(out_dir, tournament):
        with writing(stored):  # the number of episodes and the ranking rule may have changed
            write_atomically(stored, json.dumps(tournament.public(), indent=2))
        return out_dir
    with writing(out_dir, "creating"):
        out_dir.mkdir(parents=True, exist_ok=True)
    fingerprint = stored.with_suffix(".fingerprint")
    try:
        write_atomically(fingerprint, tournament.entrants_fingerprint() + "\n")
        write_atomically(stored, json.dumps(tournament.public(), indent=2))
    except StorageFull:
        fingerprint.unlink(missing_ok=True)  # the folder stays empty, so the same command can claim it again
        raise
    return out_dir


def _check_claimable(out_dir: Path, tournament: Tournament) -> bool:
    """Refuse, touching nothing, a folder this tournament cannot take; whether it holds it already. A
    folder holding only ``setup/`` and ``environments/`` (what setup scripts and requirements made, by
    content) counts as empty."""
    if out_dir.exists() and not out_dir.is_dir():
        raise SpecError(f"--out {out_dir} is a file, not a folder")
    if (out_dir / TOURNAMENT_FILE).exists():
        _check_same(out_dir, tournament)
        return True
    if out_dir.exists() and any(entry.name not in (SETUP_FOLDER, ENVIRONMENTS_FOLDER) for entry in out_dir.iterdir()):
        raise TournamentMismatch(f"--out {out_dir} is a folder with other files in it; give a new or empty folder")
    return False


def _check_same(out_dir: Path, tournament: Tournament) -> None:
    """Refuse a folder holding another tournament, naming what differs; or fewer episodes than it has."""
    try:
        previous = Tournament.model_validate_json((out_dir / TOURNAMENT_FILE).read_text())
    except (OSError, ValueError):
        raise TournamentMismatch(f"{out_dir} holds a {TOURNAMENT_FILE} this policybox cannot read") from None
    fingerprint = out_dir / (Path(TOURNAMENT_FILE).stem + ".fingerprint")
    same_entrants = fingerprint.is_file() and fingerprint.read_text().strip() == tournament.entrants_fingerprint()
    # A folder of an older policybox kept a hash of everything: its entrants are the same if they show the
    # same and hide nothing (no env values), and its fingerprint is then brought up to date.
    if not same_entrants and previous.public()["entrants"] == tournament.public()["entrants"]:
        same_entrants = not any(entrant.spec.env for entrant in tournament.entrants)
        if same_entrants:
            write_atomically(fingerprint, tournament.entrants_fingerprint() + "\n")
    differences = tournament.differences(previous)
    if not same_entrants and not any(d.startswith("policies") for d in differences):
        differences.insert(0, "policies (the same as shown, with other secrets)")
    if differences:
        raise TournamentMismatch(
            f"{out_dir} holds another tournament, which differs in: {'; '.join(differences)}. "
            "Use another --out folder, or the same policies and settings to resume or grow it"
        )
    if tournament.episodes < previous.episodes:
        raise TournamentMismatch(
            f"{out_dir} holds {previous.episodes} episodes of this tournament; --episodes must be at least "
            f"{previous.episodes} (evaluate --summary {out_dir} shows its leaderboard)"
        )


def _failures(record: EpisodeRecord) -> int:
    return sum(agent.status != "ok" for agent in record.agents)
