"""Bots whose losses a team reads on its pages (tests/test_losses.py): ``ScriptRaise`` logs a planted
``<script>`` each step and raises, from a nested function of its own file, at its third step (step
index 2) with a ``<script>`` in its message -- the same traceback every match; ``Silent`` plays noop and
never writes a line, so its logs are empty."""

from mettagrid.policy.policy import AgentPolicy, MultiAgentPolicy

FAIL_AT = 3
SCRIPT = "<script>window.pwned=1</script>"


def _give_up():
    raise ValueError(f"{SCRIPT} gave up on its step {FAIL_AT}")


class _Agent(AgentPolicy):
    def __init__(self, policy_env_info):
        super().__init__(policy_env_info)
        self._steps = 0

    def step(self, obs):
        print(f"LOSSES-LOG {SCRIPT}", flush=True)
        self._steps += 1
        if self._steps >= FAIL_AT:
            _give_up()
        return "noop"


class ScriptRaise(MultiAgentPolicy):
    def agent_policy(self, agent_id):
        return _Agent(self.policy_env_info)


class _Silent(AgentPolicy):
    def step(self, obs):
        return "noop"


class Silent(MultiAgentPolicy):
    def agent_policy(self, agent_id):
        return _Silent(self.policy_env_info)
