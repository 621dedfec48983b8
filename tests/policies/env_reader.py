"""Prints the environment variables its cell was given (one line, sorted), then plays noop."""

import os

from mettagrid.policy.noop import NoopPolicy


class EnvReader(NoopPolicy):
    def __init__(self, policy_env_info, **kwargs):
        super().__init__(policy_env_info)
        print("env:", sorted(os.environ), os.environ.get("POLICY_MODE"), flush=True)
