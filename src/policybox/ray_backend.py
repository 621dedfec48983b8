"""Episodes on a Ray cluster: ``policybox evaluate --backend ray [--ray-address ADDR]``.

Each episode is one Ray task that plays a whole policybox episode on one node -- its cells, sandbox
and zygote there -- and returns the episode's record; this process (the driver) alone writes
``results.jsonl`` and the summary, so resuming, refusing another tournament's folder and the summary
work exactly as with the local backend. A task is a pure function of the tournament and the episode
index, so where and how often it runs changes nothing in its result.

- **Submissions travel in Ray's object store**, not over a shared filesystem: the driver packs each
  policy's files once (``policybox.packing``: a deterministic tar named by its sha256); a node
  verifies the hash and unpacks it into a root-only folder, and plays the spec relocated there.
  Results name the policy by the driver's spec, never the node's copy.
- **One zygote per Ray worker process**, kept with the tournament's state for all the episodes that
  process plays; cells die with it, and it dies with the worker.
- **Faults.** A node or worker lost mid-episode: Ray runs the task again elsewhere (``max_retries``),
  and the driver records each episode once. A policy's own failure is part of the result, not a
  retry. Anything else a task raises counts as a failed attempt, as locally (``MAX_ATTEMPTS``).
  A node that cannot give the tournament's sandbox level refuses its tasks, naming itself.
- Replays are written where an episode is played; with Ray that is a node, so ``--replays`` is
  refused. Agent logs stay on the node that played the episode (``log_path`` is a path there).
"""

from __future__ import annotations

import os
import socket
import tempfile
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import ray

from policybox.envs import ConfigError
from policybox.errors import PolicyboxError
from policybox.evaluation import MAX_ATTEMPTS
from policybox.packing import Bundle, pack, relocate, unpack
from policybox.sandbox import SandboxUnavailable
from policybox.submission import private_folder
from policybox.tournament import Tournament
from policybox.worker import EpisodeWorker

REACH_TIMEOUT_S = 5.0
NODE_BASE = Path(tempfile.gettempdir()) / f"policybox-ray-{os.geteuid()}"  # root-only, on each node


def connect(address: str | None, cpus: int | None = None) -> bool:
    """Join the cluster at ``address``, or start a local Ray with ``cpus`` (default: the cores) when
    there is none; whether this call started the connection (and so must shut it down)."""
    if ray.is_initialized():
        return False
    if address is not None:
        _check_reachable(address)
    try:
        ray.init(
            address="local" if address is None else address,
            num_cpus=(cpus or os.cpu_count()) if address is None else None,
            include_dashboard=False,
            log_to_driver=False,
        )
    except (ConnectionError, ValueError, RuntimeError) as exc:
        raise ConfigError(f"cannot reach a Ray cluster at {address}: {exc}") from None
    return True


def _check_reachable(address: str) -> None:
    """A ``host:port`` nobody listens on fails here in a second; Ray itself would retry for minutes."""
    host, sep, port = address.rpartition(":")
    if not sep or "://" in address or not port.isdigit():
        return  # "auto", "ray://...": Ray's own forms, left to Ray
    try:
        socket.create_connection((host, int(port)), timeout=REACH_TIMEOUT_S).close()
    except OSError as exc:
        raise ConfigError(f"cannot reach a Ray cluster at {address}: {exc.strerror or exc}") from None


def diagnose_nodes(address: str | None) -> list[tuple[str, list[Any]]]:
    """``policybox doctor`` on every live node of the cluster: (node, its LayerChecks) per node."""
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    started = connect(address)
    try:
        nodes = [node for node in ray.nodes() if node["Alive"]]
        pinned = [NodeAffinitySchedulingStrategy(node["NodeID"], soft=False) for node in nodes]
        refs = [_diagnose.options(scheduling_strategy=strategy).remote() for strategy in pinned]
        names = [
            f"{node['NodeManagerHostname']} ({node['NodeManagerAddress']}, {node['NodeID'][:8]})" for node in nodes
        ]
        return list(zip(names, ray.get(refs), strict=True))
    finally:
        if started:
            ray.shutdown()


@ray.remote(num_cpus=0)
def _diagnose() -> list[Any]:
    from policybox.doctor import diagnose

    return list(diagnose())


class RayEpisodes:
    """The Ray backend of ``play_tournament`` (an ``EpisodeRunner``)."""

    def __init__(self, tournament: Tournament, workers: int | None, replays: bool, address: str | None) -> None:
        if replays:
            raise ConfigError("--replays is not available with --backend ray: replays would be written on the nodes")
        self._started = connect(address, workers)
        try:
            cpus = int(ray.cluster_resources().get("CPU", 1))
            self.count = max(1, min(workers or cpus, tournament.episodes))
            self._tournament = ray.put(tournament.model_dump_json())
            self._fingerprint = tournament.digest()
            bundles = {index: pack(entrant.spec) for index, entrant in enumerate(tournament.entrants)}
            self._bundles = {index: ray.put(bundle) for index, bundle in bundles.items() if bundle is not None}
        except BaseException:
            self.__exit__()
            raise

    def __enter__(self) -> RayEpisodes:
        return self

    def __exit__(self, *exc: object) -> None:
        if self._started:
            ray.shutdown()

    def check(self) -> None:
        """The tournament checked on a node, as an episode there would check it; a user's error raised here."""
        try:
            ray.get(_check.remote(self._tournament, self._fingerprint, self._bundles))
        except ray.exceptions.RayTaskError as exc:
            if isinstance(exc.cause, PolicyboxError):
                raise exc.cause from None
            raise

    def submit(self, episode: int) -> Future[str]:
        """The episode as a Ray task: Ray itself replaces lost workers and nodes and retries it."""
        return _episode.remote(self._tournament, self._fingerprint, self._bundles, episode).future()


@ray.remote(num_cpus=1, max_retries=0)
def _check(tournament_json: str, fingerprint: str, bundles: dict[int, Any]) -> None:
    _node_worker(tournament_json, fingerprint, bundles).check()


@ray.remote(num_cpus=1, max_retries=MAX_ATTEMPTS - 1)
def _episode(tournament_json: str, fingerprint: str, bundles: dict[int, Any], episode: int) -> str:
    return play_on_node(tournament_json, fingerprint, bundles, episode)


def play_on_node(tournament_json: str, fingerprint: str, bundles: dict[int, Any], episode: int) -> str:
    """One episode, played here; its record names each policy by the driver's spec and says where
    it was played (its logs are there). A sandbox level this node cannot give is refused, naming it."""
    worker = _node_worker(tournament_json, fingerprint, bundles)
    try:
        record = worker.play(episode)
    except SandboxUnavailable as exc:
        raise SandboxUnavailable(f"{_this_node()}: {exc}") from None
    driver = Tournament.model_validate_json(tournament_json)
    seats = worker.seat_maps[episode]
    for agent in record.agents:
        agent.spec = driver.entrants[seats[agent.agent_id]].spec.redacted()
    record.node = _this_node()
    return record.model_dump_json()


def _this_node() -> str:
    node = ray.get_runtime_context().get_node_id() if ray.is_initialized() else None
    return f"node {socket.gethostname()} ({node[:8] if node else 'no Ray'})"


_workers: dict[str, EpisodeWorker] = {}  # this Ray worker process's tournaments, by digest


def _node_worker(tournament_json: str, fingerprint: str, bundles: dict[int, Any]) -> EpisodeWorker:
    """This process's state for the tournament: its policies' files unpacked on this node (once),
    its logs under a root-only folder here, its zygote (started by the first episode)."""
    if fingerprint not in _workers:
        for stale in _workers.values():  # one tournament at a time: the previous one's zygote goes
            stale.forget_zygote()
        _workers.clear()
        tournament = Tournament.model_validate_json(tournament_json)
        base = private_folder(NODE_BASE, ConfigError)
        entrants = list(tournament.entrants)
        for index, ref in bundles.items():
            bundle: Bundle = ref if isinstance(ref, Bundle) else ray.get(ref)
            folder = unpack(bundle, base / "bundles")
            entrants[index] = entrants[index].model_copy(
                update={"spec": relocate(entrants[index].spec, bundle, folder)}
            )
        tournament = tournament.model_copy(update={"entrants": entrants})
        folder = base / fingerprint[:16]
        _workers[fingerprint] = EpisodeWorker(tournament, folder, False, tournament.seat_maps())
    return _workers[fingerprint]
