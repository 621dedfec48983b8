"""A small torch policy (one linear layer over the observation tokens) for the start-up benchmark."""

import torch
from mettagrid.policy.policy import AgentPolicy, MultiAgentPolicy


class _Agent(AgentPolicy):
    def __init__(self, policy_env_info, net):
        super().__init__(policy_env_info)
        self._net = net

    def step(self, obs):
        values = torch.zeros(len(obs.tokens) + 1)
        for index, token in enumerate(obs.tokens):
            values[index] = token.value
        with torch.no_grad():
            scores = self._net(values[:1].repeat(8))
        return int(torch.argmax(scores)) % len(self.policy_env_info.action_names)


class TorchPolicy(MultiAgentPolicy):
    def __init__(self, policy_env_info, **kwargs):
        super().__init__(policy_env_info, **kwargs)
        torch.manual_seed(0)
        self._net = torch.nn.Linear(8, len(policy_env_info.action_names))

    def agent_policy(self, agent_id):
        return _Agent(self.policy_env_info, self._net)
