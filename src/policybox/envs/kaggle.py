"""Kaggle adapter: the games of ``kaggle-environments`` (ConnectX, Rock-Paper-Scissors, Hungry Geese,
Halite, Kore...), every agent in a cell of its own, where Kaggle's own runner calls them all in its
process.

``--env kaggle:GAME`` makes ``kaggle_environments.make(GAME, configuration)`` in the host -- the game's
code is the installed package's, trusted as MettaGrid's is -- with its configuration from the spec's
query (``kaggle:connectx?rows=5&inarow=3``, values read as JSON) and from ``--env-kwargs``. A key the
game's specification does not have, or a value it refuses, is a ConfigError naming the choices; so is
a number of seats the game does not take (``specification.agents``).

- **Seats and turns.** Seat i is the game's agent i. Each step, the seats whose status is ``ACTIVE``
  are asked (ConnectX: the one whose turn it is; Hungry Geese: every live goose); the others are
  given ``None``, as Kaggle's runner gives them. A seat whose status is no longer ``ACTIVE`` or
  ``INACTIVE`` (``DONE``, ``ERROR``, ``TIMEOUT``, ``INVALID``) has left the game: its cell is stopped.
- **Observations** cross as the JSON of what Kaggle's runner would hand that agent (its own state's
  observation with the shared fields of agent 0's, hidden ones removed); the cell rebuilds Kaggle's
  ``Struct`` (attribute and key access), and hands the agent the game's configuration with it.
- **Actions** cross as JSON; the host checks each against the game's action schema, so that an
  action the game refuses is the agent's invalid action, recorded on it.
- **Failures are told to the game as Kaggle's runner tells it**: an agent past its deadline as a
  ``DeadlineExceeded`` (status ``TIMEOUT``), one that failed otherwise as an exception (``ERROR``), a
  refused action as itself (``INVALID``), an action its code raises on as that agent's error (``ERROR``,
  found by playing the step again). The game's rules then decide; Kaggle gives such an agent a
  reward of ``None`` -- here 0, and the agent is failed, so it ranks below every agent that played.
- **Determinism.** The game's interpreters draw from Python's ``random`` (and some from numpy's):
  both are seeded from the episode's seed before the game is made, so a seed replays a game.
- **Time.** The game's own time rules are the limits a user leaves unset (``game_limits``): ``actTimeout``
  the act deadline, ``remainingOverageTime`` the time bank, which a late reply waits on as Kaggle's overage
  does. The configuration and observations agents read carry the limits in force, and each step the game
  is told every reply's time, so its ``remainingOverageTime`` falls as the bank does.
- **Steps.** ``--steps`` caps the game's ``episodeSteps`` (the configuration the game is made with
  says the smaller); the game's own end comes first where it is sooner.
- **Moves.** Asked for a replay, each step's actions and rewards are recorded (``policybox.envs.moves``),
  with the board as text where the game renders ``ansi`` (else the shared observation, as JSON), and the
  episode as Kaggle keeps it, ``env.toJSON()``, beside them.

Agents (the cell half): a shorthand names one of the game's built-in agents (``negamax``, or
``kaggle:negamax``; ``random``); a file ``path/main.py`` without a class is an agent file whose last
callable is the agent, as Kaggle reads one (``policybox.cell.loader``). An agent is called as Kaggle
calls it: ``agent(observation, configuration)``, or ``agent(observation)`` when it takes one argument.
"""

from __future__ import annotations

import contextlib
import importlib
import io
import json
import random
import re
from collections.abc import Callable, Sequence
from typing import Any
from urllib.parse import parse_qsl

import numpy as np

from policybox.envs.base import ConfigError, GameRequest, InvalidAction
from policybox.envs.kaggle_builtins import BuiltinAgent
from policybox.envs.kaggle_schemas import fast_schemas, process_schema, state_schema_once
from policybox.envs.moves import MovesRecorder
from policybox.errors import install_command
from policybox.wire import ProtocolError, decode_value

ZYGOTE_PRELOAD = ("policybox.envs.kaggle", "policybox.envs.kaggle_builtins")
PACKAGE = "kaggle-environments"
INSTALL = (
    f"{install_command('kaggle')}, then pip install --no-deps '{PACKAGE}==1.33.2' (the dependencies it "
    "declares are needed by a few games only; docs/kaggle.md)"
)
PREFIX = "kaggle:"
LEFT = ("DONE", "ERROR", "TIMEOUT", "INVALID")  # statuses of a seat that has left the game
RENDERED = 4096  # characters of the board kept per step in the moves
RECORD_MAX = 16 * 1024 * 1024  # characters of JSON of the episode as Kaggle keeps it (env.toJSON()), beside the moves


def kaggle() -> Any:
    """The ``kaggle_environments`` package, imported quietly: on import it registers every game it ships and
    prints a line for each whose own dependencies are missing (those games are then not registered)."""
    with contextlib.redirect_stdout(io.StringIO()):
        try:
            import kaggle_environments
        except ImportError as exc:
            raise ConfigError(f"Kaggle games need the {PACKAGE} package ({exc}): {INSTALL}") from None
    return kaggle_environments


def unloadable(game: str) -> str | None:
    """Why a game the package ships is not registered here, as importing its module again says (open_spiel's
    games are ``open_spiel_env``'s); None for a game it does not ship, or one that imports."""
    if not re.fullmatch(r"[a-z0-9_]+", game):
        return None
    for name in (game, f"{game}_env"):
        module = f"kaggle_environments.envs.{name}.{name}"
        try:
            with contextlib.redirect_stdout(io.StringIO()):
                importlib.import_module(module)
        except ModuleNotFoundError as exc:
            if exc.name is not None and module.startswith(exc.name):  # the package has no such game
                continue
            return str(exc)
        except Exception as exc:  # the game's own module, failing as it did at the package's import
            return f"{type(exc).__name__}: {exc}"
    return None


def games() -> list[str]:
    """The games registered here (those whose dependencies are installed), and those loaded on first use."""
    kaggle()
    from kaggle_environments import core

    return sorted({*core.environments, *core._lazy_environments})


def split_target(target: str, kwargs: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """(game, configuration) of ``GAME?KEY=VALUE&...`` and ``--env-kwargs``; a value is read as JSON where
    it parses (``rows=5`` is 5), else kept as text."""
    game, _, query = target.partition("?")
    configuration: dict[str, Any] = {}
    try:
        pairs = parse_qsl(query, keep_blank_values=True, strict_parsing=bool(query))
    except ValueError:
        raise ConfigError(
            f"kaggle:{target}: the configuration is KEY=VALUE pairs joined by &, as rows=5&inarow=3"
        ) from None
    for key, value in pairs:
        try:
            configuration[key] = json.loads(value)
        except ValueError:
            configuration[key] = value
    return game, {**configuration, **kwargs}


def make_env(target: str, kwargs: dict[str, Any], steps: int | None = None) -> Any:
    """The game made with its configuration (``episodeSteps`` at most ``steps``); ConfigError for an unknown
    game, a key the game has not, or a value it refuses."""
    module = kaggle()
    from kaggle_environments import errors

    game, configuration = split_target(target, kwargs)
    known = games()
    if game not in known:
        if why := unloadable(game):
            raise ConfigError(f"the Kaggle game {game!r} does not load here ({why}): install what it needs")
        raise ConfigError(f"unknown Kaggle game {game!r}; installed here: {', '.join(known)}")
    try:
        with contextlib.redirect_stdout(io.StringIO()), fast_schemas():  # a game loaded on first use may print
            env = module.make(game, configuration=configuration)
    except errors.InvalidArgument as exc:
        raise ConfigError(f"kaggle:{target}: {str(exc).splitlines()[0]}") from None
    except ImportError as exc:  # a game loaded on first use, whose own dependencies are missing
        raise ConfigError(f"the Kaggle game {game!r} needs a package that is not installed: {exc}") from None
    unknown = sorted(set(configuration) - set(env.specification.configuration))
    if unknown:
        keys = ", ".join(sorted(env.specification.configuration))
        raise ConfigError(f"kaggle:{game} has no configuration key {', '.join(unknown)}; its keys: {keys}")
    if steps is not None and steps < env.configuration.episodeSteps:
        env.configuration.episodeSteps = steps
    return env


def game_limits(target: str, kwargs: dict[str, Any]) -> dict[str, Any]:
    """Kaggle's time rules as limits, from the game's specification: ``actTimeout`` is the act deadline,
    ``remainingOverageTime`` the time bank, which a late reply waits on as Kaggle's overage does
    (``wait_on_bank``); the start-up deadline is what Kaggle's runner allows an agent's first call (its
    act timeout and its whole overage: ``agentTimeout`` is obsolete), ``runTimeout`` the episode's limit."""
    env = make_env(target, kwargs)
    act_s = float(env.configuration.actTimeout)
    overage_s = float(env.specification.observation.get("remainingOverageTime", {}).get("default") or 0)
    return {
        "act_timeout_ms": act_s * 1000,
        "time_bank_ms": overage_s * 1000,
        "wait_on_bank": True,
        "init_timeout_s": act_s + overage_s,
        "episode_timeout_s": float(env.configuration.runTimeout),
    }


def fixed_agents(target: str, kwargs: dict[str, Any]) -> int | None:
    """The game's number of agents when its specification allows one only (ConnectX: 2); else None."""
    allowed = list(make_env(target, kwargs).specification.agents)
    return allowed[0] if len(allowed) == 1 else None


def open_host(request: GameRequest) -> KaggleHost:
    """The game for ``request.agents`` seats (one of the counts its specification allows), seeded and reset."""
    random.seed(request.seed)
    np.random.seed(request.seed % 2**32)
    env = make_env(request.target, request.kwargs, request.steps)
    allowed = list(env.specification.agents)
    if request.agents not in allowed:
        counts = ", ".join(str(count) for count in allowed)
        raise ConfigError(f"kaggle:{env.name} is a game for {counts} agents, not {request.agents}")
    env.configuration.actTimeout = request.limits.act_timeout_ms / 1000  # what agents read is what is enforced
    if request.limits.episode_timeout_s is not None:
        env.configuration.runTimeout = request.limits.episode_timeout_s
    host = KaggleHost(env, request)
    if request.replay is not None:
        host.moves = MovesRecorder(request.replay, host.agent_names)
    return host


def resolve_shorthand(name: str) -> str:
    """A built-in agent of the game, by name (``negamax``, ``kaggle:negamax``): found in the cell, in the
    game it plays (``policybox.envs.kaggle_builtins``)."""
    return f"policybox.envs.kaggle_builtins.{name.removeprefix(PREFIX)}"


def warm() -> None:
    """Import the package once in the zygote: every game it registers, ready for every cell."""
    with contextlib.suppress(ConfigError):
        kaggle()


def cell_half(setup: dict[str, Any]) -> KaggleCell:
    return KaggleCell(setup)


class KaggleHost:
    """The host half: a ``kaggle_environments`` Environment stepped from outside, one seat per cell."""

    family = "kaggle"

    def __init__(self, env: Any, request: GameRequest) -> None:
        state_schema_once(env)
        self._env = env
        self._target = request.target
        with fast_schemas():
            env.reset(request.agents)
        for state in env.state:  # each agent's overage is its time bank; the game draws it down as Kaggle's does
            state.observation.remainingOverageTime = request.limits.time_bank_ms / 1000
        self.agent_names = [f"player_{index}" for index in range(request.agents)]
        self._actions: dict[int, Any] = {}  # this step's, for the game
        self._durations: dict[int, float] = {}  # this step's reply times, for the game's overage
        self._played: dict[int, Any] = {}  # the last step's
        self._own: set[int] = set()  # the seats whose own action the game is given this step
        self._own_played: set[int] = set()  # the last step's
        self._raised: dict[int, str] = {}  # the last step's agents whose action made the game raise, and why
        self._steps = 0
        self._shared_state = env._Environment__get_shared_state  # what Kaggle's runner hands an agent
        self._action_schema = env._Environment__state_schema.properties.action
        self.moves: MovesRecorder | None = None

    def cell_setup(self, agent_id: int) -> dict[str, Any]:
        return {"family": self.family, "game": self._env.name, "configuration": dict(self._env.configuration)}

    def describe(self) -> dict[str, Any]:
        return {
            "family": self.family,
            "label": f"kaggle:{self._target}",
            "game": self._env.name,
            "configuration": dict(self._env.configuration),
            "num_agents": len(self.agent_names),
            "agents": self.agent_names,
            "max_steps": self.max_steps,
        }

    def acting(self) -> list[int]:
        return [index for index, state in enumerate(self._env.state) if state.status == "ACTIVE"]

    def live(self) -> set[int]:
        return {index for index, state in enumerate(self._env.state) if state.status not in LEFT}

    def observation(self, agent_id: int) -> bytes:
        return json.dumps(self._shared_state(agent_id).observation, separators=(",", ":")).encode()

    def move_checked(self, agent_id: int) -> bool:
        """Never by the game's rules: its action schema says what an action looks like, not whether it is
        legal now, so a game that raises on the one move of a step raises on that agent's move."""
        return False

    def apply_action(self, agent_id: int, payload: bytes) -> None:
        """The agent's action, read as any peer's JSON is (bounded depth, valid text, no NaN), then checked
        against the game's action schema; anything the action makes either raise is its invalid action."""
        try:
            action = decode_value(payload, "its action", finite=True)
        except ProtocolError as exc:
            raise InvalidAction(str(exc)) from None
        try:
            error, _ = process_schema(self._action_schema, action)
        except Exception as exc:  # the game's schema code, on a value an entrant chose
            raise InvalidAction(f"the game's action schema raised {type(exc).__name__} on it") from None
        self._actions[agent_id] = action  # refused, the game is shown it: it marks it INVALID itself
        if error:
            raise InvalidAction(f"the game refuses the action {json.dumps(action)[:200]}: {error.splitlines()[0]}")
        self._own.add(agent_id)

    def apply_fallback(self, agent_id: int, late: bool = False) -> None:
        """What Kaggle's runner gives the game for an agent that did not act: the action its schema refused
        itself (``INVALID``), a ``DeadlineExceeded`` for one past its deadline (``TIMEOUT``), else an
        exception (``ERROR``) -- a reply the host could not read as a JSON value (too deep, NaN) is no
        action at all."""
        from kaggle_environments.errors import DeadlineExceeded

        if agent_id not in self._actions:
            why = "past its deadline" if late else "it failed (policybox recorded why)"
            self._actions[agent_id] = DeadlineExceeded(why) if late else RuntimeError(why)

    def refused(self, agent_id: int) -> str | None:
        """The game's own verdict on an action it took: an interpreter may mark a move ``INVALID`` (or
        ``ERROR``) by its rules, which the action schema does not say (ConnectX: a full column)."""
        if agent_id not in self._own_played:
            return None
        if agent_id in self._raised:
            return f"{self._raised[agent_id]} (its action: {json.dumps(self._played[agent_id])[:200]})"
        status = self._env.state[agent_id].status
        if status not in ("INVALID", "ERROR", "TIMEOUT"):
            return None
        return f"the game marked its action {json.dumps(self._played[agent_id])[:200]} {status}"

    def took(self, agent_id: int, seconds: float) -> None:
        self._durations[agent_id] = seconds

    def step(self) -> None:
        """The step, told each agent's reply time as Kaggle's runner tells it (its logs' ``duration``): the
        game draws the time past ``actTimeout`` from the agent's ``remainingOverageTime``."""
        seats = range(len(self.agent_names))
        actions = [self._actions.get(index) for index in seats]
        durations = self._durations
        logs = [{"duration": durations[index]} if index in durations else {} for index in seats]
        self._raised = {}
        with fast_schemas():
            try:
                self._env.step(actions, [dict(log) for log in logs])  # a copy: a step that raises adds its traceback
            except Exception as exc:
                self._raised = self._culprits(actions, logs, exc)
                if not self._raised:
                    raise  # no agent's action makes the difference: the game's own fault
                for index, why in self._raised.items():
                    actions[index] = RuntimeError(why)
                self._env.step(actions, logs)
        self._durations = {}
        if self.moves is not None:
            board = self._board()
            for index in self._actions:  # the action as the game kept it (its schema's default for a None)
                action = self._env.state[index].action
                self.moves.record(self._steps, self.agent_names[index], action, self._reward(index), board)
        self._played, self._actions = self._actions, {}
        self._own_played, self._own = self._own, set()
        self._steps += 1

    def _culprits(self, actions: list[Any], logs: list[dict[str, Any]], exc: Exception) -> dict[int, str]:
        """The agents whose own action made the game's step raise -- a value its schema allows and its rules
        do not (Kore's ``LAUNCH_2_NZ`` fails an assertion): found by playing the step again from the same
        state, first with each own action in turn told to the game as that agent's error, then with each own
        action alone; each trial is undone. Without this, one such action voided the whole match."""
        why = f"its action made the game raise {type(exc).__name__}: {str(exc)[:200]}"
        suspects = sorted(self._own)
        for index in suspects:
            if self._passes(
                [RuntimeError(why) if seat == index else action for seat, action in enumerate(actions)], logs
            ):
                return {index: why}
        alone = {
            index: why
            for index in suspects
            if not self._passes(
                [
                    RuntimeError(why) if seat in self._own and seat != index else action
                    for seat, action in enumerate(actions)
                ],
                logs,
            )
        }
        others = [RuntimeError(why) if seat in alone else action for seat, action in enumerate(actions)]
        return alone if alone and self._passes(others, logs) else {}

    def _passes(self, actions: list[Any], logs: list[dict[str, Any]]) -> bool:
        """Whether the game steps with ``actions`` without raising; the step undone either way (its state,
        its record of steps, the random streams its interpreter draws from)."""
        env, streams = self._env, (random.getstate(), np.random.get_state())
        state, steps, kept_logs = env.state, len(env.steps), len(env.logs)
        try:
            env.step(actions, [dict(log) for log in logs])
        except Exception:
            return False
        else:
            return True
        finally:
            env.state = state
            del env.steps[steps:], env.logs[kept_logs:]
            random.setstate(streams[0])
            np.random.set_state(streams[1])

    def _board(self) -> str:
        """The board as the game renders it as text, else the observation all agents share, as JSON."""
        try:
            text = self._env.render(mode="ansi")
        except Exception:  # a game without a text renderer
            text = None
        if not isinstance(text, str):
            text = json.dumps(self._shared_state(0).observation, separators=(",", ":"))
        return text[:RENDERED]

    def _reward(self, agent_id: int) -> float:
        reward = self._env.state[agent_id].reward
        return float(reward) if reward is not None else 0.0

    @property
    def done(self) -> bool:
        return bool(self._env.done)

    @property
    def current_step(self) -> int:
        return self._steps

    @property
    def max_steps(self) -> int:
        return int(self._env.configuration.episodeSteps)

    def rewards(self) -> list[float]:
        """Each seat's reward at the end (Kaggle's rewards are the score so far, not a step's); ``None`` --
        Kaggle's for an agent that failed -- is 0."""
        return [self._reward(index) for index in range(len(self.agent_names))]

    def episode_stats(self) -> tuple[dict[str, float], list[dict[str, float]]]:
        """Each seat's status at the end, as Kaggle reports it (``status.DONE``: 1)."""
        return {}, [{f"status.{state.status}": 1.0} for state in self._env.state]

    def write_replay(self) -> None:
        """The moves, and beside them the episode as Kaggle keeps it (``env.toJSON()``: its steps, rewards,
        statuses and configuration) under ``"kaggle"`` -- None past ``RECORD_MAX`` characters."""
        if self.moves is not None:
            record = self._env.toJSON()
            self.moves.extra["kaggle"] = record if len(json.dumps(record)) <= RECORD_MAX else None
            self.moves.write()

    def close(self) -> None:
        """Nothing to release: the game is plain Python objects."""


class KaggleCell:
    """The cell half: JSON in, Kaggle's ``Struct`` out, the agent called as Kaggle calls it, JSON back."""

    def __init__(self, setup: dict[str, Any]) -> None:
        kaggle()
        from kaggle_environments.utils import structify

        self._game = str(setup["game"])
        self._configuration = setup["configuration"]
        self._structify = structify

    def resolve_shorthand(self, name: str) -> str:
        return resolve_shorthand(name)

    def build_policy(self, policy_class: Any, spec: Any) -> Callable[..., Any]:
        """The agent: one of the game's built-in agents, or an agent file's last callable."""
        if isinstance(policy_class, BuiltinAgent):
            kaggle()
            from kaggle_environments import core

            builtins = core.environments.get(self._game, {}).get("agents") or {}
            if policy_class.name not in builtins:
                known = ", ".join(sorted(builtins)) or "none"
                raise LookupError(
                    f"kaggle:{self._game} has no built-in agent {policy_class.name!r}; its agents: {known}"
                )
            agent: Callable[..., Any] = builtins[policy_class.name]
            return agent
        if not callable(policy_class):
            raise TypeError(
                f"{spec.class_path} is not a Kaggle agent: expected a callable agent(observation, configuration)"
            )
        found: Callable[..., Any] = policy_class
        return found

    def build_agent(self, policy: Any, spec: Any, agent_id: int) -> tuple[Any, int]:
        """The agent called with ``(observation, configuration)``, or ``(observation)`` when it takes one
        argument (Kaggle counts its code's arguments); each call gets a fresh configuration."""
        code = getattr(policy, "__code__", None)
        arguments = code.co_argcount if code is not None else 2
        configuration = self._configuration

        def act(observation: Any) -> Any:
            return policy(*[observation, self._structify(configuration)][:arguments])

        return act, 0

    def step_group(self, agent_ids: Sequence[int], payloads: Sequence[bytes | memoryview]) -> list[Any] | None:
        """None: a Kaggle agent acts for itself alone."""
        return None

    def decode_observation(self, agent_id: int, payload: bytes | memoryview) -> Any:
        return self._structify(json.loads(bytes(payload)))

    def encode_action(self, action: Any) -> bytes:
        return json.dumps(action.item() if isinstance(action, np.generic) else action).encode()
