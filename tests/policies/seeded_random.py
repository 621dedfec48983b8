"""A random policy drawing from numpy's and Python's global RNGs (which policybox seeds per agent)."""

import random

import numpy as np
from mettagrid.policy.policy import AgentPolicy, MultiAgentPolicy


class _Agent(AgentPolicy):
    def step(self, obs):
        names = self.policy_env_info.action_names
        if random.random() < 0.5:
            return names[int(np.random.randint(len(names)))]  # an action name
        return int(np.random.randint(len(names)))  # an action index


class SeededRandom(MultiAgentPolicy):
    def agent_policy(self, agent_id):
        return _Agent(self.policy_env_info)
