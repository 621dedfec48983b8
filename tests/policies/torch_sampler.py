"""Acts by sampling torch's default generator (and numpy's and Python's), as network policies sample
their actions: the same seed must give the same actions, inline and in cells, and no two agents may
share a stream. ``import torch`` is the policy's own (nothing preloads it unless asked)."""

import random

import numpy as np
import torch
from mettagrid.policy.policy import AgentPolicy, MultiAgentPolicy


class _Agent(AgentPolicy):
    def step(self, obs):
        names = self.policy_env_info.action_names
        draw = int(torch.randint(0, 1 << 20, (1,))) + int(np.random.randint(1 << 20)) + random.randrange(1 << 20)
        return names[draw % len(names)]


class TorchSampler(MultiAgentPolicy):
    def agent_policy(self, agent_id):
        return _Agent(self.policy_env_info)
