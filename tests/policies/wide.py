"""Bots whose text stresses a page's width (tests/test_web_widths.py): failure messages, log lines and
a rejection's reason that hold one long token -- a path, a digest -- with no space to wrap at, and a
class whose name is 200 characters long (``LONG_CLASS``)."""

from mettagrid.policy.policy import AgentPolicy, MultiAgentPolicy

TOKEN = "/" + "/".join(["a-very-long-folder-name-without-a-space"] * 6) + "/" + "0123456789abcdef" * 8
FAIL_AT = 5


class _Raiser(AgentPolicy):
    def __init__(self, policy_env_info):
        super().__init__(policy_env_info)
        self._steps = 0

    def step(self, obs):
        print(f"step {self._steps} read {TOKEN}", flush=True)
        self._steps += 1
        if self._steps > FAIL_AT:
            raise RuntimeError(f"cannot read {TOKEN}")
        return "noop"


class RaisesWithALongMessage(MultiAgentPolicy):
    """Logs a long token each step, then raises with it at step 5 of every match."""

    def agent_policy(self, agent_id):
        return _Raiser(self.policy_env_info)


class RejectedWithALongReason(MultiAgentPolicy):
    """Raises in its constructor with a long token: rejected at its qualification."""

    def __init__(self, policy_env_info, **kwargs):
        raise RuntimeError(f"no checkpoint at {TOKEN}")


# 200, not 300: a spec ``wide.py:CLASS`` longer than a file name can be is an OSError in parse_policy_arg today.
LONG_CLASS = "RaisesWithALongMessage" + "X" * 178
globals()[LONG_CLASS] = type(LONG_CLASS, (RaisesWithALongMessage,), {})
