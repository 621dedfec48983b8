"""One agent's policy at run time: build it from a SETUP message, turn observation bytes into actions.

The same code runs inside a cell process and, in ``inline`` mode, inside the host -- which is what
makes the two modes give identical results. The only difference is the random state: a cell owns
its process-wide ``random``/``numpy.random`` state, while inline agents share the host's, so inline
runtimes swap in their own state around every call into policy code.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np

from policybox.cell.loader import load_policy_class
from policybox.cell.report import PolicyFailure, failure_report
from policybox.envs import InvalidAction, cell_half
from policybox.spec import PolicySpec
from policybox.wire import PROTOCOL_VERSION, FrameType, check_protocol


def agent_seed(seed: int, agent_id: int) -> int:
    """A per-agent seed for the global RNGs, independent of how many agents there are."""
    return int(np.random.SeedSequence([seed, agent_id]).generate_state(1)[0])


class AgentRuntime:
    """Builds one agent's policy and steps it. Raises PolicyFailure when policy code raises."""

    def __init__(self, setup: dict[str, Any], *, owns_process: bool) -> None:
        check_protocol(setup)
        self.agent_id = int(setup["agent_id"])
        self.spec = PolicySpec.model_validate(setup["spec"])
        self._env_setup = setup["env"]
        seed = agent_seed(int(setup["seed"]), self.agent_id)
        self._owns_process = owns_process
        self._rng_state = (random.Random(seed).getstate(), _numpy_state(seed))
        if owns_process:
            _set_rng_state(self._rng_state)
        self._agent: Any = None
        self._env: Any = None

    def start(self) -> dict[str, Any]:
        """Import, construct and load the policy; the READY report."""
        with self._policy_call("init"):
            self._env = cell_half(self._env_setup)
            policy_class = load_policy_class(self.spec, self._env.resolve_shorthand)
            self._agent, minimum_ms = self._env.build_agent(policy_class, self.spec, self.agent_id)
        return {"protocol": PROTOCOL_VERSION, "policy": self.spec.display_name, "minimum_action_timeout_ms": minimum_ms}

    def step(self, payload: bytes | bytearray) -> tuple[FrameType, bytes]:
        """(ACTION, action bytes) or (INVALID_ACTION, reason) for one observation payload."""
        if self._owns_process:  # the hot path: no random-state swap needed
            try:
                action = self._agent.step(self._env.decode_observation(self.agent_id, payload))
            except (Exception, SystemExit) as exc:
                raise PolicyFailure(failure_report(exc, "step")) from exc
        else:
            with self._policy_call("step"):
                action = self._agent.step(self._env.decode_observation(self.agent_id, payload))
        try:
            return FrameType.ACTION, self._env.encode_action(action)
        except InvalidAction as exc:
            return FrameType.INVALID_ACTION, str(exc).encode()[:1000]

    @contextmanager
    def _policy_call(self, phase: str) -> Iterator[None]:
        if not self._owns_process:
            host_state = _get_rng_state()
            _set_rng_state(self._rng_state)
        try:
            yield
        except (Exception, SystemExit) as exc:  # sys.exit() in a policy is its failure too
            raise PolicyFailure(failure_report(exc, phase)) from exc
        finally:
            if not self._owns_process:
                self._rng_state = _get_rng_state()
                _set_rng_state(host_state)


def _numpy_state(seed: int) -> Any:
    return np.random.RandomState(seed).get_state()


def _get_rng_state() -> tuple[Any, Any]:
    return random.getstate(), np.random.get_state()


def _set_rng_state(state: tuple[Any, Any]) -> None:
    random.setstate(state[0])
    np.random.set_state(state[1])
