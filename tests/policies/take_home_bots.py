"""A bot whose log is longer than the tail a page keeps (4 KiB): its first line, which says its team's
secret, is only in its whole log. Every line carries markup, which every page must show as text.
Never fails."""

from mettagrid.policy.policy import AgentPolicy, MultiAgentPolicy

PAYLOAD = "<script>document.title='pwned'</script><img src=x onerror=\"document.title='pwned'\">"
FILLER = "x" * 300


class _Diarist(AgentPolicy):
    def __init__(self, policy_env_info, secret):
        super().__init__(policy_env_info)
        self._secret = secret
        self._steps = 0

    def step(self, obs):
        if self._steps == 0:
            print(f"{self._secret} FIRST-LINE {PAYLOAD}", flush=True)
        print(f"step {self._steps} {PAYLOAD} {FILLER}", flush=True)
        self._steps += 1
        return "noop"


class Diarist(MultiAgentPolicy):
    def __init__(self, policy_env_info, team="", **kwargs):
        super().__init__(policy_env_info)
        self._secret = f"{team.upper()}-WHOLE-LOG-SECRET"

    def agent_policy(self, agent_id):
        return _Diarist(self.policy_env_info, self._secret)
