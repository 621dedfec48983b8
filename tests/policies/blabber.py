"""A team that leaves its secrets where a ladder keeps them: it prints the secret its spec's env gives
it (``env.PRINTED``) to its log, then fails at its first step -- so the secret is in its log file and
in the log tail and traceback its ladder stores. Its other env value (``env.UNPRINTED``) is only in
the ladder's file of its spec."""

import os

from mettagrid.policy.noop import NoopPolicy


class Blabber(NoopPolicy):
    def __init__(self, policy_env_info, **kwargs):
        super().__init__(policy_env_info)
        print(f"my team's secret is {os.environ['PRINTED']}", flush=True)

    def agent_policy(self, agent_id):
        raise RuntimeError(f"failing on purpose, secret {os.environ['PRINTED']}")
