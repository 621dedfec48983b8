"""Wanderer: a MettaGrid policy that keeps walking -- a direction for a few steps, then another.

It scores in ``examples/moves.yaml`` (0.01 a step moved) where ``random`` spends many steps on
other actions and ``noop`` never moves.
"""

import numpy as np
from mettagrid.policy.policy import AgentPolicy, MultiAgentPolicy


class WandererAgent(AgentPolicy):
    def __init__(self, policy_env_info, agent_id, stride):
        super().__init__(policy_env_info)
        self.moves = [name for name in policy_env_info.action_names if name.startswith("move")]
        self.rng = np.random.default_rng(agent_id)
        self.stride = stride
        self.steps = 0
        self.heading = self.moves[0]

    def step(self, observation):
        if self.steps % self.stride == 0:
            self.heading = self.moves[int(self.rng.integers(len(self.moves)))]
        self.steps += 1
        return self.heading


class Wanderer(MultiAgentPolicy):
    def __init__(self, policy_env_info, stride=4, **kwargs):
        super().__init__(policy_env_info, **kwargs)
        self.stride = int(stride)

    def agent_policy(self, agent_id):
        return WandererAgent(self.policy_env_info, agent_id, self.stride)
