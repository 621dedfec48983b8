"""A torch policy whose own module never names torch: its helper module imports it. It says whether
torch was loaded before this module ran -- whether its cell was forked from a zygote that has it."""

import sys

LOADED_BEFORE = "torch" in sys.modules

import torch_helper  # noqa: E402  (the sibling module that imports torch)
from mettagrid.policy.noop import NoopPolicy  # noqa: E402


class TorchViaHelper(NoopPolicy):
    def __init__(self, policy_env_info, **kwargs):
        print(f"torch loaded before the policy's module: {LOADED_BEFORE}; {torch_helper.describe()}", flush=True)
        super().__init__(policy_env_info, **kwargs)
