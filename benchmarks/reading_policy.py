"""MettaGrid's random policy that reads its observation every step, as every trained network does.

Loadable as ``reading_policy.ReadingRandomPolicy`` (with ``benchmarks/`` on ``sys.path``) or as
``benchmarks/reading_policy.py:ReadingRandomPolicy``. MettaGrid's own random policy never looks at its
observation; a network turns it into a tensor every step, which builds its tokens first. This one builds
them (``obs.tokens``) and reads each token's ``raw_token``, as MettaGrid's ``obs_to_obs_tensor`` does,
then acts as MettaGrid's random policy does.
"""

from mettagrid.policy.policy import AgentPolicy
from mettagrid.policy.random_agent import RandomAgentPolicy, RandomMultiAgentPolicy
from mettagrid.simulator import Action, AgentObservation


class ReadingRandomAgentPolicy(RandomAgentPolicy):
    def step(self, obs: AgentObservation) -> Action:
        self.seen = [token.raw_token for token in obs.tokens]
        return super().step(obs)


class ReadingRandomPolicy(RandomMultiAgentPolicy):
    """MettaGrid's random policy, every agent reading its observation's tokens each step."""

    def agent_policy(self, agent_id: int) -> AgentPolicy:
        return ReadingRandomAgentPolicy(self._policy_env_info, self._vibe_action_p)
