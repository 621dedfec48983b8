"""An entrant whose failure is HTML: at step ``at_step`` it raises with a message that closes the cell
quoting it, opens a script and an image with an ``onerror=`` handler, each of which would set the
page's title. A page that shows it must show it as text; the tests judge what a real browser built."""

from mettagrid.policy.policy import AgentPolicy, MultiAgentPolicy

PAYLOAD = (
    "</td></tr></table><script>document.title='PWNED-SCRIPT'</script>"
    "<img src=x onerror=\"document.title='PWNED-ONERROR'\">"
)


class _Injector(AgentPolicy):
    def __init__(self, policy_env_info, at_step):
        super().__init__(policy_env_info)
        self._at_step, self._steps = at_step, 0

    def step(self, observation):
        self._steps += 1
        if self._steps == self._at_step:
            raise RuntimeError("policy says: " + PAYLOAD)
        return "noop"


class InjectHtml(MultiAgentPolicy):
    def __init__(self, policy_env_info, at_step=2, **kwargs):
        super().__init__(policy_env_info, **kwargs)
        self._at_step = int(at_step)

    def agent_policy(self, agent_id):
        return _Injector(self.policy_env_info, self._at_step)
