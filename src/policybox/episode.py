"""One episode: an environment, one policy per agent (in cells or inline), and its EpisodeResult."""

from __future__ import annotations

import contextlib
import gc
import os
import tempfile
import time
import traceback
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

import policybox
from policybox.envs import ActionSink, ConfigError, EnvHost, GameRequest, InvalidAction
from policybox.errors import PolicyboxError, SpecError
from policybox.files import environments
from policybox.host import torch_use
from policybox.host.cell_groups import cell_count, cell_groups
from policybox.host.diagnosis import unavailable
from policybox.host.inline_pool import InlinePool
from policybox.host.launcher import Launcher, SpawnLauncher, ZygoteLauncher
from policybox.host.process_pool import ProcessPool
from policybox.host.record import AgentRecord
from policybox.host.sandbox import wanted_layers
from policybox.host.zygote import Zygote, zygote_for
from policybox.results import AgentResult, AgentStatus, EpisodeResult, Failure, GameFault
from policybox.sandbox import SandboxLevel, SandboxUnavailable
from policybox.settings import (
    REPLAY_SUFFIX,
    EpisodeSettings,
    Mode,
    OnFailure,
    agent_count,
    env_family,
    zygote_preload,
)
from policybox.spec import PolicySpec, parse_policy_arg
from policybox.storage import StorageFull, writing
from policybox.threads import cell_threads
from policybox.wire import FrameType, Reply

LOG_TAIL_BYTES = 4096
SLOW_SHARE = 0.5  # of the time played: an agent whose replies took more is blamed for the episode's time limit
GAME_TRACEBACK_CHARS = 8000
T = TypeVar("T")


@dataclass(frozen=True)
class Timings:
    startup_s: float
    play_s: float


def assign_policies(specs: Sequence[T], num_agents: int) -> list[T]:
    """Agent i plays ``specs[i % len(specs)]``: ``-p a -p b`` over 4 agents gives a, b, a, b."""
    if not specs:
        raise SpecError("give at least one policy")
    if num_agents < 1:
        raise ConfigError("an episode needs at least one agent")
    return [specs[i % len(specs)] for i in range(num_agents)]


def check_shorthands(specs: Sequence[PolicySpec], settings: EpisodeSettings) -> None:
    """Fail fast on a misspelt shorthand, before any cell starts (the family's registry, not policy code)."""
    adapter, _ = env_family(settings)
    for spec in specs:
        if spec.is_shorthand:
            try:
                adapter.resolve_shorthand(spec.class_path)
            except LookupError as exc:
                raise SpecError(str(exc)) from None


def check_strict(settings: EpisodeSettings) -> None:
    """Refuse a strict episode unless every layer works here (as ``policybox doctor`` finds)."""
    if settings.mode != "process":
        raise SandboxUnavailable("a strict sandbox needs --mode process: inline mode runs policies in the host")
    missing = unavailable(wanted_layers(SandboxLevel.STRICT, seccomp=True))
    if missing:
        reasons = "; ".join(f"{check.layer}: {check.detail}" for check in missing)
        raise SandboxUnavailable(f"strict sandbox refused, layers missing on this machine: {reasons}")


def check_playable(specs: Sequence[PolicySpec], settings: EpisodeSettings, agents: int) -> None:
    """What can be wrong with an episode before any cell starts (a misspelt shorthand, a game that
    cannot be built, a strict sandbox this machine lacks), found once, before many episodes."""
    check_shorthands(specs, settings)
    if settings.sandbox == SandboxLevel.STRICT:
        check_strict(settings)
    open_env(settings, agents).close()


def open_env(settings: EpisodeSettings, agents: int, names: Sequence[str] = ()) -> EnvHost:
    """The settings' game, started for ``agents`` seats; ``names`` are the seats' policies."""
    adapter, target = env_family(settings)
    request = GameRequest(
        target, settings.env_kwargs, agents, settings.steps, settings.seed, settings.replay, names, settings.limits
    )
    try:
        host = adapter.open_host(request)
    except PolicyboxError:
        raise
    except Exception as exc:  # the game itself broke before anyone played: the game is the user's to fix
        raise ConfigError(
            f"the game {settings.env} could not be started with seed {settings.seed}: {type(exc).__name__}: {exc}"
        ) from exc
    if len(host.agent_names) != agents:
        host.close()
        raise ConfigError(f"{settings.env} is a game for {len(host.agent_names)} agents, not {agents}")
    return host


def default_log_dir(seed: int) -> Path:
    """Where an episode's agent logs go unless told: ./policybox-logs/<time>-seed<N>."""
    return Path("policybox-logs") / f"{datetime.now():%Y%m%d-%H%M%S}-seed{seed}"


def check_replay(replay: str | None) -> None:
    """Refuse, before any cell starts, a replay file that could not be written when the episode ends."""
    if replay is None:
        return
    path = Path(replay)
    if not replay.endswith(REPLAY_SUFFIX):
        raise ConfigError(f"replay {replay} must be a {REPLAY_SUFFIX} file (zlib-compressed JSON)")
    if path.is_dir():
        raise ConfigError(f"replay {replay} is a folder; give a file name such as {path / ('episode' + REPLAY_SUFFIX)}")
    if not path.parent.is_dir():
        raise ConfigError(f"replay folder {path.parent} does not exist")
    if not os.access(path.parent, os.W_OK | os.X_OK) or (path.exists() and not os.access(path, os.W_OK)):
        raise ConfigError(f"replay {replay} is not writable")


def run_episode(
    specs: Sequence[PolicySpec | str],
    settings: EpisodeSettings | None = None,
    log_dir: str | Path | None = None,
    zygote: Zygote | None = None,
    *,
    agents: int | None = None,
    refuse_unbuilt: bool = False,
    entrants: Sequence[str] | None = None,
) -> EpisodeResult:
    """Play one episode; cells are gone when this returns (``play_episode``, then its ``finish``).

    ``specs`` are PolicySpecs or ``-p`` strings (``"random"``, ``"bots/greedy.py:Greedy"``); agent i
    plays ``specs[i % len(specs)]``. ``agents``: how many play; by default the game's own number (a
    PettingZoo game, a MettaGrid config file) or, for games of any size (arena, navigation), one per
    spec. ``entrants[i]`` names the submission ``specs[i]`` plays for (a ladder's version, a
    tournament's entrant): with ``--cells per-policy`` the seats of one entrant share a cell, and
    seats of two entrants never do, whatever their specs; by default each spec given is an entrant
    of its own. ``log_dir`` gets one log file per agent (process mode; default ./policybox-logs/<time>-seed<N>).
    With the zygote launcher, pass a running ``zygote`` to reuse it across episodes; without one, a
    zygote is started for this episode and stopped after it (or, within ``kept_zygotes()``, the one kept
    for its preload is used: ``policybox.host.zygote``).

    A policy that cannot be built (it fails or hangs while its cell imports, builds and loads it) is
    that agent's failure, and the others play on -- or, with ``refuse_unbuilt``, ``PolicyRefused``
    before any step is played. A full disk where the logs or the replay go raises ``StorageFull``; when
    only the replay could not be written, the episode's result is its ``result``. An agent's log that
    a full disk cuts short is noted in that agent's ``log_note``.
    """
    played = play_episode(
        specs, settings, log_dir, zygote, agents=agents, refuse_unbuilt=refuse_unbuilt, entrants=entrants
    )
    return played.finish()


def play_episode(
    specs: Sequence[PolicySpec | str],
    settings: EpisodeSettings | None = None,
    log_dir: str | Path | None = None,
    zygote: Zygote | None = None,
    *,
    agents: int | None = None,
    refuse_unbuilt: bool = False,
    entrants: Sequence[str] | None = None,
) -> PlayedEpisode:
    """``run_episode`` up to its last step: what is left -- stopping its cells, the result, the replay --
    is the ``PlayedEpisode``'s to finish, which a caller may do on another thread while this one starts
    the next episode (``policybox.league.play.worker``). If this raises, the cells are gone already."""
    settings = settings or EpisodeSettings()
    parsed = [parse_policy_arg(spec) if isinstance(spec, str) else spec for spec in specs]
    given = list(entrants) if entrants is not None else [str(index) for index in range(len(parsed))]
    if len(given) != len(parsed):
        raise ValueError(f"{len(given)} entrants given for {len(parsed)} specs: give one entrant per spec")
    seats = assign_policies(list(zip(parsed, given, strict=True)), agent_count(settings, agents, len(parsed)))
    seated: list[PolicySpec] = [spec for spec, _ in seats]
    if settings.mode == "process" and log_dir is None:
        log_dir = default_log_dir(settings.seed)
    log_dir = None if log_dir is None else Path(log_dir)
    check_shorthands(seated, settings)
    check_replay(settings.replay)
    if settings.sandbox == SandboxLevel.STRICT:
        check_strict(settings)
    started_at = datetime.now(UTC).isoformat(timespec="seconds")
    clock = time.monotonic()
    env = open_env(settings, len(seated), [spec.display_name for spec in seated])
    with contextlib.ExitStack() as stack:
        stack.callback(env.close)
        records = agent_records(seated, settings, log_dir, [entrant for _, entrant in seats])
        cells = stack.enter_context(contextlib.ExitStack())  # closed first, then the game
        setups = [env.cell_setup(record.agent_id) for record in records]
        pool = start_pool(records, setups, settings, zygote, cells)
        if refuse_unbuilt and (refused := refusal(records)):
            raise refused
        ready = time.monotonic()
        limit = settings.limits.play_limit_s(env.max_steps)  # play's own: start-up had init_timeout_s
        deadline = None if limit is None else ready + limit
        aborted, fault = _play(env, pool, records, settings.on_agent_failure, deadline)
        timings = Timings(startup_s=ready - clock, play_s=time.monotonic() - ready)
        return PlayedEpisode(
            env, records, settings, pool, started_at, clock, timings, aborted, fault, cells, stack.pop_all()
        )


@dataclass
class PlayedEpisode:
    """An episode played to its end whose cells may still run: ``finish()`` stops them and gives its result."""

    env: EnvHost
    records: list[AgentRecord]
    settings: EpisodeSettings
    pool: ProcessPool | InlinePool
    started_at: str
    clock: float  # time.monotonic() as it began
    timings: Timings
    aborted: str | None
    fault: GameFault | None
    cells: contextlib.ExitStack  # stops the cells
    stack: contextlib.ExitStack  # stops the cells, then closes the game

    def finish(self) -> EpisodeResult:
        """Stop the cells (kill, reap, remove their cgroups and scratch); then the result, whole only now
        (how the cells were cleaned up, which logs were cut short); then the replay (``StorageFull`` if it
        cannot be written, the result its ``result``); then close the game. Once, on any one thread."""
        pool = self.pool
        with self.stack:
            self.cells.close()
            cleanup = pool.cleanup if isinstance(pool, ProcessPool) else "inline"
            duration = time.monotonic() - self.clock
            result = _result(
                self.env, self.records, self.settings, self.started_at, self.timings, duration, cleanup, self.aborted
            )
            result.game_fault = self.fault
            result.memory_budget = pool.memory_budget if isinstance(pool, ProcessPool) else None
            try:
                self.env.write_replay()  # with the cells gone, and the game still open for the replay's final stats
            except StorageFull as full:
                full.result = result  # the episode was played: only its replay is missing
                raise
            return result


class PolicyRefused(SpecError):
    """A policy cannot be built in its cell: the message names each such policy and why."""


def refusal(records: Sequence[AgentRecord], tidy: Callable[[str], str] | None = None) -> PolicyRefused | None:
    """The refusal of the policies whose agents failed while being built, if any (one line each);
    ``tidy`` rewrites each failure's message first (before it is cut to a line)."""
    failed: dict[str, str] = {}
    for record in records:
        failure = record.failure
        if failure is not None and failure.phase == "init" and record.status.is_terminal:
            if tidy is not None:
                failure = failure.model_copy(update={"message": tidy(failure.message)})
            tail = log_tail(record.log_path) if failure.kind == "Crashed" and record.log_path else None
            why = failure.one_line() + (f"; its log ends: {tail.strip()[-300:]}" if tail and tail.strip() else "")
            failed.setdefault(record.spec.display_name, f"{record.spec.display_name} cannot be built: {why}")
    return PolicyRefused("; ".join(failed.values())) if failed else None


def check_policies(
    specs: Sequence[PolicySpec],
    settings: EpisodeSettings,
    agents: int,
    zygote: Zygote | None = None,
    tidy: Callable[[str], str] | None = None,
) -> None:
    """Build each distinct policy once as an episode would -- in a cell, under its sandbox and start-up
    deadline (or inline) -- and raise ``PolicyRefused`` for those that cannot be built (``tidy``: as
    ``refusal``). Specs are tried a game's worth of seats at a time; no step is played."""
    distinct = list({spec.model_dump_json(): spec for spec in specs}.values())
    env = open_env(settings, agents)
    try:
        with tempfile.TemporaryDirectory(prefix="policybox-check-") as logs:
            for start in range(0, len(distinct), agents):
                batch = distinct[start : start + agents]
                records = agent_records(batch, settings, Path(logs) / str(start), list(map(str, range(len(batch)))))
                with contextlib.ExitStack() as cells:
                    start_pool(records, [env.cell_setup(r.agent_id) for r in records], settings, zygote, cells)
                    if refused := refusal(records, tidy):
                        raise refused
    finally:
        env.close()


def agent_records(
    specs: Sequence[PolicySpec],
    settings: EpisodeSettings,
    log_dir: Path | None,
    entrants: Sequence[str],
    agent_ids: Sequence[int] | None = None,
) -> list[AgentRecord]:
    """One record per agent, ``specs[i]`` for agent ``agent_ids[i]`` (default: i), playing for
    ``entrants[i]`` (its submission: which seats may share a cell), with its cell's thread budget and
    log file."""
    ids = range(len(specs)) if agent_ids is None else agent_ids
    adapter, _ = env_family(settings)
    torch = {id(spec): torch_use.needs_torch(spec, adapter.resolve_shorthand) for spec in specs}  # once a spec
    cells = cell_count(entrants, settings.cells_applied)
    return [
        AgentRecord(
            agent_id,
            spec,
            entrant,
            cell_threads(spec.env, settings.threads_per_cell, cells),
            _log_path(log_dir, agent_id, settings.mode),
            torch=torch[id(spec)],
        )
        for agent_id, spec, entrant in zip(ids, specs, entrants, strict=True)
    ]


def start_pool(
    records: list[AgentRecord],
    cell_envs: Sequence[dict[str, Any]],
    settings: EpisodeSettings,
    zygote: Zygote | None,
    stack: contextlib.ExitStack,
) -> ProcessPool | InlinePool:
    """Start the cells (or inline runtimes) that play ``records`` -- one per record, or per policy
    (``settings.cells_applied``) -- and wait until each is ready or has failed; they are stopped when ``stack``
    closes. ``cell_envs[i]`` is the environment's setup for the cell half of ``records[i]``. A spec
    whose setup script has not run is refused before any cell starts."""
    check_prepared([record.spec for record in records])
    if settings.mode == "inline":
        environments.check_one_process([record.spec for record in records])
    groups = cell_groups(records, cell_envs, settings.cells_applied)
    launcher = _launcher(settings, zygote, stack) if settings.mode == "process" else None
    pool = (
        ProcessPool(groups, settings.limits, settings.sandbox, settings.seccomp, launcher)
        if launcher is not None
        else InlinePool(groups)
    )
    stack.enter_context(pool)
    pool.start([group.setup_message(settings.seed, settings.limits.log_limit_bytes) for group in groups])
    return pool


def check_prepared(specs: Sequence[PolicySpec]) -> None:
    """Refuse a spec that still has a setup script or requirements: built without what its script makes,
    or without its packages, it would fail in ways that blame nobody. ``policybox.files.setup_scripts``
    runs the script in a cell and gives the spec of its result; ``policybox.files.environments`` builds
    the environment and gives the spec that imports from it."""
    for spec in specs:
        if spec.requirements:
            raise SpecError(
                f"policy {spec.display_name} declares requirements ({', '.join(spec.requirements)}) whose environment "
                "must be built first: policybox run and evaluate build it; from Python, "
                "policybox.files.environments.with_environments"
            )
        if spec.setup_script:
            raise SpecError(
                f"policy {spec.display_name} has a setup script ({spec.setup_script}) that must run first, in a "
                "cell: policybox run, evaluate and ladder submit run it; from Python, "
                "policybox.files.setup_scripts.prepared"
            )


def _launcher(settings: EpisodeSettings, zygote: Zygote | None, stack: contextlib.ExitStack) -> Launcher:
    if settings.launcher == "spawn":
        return SpawnLauncher()
    if zygote is None:
        zygote = zygote_for(zygote_preload(settings), stack)
    elif set(settings.preload) - set(zygote.preload):
        raise ValueError(f"the zygote given preloads {zygote.preload}, not {settings.preload}")
    return ZygoteLauncher(zygote)


def _log_path(log_dir: Path | None, agent_id: int, mode: Mode) -> Path | None:
    """Where agent ``agent_id``'s output goes: a 0600 file (made by the host's output pump) in a 0700
    folder, so that nothing -- another cell included -- reads an agent's output but the operator."""
    if mode != "process" or log_dir is None:
        return None
    with writing(log_dir, "creating"):
        log_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    log_dir.chmod(0o700)
    return log_dir / f"agent-{agent_id}.log"


class _GameRaised(Exception):
    """The game raised: the episode ends, and the fault is its result's ``game_fault``."""

    def __init__(self, fault: GameFault) -> None:
        super().__init__(fault.one_line())
        self.fault = fault


def _fault(phase: str, step: int, exc: Exception, agent: int | None = None, blamed: bool = False) -> _GameRaised:
    trace = "".join(traceback.format_exception(exc))[-GAME_TRACEBACK_CHARS:]
    return _GameRaised(
        GameFault(
            phase=phase,
            step=step,
            kind=type(exc).__name__,
            message=str(exc)[:2000],
            traceback=trace,
            agent=agent,
            blamed=blamed,
        )
    )


def _play(
    env: EnvHost,
    pool: ProcessPool | InlinePool,
    records: list[AgentRecord],
    on_agent_failure: OnFailure,
    deadline: float | None,
) -> tuple[str | None, GameFault | None]:
    """Play to the end: (why the episode was cut short, if it was; the game's fault, if it raised).

    A game that raises -- on a move it should have refused, or from a bug of its own -- ends the
    episode there, recorded and attributed; it never ends it without a result. The agent whose own
    action the game was applying, unchecked, is blamed: its status becomes ``error``."""
    try:
        return _steps(env, pool, records, on_agent_failure, deadline), None
    except _GameRaised as raised:
        fault = raised.fault
        if fault.blamed and fault.agent is not None:
            message = f"its action made the game raise {fault.kind}: {fault.message}"
            failure = Failure(step=fault.step, phase="step", kind="GameError", message=message[:2000])
            records[fault.agent].fail(AgentStatus.ERROR, failure)
        return fault.one_line(), fault


def _steps(
    env: EnvHost,
    pool: ProcessPool | InlinePool,
    records: list[AgentRecord],
    on_agent_failure: OnFailure,
    deadline: float | None,
) -> str | None:
    """Step until the game ends; the reason if the episode was cut short instead. Only the agents
    whose turn it is are asked; an agent that leaves the game has its cell stopped. Every call into
    the game is guarded: what it raises becomes a ``_GameRaised`` naming the phase and the mover."""
    started = time.monotonic()
    while True:
        step = env.current_step
        try:
            if env.done:
                return None
            acting = env.acting()
            observations = {i: env.observation(i) for i in acting}
        except Exception as exc:
            raise _fault("observe", step, exc) from exc
        if on_agent_failure == "abort" and (cause := _first_terminal_failure(records)):
            return cause
        if deadline is not None and (now := time.monotonic()) >= deadline:
            _blame_slow(records, step, now - started)
            return f"episode time limit reached after {step} steps"
        # Keep collector pauses off the step path (as MettaGrid's Rollout does); collect between steps.
        gc.disable()
        try:
            replies = pool.act(step, observations)
            _apply(env, records, step, acting, replies)
        finally:
            gc.enable()
        try:
            live = env.live()
        except Exception as exc:
            raise _fault("observe", step + 1, exc) from exc
        _leave(pool, records, live, step + 1)


def _blame_slow(records: list[AgentRecord], step: int, played_s: float) -> None:
    """The episode's time limit is reached: each agent still playing whose replies took more than
    ``SLOW_SHARE`` of the time played is disabled -- it held the episode up, not the game or the others."""
    for record in records:
        thinking_s = sum(record.latencies_ns) / 1e9
        if record.playing and thinking_s > SLOW_SHARE * played_s:
            message = (
                f"its replies took {thinking_s:.1f} s of the {played_s:.1f} s played when the episode's time "
                f"limit was reached at step {step}"
            )
            failure = Failure(step=step, phase="step", kind="EpisodeTimeLimit", message=message)
            record.fail(AgentStatus.DISABLED, failure)


def _apply(
    env: EnvHost, records: list[AgentRecord], step: int, acting: Sequence[int], replies: Mapping[int, Reply]
) -> None:
    """Give the game every acting agent's action, then step it. A raise names the agent whose action
    it was applying (in a step with one mover: that mover), and blames it when that action was its
    policy's own and the host could not check it against the game's legal moves -- a raise on a
    checked move is the game's bug; on an unchecked one it may be the game refusing an illegal move."""
    own = {}
    for i in acting:
        records[i].turns += 1
        try:
            own[i] = apply_reply(env, records[i], step, replies.get(i))
            if i in replies:  # its latency of this step is its last
                env.took(i, records[i].latencies_ns[-1] / 1e9)
        except Exception as exc:
            raise _fault("step", step, exc, i) from exc
    try:
        env.step()
    except Exception as exc:
        mover = acting[0] if len(acting) == 1 else None
        blamed = mover is not None and own[mover] and not env.move_checked(mover)
        raise _fault("step", step, exc, mover, blamed) from exc
    for i in acting:
        try:
            why = env.refused(i) if own[i] else None
        except Exception as exc:
            raise _fault("step", step, exc, i) from exc
        if why is not None:
            records[i].invalid_action(step, why)


def _leave(pool: ProcessPool | InlinePool, records: list[AgentRecord], live: Collection[int], step: int) -> None:
    """Stop the cells of the agents that have left the game (terminated or truncated) this step."""
    if len(live) < len(records):
        gone = [record for record in records if record.left_at_step is None and record.agent_id not in live]
        for record in gone:
            record.leave(step)
        if gone:
            pool.retire_stopped()


def _first_terminal_failure(records: list[AgentRecord]) -> str | None:
    for record in records:
        if record.status.is_terminal and record.failure is not None:
            return f"agent {record.agent_id} ({record.spec.display_name}) {record.status}: {record.failure.one_line()}"
    return None


def apply_reply(env: ActionSink, record: AgentRecord, step: int, reply: Reply | None) -> bool:
    """Give the env an agent's reply (its action) or, for no reply or an invalid one, the family's
    fallback action; record it. Whether the agent's own action was applied."""
    agent_id = record.agent_id
    if reply is not None and reply[0] == FrameType.ACTION:
        try:
            env.apply_action(agent_id, reply[1])
            record.applied(reply[1])
            return True
        except InvalidAction as exc:
            record.invalid_action(step, str(exc))
    elif reply is not None:  # INVALID_ACTION: the cell could not encode what the policy returned
        record.invalid_action(step, reply[1].decode("utf-8", "replace")[:1000])
    env.apply_fallback(agent_id, late=reply is None and record.late)
    record.applied(None)
    return False


def _result(
    env: EnvHost,
    records: list[AgentRecord],
    settings: EpisodeSettings,
    started_at: str,
    timings: Timings,
    duration: float,
    cleanup: str,
    aborted: str | None,
) -> EpisodeResult:
    rewards = env.rewards()
    game_stats, agent_stats = env.episode_stats()
    agents = []
    for record in records:
        tail = log_tail(record.log_path) if record.log_path is not None else None
        if record.failure is not None and record.log_path is not None:
            record.failure.log_tail = tail
        agents.append(
            AgentResult(
                agent_id=record.agent_id,
                agent=env.agent_names[record.agent_id],
                policy=record.spec.display_name,
                spec=record.spec.redacted(),
                reward=rewards[record.agent_id],
                stats=agent_stats[record.agent_id],
                status=record.status,
                failure=record.failure,
                first_failure_step=record.first_failure_step,
                turns=record.turns,
                timeouts=record.timeouts,
                invalid_actions=record.invalid_actions,
                minimum_action_timeout_ms=record.minimum_action_timeout_ms,
                threads=record.threads,
                left_at_step=record.left_at_step,
                latency=record.latency(),
                memory=record.memory,
                sandbox=record.sandbox,
                action_digest=record.action_digest,
                log_path=str(record.log_path) if record.log_path else None,
                log_tail=tail,
                log_note=record.log_note,
            )
        )
    return EpisodeResult(
        policybox_version=policybox.__version__,
        mode=settings.mode,
        cells=settings.cells_applied,
        seed=settings.seed,
        steps=env.current_step,
        env=env.describe(),
        limits=settings.limits,
        on_agent_failure=settings.on_agent_failure,
        sandbox=settings.sandbox if settings.mode == "process" else SandboxLevel.OFF,
        cleanup=cleanup,
        aborted=aborted,
        game_stats=game_stats,
        agents=agents,
        started_at=started_at,
        duration_s=round(duration, 3),
        startup_s=round(timings.startup_s, 4),
        play_s=round(timings.play_s, 4),
    )


def log_tail(path: Path) -> str | None:
    try:
        with open(path, "rb") as log:
            log.seek(max(0, path.stat().st_size - LOG_TAIL_BYTES))
            return log.read().decode("utf-8", "replace") or None
    except OSError:
        return None
