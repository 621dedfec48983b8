"""MettaGrid's random policy that first imports a module it is given (``kw.module``): the standard
library's ``json`` from the host, or ``more_itertools`` from a submission's built environment
(``bench_environments.py``)."""

import importlib

from mettagrid.policy.random_agent import RandomMultiAgentPolicy


class ImportsPackage(RandomMultiAgentPolicy):
    def __init__(self, policy_env_info, module: str = "json", **kwargs):
        importlib.import_module(module)
        super().__init__(policy_env_info, **kwargs)
