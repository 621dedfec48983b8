"""MettaGrid adapter: the host half runs the game, the cell half speaks MettaGrid's policy API.

``--env arena``, ``--env navigation``, or a MettaGridConfig JSON/YAML file (``--env FILE`` or
``--env mettagrid:FILE``). Every agent acts every step; agent i is seat i. Fallback action: the
game's ``noop``.

Observation payload: the agent's raw observation tokens exactly as the game writes them
(``num_tokens x token_dim`` uint8 bytes), followed -- only when the game has talk enabled -- by a
JSON list of the talk visible to that agent. Action payload: ``<hh`` (action id, vibe id or -1)
in the game's action order, followed by optional UTF-8 talk text.
"""

from __future__ import annotations

import functools
import hashlib
import json
import struct
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from policybox.envs.base import ConfigError, GameRequest, InvalidAction, not_a_policy
from policybox.envs.mettagrid_shorthands import shorthand_registry
from policybox.storage import StorageFull, writing

if TYPE_CHECKING:
    from mettagrid.simulator import Action
    from mettagrid.simulator.interface import ObservationToken, VisibleTalk

ACTION = struct.Struct("<hh")
NO_VIBE = -1
ARENA_MAPS = ("arena", "navigation")
ZYGOTE_PRELOAD = ("policybox.envs.mettagrid", "mettagrid.simulator")


def open_host(request: GameRequest) -> MettaGridHost:
    """A MettaGrid game for ``request.agents`` seats, ``steps`` long, its map seeded from ``seed``."""
    _refuse_kwargs(request.kwargs)
    config = make_config(request.target, request.agents, request.steps, request.seed)
    return MettaGridHost(config, request.seed, request.replay, request.names)


def fixed_agents(target: str, kwargs: dict[str, Any]) -> int | None:
    """A config file's num_agents; None for arena and navigation, which are made for any number."""
    _refuse_kwargs(kwargs)
    if target in ARENA_MAPS:
        return None
    from mettagrid.config.mettagrid_config import MettaGridConfig

    return int(_load_config_file(Path(target), MettaGridConfig).game.num_agents)


def _refuse_kwargs(kwargs: dict[str, Any]) -> None:
    if kwargs:
        raise ConfigError("--env-kwargs is for PettingZoo games; a MettaGrid game is set up by its config file")


def warm() -> None:
    """Read MettaGrid's shorthand registry once in the zygote, so that its cells need not."""
    shorthand_registry()


def cell_half(setup: dict[str, Any]) -> MettaGridCell:
    return MettaGridCell(setup)


def make_config(env: str, num_agents: int, max_steps: int, seed: int) -> Any:
    """A MettaGridConfig for a named game or a JSON/YAML config file, its map seeded from ``seed``."""
    from mettagrid.builder.envs import make_arena, make_navigation
    from mettagrid.config.mettagrid_config import MettaGridConfig
    from mettagrid.map_builder.map_builder import HasSeed

    if env == "arena":
        config = make_arena(num_agents)
    elif env == "navigation":
        config = make_navigation(num_agents)
    else:
        config = _load_config_file(Path(env), MettaGridConfig)
        if config.game.num_agents != num_agents:
            raise ConfigError(f"{env} is a game for {config.game.num_agents} agents, not {num_agents}")
    config.game.max_steps = max_steps
    builder = config.game.map_builder
    # MettaGrid draws a fresh random map per episode unless the builder is seeded; seed it from the
    # episode seed so that --seed reproduces the map too (a seed set in the config file wins).
    if isinstance(builder, HasSeed) and builder.seed is None:
        builder.seed = seed
    return config


def _load_config_file(path: Path, model: Any) -> Any:
    import yaml
    from pydantic import ValidationError

    if path.suffix in (".yaml", ".yml", ".json") and not path.is_file():
        raise ConfigError(f"--env {str(path)!r}: the game file {path} does not exist")
    if not path.is_file():
        raise ConfigError(
            f"--env {str(path)!r} is neither a known game ({', '.join(ARENA_MAPS)}) nor a config file "
            "(a PettingZoo game is pettingzoo:MODULE:FACTORY)"
        )
    try:
        return model.model_validate(_parsed(path.read_text(), path.suffix))
    except (ValueError, yaml.YAMLError, ValidationError) as exc:
        raise ConfigError(f"{path} is not a valid MettaGridConfig: {exc}") from None


def _parsed(text: str, suffix: str) -> Any:
    """A game file's contents: JSON by json, YAML by libyaml where PyYAML has it. Read twice an episode (its
    agents, then its game): pure-Python YAML took 40 ms a read of a 12 KB config, libyaml 4, json 0.1."""
    import yaml

    if suffix == ".json":
        return json.loads(text)
    return yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))  # a safe loader, C or Python


def resolve_shorthand(name: str) -> str:
    """The class path a shorthand such as ``random`` names in MettaGrid's policy registry."""
    registry = shorthand_registry()
    if name not in registry:
        raise LookupError(f"unknown policy shorthand {name!r}; MettaGrid knows: {', '.join(sorted(registry))}")
    return registry[name]


def cell_setup(policy_env: Any) -> dict[str, Any]:
    """What the cell half needs to rebuild MettaGrid's own policy-facing objects, from the game's
    ``PolicyEnvInterface`` (whose ``all_action_names`` are the simulation's action order)."""
    return {
        "family": "mettagrid",
        "policy_env": policy_env.model_dump(mode="json"),
        "action_names": list(policy_env.all_action_names),
        "talk": policy_env.talk.enabled,
    }


def encode_observation(observation: Any, token_shape: tuple[int, ...], talk: bool) -> bytes:
    """The observation payload of a MettaGrid ``AgentObservation`` built by MettaGrid itself (the
    caller runs the game): its tokens' raw rows, the empty rows after them, and its talk."""
    buffer = np.full(token_shape, 0xFF, dtype=np.uint8)
    tokens = observation.tokens[: token_shape[0]]
    if tokens:
        buffer[: len(tokens)] = np.stack([token.raw_token for token in tokens])
    return buffer.tobytes() + (_talk_payload(observation.talk) if talk else b"")


def _talk_payload(visible_talk: Any) -> bytes:
    talk = [[t.agent_id, t.text, t.location.row, t.location.col, t.remaining_steps] for t in visible_talk]
    return json.dumps(talk).encode()


def parse_action(payload: bytes, action_count: int, vibe_ids: frozenset[int]) -> tuple[int, int, bytes]:
    """(action id, vibe id or NO_VIBE, talk bytes) of an untrusted action payload; InvalidAction if
    it is not one of a game with ``action_count`` actions whose vibe actions are ``vibe_ids``."""
    if len(payload) < ACTION.size:
        raise InvalidAction(f"action payload of {len(payload)} bytes, expected at least {ACTION.size}")
    action_id, vibe_id = ACTION.unpack_from(payload)
    if not 0 <= action_id < action_count:
        raise InvalidAction(f"action id {action_id} out of range 0..{action_count - 1}")
    if vibe_id != NO_VIBE and vibe_id not in vibe_ids:
        raise InvalidAction(f"vibe id {vibe_id} is not a vibe action")
    return action_id, vibe_id, bytes(payload[ACTION.size :])


class MettaGridHost:
    """The host half: one MettaGrid simulation, fed action ids, read as raw token bytes.

    With ``replay``, MettaGrid's own replay writer records the simulation and ``write_replay``
    saves it there: the ``.json.z`` file MettaGrid's runner writes and MettaScope loads.
    """

    family = "mettagrid"

    def __init__(self, config: Any, seed: int, replay: str | None = None, policy_names: Sequence[str] = ()) -> None:
        from mettagrid.policy.policy_env_interface import PolicyEnvInterface
        from mettagrid.simulator import Simulator
        from mettagrid.simulator.replay_log_writer import InMemoryReplayWriter

        self._config = config
        self._replay = replay
        self._replay_writer = InMemoryReplayWriter() if replay is not None else None
        simulator = Simulator()
        if self._replay_writer is not None:  # attached as MettaGrid's Rollout attaches its event handlers
            simulator.add_event_handler(self._replay_writer)
        try:
            self._sim = simulator.new_simulation(config, seed)
        except Exception as exc:  # the game the user described cannot be built (e.g. too many agents)
            message = f"MettaGrid cannot build {config.label or 'this game'} for {config.game.num_agents} agents"
            raise ConfigError(f"{message}: {type(exc).__name__}: {exc}") from exc
        # Rollout names each agent's policy here; the replay shows it as that agent's policy_infos.
        self._sim._context["policy_infos"] = {i: {"policy_name": name} for i, name in enumerate(policy_names)}
        self._c_sim = self._sim._c_sim
        self._observations = self._c_sim.observations()  # persistent buffer, rewritten in place each step
        self._actions = self._c_sim.actions()
        self._vibe_actions = self._c_sim.vibe_actions()
        self._action_names = self._sim.action_names
        self._vibe_ids = frozenset(self._sim.vibe_action_ids.values())
        self._noop_id = self._sim.action_ids[config.game.actions.noop.Noop().name]
        self._talk_enabled = config.game.talk.enabled
        self._policy_env = PolicyEnvInterface.from_mg_cfg(config)
        if list(self._policy_env.all_action_names) != list(self._action_names):  # cells name actions by it
            raise ConfigError(f"{config.label}: MettaGrid's policy interface orders its actions unlike the game")
        self._map_digest = self._digest_map()
        self.num_agents = config.game.num_agents
        self.agent_names = [str(i) for i in range(self.num_agents)]
        self._seats = range(self.num_agents)

    def _digest_map(self) -> str:
        """A fingerprint of the starting map, so a replay can be checked to be on the same map."""
        objects = sorted((o["type_name"], *o["location"]) for o in self._sim.grid_objects().values())
        return hashlib.sha256(json.dumps(objects).encode()).hexdigest()[:16]

    def cell_setup(self, agent_id: int) -> dict[str, Any]:
        return cell_setup(self._policy_env)

    def acting(self) -> range:
        return self._seats

    def live(self) -> range:
        return self._seats

    def describe(self) -> dict[str, Any]:
        game = self._config.game
        return {
            "family": self.family,
            "label": self._config.label,
            "num_agents": self.num_agents,
            "max_steps": game.max_steps,
            "map_seed": getattr(game.map_builder, "seed", None),
            "map_digest": self._map_digest,
            "actions": self._action_names,
        }

    def observation(self, agent_id: int) -> bytes | memoryview:
        tokens = memoryview(self._observations[agent_id]).cast("B")
        if not self._talk_enabled:
            return tokens
        return bytes(tokens) + _talk_payload(self._sim._visible_talk(agent_id))

    def apply_action(self, agent_id: int, payload: bytes) -> None:
        """Set an agent's action from an untrusted action payload; InvalidAction if it is not one."""
        action_id, vibe_id, talk = parse_action(payload, len(self._action_names), self._vibe_ids)
        if talk:
            self._queue_talk(agent_id, talk)
        # Same buffer writes as mettagrid.simulator.SimulationAgent.set_action.
        if vibe_id != NO_VIBE:
            self._actions[agent_id] = action_id
            self._vibe_actions[agent_id] = vibe_id
        elif action_id in self._vibe_ids:
            self._actions[agent_id] = 0
            self._vibe_actions[agent_id] = action_id
        else:
            self._actions[agent_id] = action_id
            self._vibe_actions[agent_id] = 0

    def _queue_talk(self, agent_id: int, raw: bytes) -> None:
        try:
            self._sim.agent(agent_id).set_talk(raw.decode("utf-8"))
        except (UnicodeDecodeError, ValueError) as exc:
            raise InvalidAction(f"talk rejected: {exc}") from None

    def move_checked(self, agent_id: int) -> bool:
        """Always: ``parse_action`` admits only actions MettaGrid accepts, so a raise is the game's own."""
        return True

    def took(self, agent_id: int, seconds: float) -> None:
        """Nothing: MettaGrid keeps no time of its own."""

    def refused(self, agent_id: int) -> str | None:
        """Never: what MettaGrid would refuse, ``parse_action`` refuses first."""
        return None

    def apply_fallback(self, agent_id: int, late: bool = False) -> None:
        """MettaGrid's fallback: the game's noop action."""
        self._actions[agent_id] = self._noop_id
        self._vibe_actions[agent_id] = 0

    def step(self) -> None:
        self._sim.step()

    @property
    def done(self) -> bool:
        return self._sim.is_done()

    @property
    def current_step(self) -> int:
        return int(self._sim.current_step)

    @property
    def max_steps(self) -> int:
        return int(self._config.game.max_steps)  # --steps: the config's own is replaced by it

    def rewards(self) -> list[float]:
        return [float(r) for r in self._sim.episode_rewards]

    def episode_stats(self) -> tuple[dict[str, float], list[dict[str, float]]]:
        """(game stats, per-agent stats) as MettaGrid reports them."""
        stats = self._sim.episode_stats
        game = {k: float(v) for k, v in stats["game"].items()}
        return game, [{k: float(v) for k, v in agent.items()} for agent in stats["agent"]]

    def write_replay(self) -> None:
        """Save the recorded replay, if any: the whole game, or what was played of a game cut short.

        MettaGrid completes a replay when the game ends; a game stopped early (aborted, out of time)
        never ends, so its replay is completed here, as the game's end would have. On a full disk:
        StorageFull, and no file left.
        """
        if self._replay_writer is None or self._replay is None:
            return
        if not self._replay_writer.get_completed_replays():
            self._replay_writer.on_episode_end()
        (replay,) = self._replay_writer.get_completed_replays()
        path = Path(self._replay)
        try:
            with writing(path):
                replay.write_replay(path.resolve().as_uri())  # as mettagrid's run_episode_local does
        except StorageFull:
            path.unlink(missing_ok=True)  # what a full disk let through is no replay: MettaScope cannot read it
            raise

    def close(self) -> None:
        self._sim.close()


def _own_step_batch(policy: Any) -> bool:
    """Whether a MettaGrid policy implements ``step_batch`` itself (MultiAgentPolicy's only raises)."""
    from mettagrid.policy.policy import MultiAgentPolicy

    own = getattr(type(policy), "step_batch", None)
    return own is not None and own is not MultiAgentPolicy.step_batch


@functools.cache
def _lazy_observation_class() -> type:
    """MettaGrid's ``AgentObservation`` with ``tokens`` built on first read (made once, on first use,
    so that importing this module does not import MettaGrid)."""
    from mettagrid.simulator.interface import AgentObservation

    class LazyAgentObservation(AgentObservation):
        def __init__(  # noqa: D107 - see the class
            self,
            agent_id: int,
            talk: tuple[VisibleTalk, ...],
            build: Callable[[], list[ObservationToken]],
            raw: Callable[[], np.ndarray],
        ) -> None:
            self.agent_id = agent_id
            self.talk = talk
            self._build: Callable[[], list[ObservationToken]] | None = build
            self._tokens: Sequence[ObservationToken] | None = None
            self._raw = raw

        @property
        def raw_tokens(self) -> np.ndarray:
            """policybox's addition to MettaGrid's observation: its token buffer as the game wrote it, a
            read-only ``(tokens, 3)`` uint8 array (``tokens`` are its rows up to the first empty one),
            for a policy that batches observations without building token objects."""
            return self._raw()

        @property
        def tokens(self) -> Sequence[ObservationToken]:
            if self._tokens is None:
                assert self._build is not None  # dropped only once the tokens are built
                self._tokens, self._build = self._build(), None
            return self._tokens

        @tokens.setter
        def tokens(self, value: Sequence[ObservationToken]) -> None:
            self._tokens = value

    return LazyAgentObservation


@functools.cache
def _action_class() -> type[Action]:
    """MettaGrid's ``Action``, imported on first use (as by the first action encoded) and looked up once:
    an import statement costs a microsecond on every step of a cell."""
    from mettagrid.simulator import Action

    return Action


class MettaGridCell:
    """The cell half: bytes in, MettaGrid ``AgentObservation`` out; a policy's action in, bytes out."""

    def __init__(self, setup: dict[str, Any]) -> None:
        from mettagrid.policy.policy_env_interface import PolicyEnvInterface

        self.policy_env_info = PolicyEnvInterface.model_validate(setup["policy_env"])
        self._features = {feature.id: feature for feature in self.policy_env_info.obs_features}
        self._token_shape = tuple(self.policy_env_info.observation_shape)
        self._token_bytes = int(np.prod(self._token_shape))
        self._talk = bool(setup["talk"])
        self._flat_names = self.policy_env_info.all_action_names
        self._action_ids = {name: index for index, name in enumerate(setup["action_names"])}
        self._policy: Any = None
        self._agents: dict[int, Any] = {}  # each seat's agent policy

    def resolve_shorthand(self, name: str) -> str:
        return resolve_shorthand(name)

    def build_policy(self, policy_class: type, spec: Any) -> Any:
        """Construct a MettaGrid policy as MettaGrid does and load its data: one for all the cell's seats."""
        if not isinstance(policy_class, type) or not callable(getattr(policy_class, "agent_policy", None)):
            expected = "a class with agent_policy(agent_id) (e.g. a mettagrid.policy.policy.MultiAgentPolicy subclass)"
            raise not_a_policy(spec, "a MettaGrid policy", expected)
        policy = policy_class(self.policy_env_info, **spec.init_kwargs)
        if spec.data_path:
            loader = getattr(policy, "load_policy_data", None)
            if not callable(loader):
                raise TypeError(f"{spec.class_path} has no load_policy_data(path) but a data path was given")
            loader(spec.data_path)
        self._policy = policy
        return policy

    def build_agent(self, policy: Any, spec: Any, agent_id: int) -> tuple[Any, int]:
        """Seat ``agent_id``'s agent policy, reset: its step, and the policy's minimum action timeout."""
        agent = policy.agent_policy(agent_id)
        if not callable(getattr(agent, "step", None)):
            raise TypeError(f"{spec.class_path}.agent_policy({agent_id}) returned {agent!r}, which has no step()")
        reset = getattr(agent, "reset", None)
        if callable(reset):
            reset()
        self._agents[agent_id] = agent
        return agent.step, int(getattr(policy, "minimum_action_timeout_ms", 0) or 0)

    def step_group(self, agent_ids: Sequence[int], payloads: Sequence[bytes | memoryview]) -> list[Any] | None:
        """As MettaGrid's ``Rollout`` steps a group: ``step_group`` when the first seat's agent policy
        says it ``can_step_group`` the seats; else, for a policy with its own ``step_batch`` (a raw-buffer
        policy), one ``step_batch`` over the raw observations, laid out as MettaGrid's policy server does;
        else None."""
        agents = [self._agents[agent_id] for agent_id in agent_ids]
        can_group = getattr(agents[0], "can_step_group", None)
        if callable(can_group) and can_group(agents):
            pairs = zip(agent_ids, payloads, strict=True)
            observations = [(agent_id, self.decode_observation(agent_id, payload)) for agent_id, payload in pairs]
            actions = list(agents[0].step_group(observations))
            if len(actions) != len(agent_ids):
                raise ValueError(f"step_group returned {len(actions)} actions for {len(agent_ids)} agents")
            return actions
        if _own_step_batch(self._policy):
            return self._step_batch(agent_ids, payloads)
        return None

    def _step_batch(self, agent_ids: Sequence[int], payloads: Sequence[bytes | memoryview]) -> list[Any]:
        seats = np.asarray(agent_ids, dtype=np.intp)
        observations = np.zeros((self.policy_env_info.num_agents, *self._token_shape), dtype=np.uint8)
        for seat, payload in zip(agent_ids, payloads, strict=True):
            observations[seat] = self._raw(payload)
        actions = np.zeros(self.policy_env_info.num_agents, dtype=np.int64)
        self._policy.step_batch(observations, actions)
        return [int(action) for action in actions[seats]]

    def decode_observation(self, agent_id: int, payload: bytes | memoryview) -> Any:
        """MettaGrid's ``AgentObservation`` for an observation payload (which must not change after:
        ``bytes``). Its tokens are built the first time a policy reads them, so a policy that never
        does (random, noop, many scripted ones) does not pay for them; one that does gets exactly
        the list MettaGrid's ``SimulationAgent.observation`` builds."""
        talk: tuple[VisibleTalk, ...] = ()
        if self._talk:
            from mettagrid.simulator.interface import Location, VisibleTalk

            talk = tuple(
                VisibleTalk(agent_id=a, text=text, location=Location(r, c), remaining_steps=left)
                for a, text, r, c, left in json.loads(bytes(payload[self._token_bytes :]))
            )
        return _lazy_observation_class()(agent_id, talk, lambda: self._tokens(payload), lambda: self._raw(payload))

    def _raw(self, payload: bytes | memoryview) -> np.ndarray:
        return np.frombuffer(payload, dtype=np.uint8, count=self._token_bytes).reshape(self._token_shape)

    def _tokens(self, payload: bytes | memoryview) -> list[ObservationToken]:
        from mettagrid.simulator.interface import ObservationToken

        raw = self._raw(payload)
        # The same tokens as mettagrid.simulator.SimulationAgent.observation builds (rows up to the
        # first empty one, each raw_token a row view), found with array operations, not a row loop.
        count = raw[:, 1].tobytes().find(b"\xff")
        valid = raw if count < 0 else raw[:count]
        features = self._features
        return [
            ObservationToken(feature=features[feature_id], value=value, raw_token=row)
            for feature_id, value, row in zip(valid[:, 1].tolist(), valid[:, 2].tolist(), list(valid), strict=True)
        ]

    def encode_action(self, action: Any) -> bytes:
        """A MettaGrid Action, an action name or a flat action index -> action payload."""
        talk = None
        vibe = None
        if isinstance(action, _action_class()):
            name, vibe, talk = action.name, action.vibe, action.talk
        elif isinstance(action, str):
            name = action
        elif isinstance(action, (int, np.integer)) and not isinstance(action, bool):
            if not 0 <= int(action) < len(self._flat_names):
                raise InvalidAction(f"action index {int(action)} out of range 0..{len(self._flat_names) - 1}")
            name = self._flat_names[int(action)]
        else:
            raise InvalidAction(f"step() returned {type(action).__name__}; expected an Action, action name or index")
        action_id = self._lookup(name)
        vibe_id = NO_VIBE if vibe is None else self._lookup(vibe)
        return ACTION.pack(action_id, vibe_id) + (talk.encode("utf-8") if talk else b"")

    def _lookup(self, name: Any) -> int:
        if not isinstance(name, str) or name not in self._action_ids:
            raise InvalidAction(f"unknown action {name!r}")
        return self._action_ids[name]
