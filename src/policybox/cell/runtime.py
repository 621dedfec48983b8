"""One agent's policy at run time: build it from a SETUP message, turn observation bytes into actions.

The same code runs inside a cell process and, in ``inline`` mode, inside the host -- which is what
makes the two modes give identical results. The only difference is the process-wide state (random
streams, thread budget, ``policybox.cell.agent_state``): a cell owns its process and sets it once,
while inline agents share the host, so inline runtimes swap theirs in around every call into
policy code.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from typing import Any

from policybox.cell.agent_state import AgentState
from policybox.cell.loader import load_policy_class
from policybox.cell.report import PolicyFailure, failure_report
from policybox.envs import InvalidAction, cell_half
from policybox.spec import PolicySpec
from policybox.wire import PROTOCOL_VERSION, FrameType, check_protocol


class AgentRuntime:
    """Builds one agent's policy and steps it. Raises PolicyFailure when policy code raises."""

    def __init__(self, setup: dict[str, Any], *, owns_process: bool) -> None:
        check_protocol(setup)
        self.agent_id = int(setup["agent_id"])
        self.spec = PolicySpec.model_validate(setup["spec"])
        self._env_setup = setup["env"]
        threads = setup.get("threads")
        self._state = AgentState(int(setup["seed"]), self.agent_id, None if threads is None else int(threads))
        self._owns_process = owns_process
        if owns_process:
            self._state.apply()
        self._act: Any = None  # the policy's observation -> action function
        self._env: Any = None

    def start(self) -> dict[str, Any]:
        """Import, construct and load the policy; the READY report."""
        with self._policy_call("init"):  # importing it: torch, if it brings it, is seeded before it is built
            self._env = cell_half(self._env_setup)
            policy_class = load_policy_class(self.spec, self._env.resolve_shorthand)
        with self._policy_call("init"):
            self._act, minimum_ms = self._env.build_agent(policy_class, self.spec, self.agent_id)
        return {
            "protocol": PROTOCOL_VERSION,
            "policy": self.spec.display_name,
            "minimum_action_timeout_ms": minimum_ms,
            "torch": "torch" in sys.modules,  # the host starts its next cells with it (policybox.host.torch_use)
        }

    def step(self, payload: bytes | bytearray) -> tuple[FrameType, bytes]:
        """(ACTION, action bytes) or (INVALID_ACTION, reason) for one observation payload."""
        if self._owns_process:  # the hot path: no random-state swap needed
            try:
                action = self._act(self._env.decode_observation(self.agent_id, payload))
            except (Exception, SystemExit) as exc:
                raise PolicyFailure(failure_report(exc, "step")) from exc
            self._state.notice_torch()
        else:
            with self._policy_call("step"):
                action = self._act(self._env.decode_observation(self.agent_id, payload))
        try:
            return FrameType.ACTION, self._env.encode_action(action)
        except InvalidAction as exc:
            return FrameType.INVALID_ACTION, str(exc).encode()[:1000]

    @contextmanager
    def _policy_call(self, phase: str) -> Iterator[None]:
        try:
            with self._state.active() if not self._owns_process else nullcontext():
                yield
            if self._owns_process:
                self._state.notice_torch()
        except (Exception, SystemExit) as exc:  # sys.exit() in a policy is its failure too
            raise PolicyFailure(failure_report(exc, phase)) from exc
