"""A deterministic policy with memory: its action depends on every observation it has seen so far."""

from mettagrid.policy.policy import AgentPolicy, MultiAgentPolicy
from mettagrid.simulator import Action


class _Agent(AgentPolicy):
    def __init__(self, policy_env_info, agent_id, stride):
        super().__init__(policy_env_info)
        self._memory = agent_id
        self._stride = stride

    def reset(self):
        self._memory += 1

    def step(self, obs):
        for token in obs.tokens:
            self._memory = (self._memory * 31 + int(token.value) + token.feature.id) % 1_000_003
        names = self.policy_env_info.action_names
        return Action(name=names[(self._memory // self._stride) % len(names)])


class Stateful(MultiAgentPolicy):
    def __init__(self, policy_env_info, stride=7, **kwargs):
        super().__init__(policy_env_info, **kwargs)
        self._stride = stride

    def agent_policy(self, agent_id):
        return _Agent(self.policy_env_info, agent_id, self._stride)


class SlowThinker(Stateful):
    """Declares, as MettaGrid policies may, that it needs at least two seconds per step."""

    minimum_action_timeout_ms = 2000
