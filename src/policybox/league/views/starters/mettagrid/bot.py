"""A starter bot for a MettaGrid ladder: every agent plays one of the game's actions at random.

Change ``step`` to play better. ``policy_spec.json`` names this class; zip this folder's files (no
folder around them) and submit the zip.
"""

import numpy as np
from mettagrid.policy.policy import AgentPolicy, MultiAgentPolicy


class StarterAgent(AgentPolicy):
    def __init__(self, policy_env_info, agent_id):
        super().__init__(policy_env_info)
        self.actions = list(policy_env_info.action_names)
        self.rng = np.random.default_rng(agent_id)

    def step(self, observation):
        return self.actions[int(self.rng.integers(len(self.actions)))]


class Starter(MultiAgentPolicy):
    def agent_policy(self, agent_id):
        return StarterAgent(self.policy_env_info, agent_id)
