"""One cell's policy at run time: build it for the cell's seats from a SETUP message, turn their
observation bytes into replies.

A cell plays one seat (``--cells per-agent``) or every seat of one submission (``--cells per-policy``):
its policy is built once, and each seat gets its own act function (MettaGrid: ``agent_policy(i)``).
Several seats asked at once are stepped with one call into the policy when it can batch them (the
family's ``step_group``: MettaGrid's ``step_group`` or ``step_batch``), else one after another.

The same code runs inside a cell process and, in ``inline`` mode, inside the host -- which is what
makes the two modes give identical results. The only difference is the process-wide state (random
streams, thread budget, ``policybox.cell.agent_state``): a cell owns its process and sets it once,
while inline cells share the host, so theirs is swapped in around every step of the cell. The
state is the cell's first seat's: the seats of a per-policy cell draw from one set of streams, in
seat order, as the agents of one policy do in MettaGrid's own ``Rollout``.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from typing import Any

from policybox.cell.agent_state import AgentState
from policybox.cell.loader import load_policy_class
from policybox.cell.report import PolicyFailure, failure_report
from policybox.envs import InvalidAction, cell_half
from policybox.spec import PolicySpec
from policybox.wire import PROTOCOL_VERSION, FrameType, Reply, check_protocol, encode_report


@dataclass(frozen=True)
class Built:
    """A policy built for a cell's seats, and the game's cell half it was built with."""

    env: Any
    policy: Any


class CellRuntime:
    """Builds one cell's policy for its seats and steps them. ``start`` raises PolicyFailure when
    policy code raises; a seat whose step raises gets an ERROR reply and is not stepped again."""

    def __init__(self, setup: dict[str, Any], *, owns_process: bool) -> None:
        check_protocol(setup)
        self.agent_ids = [int(agent_id) for agent_id in setup["agents"]]
        if not self.agent_ids:
            raise ValueError("SETUP names no agents")
        self.spec = PolicySpec.model_validate(setup["spec"])
        self._env_setup = setup["env"]
        threads = setup.get("threads")
        self._state = AgentState(int(setup["seed"]), self.agent_ids[0], None if threads is None else int(threads))
        self._owns_process = owns_process
        if owns_process:
            self._state.apply()
        self._acts: dict[int, Any] = {}  # each seat still played: its observation -> action function
        self._env: Any = None

    @property
    def playing(self) -> bool:
        """Whether any of the cell's seats is still played (a seat whose policy raised is not)."""
        return bool(self._acts)

    def build(self) -> Built:
        """Import, construct and load the policy (under the cell's state): what its seats' agents are
        built from. ``start`` does it for its own seats; a forked seat's loader does it for them all."""
        with nullcontext() if self._owns_process else self._state.active():  # inline: the cell's state
            with self._policy_call("init"):  # importing it: torch, if it brings it, is seeded first
                env = cell_half(self._env_setup)
                policy_class = load_policy_class(self.spec, env.resolve_shorthand)
            with self._policy_call("init"):
                return Built(env, env.build_policy(policy_class, self.spec))

    def start(self, built: Built | None = None) -> dict[str, Any]:
        """Build the policy (unless ``built``: a loader's, ``policybox.cell.seats``), then each seat's
        agent; the READY report."""
        built = built or self.build()
        policy, self._env = built.policy, built.env
        with nullcontext() if self._owns_process else self._state.active():  # inline: the cell's state
            minimum = 0
            for agent_id in self.agent_ids:
                with self._policy_call("init"):
                    self._acts[agent_id], minimum = self._env.build_agent(policy, self.spec, agent_id)
        return {
            "protocol": PROTOCOL_VERSION,
            "policy": self.spec.display_name,
            "minimum_action_timeout_ms": minimum,
            "torch": "torch" in sys.modules,  # the host starts its next cells with it (policybox.host.torch_use)
        }

    def step(self, observations: Sequence[tuple[int, bytes | memoryview]]) -> list[tuple[int, Reply]]:
        """One reply per ``(agent id, observation payload)``, in order: the seats asked are stepped
        with one call when the policy can batch them, else one after another."""
        if len(observations) > 1 and not self._acts.keys() >= {agent_id for agent_id, _ in observations}:
            raise ValueError(f"observations for agents {[a for a, _ in observations]}, not all of them played here")
        if self._owns_process:  # the hot path: no context manager
            return self._step_seats(observations)
        with self._state.active():
            return self._step_seats(observations)

    def step_seat(self, agent_id: int, payload: bytes | memoryview) -> Reply:
        """One seat's reply to its observation ``payload``: ``step`` of one seat, without its lists (the hot
        path of a cell of one seat)."""
        if self._owns_process:
            return self._step_one(agent_id, payload)
        with self._state.active():
            return self._step_one(agent_id, payload)

    def _step_seats(self, observations: Sequence[tuple[int, bytes | memoryview]]) -> list[tuple[int, Reply]]:
        if len(observations) > 1:
            return self._step_group(observations)
        return [(agent_id, self._step_one(agent_id, payload)) for agent_id, payload in observations]

    def _step_group(self, observations: Sequence[tuple[int, bytes | memoryview]]) -> list[tuple[int, Reply]]:
        agent_ids = [agent_id for agent_id, _ in observations]
        try:
            with self._policy_call("step"):
                actions = self._env.step_group(agent_ids, [payload for _, payload in observations])
        except PolicyFailure as failure:  # the batched call failed for every seat in it
            for agent_id in agent_ids:
                del self._acts[agent_id]
            report = encode_report(failure.report)
            return [(agent_id, (FrameType.ERROR, report)) for agent_id in agent_ids]
        if actions is None:
            return [(agent_id, self._step_one(agent_id, payload)) for agent_id, payload in observations]
        return [(agent_id, self._encode(action)) for agent_id, action in zip(agent_ids, actions, strict=True)]

    def _step_one(self, agent_id: int, payload: bytes | memoryview) -> Reply:
        act = self._acts.get(agent_id)
        if act is None:
            raise ValueError(f"an observation for agent {agent_id}, which this cell does not play")
        try:  # the hot path: no context manager
            action = act(self._env.decode_observation(agent_id, payload))
        except (Exception, SystemExit) as exc:
            del self._acts[agent_id]
            return FrameType.ERROR, encode_report(failure_report(exc, "step"))
        self._state.notice_torch()
        return self._encode(action)

    def _encode(self, action: Any) -> Reply:
        try:
            return FrameType.ACTION, self._env.encode_action(action)
        except InvalidAction as exc:
            return FrameType.INVALID_ACTION, str(exc).encode()[:1000]

    @contextmanager
    def _policy_call(self, phase: str) -> Iterator[None]:
        try:
            yield
        except (Exception, SystemExit) as exc:  # sys.exit() in a policy is its failure too
            raise PolicyFailure(failure_report(exc, phase)) from exc
        self._state.notice_torch()  # torch imported by this call: seeded before the next one
