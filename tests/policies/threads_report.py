"""Prints, once, the thread budget it finds: torch's threads, OpenMP's variable and the BLAS pool numpy
loaded -- read by the test from the agent's log, which the host writes. Plays the no-op."""

import os

import torch
from mettagrid.policy.policy import AgentPolicy, MultiAgentPolicy
from threadpoolctl import threadpool_info


class _Agent(AgentPolicy):
    def step(self, obs):
        return "noop"


class ThreadsReport(MultiAgentPolicy):
    def __init__(self, policy_env_info, **kwargs):
        super().__init__(policy_env_info, **kwargs)
        blas = [pool["num_threads"] for pool in threadpool_info() if pool["user_api"] == "blas"]
        print(f"torch={torch.get_num_threads()} omp={os.environ.get('OMP_NUM_THREADS')} blas={blas}", flush=True)

    def agent_policy(self, agent_id):
        return _Agent(self.policy_env_info)
