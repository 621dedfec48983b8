"""Sleeps in every step (0.2 s unless told otherwise) and logs when each step started and ended."""

import time

from mettagrid.policy.policy import AgentPolicy, MultiAgentPolicy


class _Agent(AgentPolicy):
    def __init__(self, policy_env_info, sleep_s):
        super().__init__(policy_env_info)
        self._sleep_s = sleep_s

    def step(self, obs):
        started = time.time()
        time.sleep(self._sleep_s)
        print(f"step {started:.6f} {time.time():.6f}", flush=True)
        return "noop"


class Sleepy(MultiAgentPolicy):
    def __init__(self, policy_env_info, sleep_s=0.2, **kwargs):
        super().__init__(policy_env_info, **kwargs)
        self._sleep_s = sleep_s

    def agent_policy(self, agent_id):
        return _Agent(self.policy_env_info, self._sleep_s)
