"""A bot whose failure has a traceback through its own file: ``NestedRaise`` raises from a nested
function of this file at its third step, and prints a line to its log every step. Its team must see
this file's frame first (as ``own_traceback.py``, never the organiser's path); others see the first
line only."""

from mettagrid.policy.policy import AgentPolicy, MultiAgentPolicy

FAIL_AT = 3
LOG_LINE = "OWN-TRACEBACK-BOT-LOG"


def _deep_inside(steps):
    raise ValueError(f"own code gave up at step {steps}\nOWN-SECOND-LINE")


def _decide(steps):
    if steps >= FAIL_AT:
        _deep_inside(steps)
    return "noop"


class _Agent(AgentPolicy):
    def __init__(self, policy_env_info):
        super().__init__(policy_env_info)
        self._steps = 0

    def step(self, obs):
        print(f"{LOG_LINE} {self._steps}", flush=True)
        self._steps += 1
        return _decide(self._steps)


class NestedRaise(MultiAgentPolicy):
    def agent_policy(self, agent_id):
        return _Agent(self.policy_env_info)


class Chatty(MultiAgentPolicy):
    """Never fails; logs a line every step: a seat whose log tail is kept though it played ok."""

    def agent_policy(self, agent_id):
        agent = _Agent(self.policy_env_info)
        agent.step = lambda obs: (print(f"{LOG_LINE} ok", flush=True), "noop")[1]
        return agent
