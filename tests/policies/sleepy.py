"""Sleeps 0.2 s in every step and logs when each step started and ended, to show cells overlap."""

import time

from mettagrid.policy.policy import AgentPolicy, MultiAgentPolicy


class _Agent(AgentPolicy):
    def step(self, obs):
        started = time.time()
        time.sleep(0.2)
        print(f"step {started:.6f} {time.time():.6f}", flush=True)
        return "noop"


class Sleepy(MultiAgentPolicy):
    def agent_policy(self, agent_id):
        return _Agent(self.policy_env_info)
