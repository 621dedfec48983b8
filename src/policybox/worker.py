"""A worker: a process that plays a tournament's episodes, ``python -I -m policybox.worker --fd N``.

It holds what playing needs -- the tournament, where logs go, one zygote for all its episodes
(``EpisodeWorker``, which a Ray worker on a node holds too) -- and serves its driver over the
socket it inherits as fd N, one message at a time (``multiprocessing.connection`` framing; the
driver and its workers are one program, and no policy code runs in a worker, only in its cells):

    driver -> worker   ("start", tournament JSON, folder, replays, memory budget, CPU index)
                       ("check",)  |  ("play", episode)  |  ("stop",)
    worker -> driver   ("checked", None or the exception)
                       ("played", episode, EpisodeRecord JSON)  |  ("failed", episode, the exception)

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
from dataclasses import dataclass
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from policybox.episode import check_playable, check_policies, run_episode, zygote_preload
from policybox.host.budget import Budget, adopt
from policybox.host.zygote import Zygote, ZygoteError
from policybox.results import EpisodeRecord
from policybox.storage import writing
from policybox.tournament import Tournament

PR_SET_PDEATHSIG = 1


@dataclass
class EpisodeWorker:
    """What a process playing episodes holds (a local worker, or a Ray worker on a node): the
    tournament, where to write logs, and its zygote, reused for all its episodes."""

    tournament: Tournament
    folder: Path
    replays: bool
    seat_maps: list[list[int]]
    zygote: Zygote | None = None

    def zygote_for(self) -> Zygote | None:
        settings = self.tournament.settings
        if settings.mode != "process" or settings.launcher != "zygote":
            return None
        if self.zygote is None:
            self.zygote = Zygote(zygote_preload(settings))
        return self.zygote

    def forget_zygote(self) -> None:
        if self.zygote is not None:
            self.zygote.close()
            self.zygote = None

    def check(self) -> None:
        """Check the tournament as an episode would, before any: the errors a user can make -- a
        ``--preload`` or shorthand that does not exist, a game that cannot be built (or cannot write
        the replays asked for), a policy that cannot be built in its cell (``PolicyRefused``)."""
        tournament = self.tournament
        zygote = self.zygote_for()  # a --preload that cannot be imported is the user's to fix: ZygoteError says so
        settings = tournament.settings
        if self.replays:  # a game family without replays refuses to be opened for one
            settings = settings.model_copy(update={"replay": str(self.folder / "replays" / "check.json.z")})
        specs = [entrant.spec for entrant in tournament.entrants]
        check_playable(specs, settings, tournament.agents)
        check_policies(specs, tournament.settings, tournament.agents, zygote)

    def play(self, episode: int) -> EpisodeRecord:
        """Play one episode of the tournament (logs, and replays if asked, under ``folder``)."""
        tournament = self.tournament
        seats = self.seat_maps[episode]
        specs = [tournament.entrants[index].spec for index in seats]
        update: dict = {"seed": tournament.episode_seed(episode)}
        if self.replays:
            with writing(self.folder / "replays", "creating"):
                (self.folder / "replays").mkdir(exist_ok=True)
            update["replay"] = str(self.folder / "replays" / f"episode-{episode:05d}.json.z")
        settings = tournament.settings.model_copy(update=update)
        log_dir = self.folder / "logs" / f"episode-{episode:05d}"
        try:
            result = run_episode(specs, settings, log_dir, zygote=self.zygote_for())
        except ZygoteError:
            self.forget_zygote()  # the next episode starts a fresh one
            raise
        keys = [tournament.entrants[index].key for index in seats]
        return EpisodeRecord(**result.model_dump(), episode=episode, seats=keys)


def serve(connection: Connection) -> None:
    """Take the start message, then answer checks and episodes until told to stop (or the driver goes)."""
    _, tournament_json, folder, replays, budget, cpu = connection.recv()
    worker = _started(tournament_json, folder, replays, budget, cpu)
    try:
        while True:
            try:
                message = connection.recv()
            except EOFError:
                return  # the driver is gone
            if message[0] == "stop":
                return
            if message[0] == "check":
                connection.send(("checked", _attempt(worker.check)))
            else:
                episode = message[1]
                outcome = _attempt(lambda episode=episode: worker.play(episode).model_dump_json())
                failed = isinstance(outcome, BaseException)
                connection.send(("failed" if failed else "played", episode, outcome))
    finally:
        worker.forget_zygote()


def _started(tournament_json: str, folder: str, replays: bool, budget: Budget | None, cpu: int) -> EpisodeWorker:
    """Take one CPU (its cells inherit it: wake-ups stay on one core), put its cells into the driver's
    memory budget, hold the tournament, and start its zygote now, while the driver checks."""
    cpus = sorted(os.sched_getaffinity(0))
    os.sched_setaffinity(0, {cpus[cpu % len(cpus)]})
    if budget is not None:
        adopt(budget)
    tournament = Tournament.model_validate_json(tournament_json)
    worker = EpisodeWorker(tournament, Path(folder), replays, tournament.seat_maps())
    with contextlib.suppress(ZygoteError):  # if it fails, the check or the first episode says why
        worker.zygote_for()
    return worker


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
    parser = argparse.ArgumentParser(prog="policybox.worker", description=__doc__)
    parser.add_argument("--fd", type=int, required=True)
    parser.add_argument("--parent-pid", type=int, required=True)
    args = parser.parse_args(argv)
    ctypes.CDLL(None).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != args.parent_pid:
        return 1  # the driver died before the parent-death signal was armed
    signal.signal(signal.SIGTERM, _terminated)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the driver alone decides when its workers stop
    with Connection(args.fd) as connection:
        try:
            serve(connection)
        except (EOFError, ConnectionError):  # the driver is gone: nothing to tell anyone
            return 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
