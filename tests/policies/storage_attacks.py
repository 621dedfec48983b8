"""Policies whose text attacks the ladder's database: NUL bytes, invalid UTF-8 and lone surrogates in
what they raise and print (PostgreSQL's text cannot hold a NUL; no UTF-8 encoder writes a lone
surrogate). The step-time ones fail at step 10 of every episode (a test lets them play without a
qualification, as a version that qualified and then changed its behaviour)."""

import os

from mettagrid.policy.policy import AgentPolicy, MultiAgentPolicy

FAIL_AT = 10
GARBAGE = b"\x00before\x00 \xff\xfe\xc3( not UTF-8 \x00\xed\xa0\x80 a surrogate's bytes\x00\n"
MESSAGE = "x\x00y \udcff lone surrogate \ud800"


class NulInInit(MultiAgentPolicy):
    """Raises ``RuntimeError("x\\x00y")`` when it is made: rejected at qualification."""

    def __init__(self, policy_env_info, **kwargs):
        raise RuntimeError("x\x00y")


class _Agent(AgentPolicy):
    def __init__(self, policy_env_info, crash):
        super().__init__(policy_env_info)
        self._steps, self._crash = 0, crash

    def step(self, obs):
        self._steps += 1
        if self._steps > FAIL_AT:
            os.write(1, GARBAGE * 20)
            os.write(2, GARBAGE * 20)
            if self._crash:
                os._exit(7)  # crashed: its result carries its log tail, garbage and all
            raise RuntimeError(MESSAGE)
        return "noop"


class NulInMatch(MultiAgentPolicy):
    """At step 10 prints garbage and raises an exception whose message holds a NUL
    and lone surrogates (its traceback too)."""

    crash = False

    def agent_policy(self, agent_id):
        return _Agent(self.policy_env_info, self.crash)


class NulThenCrash(NulInMatch):
    """At step 10 prints garbage and exits 7 (its log tail is stored)."""

    crash = True
