"""Bots for the web page's tests. Each writes text a page must show as text -- a script element, an
image with an onerror attribute -- where a policy can: its exception's message, its traceback, its
log. ``LogsThenRaises`` also writes its team's secret in its log (``ALPHA-LOG-SECRET`` for
``kw.team=alpha``: made here, so that it is in no spec), which no other team may read, and the
second line of its exception's message ``ALPHA-MESSAGE-SECRET``: others see only the first line."""

from mettagrid.policy.policy import AgentPolicy, MultiAgentPolicy

PAYLOAD = "<script>document.title='pwned'</script><img src=x onerror=\"document.title='pwned'\">"
FAIL_AT = 5


class HostileInInit(MultiAgentPolicy):
    """Raises in its constructor with markup as its message: a rejected submission whose reason
    (its traceback) holds a script."""

    def __init__(self, policy_env_info, **kwargs):
        raise RuntimeError(PAYLOAD)


class HostileInStep(MultiAgentPolicy):
    """Built without fault, then raises at its first step with markup as its message: an upload the
    build check lets through and its qualification rejects, with a script in its traceback."""

    def agent_policy(self, agent_id):
        return _Raiser(self.policy_env_info)


class _Raiser(AgentPolicy):
    def step(self, obs):
        raise RuntimeError(PAYLOAD)


class _Logger(AgentPolicy):
    def __init__(self, policy_env_info, secret):
        super().__init__(policy_env_info)
        self._secret = secret
        self._steps = 0

    def step(self, obs):
        print(f"{self._secret} step {self._steps} {PAYLOAD}", flush=True)
        self._steps += 1
        if self._steps > FAIL_AT:
            raise RuntimeError(f"gave up {PAYLOAD}\n{self._secret.replace('LOG', 'MESSAGE')} on its second line")
        return "noop"


class LogsThenRaises(MultiAgentPolicy):
    """Logs its team's secret (and markup) every step, then raises at step 5: a failure with a log tail."""

    def __init__(self, policy_env_info, team="", **kwargs):
        super().__init__(policy_env_info)
        self._secret = f"{team.upper()}-LOG-SECRET"

    def agent_policy(self, agent_id):
        return _Logger(self.policy_env_info, self._secret)
