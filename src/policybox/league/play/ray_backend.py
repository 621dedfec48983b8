"""Episodes on a Ray cluster: ``policybox evaluate --backend ray [--ray-address ADDR]``.

Each episode (an ``EpisodeJob``) is one Ray task that plays a whole policybox episode on one node --
its cells, sandbox and zygote there -- and returns the episode's result; this process (the driver)
alone writes results, so everything a leaderboard does with them works exactly as with the local
backend. A task is a pure function of its job, so where and how often it runs changes nothing in its
result.

- **Submissions travel in Ray's object store**, not over a shared filesystem: the driver packs each
  policy's files once (``policybox.files.packing``: a deterministic tar named by its sha256); a node
  verifies the hash and unpacks it into a root-only folder, and plays the spec relocated there.
  Results name the policy by the driver's spec, never the node's copy. A policy's environment
  (``policybox.files.environments``) does not travel: the driver sends its locked pins, and a node
  builds them once into a root-only folder of its own, by the same hash, from the episode's index.
- **One zygote per Ray worker process**, kept for all the episodes that process plays; cells die
  with it, and it dies with the worker.
- **Faults.** A node or worker lost mid-episode: Ray runs the task again elsewhere (``max_retries``),
  and the driver records each episode once. A policy's own failure is part of the result, not a
  retry. Anything else a task raises counts as a failed attempt, as locally (``MAX_ATTEMPTS``).
  A node that cannot give the episode's sandbox level refuses its tasks, naming itself.
- Replays are written where an episode is played; with Ray that is a node, so ``--replays`` is
  refused. Agent logs stay on the node that played the episode (``log_path`` is a path there).
"""

from __future__ import annotations

import hashlib
import os
import socket
import tempfile
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import ray

from policybox.envs import ConfigError
from policybox.errors import PolicyboxError
from policybox.files.environments import as_locked, with_environment
from policybox.files.package_source import package_source
from policybox.files.packing import Bundle, pack, relocate, unpack
from policybox.league.play.runner import MAX_ATTEMPTS, EpisodeJob
from policybox.league.play.worker import Player
from policybox.results import EpisodeResult
from policybox.sandbox import SandboxUnavailable
from policybox.settings import EpisodeSettings
from policybox.spec import PolicySpec
from policybox.submission import private_folder

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
    from policybox.host.diagnosis import diagnose

    return list(diagnose())


class RayEpisodes:
    """The Ray backend (an ``EpisodeRunner``): ``count`` episodes at once, or one per CPU of the cluster."""

    def __init__(self, count: int | None, address: str | None) -> None:
        self._started = connect(address, count)
        self._bundles: dict[str, Any] = {}  # each policy's files, packed once and put in the object store
        try:
            self.count = count or max(1, int(ray.cluster_resources().get("CPU", 1)))
        except BaseException:
            self.__exit__()
            raise

    def __enter__(self) -> RayEpisodes:
        return self

    def __exit__(self, *exc: object) -> None:
        if self._started:
            ray.shutdown()

    def check(self, specs: list[PolicySpec], settings: EpisodeSettings, agents: int) -> None:
        """The check a node makes of these specs and settings, as its episodes would; a user's error raised here."""
        _refuse_replays(settings)
        specs = [as_locked(spec) for spec in specs]
        try:
            ray.get(
                _check.remote(
                    [s.model_dump_json() for s in specs], settings.model_dump_json(), agents, self._packed(specs)
                )
            )
        except ray.exceptions.RayTaskError as exc:
            if isinstance(exc.cause, PolicyboxError):
                raise exc.cause from None
            raise

    def submit(self, job: EpisodeJob) -> Future[str]:
        """The episode as a Ray task: Ray itself replaces lost workers and nodes and retries it."""
        _refuse_replays(job.settings)
        job = job.model_copy(update={"specs": [as_locked(spec) for spec in job.specs]})
        result: Future[str] = _episode.remote(job.model_dump_json(), self._packed(job.specs)).future()
        return result

    def _packed(self, specs: list[PolicySpec]) -> dict[str, Any]:
        """The bundles of the specs that need files, by ``spec_key``: packed on first use, then reused."""
        wanted = {}
        for spec in specs:
            key = spec_key(spec)
            if key not in self._bundles:
                bundle = pack(spec)
                self._bundles[key] = None if bundle is None else ray.put(bundle)
            if self._bundles[key] is not None:
                wanted[key] = self._bundles[key]
        return wanted


def spec_key(spec: PolicySpec) -> str:
    return hashlib.sha256(spec.model_dump_json().encode()).hexdigest()


def _refuse_replays(settings: EpisodeSettings) -> None:
    if settings.replay is not None:
        raise ConfigError("--replays is not available with --backend ray: replays would be written on the nodes")


@ray.remote(num_cpus=1, max_retries=0)
def _check(specs: list[str], settings: str, agents: int, bundles: dict[str, Any]) -> None:
    given = EpisodeSettings.model_validate_json(settings)
    here = [_on_this_node(PolicySpec.model_validate_json(spec), bundles, given) for spec in specs]
    _player().check(here, given, agents)


@ray.remote(num_cpus=1, max_retries=MAX_ATTEMPTS - 1)
def _episode(job: str, bundles: dict[str, Any]) -> str:
    return play_on_node(EpisodeJob.model_validate_json(job), bundles)


def play_on_node(job: EpisodeJob, bundles: dict[str, Any]) -> str:
    """One episode, played here with its policies' files unpacked here and its logs under a root-only
    folder of this node; its result names each policy by the driver's spec and says where it was
    played (its logs are there). A sandbox level this node cannot give is refused, naming it."""
    here = job.model_copy(
        update={
            "specs": [_on_this_node(spec, bundles, job.settings) for spec in job.specs],
            "log_dir": str(_node_base() / "logs" / hashlib.sha256(job.log_dir.encode()).hexdigest()[:16] / job.name),
        }
    )
    try:
        result: EpisodeResult = _player().play(here)
    except SandboxUnavailable as exc:
        raise SandboxUnavailable(f"{_this_node()}: {exc}") from None
    for agent in result.agents:
        agent.spec = job.specs[agent.agent_id].redacted()
    result.node = _this_node()
    return result.model_dump_json()


def _this_node() -> str:
    node = ray.get_runtime_context().get_node_id() if ray.is_initialized() else None
    return f"node {socket.gethostname()} ({node[:8] if node else 'no Ray'})"


_players: list[Player] = []  # this Ray worker process's one player, with its zygote


def _player() -> Player:
    if not _players:
        _players.append(Player())
    return _players[0]


def _node_base() -> Path:
    return private_folder(NODE_BASE, ConfigError)


def _on_this_node(spec: PolicySpec, bundles: dict[str, Any], settings: EpisodeSettings) -> PolicySpec:
    """The spec relocated into its bundle, unpacked on this node (once), and given its environment, built
    on this node from its locked pins (once: ``files.environments``); a spec without files as it is."""
    ref = bundles.get(spec_key(spec))
    if ref is not None:
        bundle: Bundle = ref if isinstance(ref, Bundle) else ray.get(ref)
        spec = relocate(spec, bundle, unpack(bundle, _node_base() / "bundles"))
    if not spec.requirements:
        return spec
    source = package_source(settings)
    return with_environment(spec, _node_base() / "environments", source)
