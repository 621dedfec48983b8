"""A PettingZoo Parallel game whose agents leave at different steps: agent ``a<i>`` terminates after
``lifetimes[i]`` steps. Each step an agent is in the game it earns its action (0 or 1). With
``raise_at_step``, ``step()`` raises at that step: a game with a bug, met while every agent moves."""

from __future__ import annotations

import numpy as np
from gymnasium import spaces
from pettingzoo import ParallelEnv


class Staggered(ParallelEnv):
    metadata = {"name": "staggered_v0"}

    def __init__(self, lifetimes=(2, 5, 30), raise_at_step=None):
        self.lifetimes = list(lifetimes)
        self.raise_at_step = raise_at_step
        self.possible_agents = [f"a{i}" for i in range(len(self.lifetimes))]
        self.agents = []
        self.step_count = 0

    def observation_space(self, agent):
        return spaces.Box(0, 1000, (1,), np.float32)

    def action_space(self, agent):
        return spaces.Discrete(2)

    def _observe(self):
        return {agent: np.array([self.step_count], dtype=np.float32) for agent in self.agents}

    def reset(self, seed=None, options=None):
        self.agents = list(self.possible_agents)
        self.step_count = 0
        return self._observe(), {agent: {} for agent in self.agents}

    def step(self, actions):
        self.step_count += 1
        if self.step_count == self.raise_at_step:
            raise RuntimeError(f"the game broke on purpose at step {self.step_count}")
        rewards = {agent: float(actions[agent]) for agent in self.agents}
        terminations = {agent: self.step_count >= self.lifetimes[int(agent[1:])] for agent in self.agents}
        truncations = dict.fromkeys(self.agents, False)
        infos = {agent: {} for agent in self.agents}
        observations = self._observe()
        self.agents = [agent for agent in self.agents if not terminations[agent]]
        return observations, rewards, terminations, truncations, infos


def parallel_env(**kwargs):
    return Staggered(**kwargs)
