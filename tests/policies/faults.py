"""Policies that fail in one specific way each, to check the failure is pinned on the right agent."""

import os

from mettagrid.policy.policy import AgentPolicy, MultiAgentPolicy

FAIL_AT = 10


class _Countdown(AgentPolicy):
    def __init__(self, policy_env_info, fail, before_step=lambda: None):
        super().__init__(policy_env_info)
        self._fail = fail
        self._before_step = before_step
        self._steps = 0

    def step(self, obs):
        self._before_step()
        self._steps += 1
        if self._steps > FAIL_AT:
            self._fail()
        return "noop"


def _raise():
    raise RuntimeError("policy gave up at step 10")


class RaiseInStep(MultiAgentPolicy):
    def agent_policy(self, agent_id):
        return _Countdown(self.policy_env_info, _raise)


class ExitInStep(MultiAgentPolicy):
    def agent_policy(self, agent_id):
        return _Countdown(self.policy_env_info, lambda: os._exit(3))


class RaiseInInit(MultiAgentPolicy):
    def __init__(self, policy_env_info, **kwargs):
        raise ValueError("bad configuration for this policy")

    def agent_policy(self, agent_id):
        raise AssertionError("never built")


class NotAPolicy:
    """Has no agent_policy: policybox must say so, naming this class."""

    def __init__(self, policy_env_info):
        pass


class SleepInStep(MultiAgentPolicy):
    """From step 10 on, sleeps for an hour inside step(): deaf to its socket, only a kill ends it."""

    def agent_policy(self, agent_id):
        import time

        return _Countdown(self.policy_env_info, lambda: time.sleep(3600))
