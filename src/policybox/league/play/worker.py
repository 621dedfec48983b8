"""A worker: a process that plays episodes for a driver, ``python -I -m policybox.league.play.worker --fd N``.

It holds what playing needs between episodes -- one zygote per set of preloaded modules
(``Player``, which a Ray worker on a node holds too) -- and serves its driver over the socket it
inherits as fd N, one message at a time (``multiprocessing.connection`` framing; the driver and its
workers are one program, and no policy code runs in a worker, only in its cells):

    driver -> worker   ("start", memory budget, CPU index)
                       ("check", specs, settings, agents)  |  ("play", key, EpisodeJob JSON)  |  ("stop",)
                       ("setup", key, prepare_version's arguments)
    worker -> driver   ("checked", None or the exception)
                       ("played", key, EpisodeResult JSON)  |  ("set up", key, SetupOutcome)
                       ("failed", key, the exception)

A ladder runs its versions' setup scripts and builds their environments in workers of their own
(``files.setup_scripts.prepare_version``: one version at a time each, beside the workers that play
matches), so that a slow script or build never holds up play.

A worker is a fresh interpreter, never a re-import of its caller's ``__main__`` (multiprocessing's
spawn does that, so a script without an ``if __name__ == "__main__":`` guard could not evaluate). It
dies with its driver (``PR_SET_PDEATHSIG``); SIGTERM ends it cleanly: the episode it plays stops
and every cell with it, then its zygote.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import os
import pickle
import signal
import sys
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from policybox.episode import check_playable, check_policies, run_episode
from policybox.files.setup_scripts import prepare_version
from policybox.host.budget import Budget, adopt
from policybox.host.zygote import Zygote, ZygoteError
from policybox.league.play.runner import EpisodeJob
from policybox.results import EpisodeResult
from policybox.settings import EpisodeSettings, zygote_preload
from policybox.spec import PolicySpec
from policybox.storage import writing

PR_SET_PDEATHSIG = 1


class Player:
    """Plays episodes in this process, each with a zygote of the modules its settings preload
    (kept for the next episode that preloads the same)."""

    def __init__(self) -> None:
        self._zygote: Zygote | None = None

    def zygote_for(self, settings: EpisodeSettings) -> Zygote | None:
        if settings.mode != "process" or settings.launcher != "zygote":
            return None
        preload = zygote_preload(settings)
        if self._zygote is not None and self._zygote.preload != preload:
            self.close()
        if self._zygote is None:
            self._zygote = Zygote(preload)
        return self._zygote

    def close(self) -> None:
        if self._zygote is not None:
            self._zygote.close()
            self._zygote = None

    def check(self, specs: list[PolicySpec], settings: EpisodeSettings, agents: int) -> None:
        """What an episode of these specs and settings would refuse, before any: a ``--preload`` or
        shorthand that does not exist, a game that cannot be built (or cannot write the replays asked
        for), a policy that cannot be built in its cell (``PolicyRefused``)."""
        zygote = self.zygote_for(settings)  # a --preload that cannot be imported: ZygoteError says so
        check_playable(specs, settings, agents)
        check_policies(specs, settings.model_copy(update={"replay": None}), agents, zygote)

    def play(self, job: EpisodeJob) -> EpisodeResult:
        """Play one episode: its logs (and its replay, if it asks for one) where the job says."""
        if job.settings.replay is not None:
            with writing(Path(job.settings.replay).parent, "creating"):
                Path(job.settings.replay).parent.mkdir(exist_ok=True)
        try:
            zygote = self.zygote_for(job.settings)
            return run_episode(job.specs, job.settings, job.log_dir, zygote=zygote, entrants=job.entrants)
        except ZygoteError:
            self.close()  # the next episode starts a fresh one
            raise


def serve(connection: Connection) -> None:
    """Take the start message, then answer checks and episodes until told to stop (or the driver goes)."""
    _, budget, cpu = connection.recv()
    _start(budget, cpu)
    player = Player()
    try:
        while True:
            try:
                message = connection.recv()
            except EOFError:
                return  # the driver is gone
            if message[0] == "stop":
                return
            if message[0] == "check":
                connection.send(("checked", _attempt(lambda message=message: player.check(*message[1:]))))
                continue
            if message[0] == "setup":
                key, done = message[1], "set up"
                outcome = _attempt(lambda arguments=message[2]: prepare_version(*arguments))
            else:
                key, job, done = message[1], EpisodeJob.model_validate_json(message[2]), "played"
                outcome = _attempt(lambda job=job: player.play(job).model_dump_json())
            connection.send(("failed" if isinstance(outcome, BaseException) else done, key, outcome))
    finally:
        player.close()


def _start(budget: Budget | None, cpu: int) -> None:
    """Take one CPU (its cells inherit it: wake-ups stay on one core) and put its cells into the
    driver's memory budget."""
    cpus = sorted(os.sched_getaffinity(0))
    os.sched_setaffinity(0, {cpus[cpu % len(cpus)]})
    if budget is not None:
        adopt(budget)


def _attempt(action: Any) -> Any:
    """What ``action()`` returned, or the exception it raised, made safe to send (an exception that
    cannot be pickled, say one of a game's own, is sent as a RuntimeError naming it)."""
    try:
        return action()
    except Exception as exc:
        try:
            pickle.dumps(exc)
        except Exception:
            return RuntimeError(f"{type(exc).__name__}: {exc}")
        return exc


def _terminated(signum: int, frame: Any) -> None:
    raise SystemExit(128 + signum)  # unwinds the episode: its cells are stopped on the way out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="policybox.league.play.worker", description=__doc__)
    parser.add_argument("--fd", type=int, required=True)
    parser.add_argument("--parent-pid", type=int, required=True)
    args = parser.parse_args(argv)
    ctypes.CDLL(None).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != args.parent_pid:
        return 1  # the driver died before the parent-death signal was armed
    signal.signal(signal.SIGTERM, _terminated)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the driver alone decides when its workers stop
    with Connection(args.fd) as connection, contextlib.suppress(EOFError, ConnectionError):
        serve(connection)  # EOFError, ConnectionError: the driver is gone, nothing to tell anyone
    return 0


if __name__ == "__main__":
    sys.exit(main())
