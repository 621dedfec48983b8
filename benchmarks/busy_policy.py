"""A MettaGrid policy that burns ~1 ms of CPU per step in pure Python, then does nothing.

Loadable as ``busy_policy.Busy1msPolicy`` (with ``benchmarks/`` on ``sys.path``) or as
``benchmarks/busy_policy.py:Busy1msPolicy``; ``Busy1msAct`` is the same for PettingZoo games. It
imports only the standard library and MettaGrid.
"""

import time

from mettagrid.policy.policy import AgentPolicy, MultiAgentPolicy
from mettagrid.policy.policy_env_interface import PolicyEnvInterface
from mettagrid.simulator import Action, AgentObservation

BUSY_NS = 1_000_000  # CPU time burnt per step


class Busy1msAgentPolicy(AgentPolicy):
    def step(self, obs: AgentObservation) -> Action:
        # Thread CPU time, not wall time: the policy does the same work however contended the machine is.
        deadline = time.thread_time_ns() + BUSY_NS
        spins = 0
        while time.thread_time_ns() < deadline:
            spins += 1
        return Action(name="noop")


class Busy1msPolicy(MultiAgentPolicy):
    """Every agent spins for 1 ms of its own thread's CPU time, then returns the noop action."""

    def __init__(self, policy_env_info: PolicyEnvInterface, device: str = "cpu", **kwargs: object) -> None:
        super().__init__(policy_env_info, device=device)

    def agent_policy(self, agent_id: int) -> AgentPolicy:
        return Busy1msAgentPolicy(self._policy_env_info)


class Busy1msAct:
    """The same for PettingZoo games: ``act`` spins for 1 ms of thread CPU time, then plays 0."""

    def __init__(self, observation_space: object, action_space: object, **kwargs: object) -> None:
        pass

    def act(self, observation: object) -> int:
        deadline = time.thread_time_ns() + BUSY_NS
        while time.thread_time_ns() < deadline:
            pass
        return 0
