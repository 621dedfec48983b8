"""One episode: an environment, one policy per agent (in cells or inline), played step by step to its
EpisodeResult. Its cells are started by ``policybox.startup``, its game opened by ``policybox.game``."""

from __future__ import annotations

import contextlib
import gc
import os
import time
import traceback
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TypeVar

import policybox
from policybox.envs import ActionSink, ConfigError, EnvHost, InvalidAction
from policybox.errors import SpecError
from policybox.game import check_shorthands, open_env
from policybox.host.cell_pool import CellPool
from policybox.host.output import log_tail
from policybox.host.record import AgentRecord
from policybox.host.zygote import Zygote
from policybox.results import AgentResult, AgentStatus, EpisodeResult, Failure, GameFault
from policybox.sandbox import SandboxLevel
from policybox.settings import REPLAY_SUFFIX, EpisodeSettings, OnFailure, agent_count
from policybox.spec import PolicySpec, parse_policy_arg
from policybox.startup import agent_records, check_strict, refusal, start_pool
from policybox.storage import StorageFull
from policybox.wire import FrameType, Reply

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


def check_playable(specs: Sequence[PolicySpec], settings: EpisodeSettings, agents: int) -> None:
    """What can be wrong with an episode before any cell starts (a misspelt shorthand, a game that
    cannot be built, a strict sandbox this machine lacks), found once, before many episodes."""
    check_shorthands(specs, settings)
    if settings.sandbox == SandboxLevel.STRICT:
        check_strict(settings)
    open_env(settings, agents).close()


def default_log_dir(seed: int) -> Path:
    """Where an episode's agent logs go unless told: ./policybox-logs/<time>-seed<N>."""
    return Path("policybox-logs") / f"{datetime.now():%Y%m%d-%H%M%S}-seed{seed}"


def check_replay(replay: str | None) -> None:
    """Refuse, before any cell starts, a replay file that could not be written when the episode ends."""
    if replay is None:
        return
    path = Path(replay)  # its name is EpisodeSettings' rule (``_replay_name``), checked as the settings are made
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
        setups = [env.cell_setup(agent_id) for agent_id in range(len(seated))]
        records = agent_records(seated, settings, log_dir, [entrant for _, entrant in seats], setups)
        cells = stack.enter_context(contextlib.ExitStack())  # closed first, then the game
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
    pool: CellPool
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
            duration = time.monotonic() - self.clock
            result = _result(
                self.env,
                self.records,
                self.settings,
                self.started_at,
                self.timings,
                duration,
                pool.cleanup,
                self.aborted,
            )
            result.game_fault = self.fault
            result.memory_budget = pool.memory_budget
            try:
                self.env.write_replay()  # with the cells gone, and the game still open for the replay's final stats
            except StorageFull as full:
                full.result = result  # the episode was played: only its replay is missing
                raise
            return result


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
    pool: CellPool,
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
    pool: CellPool,
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


def _leave(pool: CellPool, records: list[AgentRecord], live: Collection[int], step: int) -> None:
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
