"""A worker: a process that plays episodes for a driver, ``python -I -m policybox.league.play.worker --fd N
[--offers M]``.

It holds what playing needs between episodes -- one zygote per set of preloaded modules
(``Player``, which a Ray worker on a node holds too) -- and serves its driver over the socket it
inherits as fd N, one message at a time (``multiprocessing.connection`` framing; the driver and its
workers are one program, and no policy code runs in a worker, only in its cells):

    driver -> worker   ("start", memory budget, CPU index, environment, folder)
                       ("check", specs, settings, agents)  |  ("play", key, EpisodeJob JSON)  |  ("stop",)
                       ("setup", key, prepare_version's arguments)
    worker -> driver   ("checked", None or the exception)
                       ("played", key, EpisodeResult JSON)  |  ("set up", key, SetupOutcome)
                       ("failed", key, the exception)

An episode's result is sent once its cells are stopped (``Replies``), on a thread of its own: while
it waits for them to exit and removes their cgroups and scratch, the worker starts the next episode.

The zygote is its driver's where the driver offers one: before the first message that needs it, the
driver sends on the socket inherited as fd M a channel to its own zygote (``Zygote.channel``; one
datagram, the preload as JSON, with the channel's fd), and the worker forks its cells there rather
than paying for a zygote of its own (about 0.6 s of CPU, and its memory). Its cells are then the
driver's zygote's children, still on this worker's CPU and in its budget; if the worker dies, the
zygote kills them when the channel closes, as a worker's own zygote would have died with it.

A ladder runs its versions' setup scripts and builds their environments in workers of their own
(``files.setup_scripts.prepare_version``: one version at a time each, beside the workers that play
matches), so that a slow script or build never holds up play.

A worker is forked from the driver's zygote where its cells fork from one (``Zygote.start``: the game
and numpy already imported, about 0.04 s of CPU to start), else a fresh interpreter (about 0.8 s with
the game's host side); never a re-import of its caller's ``__main__`` (multiprocessing's spawn does
that, so a script without an ``if __name__ == "__main__":`` guard could not evaluate). Either way it
takes the driver's environment and folder from its start message. It dies with its driver
(``PR_SET_PDEATHSIG``: a forked one with the zygote, which dies with the driver); SIGTERM ends it
cleanly: the episode it plays stops and every cell with it, then its zygote (or its channel to the
driver's).
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import json
import os
import pickle
import signal
import socket
import sys
import tempfile
import threading
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from policybox.episode import PlayedEpisode, check_playable, play_episode
from policybox.files.setup_scripts import prepare_version
from policybox.host.budget import Budget, adopt
from policybox.host.zygote import Zygote, ZygoteError, kept_zygotes, zygote_in
from policybox.league.play.runner import EpisodeJob
from policybox.process_names import WORKER, name_process
from policybox.results import EpisodeResult
from policybox.settings import EpisodeSettings, zygote_preload
from policybox.spec import PolicySpec
from policybox.startup import check_policies
from policybox.storage import writing

PR_SET_PDEATHSIG = 1
MAX_OFFER = 1 << 16


class Player:
    """Plays episodes in this process, each with a zygote of the modules its settings preload, kept for
    every later episode, check and setup that preloads the same (``kept``): the one its driver offered
    (``offer``: a channel to the driver's own zygote), else one it starts."""

    def __init__(self) -> None:
        self.zygotes: dict[tuple[str, ...], Zygote] = {}

    def kept(self) -> contextlib.AbstractContextManager[dict[tuple[str, ...], Zygote]]:
        """A block in which every episode, check and setup takes these zygotes (``kept_zygotes``)."""
        return kept_zygotes(self.zygotes)

    def offer(self, preload: tuple[str, ...], channel: socket.socket) -> None:
        """Fork the cells of episodes that preload ``preload`` through ``channel``, from the driver's zygote."""
        old = self.zygotes.pop(preload, None)
        if old is not None:
            old.close()
        self.zygotes[preload] = Zygote(preload, channel)

    def zygote_for(self, settings: EpisodeSettings) -> Zygote | None:
        if settings.mode != "process" or settings.launcher != "zygote":
            return None
        return zygote_in(self.zygotes, zygote_preload(settings))

    def close(self) -> None:
        for zygote in self.zygotes.values():
            zygote.close()
        self.zygotes.clear()

    def check(self, specs: list[PolicySpec], settings: EpisodeSettings, agents: int) -> None:
        """What an episode of these specs and settings would refuse, before any: a ``--preload`` or
        shorthand that does not exist, a game that cannot be built (or cannot write the replays asked
        for), a policy that cannot be built in its cell (``PolicyRefused``)."""
        zygote = self.zygote_for(settings)  # a --preload that cannot be imported: ZygoteError says so
        check_playable(specs, settings, agents)
        check_policies(specs, settings.model_copy(update={"replay": None}), agents, zygote)

    def play(self, job: EpisodeJob) -> EpisodeResult:
        """Play one episode: its logs (and its replay, if it asks for one) where the job says."""
        return self.played(job).finish()

    def played(self, job: EpisodeJob) -> PlayedEpisode:
        """``play`` up to the episode's last step: its cells are still to be stopped (``PlayedEpisode.finish``)."""
        if job.settings.replay is not None:
            with writing(Path(job.settings.replay).parent, "creating"):
                Path(job.settings.replay).parent.mkdir(exist_ok=True)
        try:
            zygote = self.zygote_for(job.settings)
            return play_episode(job.specs, job.settings, job.log_dir, zygote=zygote, entrants=job.entrants)
        except ZygoteError:
            self.close()  # the next episode starts a fresh one
            raise


class Replies:
    """The worker's side of its connection to the driver, for two threads: this one, and the one finishing
    the last episode played (``finish``) while this one plays the next -- so the time a played episode's
    cells take to stop (waiting for the kernel to tear down their namespaces, removing their cgroups and
    scratch) overlaps the next episode's start and play. Its result is sent once it is whole, after its
    cells are gone."""

    def __init__(self, connection: Connection) -> None:
        self._connection = connection
        self._lock = threading.Lock()
        self._finishing: list[threading.Thread] = []  # oldest first

    def send(self, message: tuple[Any, ...]) -> None:
        with self._lock, contextlib.suppress(OSError):  # the driver is gone: the next read says so
            self._connection.send(message)

    def finish(self, key: Any, played: PlayedEpisode) -> None:
        """Finish ``played`` on a thread of its own, then send its result; return once the episode before it
        is finished, so that this thread plays on while one episode at most is being finished (two
        for a moment: an interrupt while waiting for the older leaves both to ``settle``)."""
        if played.settings.mode != "process":  # no cells to wait for; its policies, in this process, go here
            self._finish(key, played)
            return
        thread = threading.Thread(target=self._finish, args=(key, played), name="policybox-finish")
        thread.start()
        self._finishing.append(thread)
        while len(self._finishing) > 1:
            self._finishing[0].join()
            self._finishing.pop(0)

    def _finish(self, key: Any, played: PlayedEpisode) -> None:
        outcome = _attempt(lambda: played.finish().model_dump_json())
        self.send(("failed" if isinstance(outcome, BaseException) else "played", key, outcome))

    def settle(self) -> None:
        """Wait until every episode being finished is: its cells gone, its result sent."""
        while self._finishing:
            self._finishing[0].join()
            self._finishing.pop(0)


def serve(connection: Connection, offers: socket.socket | None = None) -> None:
    """Take the start message, then answer checks and episodes until told to stop (or the driver goes).
    ``offers``: where the driver sends a channel to its zygote before the first message that needs it."""
    _start(*connection.recv()[1:])
    player = Player()
    replies = Replies(connection)
    try:
        while True:
            try:
                message = connection.recv()
            except EOFError:
                return  # the driver is gone
            _take_offers(offers, player)
            if message[0] == "stop":
                return
            if message[0] == "check":
                replies.send(("checked", _attempt(lambda message=message: player.check(*message[1:]))))
                continue
            key = message[1]
            if message[0] == "setup":
                with player.kept():  # its cells fork from the zygotes the episodes use
                    outcome = _attempt(lambda arguments=message[2]: prepare_version(*arguments))
                replies.send(("failed" if isinstance(outcome, BaseException) else "set up", key, outcome))
                continue
            job = EpisodeJob.model_validate_json(message[2])
            played = _attempt(lambda job=job: player.played(job))
            if isinstance(played, BaseException):
                replies.send(("failed", key, played))
            else:
                replies.finish(key, played)
    finally:
        replies.settle()  # every cell stopped before the zygotes they fork from
        player.close()


def _take_offers(offers: socket.socket | None, player: Player) -> None:
    """The channels the driver sent since the last message (each before the message that needs it)."""
    while offers is not None:
        try:
            message, fds, _, _ = socket.recv_fds(offers, MAX_OFFER, 1)  # non-blocking: only what is there
        except BlockingIOError:
            return
        if not message:
            return  # the driver is gone: the next read of its connection says so
        player.offer(tuple(json.loads(message)), socket.socket(fileno=fds[0]))


def _start(budget: Budget | None, cpu: int, environment: dict[str, str], folder: str) -> None:
    """Take the driver's environment and folder (a worker forked from a zygote starts with the zygote's);
    take one CPU (its cells inherit it: wake-ups stay on one core); put its cells into the driver's
    memory budget."""
    os.environ.clear()
    os.environ.update(environment)
    os.chdir(folder)
    tempfile.tempdir = None  # chosen anew, under the driver's environment, if the zygote chose one
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
    parser.add_argument("--offers", type=int, help="the socket on which the driver offers its zygotes")
    args = parser.parse_args(argv)
    ctypes.CDLL(None).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != args.parent_pid:
        return 1  # the driver died before the parent-death signal was armed (or the zygote it forked from)
    name_process(WORKER)
    signal.signal(signal.SIGTERM, _terminated)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the driver alone decides when its workers stop
    offers = None if args.offers is None else socket.socket(fileno=args.offers)
    if offers is not None:
        offers.setblocking(False)  # recv_fds ignores its flags argument (CPython 3.11)
    with Connection(args.fd) as connection, contextlib.suppress(EOFError, ConnectionError):
        serve(connection, offers)  # EOFError, ConnectionError: the driver is gone, nothing to tell anyone
    return 0


if __name__ == "__main__":
    sys.exit(main())
