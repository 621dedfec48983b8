"""PettingZoo adapter: any PettingZoo game, Parallel or turn-based (AEC), named ``MODULE:FACTORY``.

``--env pettingzoo:mpe2.simple_spread_v3:parallel_env`` imports ``mpe2.simple_spread_v3`` in the host
and calls ``parallel_env(**env_kwargs)`` (``pettingzoo:games/mine.py:env`` imports a game file); a
factory may return a Parallel env or an AEC env. Seat i is ``possible_agents[i]``.

- Parallel games ask every agent in ``env.agents`` to act each step; turn-based (AEC) games ask only
  ``env.agent_selection``, with the observation ``env.last()`` would give it. One env step is one
  policybox step (in an AEC game: one turn), and ``--steps`` caps them.
- An agent that terminates or is truncated leaves the episode: its cell is stopped. The episode ends
  when ``env.agents`` is empty or at the step limit. Rewards are summed per agent.
- Observations and actions cross as raw array bytes (``policybox.envs.spaces``, no pickle); the cell
  gets the spaces once at setup. Actions are parsed against ``action_space(agent)`` in the host;
  anything else is an invalid action.
- **Legal moves.** A game with a Discrete action space may say which moves are legal now with an
  ``action_mask``, in the observation dict or in the agent's info. The policy sees it where the game
  puts it: in its observation, or in the ``info`` its ``act(observation, info)`` is given -- the one
  entry of an agent's info that crosses to its cell (the rest stays in the host: an info may hold any
  Python object, which cannot cross without pickle). The host checks every action against the mask
  before the game sees it: a masked-out move is an invalid action, and the fallback is played
  instead -- so a game that raises on an illegal move never gets one.
- **Moves.** Asked for a replay, a game records its moves there (``policybox.envs.moves``): each
  step's acting agents, their actions and the rewards the step gave them, and the board as text
  when the game was made with ``render_mode="ansi"``.
- **Fallback action** (what a timed-out, invalid or failed agent plays): with an ``action_mask``
  the first legal action; otherwise the action space's zero (``policybox.envs.spaces.fallback_action``).
  It never plays a masked-out move.

Observation payload: one byte, 1 when the agent's info holds a mask (then the mask follows, one byte
per action: 0 or 1) and 0 when not; then the observation's bytes.
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from gymnasium import spaces

from policybox.envs.base import ConfigError, GameRequest, InvalidAction, not_a_policy
from policybox.envs.moves import MovesRecorder
from policybox.envs.spaces import SpaceCodec, fallback_action

ZYGOTE_PRELOAD = ("policybox.envs.pettingzoo", "policybox.envs.pettingzoo_policies")
NO_MASK, MASK = b"\x00", b"\x01"
_UNSEEN = object()  # a turn whose observation has not been asked for yet
SHORTHANDS = {
    "random": "policybox.envs.pettingzoo_policies.RandomPolicy",
    "noop": "policybox.envs.pettingzoo_policies.FallbackPolicy",
}
USAGE = (
    "--env pettingzoo:MODULE:FACTORY (MODULE dotted, or a .py file), e.g. pettingzoo:mpe2.simple_spread_v3:parallel_env"
)


def make_env(target: str, kwargs: dict[str, Any]) -> Any:
    """The game ``MODULE:FACTORY`` names, made with ``kwargs``: a Parallel or an AEC env."""
    from pettingzoo.utils.env import AECEnv, ParallelEnv

    module_name, _, factory_name = target.rpartition(":")
    if not module_name or not factory_name:
        raise ConfigError(f"{target!r} is not MODULE:FACTORY: {USAGE}")
    module = _import_game(module_name)
    factory = getattr(module, factory_name, None)
    if not callable(factory):
        raise ConfigError(f"{module_name} has no factory {factory_name!r} (for example parallel_env or env)")
    try:
        env = factory(**kwargs)
    except (TypeError, ValueError) as exc:  # a keyword the game does not take, or a value it refuses
        raise ConfigError(f"{target}({_kwargs_text(kwargs)}) failed: {type(exc).__name__}: {exc}") from None
    if not isinstance(env, ParallelEnv | AECEnv):
        raise ConfigError(f"{target} returned {type(env).__name__}, which is neither a PettingZoo Parallel nor AEC env")
    return env


def _import_game(name: str) -> Any:
    """A game module by dotted name, or a game file (``games/mine.py``) as a module of its own."""
    try:
        if name.endswith(".py"):
            path = Path(name)
            if not path.is_file():
                raise ConfigError(f"PettingZoo game file {name} does not exist")
            spec = importlib.util.spec_from_file_location(f"policybox_game_{path.stem}", path)
            assert spec is not None and spec.loader is not None
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
            return module
        return importlib.import_module(name)
    except ImportError as exc:
        raise ConfigError(f"cannot import the PettingZoo game module {name!r}: {exc}") from None


def _kwargs_text(kwargs: dict[str, Any]) -> str:
    return ", ".join(f"{key}={value!r}" for key, value in kwargs.items())


def fixed_agents(target: str, kwargs: dict[str, Any]) -> int:
    """A PettingZoo game has its own agents: ``possible_agents``."""
    env = make_env(target, kwargs)
    try:
        return len(env.possible_agents)
    finally:
        env.close()


def open_host(request: GameRequest) -> PettingZooHost:
    """The game reset with the request's seed; its number of agents is the caller's to check."""
    from pettingzoo.utils.env import ParallelEnv

    env = make_env(request.target, request.kwargs)
    try:
        game = ParallelGame if isinstance(env, ParallelEnv) else TurnGame
        host = game(env, request.target, request.kwargs, request.steps, request.seed)
        if request.replay is not None:
            host.moves = MovesRecorder(request.replay, host.agent_names)
        return host
    except BaseException:
        env.close()
        raise


def resolve_shorthand(name: str) -> str:
    if name not in SHORTHANDS:
        raise LookupError(f"unknown policy shorthand {name!r} for PettingZoo games; known: {', '.join(SHORTHANDS)}")
    return SHORTHANDS[name]


def warm() -> None:
    """Nothing to read once: the shorthands are a fixed table."""


def cell_half(setup: dict[str, Any]) -> PettingZooCell:
    return PettingZooCell(setup)


class PettingZooHost:
    """What both kinds of PettingZoo game share: seats, spaces and codecs, rewards, the step limit."""

    family = "pettingzoo"
    api = ""

    def __init__(self, env: Any, target: str, kwargs: dict[str, Any], max_steps: int, seed: int) -> None:
        self._env = env
        self._target = target
        self._kwargs = kwargs
        self._max_steps = max_steps
        self._agents = list(env.possible_agents)
        self._seat = {agent: index for index, agent in enumerate(self._agents)}
        self.agent_names = [str(agent) for agent in self._agents]
        self._observation_codecs = [SpaceCodec(env.observation_space(agent)) for agent in self._agents]
        self._action_codecs = [SpaceCodec(env.action_space(agent)) for agent in self._agents]
        self._totals = [0.0] * len(self._agents)
        self._steps = 0
        self.moves: MovesRecorder | None = None  # set when the episode asks for its moves

    def cell_setup(self, agent_id: int) -> dict[str, Any]:
        return {
            "family": self.family,
            "observation_space": self._observation_codecs[agent_id].describe(),
            "action_space": self._action_codecs[agent_id].describe(),
        }

    def describe(self) -> dict[str, Any]:
        return {
            "family": self.family,
            "label": self._target,
            "kwargs": self._kwargs,
            "api": self.api,
            "num_agents": len(self._agents),
            "agents": self.agent_names,
            "max_steps": self._max_steps,
        }

    def live(self) -> set[int]:
        return {self._seat[agent] for agent in self._env.agents}

    @property
    def current_step(self) -> int:
        return self._steps

    @property
    def max_steps(self) -> int:
        """``--steps``, or the game's own ``max_cycles`` where it is smaller (a turn game's cycle is one
        turn of every agent)."""
        cycles = getattr(self._env.unwrapped, "max_cycles", None)
        if not isinstance(cycles, int) or cycles < 1:
            return self._max_steps
        return min(self._max_steps, cycles * (len(self._agents) if self.api == "aec" else 1))

    @property
    def done(self) -> bool:
        return not self._env.agents or self._steps >= self._max_steps

    def rewards(self) -> list[float]:
        return list(self._totals)

    def episode_stats(self) -> tuple[dict[str, float], list[dict[str, float]]]:
        """PettingZoo has no episode stats of its own; the rewards are in ``rewards``."""
        return {}, [{} for _ in self._agents]

    def write_replay(self) -> None:
        """The moves, if the episode asked for them."""
        if self.moves is not None:
            self.moves.write()

    def _record(self, step: int, actions: dict[Any, Any], rewards: dict[Any, Any]) -> None:
        """Each agent's move at ``step``, with the board after it where the game renders as text."""
        if self.moves is None:
            return
        board = self._env.render() if getattr(self._env, "render_mode", None) == "ansi" else None
        for agent, action in actions.items():
            self.moves.record(step, str(agent), action, float(rewards.get(agent, 0.0)), board)

    def close(self) -> None:
        self._env.close()

    def _current(self, agent_id: int) -> tuple[Any, Any]:
        """The agent's observation and info now (what ``last()`` would give it)."""
        raise NotImplementedError

    def _info_mask(self, agent_id: int) -> np.ndarray | None:
        """The legal-move mask the agent's info holds (0/1 bytes, one per action), if any."""
        _, info = self._current(agent_id)
        return self._as_mask(agent_id, info.get("action_mask") if isinstance(info, dict) else None)

    def _mask(self, agent_id: int) -> np.ndarray | None:
        """The legal-move mask now, wherever the game puts it: the observation dict, else the info."""
        observation, _ = self._current(agent_id)
        if isinstance(observation, dict) and "action_mask" in observation:
            return self._as_mask(agent_id, observation["action_mask"])
        return self._info_mask(agent_id)

    def _as_mask(self, agent_id: int, mask: Any) -> np.ndarray | None:
        """A mask the host can check moves against: one per action of a Discrete space, with at least one
        legal move (a game's mask of another shape, or with no legal move, decides nothing here)."""
        space = self._action_codecs[agent_id].space
        if mask is None or type(space) is not spaces.Discrete:
            return None
        legal = (np.asarray(mask).reshape(-1) != 0).astype(np.uint8)
        return legal if legal.size == space.n and legal.any() else None

    def move_checked(self, agent_id: int) -> bool:
        """Checked when the game gave a legal-move mask for it now."""
        return self._mask(agent_id) is not None

    def took(self, agent_id: int, seconds: float) -> None:
        """Nothing: a PettingZoo game keeps no time of its own."""

    def refused(self, agent_id: int) -> str | None:
        """Never: a PettingZoo game refuses a move by raising (``move_checked`` says whose fault that is)."""
        return None

    def _legal(self, agent_id: int, action: Any) -> Any:
        """``action`` if the game's mask allows it now; InvalidAction (before the game sees it) if not."""
        mask = self._mask(agent_id)
        if mask is not None and not mask[int(action) - int(self._action_codecs[agent_id].space.start)]:
            raise InvalidAction(f"move {action} is not legal now (the game's action_mask forbids it)")
        return action

    def _payload(self, agent_id: int, observation: Any) -> bytes:
        mask = self._info_mask(agent_id)
        header = NO_MASK if mask is None else MASK + mask.tobytes()
        return header + self._observation_codecs[agent_id].encode(observation)

    def _fallback(self, agent_id: int) -> Any:
        mask = self._mask(agent_id)
        return fallback_action(self._action_codecs[agent_id].space, None if mask is None else {"action_mask": mask})


class ParallelGame(PettingZooHost):
    """A Parallel env: every live agent acts every step; the actions go to ``env.step`` together."""

    api = "parallel"

    def __init__(self, env: Any, target: str, kwargs: dict[str, Any], max_steps: int, seed: int) -> None:
        super().__init__(env, target, kwargs, max_steps, seed)
        self._observations, self._infos = env.reset(seed=seed)
        self._actions: dict[Any, Any] = {}

    def acting(self) -> list[int]:
        return [self._seat[agent] for agent in self._env.agents if agent in self._observations]

    def _current(self, agent_id: int) -> tuple[Any, Any]:
        agent = self._agents[agent_id]
        return self._observations.get(agent), self._infos.get(agent)

    def observation(self, agent_id: int) -> bytes:
        return self._payload(agent_id, self._observations[self._agents[agent_id]])

    def apply_action(self, agent_id: int, payload: bytes) -> None:
        action = self._legal(agent_id, self._action_codecs[agent_id].parse_action(payload))
        self._actions[self._agents[agent_id]] = action

    def apply_fallback(self, agent_id: int, late: bool = False) -> None:
        self._actions[self._agents[agent_id]] = self._fallback(agent_id)

    def step(self) -> None:
        self._observations, rewards, _, _, self._infos = self._env.step(self._actions)
        self._record(self._steps, self._actions, rewards)
        self._actions = {}
        self._steps += 1
        for agent, reward in rewards.items():
            self._totals[self._seat[agent]] += float(reward)


class TurnGame(PettingZooHost):
    """An AEC env: only ``agent_selection`` acts; agents that are done are stepped out with ``None``.

    Rewards: ``last()`` gives the selected agent its reward accumulated since it last acted, so it is
    credited each time an agent is selected; what the others have pending is credited at the end.
    """

    api = "aec"

    def __init__(self, env: Any, target: str, kwargs: dict[str, Any], max_steps: int, seed: int) -> None:
        super().__init__(env, target, kwargs, max_steps, seed)
        env.reset(seed=seed)
        self._action: Any = None
        self._credited = False
        self._next_turn()

    def _next_turn(self) -> None:
        """Credit the selected agent and step out agents that are done, until a live one's turn."""
        env = self._env
        while env.agents:
            agent = env.agent_selection
            self._totals[self._seat[agent]] += float(env._cumulative_rewards[agent])
            if not (env.terminations[agent] or env.truncations[agent]):
                break
            env.step(None)  # PettingZoo's way to remove an agent that is done
        self._observation = _UNSEEN  # observed when first asked for: a game that raises there, raises there

    def acting(self) -> list[int]:
        return [self._seat[self._env.agent_selection]] if self._env.agents else []

    def _current(self, agent_id: int) -> tuple[Any, Any]:
        if self._observation is _UNSEEN:
            self._observation = self._env.observe(self._env.agent_selection)
        return self._observation, self._env.infos.get(self._agents[agent_id])

    def observation(self, agent_id: int) -> bytes:
        return self._payload(agent_id, self._current(agent_id)[0])

    def apply_action(self, agent_id: int, payload: bytes) -> None:
        self._action = self._legal(agent_id, self._action_codecs[agent_id].parse_action(payload))

    def apply_fallback(self, agent_id: int, late: bool = False) -> None:
        self._action = self._fallback(agent_id)

    def step(self) -> None:
        agent = self._env.agent_selection
        self._env.step(self._action)
        self._record(self._steps, {agent: self._action}, self._env.rewards)
        self._action = None
        self._steps += 1
        if self.done:
            self._credit_pending()
        else:
            self._next_turn()

    def _credit_pending(self) -> None:
        """At the end: what agents still in the game earned since they were last selected."""
        env = self._env
        for agent in env.agents:
            self._totals[self._seat[agent]] += float(env._cumulative_rewards[agent])


class PettingZooCell:
    """The cell half: bytes in, the exact observation the env produced (and the mask its info held)
    out; an action in, bytes out."""

    def __init__(self, setup: dict[str, Any]) -> None:
        self._observations = SpaceCodec.from_description(setup["observation_space"])
        self._actions = SpaceCodec.from_description(setup["action_space"])
        space = self._actions.space
        self._mask_size = int(space.n) if type(space) is spaces.Discrete else 0

    def resolve_shorthand(self, name: str) -> str:
        return resolve_shorthand(name)

    def build_policy(self, policy_class: type, spec: Any) -> Any:
        """The policy class, checked: a PettingZoo policy is built per seat (``build_agent``)."""
        if not isinstance(policy_class, type) or not callable(getattr(policy_class, "act", None)):
            expected = (
                "a class built as Cls(observation_space, action_space, **kwargs) with act(observation) or "
                "act(observation, info)"
            )
            raise not_a_policy(spec, "a policy for PettingZoo games", expected)
        return policy_class

    def build_agent(self, policy: Any, spec: Any, agent_id: int) -> tuple[Any, int]:
        """``Cls(observation_space, action_space, **kwargs)``, ``load(path)`` for a data path, ``reset()``;
        its ``act``, given ``(observation, info)`` when it takes two arguments. The spaces are seeded
        from the agent's random stream, so ``sample()`` replays."""
        import random

        observation_space, action_space = self._observations.space, self._actions.space
        observation_space.seed(random.getrandbits(32))
        action_space.seed(random.getrandbits(32))
        agent = policy(observation_space, action_space, **spec.init_kwargs)
        if spec.data_path:
            loader = getattr(agent, "load", None)
            if not callable(loader):
                raise TypeError(f"{spec.class_path} has no load(path) but a data path was given")
            loader(spec.data_path)
        reset = getattr(agent, "reset", None)
        if callable(reset):
            reset()
        return _caller(agent.act), int(getattr(agent, "minimum_action_timeout_ms", 0) or 0)

    def step_group(self, agent_ids: Sequence[int], payloads: Sequence[bytes | memoryview]) -> list[Any] | None:
        """None: PettingZoo has no batched policy API, so each seat acts in turn."""
        return None

    def decode_observation(self, agent_id: int, payload: bytes | memoryview) -> tuple[Any, dict[str, Any]]:
        """(the observation, the info entries that cross: ``action_mask`` when the game's info holds one)."""
        view = memoryview(payload).cast("B")
        if view[:1] == MASK:
            end = 1 + self._mask_size
            info = {"action_mask": np.frombuffer(view[1:end], np.uint8).astype(np.int8)}
        else:
            end, info = 1, {}
        return self._observations.decode(view[end:]), info

    def encode_action(self, action: Any) -> bytes:
        return self._actions.encode_action(action)


def _caller(act: Callable[..., Any]) -> Callable[[tuple[Any, dict[str, Any]]], Any]:
    """What the cell calls with a decoded (observation, info): ``act(observation, info)`` for a policy
    whose ``act`` takes a second argument, else ``act(observation)``."""
    try:
        parameters = list(inspect.signature(act).parameters.values())
    except (TypeError, ValueError):  # a builtin without a signature: the one-argument form
        parameters = []
    positional = [p for p in parameters if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    if len(positional) >= 2 or any(p.kind == p.VAR_POSITIONAL for p in parameters):
        return lambda decoded: act(*decoded)
    return lambda decoded: act(decoded[0])
