"""Where a leaderboard's episodes are played, seen from its driver: a job in, a result out.

An episode to play is an ``EpisodeJob`` -- the spec in each seat and the episode's settings (its seed
and replay among them) and where its logs go -- so that whoever plays it needs nothing else: a
worker process here (``policybox.league.play.worker_pool``) or a Ray task on a cluster node
(``policybox.league.play.ray_backend``). The driver alone keeps what the episode means (a tournament's
episode index and seat keys, a ladder's match) and alone writes results.

A policy's failure is part of its episode's result. A failure of the machinery -- a zygote that
dies, a worker process or node that is lost -- fails the job's future: the driver plays it again,
up to ``MAX_ATTEMPTS`` plays in all. An error the user must fix (a game that cannot be reset with a
seed, a full disk: a ``PolicyboxError``) is raised at once, never retried.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from concurrent.futures import FIRST_COMPLETED, Future, wait
from typing import Protocol, TypeVar

from pydantic import BaseModel, Field

from policybox.errors import PolicyboxError
from policybox.host.zygote import ZygoteError
from policybox.results import EpisodeResult
from policybox.settings import EpisodeSettings
from policybox.spec import PolicySpec

MAX_ATTEMPTS = 3
IN_FLIGHT_PER_WORKER = 2  # one episode queued behind the one a worker plays: it never waits for the driver


class EpisodeJob(BaseModel):
    """One episode to play: everything the process that plays it needs."""

    name: str = Field(description="Its name among the driver's episodes (episode-00012, match-000123, ...)")
    specs: list[PolicySpec] = Field(description="The policy in each seat")
    entrants: list[str] = Field(
        description="Whom each seat plays for (a version, an entrant's key): with cells per policy, the seats "
        "of one entrant share a cell, and two entrants never do, even with equal specs"
    )
    settings: EpisodeSettings = Field(description="How it is played; its seed and replay are set")
    log_dir: str = Field(description="Where its agents' logs go, on the machine that plays it")


class EpisodeRunner(Protocol):
    """Where episodes are played: worker processes here, or a Ray cluster."""

    count: int  # episodes played at once

    def __enter__(self) -> EpisodeRunner: ...
    def __exit__(self, *exc: object) -> None: ...
    def check(self, specs: list[PolicySpec], settings: EpisodeSettings, agents: int) -> None:
        """Raise what a user got wrong (a shorthand, a game, a sandbox level, a policy that cannot be
        built, replays of a game without them) before any episode, as a player would find it."""

    def submit(self, job: EpisodeJob) -> Future[str]:
        """Play ``job``; its EpisodeResult as JSON, or a future that fails if the machinery does."""


def is_users(exc: BaseException) -> bool:
    """Whether an exception a job's future raised is the user's to fix (raise it), not the machinery's
    (play the job again): every PolicyboxError but a zygote that died."""
    return isinstance(exc, PolicyboxError) and not isinstance(exc, ZygoteError)


def play_again(exc: Exception, attempts: int) -> bool:
    """The retry rule, for a job (an episode, a setup script) whose future raised ``exc`` after
    ``attempts`` plays: the user's error is raised at once (every later job would fail the same way);
    the machinery's is played again while fewer than ``MAX_ATTEMPTS`` plays were made (True), else
    given up (False)."""
    if is_users(exc):
        raise exc
    return attempts < MAX_ATTEMPTS


def failure(exc: Exception) -> str:
    """Why a job given up failed: the machinery's exception, in one line of type and message."""
    return f"{type(exc).__name__}: {exc}"


Key = TypeVar("Key", bound=Hashable)  # what names a job: an episode's index, a match's id


def play_all(
    runner: EpisodeRunner,
    jobs: dict[Key, EpisodeJob],
    finished: Callable[[Key, EpisodeResult], None],
    enough: Callable[[], bool] = lambda: False,
) -> dict[Key, str]:
    """Play every job (in the dict's order, ``IN_FLIGHT_PER_WORKER`` per worker at once), calling
    ``finished(key, result)`` as each ends; the keys that failed ``MAX_ATTEMPTS`` times, with why.
    Once ``enough()`` (asked before each job is started) is true, no job is started: those in
    flight finish, the rest are left unplayed."""
    attempts = dict.fromkeys(jobs, 0)
    queue = list(reversed(jobs))
    incomplete: dict[Key, str] = {}
    running: dict[Future[str], Key] = {}
    while queue or running:
        while queue and len(running) < IN_FLIGHT_PER_WORKER * runner.count:
            if enough():
                queue.clear()
                break
            key = queue.pop()
            attempts[key] += 1
            running[runner.submit(jobs[key])] = key
        done, _ = wait(running, return_when=FIRST_COMPLETED)
        for future in done:
            key = running.pop(future)
            try:
                finished(key, EpisodeResult.model_validate_json(future.result()))
            except Exception as exc:
                if play_again(exc, attempts[key]):
                    queue.append(key)
                else:
                    incomplete[key] = failure(exc)
    return incomplete
