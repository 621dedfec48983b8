"""Prints to stdout and stderr every step: that must land in its log file, never in the protocol."""

import sys

from mettagrid.policy.policy import AgentPolicy, MultiAgentPolicy


class _Agent(AgentPolicy):
    def __init__(self, policy_env_info, agent_id):
        super().__init__(policy_env_info)
        self._agent_id = agent_id
        self._steps = 0

    def step(self, obs):
        print(f"agent {self._agent_id} step {self._steps} stdout")
        print(f"agent {self._agent_id} step {self._steps} stderr", file=sys.stderr)
        self._steps += 1
        return "noop"


class Chatty(MultiAgentPolicy):
    def agent_policy(self, agent_id):
        return _Agent(self.policy_env_info, agent_id)
