"""Baseline measurements to compare policybox against, each taken in the calling process.

* ``rollout_run``: MettaGrid's in-process ``Rollout`` (what MettaGrid users run today);
  ``run_rollout`` / ``start_rollout``: the same ``Rollout`` around any ``MultiAgentPolicy`` (e.g. policybox's
  ``SandboxedPolicy``), optionally with ``policy_group_keys``.
* ``policy_server_steps_per_s`` / ``policy_server_episode_s`` / ``policy_server_startup_s``: MettaGrid's own
  policy-server isolation (``mettagrid.runner``), one batched WebSocket policy server for all agents.
* ``socketpair_round_trip_us`` / ``socketpair_round_trip_payload_us``: the floor of a blocking round trip
  between two processes on this machine.

The MettaGrid baselines take a policy (a name in ``CLASS_PATHS`` or a class path) and, for a policy with weights,
an optional checkpoint (``data_path``) that MettaGrid's ``load_policy_data`` reads.

Import with ``benchmarks/`` on ``sys.path`` (``import baselines``); ``busy_policy`` must be importable the same
way. Every function reaps what it starts. Run this file to print each measurement once.
"""

import contextlib
import json
import logging
import os
import random
import shutil
import socket
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import psutil
from mettagrid.builder.envs import make_arena
from mettagrid.config.mettagrid_config import MettaGridConfig
from mettagrid.map_builder.random_map import RandomMapBuilder
from mettagrid.policy.policy import MultiAgentPolicy
from mettagrid.policy.policy_env_interface import PolicyEnvInterface
from mettagrid.policy.submission import POLICY_SPEC_FILENAME, SubmissionPolicySpec, write_submission_policy_spec
from mettagrid.runner.episode_runner import run_episode_isolated
from mettagrid.runner.policy_server.manager import launch_local_policy_server
from mettagrid.runner.policy_server.websocket_transport import WebSocketPolicyServerClient
from mettagrid.runner.types import EpisodeSpec
from mettagrid.simulator.rollout import Rollout
from mettagrid.util.module import load_symbol

BENCH_DIR = Path(__file__).resolve().parent
# The policies the benchmarks name, by class path: loaded here with load_symbol (so torch is imported only for a
# policy that needs it) and by the policy server (metta://policy/<class path>, or a submission's policy_spec.json),
# so busy_policy must be importable in both (see _server_env). Any other name is taken as a class path itself.
CLASS_PATHS = {
    "random": "mettagrid.policy.random_agent.RandomMultiAgentPolicy",
    "busy1ms": "busy_policy.Busy1msPolicy",
    "lstm": "mettagrid.policy.lstm.LSTMPolicy",
}


def class_path(policy: str) -> str:
    """The class path of ``policy``: a name in ``CLASS_PATHS``, or a class path already."""
    return CLASS_PATHS.get(policy, policy)


def make_policy(policy: str, env_info: PolicyEnvInterface, data_path: str | Path | None = None) -> MultiAgentPolicy:
    """``policy``'s ``MultiAgentPolicy`` as MettaGrid builds one: the class on ``env_info``, then
    ``load_policy_data(data_path)`` when a checkpoint is given."""
    multi = load_symbol(class_path(policy))(env_info)
    if data_path is not None:
        multi.load_policy_data(str(data_path))
    return multi


def arena_config(num_agents: int, steps: int, seed: int) -> MettaGridConfig:
    """MettaGrid's arena game (``make_arena``) on a 10x10 random map, ``steps`` long, map seeded with ``seed``.

    ``make_arena`` builds a 25x25 ``MapGen`` (plus a 6-cell wall border) whose ``Random`` scene scatters the
    agents and 10 walls. To get the reference's "10x10 random map" we pass ``make_arena`` its documented
    ``map_builder`` override: MettaGrid's ``RandomMapBuilder`` with width=height=10, no border (the grid is
    exactly 10x10), the same 10 walls and ``num_agents`` agents shuffled into it: 24 agents + 10 walls fill
    34 of the 100 cells. ``RandomMapBuilder`` reseeds from ``seed`` on every build, so the map is fixed.
    """
    builder = RandomMapBuilder.Config(
        width=10, height=10, border_width=0, agents=num_agents, objects={"wall": 10}, seed=seed
    )
    config = make_arena(num_agents, map_builder=builder)
    config.game.max_steps = steps
    return config


@dataclass(frozen=True)
class RolloutRun:
    """One ``Rollout`` episode: its stepping rate, its constructor's time and what the episode ended with."""

    steps_per_s: float  # env steps taken / seconds of run_until_done()
    startup_s: float  # seconds of the Rollout(...) constructor (makes the game, resets every agent policy)
    rewards: tuple[float, ...]  # each agent's episode reward
    stats: str  # the episode's stats (game and per-agent), as sorted JSON: equal episodes give equal strings
    timeouts: int  # agent steps Rollout replaced by a no-op for exceeding max_action_time_ms


def start_rollout(
    config: MettaGridConfig, multi: MultiAgentPolicy, seed: int, group_keys: Sequence[object] | None = None
) -> tuple[Rollout, float]:
    """MettaGrid's ``Rollout`` of ``config`` with ``multi.agent_policy(i)`` for every agent, and the seconds its
    constructor took (it builds the game and calls ``reset()`` on each agent policy). ``group_keys`` is
    ``Rollout``'s ``policy_group_keys``: None steps agents one after another. Close it with ``_simulator.close()``."""
    agents = [multi.agent_policy(i) for i in range(config.game.num_agents)]
    start = time.perf_counter()
    rollout = Rollout(config, agents, seed=seed, policy_group_keys=group_keys)
    return rollout, time.perf_counter() - start


def run_rollout(
    config: MettaGridConfig,
    multi: MultiAgentPolicy,
    seed: int,
    group_keys: Sequence[object] | None = None,
    torch_threads: int | None = None,
) -> RolloutRun:
    """One episode of ``start_rollout(config, multi, seed, group_keys)``; times ``run_until_done()`` (and, apart,
    the constructor). Python's ``random`` and, when the policy uses torch, torch's global generator are seeded
    with ``seed`` for the run (and restored after) so an in-process sampling policy repeats. Torch runs with its
    default thread count (what a MettaGrid user gets), or ``torch_threads`` for the run. The caller owns ``multi``
    (and closes it, if it holds resources)."""
    rollout, startup_s = start_rollout(config, multi, seed, group_keys)
    try:
        with _seeded(seed), _torch_threads(torch_threads):
            start = time.perf_counter()
            rollout.run_until_done()
            elapsed = time.perf_counter() - start
        sim = rollout._sim
        return RolloutRun(
            # Steps actually taken, read as MettaGrid's own single_episode_rollout does.
            steps_per_s=sim.current_step / elapsed,
            startup_s=startup_s,
            rewards=tuple(float(reward) for reward in sim.episode_rewards),
            stats=json.dumps(sim.episode_stats, sort_keys=True, default=str),
            timeouts=sum(rollout.timeout_counts),
        )
    finally:
        rollout._simulator.close()


def rollout_run(
    num_agents: int,
    steps: int,
    seed: int,
    policy: str,
    data_path: str | Path | None = None,
    torch_threads: int | None = None,
) -> RolloutRun:
    """MettaGrid's ``mettagrid.simulator.rollout.Rollout`` stepping ``policy`` in this process (``.steps_per_s``:
    env steps per second of ``run_until_done()``; also start-up, rewards, stats).

    One ``AgentPolicy`` per agent from one ``MultiAgentPolicy`` (``make_policy``: "random" = MettaGrid's
    ``RandomMultiAgentPolicy``, "busy1ms" = ``busy_policy.Busy1msPolicy``, "lstm" = MettaGrid's ``LSTMPolicy``
    with the checkpoint ``data_path``); no ``policy_group_keys``, so agents are stepped one after another as a
    user's plain ``Rollout`` does; seeding and threads as ``run_rollout``.
    """
    config = arena_config(num_agents, steps, seed)
    multi = make_policy(policy, PolicyEnvInterface.from_mg_cfg(config), data_path)
    return run_rollout(config, multi, seed, torch_threads=torch_threads)


@contextlib.contextmanager
def _seeded(seed: int) -> Iterator[None]:
    """Seed Python's ``random`` and, if imported, torch's global generator for the block; restore both after."""
    torch = sys.modules.get("torch")
    saved_random = random.getstate()
    saved_torch = torch.random.get_rng_state() if torch is not None else None
    random.seed(seed)
    if torch is not None:
        torch.manual_seed(seed)
    try:
        yield
    finally:
        random.setstate(saved_random)
        if torch is not None:
            torch.random.set_rng_state(saved_torch)


@contextlib.contextmanager
def _torch_threads(threads: int | None) -> Iterator[None]:
    """Run the block with torch's intra-op thread count at ``threads`` (None: leave it), then restore it."""
    torch = sys.modules.get("torch") if threads is not None else None
    if torch is None:
        yield
        return
    saved = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        yield
    finally:
        torch.set_num_threads(saved)


@contextlib.contextmanager
def _env(**values: str) -> Iterator[None]:
    """Set environment variables of this process for the block, then restore them."""
    saved = {key: os.environ.get(key) for key in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


@contextlib.contextmanager
def _bounded(seconds: float) -> Iterator[None]:
    """Kill the MettaGrid runner processes started inside the block if it runs longer than ``seconds``, and
    any still alive after it.

    MettaGrid's runner waits on its episode subprocess and policy server without a deadline, so a timer kills
    the ``mettagrid.runner`` descendants this process gained inside the block; MettaGrid then sees them die
    and cleans up. Processes the caller starts meanwhile (other command lines) are left alone.
    """
    me = psutil.Process()
    before = {child.pid for child in me.children(recursive=True)}
    fired = threading.Event()

    def new_runner_processes() -> list[psutil.Process]:
        found = []
        for child in me.children(recursive=True):
            with contextlib.suppress(psutil.Error):
                if child.pid not in before and "mettagrid.runner" in " ".join(child.cmdline()):
                    found.append(child)
        return found

    def kill(processes: list[psutil.Process]) -> None:
        for process in processes:
            with contextlib.suppress(psutil.Error):
                process.kill()

    def on_timeout() -> None:
        fired.set()
        kill(new_runner_processes())

    timer = threading.Timer(seconds, on_timeout)
    timer.daemon = True
    timer.start()
    try:
        yield
    except Exception as exc:
        if fired.is_set():
            raise TimeoutError(f"MettaGrid policy-server run exceeded {seconds:.1f} s") from exc
        raise
    finally:
        timer.cancel()
        leftovers = new_runner_processes()
        kill(leftovers)
        psutil.wait_procs(leftovers, timeout=5)
    if fired.is_set():
        raise TimeoutError(f"MettaGrid policy-server run exceeded {seconds:.1f} s")


def _server_env() -> dict[str, str]:
    """Extra environment for the policy-server process so that it can import ``busy_policy``."""
    paths = [str(BENCH_DIR), *filter(None, [os.environ.get("PYTHONPATH")])]
    return {"PYTHONPATH": os.pathsep.join(paths)}


def _timeout_s(num_agents: int, steps: int, data_path: str | Path | None = None) -> float:
    # startup + 10 ms per agent-step (100 ms for a network, which on a busy machine with torch's default
    # threads can take tens of ms per agent): far above any healthy run
    return 120.0 + steps * num_agents * (0.1 if data_path is not None else 0.01)


def policy_uri(policy: str, data_path: str | Path | None, folder: Path) -> str:
    """The URI MettaGrid's runner and policy server load ``policy`` from.

    Without a checkpoint: ``metta://policy/<class path>``. With one: MettaGrid has no URI that names a class
    and a checkpoint, so this writes a submission folder in its own format into ``folder`` -- the checkpoint
    copied in, and a ``policy_spec.json`` (``SubmissionPolicySpec``) naming the class and the checkpoint
    relative to the folder -- and returns its ``file://`` URI. The runner localizes that URI as is, the server's
    ``policy_spec_from_uri`` reads the spec (``load_policy_spec_from_path``) and ``initialize_or_load_policy``
    calls ``load_policy_data`` with the checkpoint's path.
    """
    if data_path is None:
        return f"metta://policy/{class_path(policy)}"
    submission = folder / "submission"
    submission.mkdir()
    checkpoint = Path(data_path)
    shutil.copyfile(checkpoint, submission / checkpoint.name)
    spec = SubmissionPolicySpec(class_path=class_path(policy), data_path=checkpoint.name)
    write_submission_policy_spec(submission / POLICY_SPEC_FILENAME, spec)
    return submission.as_uri()


def _run_isolated(
    num_agents: int, steps: int, seed: int, policy: str, debug_dir: Path | None, data_path: str | Path | None = None
) -> float:
    """Run one episode through ``run_episode_isolated``; return its wall time in seconds."""
    # EPISODE_RUNNER_USE_ISOLATED_VENVS=0: serve the policy with this Python instead of a fresh venv (manager.py).
    with (
        tempfile.TemporaryDirectory(prefix="baselines-") as tmp,
        _bounded(_timeout_s(num_agents, steps, data_path)),
        _env(EPISODE_RUNNER_USE_ISOLATED_VENVS="0"),
    ):
        spec = EpisodeSpec(
            policy_uris=[policy_uri(policy, data_path, Path(tmp))],
            assignments=[0] * num_agents,  # every agent on policy 0 -> one server, stepped as one batch
            env=arena_config(num_agents, steps, seed),
            seed=seed,
        )
        start = time.perf_counter()
        run_episode_isolated(
            spec,
            Path(tmp) / "results.json",
            debug_dir=debug_dir,
            # policy_secrets is MettaGrid's per-policy environment (keyed by policy index) for the server.
            policy_secrets={0: _server_env()},
        )
        return time.perf_counter() - start


def policy_server_steps_per_s(
    num_agents: int, steps: int, seed: int, policy: str, data_path: str | Path | None = None
) -> float:
    """Env steps per second of the stepping phase of MettaGrid's policy-server episode.

    Runs ``run_episode_isolated`` (what ``python -m mettagrid.runner.executor`` runs) with
    ``EPISODE_RUNNER_USE_ISOLATED_VENVS=0``: one policy server process for the single policy (all agents share
    it), then an episode subprocess whose ``Rollout`` sends all agents' observations to the server in one
    WebSocket ``BatchStepRequest`` per step. (The server then calls each agent's ``AgentPolicy.step`` in turn:
    the batch is one message per step, not one batched call into the policy; see
    ``LocalPolicyServer.batch_step``.) A checkpoint reaches the server as a submission folder (``policy_uri``).
    The stepping phase is not visible from here, so the episode runs with a ``debug_dir``, which makes MettaGrid
    write its per-step trace (``agent_step``/``env_step`` spans);
    timed = first policy step start -> last ``env_step`` end, i.e. every step's server round trip, action
    decoding and env step, but not server launch, policy preparation, env construction or results writing.
    Tracing costs a JSON line per agent per step (~6.6 us each here, i.e. ~3-4% of a step at 4 or 24 agents
    with the random policy, so the rate is that much low), and debug_dir also sets ``PYTHONPERFSUPPORT=1``.
    Returns env steps taken (``env_step`` spans) / that time.
    The server's policy is not seeded (MettaGrid gives it no seed), so a sampling policy's actions vary per run;
    torch in the server runs with its default thread count.
    """
    with tempfile.TemporaryDirectory(prefix="baselines-trace-") as debug_dir:
        _run_isolated(num_agents, steps, seed, policy, Path(debug_dir), data_path)
        events = json.loads((Path(debug_dir) / "trace.json").read_text())
    env_steps = [e for e in events if e.get("name") == "env_step"]
    first_us = min(e["ts"] for e in events if e.get("name") in ("agent_step", "env_step"))
    last_us = max(e["ts"] + e["dur"] for e in env_steps)
    return len(env_steps) / ((last_us - first_us) / 1e6)


def policy_server_episode_s(
    num_agents: int, steps: int, seed: int, policy: str, data_path: str | Path | None = None
) -> float:
    """Wall seconds of one whole ``run_episode_isolated`` call, no tracing: everything the user waits for.

    Includes starting the policy server (a fresh Python importing MettaGrid, polled for readiness every
    100 ms), starting the episode subprocess (another fresh Python), policy preparation, env construction,
    stepping, writing and reading results.json, and shutting the server down.
    """
    return _run_isolated(num_agents, steps, seed, policy, None, data_path)


def policy_server_startup_s(num_agents: int, policy: str = "random", data_path: str | Path | None = None) -> float:
    """Seconds until a MettaGrid policy server can take its first step for ``num_agents`` agents.

    Timed: ``launch_local_policy_server`` (spawn ``python -m mettagrid.runner.policy_server.server``, wait for
    its ready file; MettaGrid polls it every 100 ms, so this is quantised up to 0.1 s) plus connecting
    ``WebSocketPolicyServerClient``, whose PreparePolicy request makes the server load the policy (and its
    checkpoint, if any) and build the agents' policies; the same two calls ``run_episode_isolated`` and
    ``episode_subprocess`` make. Not timed: writing the submission folder, closing the connection and shutting
    the server down.
    """
    env_info = PolicyEnvInterface.from_mg_cfg(arena_config(num_agents, 1, 0))
    with (
        tempfile.TemporaryDirectory(prefix="baselines-") as tmp,
        _bounded(_timeout_s(num_agents, 0)),
        _env(EPISODE_RUNNER_USE_ISOLATED_VENVS="0"),
    ):
        uri = policy_uri(policy, data_path, Path(tmp))
        start = time.perf_counter()
        server = launch_local_policy_server(uri, extra_env=_server_env())
        try:
            client = WebSocketPolicyServerClient(env_info, url=server.base_url, agent_ids=list(range(num_agents)))
            elapsed = time.perf_counter() - start
            client.close()
        finally:
            server.shutdown()
    return elapsed


def _echo_child(sock: socket.socket, request_bytes: int, reply_bytes: int) -> None:
    """Forked child: read a full request, answer ``reply_bytes`` bytes, until the parent closes the socket."""
    buf = bytearray(request_bytes)
    reply = bytes(reply_bytes)
    while sock.recv_into(buf, request_bytes, socket.MSG_WAITALL) == request_bytes:
        sock.sendall(reply)


def _round_trip_us(request_bytes: int, reply_bytes: int, round_trips: int, pin: tuple[int, int] | None) -> float:
    parent_sock, child_sock = socket.socketpair()
    pid = os.fork()
    if pid == 0:  # child: echo, then leave without running the parent's cleanup handlers
        code = 1
        try:
            parent_sock.close()
            if pin is not None:
                os.sched_setaffinity(0, {pin[1]})
            _echo_child(child_sock, request_bytes, reply_bytes)
            code = 0
        finally:
            os._exit(code)
    child_sock.close()
    affinity = os.sched_getaffinity(0)
    try:
        if pin is not None:
            os.sched_setaffinity(0, {pin[0]})
        request = bytes(request_bytes)
        reply = bytearray(reply_bytes)

        def batch(n: int) -> float:
            start = time.perf_counter()
            for _ in range(n):
                parent_sock.sendall(request)
                if parent_sock.recv_into(reply, reply_bytes, socket.MSG_WAITALL) != reply_bytes:
                    raise RuntimeError("echo child closed the socket")
            return (time.perf_counter() - start) / n * 1e6

        per_batch = max(1, round_trips // 5)
        batch(min(per_batch, 1000))  # warm-up, not counted
        return statistics.median(batch(per_batch) for _ in range(5))
    finally:
        os.sched_setaffinity(0, affinity)
        parent_sock.close()  # child sees EOF and exits
        os.waitpid(pid, 0)


def socketpair_round_trip_us(round_trips: int = 20000, pin: tuple[int, int] | None = None) -> float:
    """Microseconds per blocking 16-byte -> 16-byte round trip over a ``socket.socketpair()`` to a forked echo child.

    Median over 5 batches of ``round_trips // 5`` round trips, after a short uncounted warm-up. ``pin`` =
    (parent CPU, child CPU) pins both processes; by default the scheduler places them. On a VM, where waking
    a process on another vCPU is slow, the unpinned result depends on that placement: same CPU vs two CPUs
    can differ by an order of magnitude, so measure both with ``pin=(0, 0)`` and ``pin=(0, 1)``.
    """
    return _round_trip_us(16, 16, round_trips, pin)


def socketpair_round_trip_payload_us(
    payload_bytes: int = 1500, round_trips: int = 20000, pin: tuple[int, int] | None = None
) -> float:
    """As ``socketpair_round_trip_us`` with a ``payload_bytes`` request and a 4-byte reply (observation -> action)."""
    return _round_trip_us(payload_bytes, 4, round_trips, pin)


if __name__ == "__main__":
    logging.getLogger("mettagrid").setLevel(logging.WARNING)  # importing mettagrid turns on INFO logging
    STEPS, SEED = 300, 0
    cpus = sorted(os.sched_getaffinity(0))
    for pin in [None, (cpus[0], cpus[0]), *([(cpus[0], cpus[1])] if len(cpus) > 1 else [])]:
        where = "unpinned" if pin is None else f"CPUs {pin[0]},{pin[1]}"
        print(f"socketpair round trip 16 B -> 16 B,  {where:8s}: {socketpair_round_trip_us(pin=pin):8.1f} us")
        print(f"socketpair round trip 1500 B -> 4 B, {where:8s}: {socketpair_round_trip_payload_us(pin=pin):8.1f} us")
    for agents in (4, 24):
        for name in ("random", "busy1ms"):
            label = f"{agents:2d} agents, {name:7s}, {STEPS} steps"
            rollout = rollout_run(agents, STEPS, SEED, name).steps_per_s
            print(f"Rollout in-process          {label}: {rollout:8.1f} steps/s")
            sps = policy_server_steps_per_s(agents, STEPS, SEED, name)
            print(f"policy server, stepping     {label}: {sps:8.1f} steps/s")
            wall = policy_server_episode_s(agents, STEPS, SEED, name)
            print(f"policy server, whole run    {label}: {wall:8.2f} s ({STEPS / wall:.1f} steps/s)")
        print(f"policy server startup+prepare {agents:2d} agents: {policy_server_startup_s(agents):6.2f} s")
