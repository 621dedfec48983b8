"""Isolation inside MettaGrid's own tools: ``SandboxedPolicy``, a drop-in ``MultiAgentPolicy``.

A MettaGrid user changes one class path and their own pipeline (``Rollout``,
``run_multi_episode_rollout``, ``run_episode_local``, their scripts) runs every agent of the policy
in its own policybox cell::

    PolicySpec(class_path="policybox.mettagrid.SandboxedPolicy", init_kwargs={"policy": "lstm,data=lstm.pt"})

``policy`` is any policybox spec (a ``-p`` string, or a dict of PolicySpec fields); the other
keyword arguments are ``policybox run``'s limits and sandbox settings (``act_timeout_ms=500``,
``sandbox="strict"``, ``preload=["torch"]``, ``threads_per_cell=1``), and ``log_dir``: where the agents'
logs go (one folder per episode); by default a temporary folder, removed when the policy is closed.

MettaGrid runs the game and builds each observation as usual; the agent policies send it to their
cells and return the action the cell chose. A crashed, hung or invalid agent plays MettaGrid's
no-op instead of raising into MettaGrid's loop, and its ``infos`` say what happened; deadlines and
the time bank are the host's, as in ``policybox run``. With ``policy_group_keys`` (MettaGrid's
runner sets them) all of the policy's agents are stepped together: every observation goes out
before any reply is awaited; with ``cells="per-policy"`` they share one cell, which steps them with
the inner policy's own ``step_group`` when it can. ``reset()`` (MettaGrid calls it on each agent policy before an
episode) gives the next episode fresh cells; cells stop when the policy is closed, garbage-collected
or the interpreter exits.
"""

from __future__ import annotations

import contextlib
import tempfile
import weakref
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from mettagrid.policy.policy import AgentPolicy, MultiAgentPolicy
from mettagrid.policy.policy_env_interface import PolicyEnvInterface
from mettagrid.simulator import Action, AgentObservation

from policybox.envs import ConfigError
from policybox.envs.mettagrid import cell_setup, encode_observation, parse_action
from policybox.episode import apply_reply
from policybox.errors import SpecError
from policybox.game import check_shorthands
from policybox.host.record import AgentRecord
from policybox.host.remove import remove_tree
from policybox.host.zygote import Zygote
from policybox.sandbox import SandboxLevel
from policybox.settings import EpisodeSettings, zygote_preload
from policybox.spec import PolicySpec, check_spec, parse_policy_arg
from policybox.startup import agent_records, check_strict, start_pool

NOOP = "noop"  # MettaGrid's no-op action: what a failed agent plays
# Settings of a whole episode, which MettaGrid's own runner decides when the policy is a SandboxedPolicy.
EPISODE_ONLY = (
    "env",
    "env_kwargs",
    "steps",
    "agents",
    "replay",
    "on_agent_failure",
    "episode_timeout_s",
    "play_share",
)


class SandboxedPolicy(MultiAgentPolicy):
    """A MettaGrid policy whose agents each run ``policy`` in a sandboxed cell of their own (or, with
    ``cells="per-policy"``, all of them in one)."""

    def __init__(
        self,
        policy_env_info: PolicyEnvInterface,
        policy: str | Mapping[str, Any] | PolicySpec,
        device: str = "cpu",
        log_dir: str | Path | None = None,
        **options: Any,
    ) -> None:
        super().__init__(policy_env_info, device=device)
        self._spec = inner_spec(policy)
        misplaced = sorted(set(options) & set(EPISODE_ONLY))
        if misplaced:
            raise ConfigError(
                f"SandboxedPolicy: {', '.join(misplaced)} belong to the episode MettaGrid runs, not the policy"
            )
        self._settings = EpisodeSettings.from_options(options)
        check_shorthands([self._spec], self._settings)
        if self._settings.sandbox == SandboxLevel.STRICT:
            check_strict(self._settings)
        self._log_dir = Path(log_dir) if log_dir else None  # None: a temporary folder, removed on close
        self._agent_ids: list[int] = []
        self._state = _CellsHolder(self._settings)
        weakref.finalize(self, self._state.close)  # on garbage collection and at interpreter exit

    @property
    def spec(self) -> PolicySpec:
        """The inner policy every agent's cell runs."""
        return self._spec

    def agent_policy(self, agent_id: int) -> AgentPolicy:
        if agent_id not in self._agent_ids:
            self._agent_ids.append(agent_id)
            self._state.stale = True  # the running cells do not include it
        return SandboxedAgentPolicy(self, agent_id)

    def load_policy_data(self, policy_data_path: str) -> None:
        """The inner policy's checkpoint: loaded in each cell (as MettaGrid's loader passes ``data_path``)."""
        self._spec = check_spec(self._spec.model_copy(update={"data_path": policy_data_path}), Path.cwd())
        self._state.stale = True

    def reset(self) -> None:
        """Start the agents' cells for the next episode -- fresh ones once the last have played, so no
        state survives from one episode to the next. MettaGrid resets every agent policy before an
        episode, untimed: the cells start there, not in the first (timed) step."""
        if self._agent_ids:  # no agent policy asked for yet: nothing to start
            self._state.start(self._start_args(), renew=True)

    def close(self) -> None:
        """Stop every cell (and the zygote they fork from); a later step starts them again."""
        self._state.close()

    def step_agents(self, observations: Mapping[int, AgentObservation]) -> dict[int, Action]:
        """One action per agent of ``observations``: all are sent before any reply is awaited."""
        return self._state.start(self._start_args(), renew=False).act(observations)

    def _start_args(self) -> tuple[PolicySpec, list[int], PolicyEnvInterface, Path | None]:
        return self._spec, sorted(self._agent_ids), self.policy_env_info, self._log_dir

    def agent_infos(self, agent_id: int) -> dict[str, Any]:
        """What happened to an agent's policy so far this episode (empty before its cell started)."""
        record = self._state.record(agent_id)
        if record is None:
            return {}
        infos: dict[str, Any] = {"policybox_status": record.status.value}
        if record.failure is not None:
            infos["policybox_failure"] = record.failure.one_line()
        return infos


class SandboxedAgentPolicy(AgentPolicy):
    """One agent of a ``SandboxedPolicy``: its observations go to its cell."""

    def __init__(self, parent: SandboxedPolicy, agent_id: int) -> None:
        super().__init__(parent.policy_env_info)
        self._parent = parent
        self.agent_id = agent_id

    @property
    def infos(self) -> dict[str, Any]:
        return self._parent.agent_infos(self.agent_id)

    def step(self, obs: AgentObservation) -> Action:
        return self._parent.step_agents({self.agent_id: obs})[self.agent_id]

    def can_step_group(self, policies: Sequence[AgentPolicy]) -> bool:
        return all(isinstance(p, SandboxedAgentPolicy) and p._parent is self._parent for p in policies)

    def step_group(self, observations: list[tuple[int, AgentObservation]]) -> list[Action]:
        """MettaGrid's grouped step (``policy_group_keys``): ``(agent index, observation)`` pairs."""
        actions = self._parent.step_agents(dict(observations))
        return [actions[index] for index, _ in observations]

    def reset(self, simulation: Any = None) -> None:
        self._parent.reset()


def inner_spec(policy: str | Mapping[str, Any] | PolicySpec) -> PolicySpec:
    """A checked PolicySpec from a ``-p`` string, a PolicySpec or a mapping of its fields; SpecError if
    it is none of them."""
    if isinstance(policy, str):
        return parse_policy_arg(policy)
    if isinstance(policy, Mapping):
        try:
            policy = PolicySpec.model_validate(dict(policy))
        except ValueError as exc:
            raise SpecError(f"SandboxedPolicy: invalid policy spec: {exc}") from None
    if isinstance(policy, PolicySpec):
        return check_spec(policy, Path.cwd())
    raise SpecError(f"SandboxedPolicy: policy must be a spec string or mapping, not {type(policy).__name__}")


def initialize_or_load_policy(
    policy_env_info: PolicyEnvInterface, policy_spec: Any, sandbox: bool = True, **options: Any
) -> MultiAgentPolicy:
    """MettaGrid's ``initialize_or_load_policy``, with ``sandbox=True`` running each agent of the
    policy ``policy_spec`` (a MettaGrid PolicySpec) in a policybox cell; options as SandboxedPolicy's."""
    if not sandbox:
        from mettagrid.policy.loader import initialize_or_load_policy as load_in_process

        return load_in_process(policy_env_info, policy_spec)
    fields = {"class_path": policy_spec.class_path, "init_kwargs": dict(policy_spec.init_kwargs or {})}
    if policy_spec.data_path:
        fields["data_path"] = policy_spec.data_path
    return SandboxedPolicy(policy_env_info, policy=fields, **options)


class _CellsHolder:
    """The running cells of one SandboxedPolicy, and its zygote; what its finalizer closes (it holds
    no reference to the policy, so the policy can be collected)."""

    def __init__(self, settings: EpisodeSettings) -> None:
        self._settings = settings
        self._zygote: Zygote | None = None
        self._cells: _Cells | None = None
        self._episodes = 0
        self._temporary_logs: Path | None = None
        self.stale = True  # the running cells (if any) are not the policy's current agents or spec

    def start(self, args: tuple[PolicySpec, list[int], PolicyEnvInterface, Path | None], renew: bool) -> _Cells:
        """The cells to step: the running ones, unless there are none, they are stale, or (``renew``)
        they have already played."""
        if self._cells is not None and not self.stale and not (renew and self._cells.used):
            return self._cells
        self._close_cells()
        spec, agent_ids, policy_env, log_dir = args
        # Each episode's agents get their own random streams, as one long-lived policy's would differ.
        settings = self._settings.model_copy(update={"seed": self._settings.seed + self._episodes})
        if settings.mode == "process" and settings.launcher == "zygote" and self._zygote is None:
            self._zygote = Zygote(zygote_preload(settings))
        if log_dir is None:
            if self._temporary_logs is None:
                self._temporary_logs = Path(tempfile.mkdtemp(prefix="policybox-mettagrid-"))
            log_dir = self._temporary_logs
        log_folder = log_dir / f"episode-{self._episodes}"
        self._cells = _Cells(spec, settings, policy_env, agent_ids, log_folder, self._zygote)
        self._episodes += 1
        self.stale = False
        return self._cells

    def record(self, agent_id: int) -> AgentRecord | None:
        return None if self._cells is None else self._cells.record(agent_id)

    def _close_cells(self) -> None:
        cells, self._cells = self._cells, None
        if cells is not None:
            cells.close()

    def close(self) -> None:
        try:
            self._close_cells()
        finally:
            zygote, self._zygote = self._zygote, None
            if zygote is not None:
                zygote.close()
            logs, self._temporary_logs = self._temporary_logs, None
            if logs is not None:
                remove_tree(logs)


class _Cells:
    """One episode's cells for the policy's agents: started together, stepped together, stopped together."""

    def __init__(
        self,
        spec: PolicySpec,
        settings: EpisodeSettings,
        policy_env: PolicyEnvInterface,
        agent_ids: list[int],
        log_dir: Path,
        zygote: Zygote | None,
    ) -> None:
        self._stack = contextlib.ExitStack()
        setups = [cell_setup(policy_env)] * len(agent_ids)
        self._records = agent_records(
            [spec] * len(agent_ids), settings, log_dir, ["policy"] * len(agent_ids), setups, agent_ids
        )
        self._by_id = {record.agent_id: record for record in self._records}
        self._token_shape = tuple(policy_env.observation_shape)
        self._talk = policy_env.talk.enabled
        self._actions = _ChosenActions(policy_env)
        self._calls = 0
        self._steps = dict.fromkeys(agent_ids, 0)
        try:
            self._pool = start_pool(self._records, setups, settings, zygote, self._stack)
        except BaseException:
            self._stack.close()
            raise

    def record(self, agent_id: int) -> AgentRecord | None:
        return self._by_id.get(agent_id)

    @property
    def used(self) -> bool:
        """Whether any agent has played a step in these cells."""
        return self._calls > 0

    def act(self, observations: Mapping[int, AgentObservation]) -> dict[int, Action]:
        unknown = set(observations) - set(self._by_id)
        if unknown:
            raise ValueError(f"agents {sorted(unknown)} are not agents of this SandboxedPolicy")
        # The step of the agents asked: how many observations they have had (all agents of a game
        # are asked once a step, one by one or together); it numbers the request, so that a late
        # reply to an earlier step is dropped, and the step a failure is recorded at.
        step = max(self._steps[agent_id] for agent_id in observations)
        self._calls += 1
        payloads = {i: encode_observation(obs, self._token_shape, self._talk) for i, obs in observations.items()}
        replies = self._pool.act(step, payloads)
        for record in self._records:
            if record.agent_id in observations:
                apply_reply(self._actions, record, step, replies.get(record.agent_id))
                self._steps[record.agent_id] = step + 1
        return {agent_id: self._actions.chosen.pop(agent_id) for agent_id in observations}

    def close(self) -> None:
        self._stack.close()


class _ChosenActions:
    """The action sink of a SandboxedPolicy: MettaGrid runs the game, so a reply becomes an ``Action``."""

    def __init__(self, policy_env: PolicyEnvInterface) -> None:
        self._names = list(policy_env.all_action_names)
        self._vibe_ids = frozenset(self._names.index(name) for name in policy_env.vibe_action_names)
        self.chosen: dict[int, Action] = {}

    def apply_action(self, agent_id: int, payload: bytes) -> None:
        action_id, vibe_id, talk = parse_action(payload, len(self._names), self._vibe_ids)
        vibe = None if vibe_id < 0 else self._names[vibe_id]
        self.chosen[agent_id] = Action(name=self._names[action_id], vibe=vibe, talk=talk.decode() if talk else None)

    def apply_fallback(self, agent_id: int, late: bool = False) -> None:
        self.chosen[agent_id] = Action(name=NOOP)
