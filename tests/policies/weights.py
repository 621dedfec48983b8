"""Plays by a numpy weight vector loaded from its checkpoint: always the action with the top weight.

Without a checkpoint the weights are zero, which picks action 0 (noop) every step.
"""

import numpy as np
from mettagrid.policy.policy import AgentPolicy, MultiAgentPolicy


class _Agent(AgentPolicy):
    def __init__(self, policy_env_info, weights):
        super().__init__(policy_env_info)
        self._weights = weights

    def step(self, obs):
        return int(np.argmax(self._weights))


class Weights(MultiAgentPolicy):
    def __init__(self, policy_env_info, **kwargs):
        super().__init__(policy_env_info, **kwargs)
        self.weights = np.zeros(len(policy_env_info.all_action_names))

    def load_policy_data(self, policy_data_path):
        self.weights = np.load(policy_data_path)["weights"]
        print(f"loaded weights {self.weights.tolist()} from {policy_data_path}")

    def agent_policy(self, agent_id):
        return _Agent(self.policy_env_info, self.weights)
