"""Columns: a turn-based PettingZoo (AEC) game that keeps its legal moves in the agent's info, as many
board games do, and whose ``step()`` raises on an illegal move instead of penalising it.

Two players take turns dropping a token into one of ``columns`` columns of ``height`` slots; a full
column is an illegal move. A drop into column c earns the dropper c + 1. The game ends when every
column is full. ``mask_in`` says where the legal moves are: ``"info"`` (``info["action_mask"]``),
``"observation"`` (a dict observation with ``action_mask``) or ``"none"`` (no mask at all: the only
way to learn a column is full is the exception). A game with a bug: ``raise_at_turn`` makes
``step()`` raise at that turn whatever was played, ``observe_raises_at_turn`` makes ``observe()``
raise from that turn on, ``reset_raises`` makes ``reset()`` raise, and ``reset_raises_unless_seed``
makes it raise for every seed but that one.
"""

from __future__ import annotations

import numpy as np
from gymnasium import spaces
from pettingzoo import AECEnv


class IllegalMove(ValueError):
    """What this game raises on a move into a full column."""


class Columns(AECEnv):
    metadata = {"name": "columns_v0", "is_parallelizable": False}

    def __init__(
        self,
        columns: int = 3,
        height: int = 2,
        mask_in: str = "info",
        raise_at_turn: int | None = None,
        observe_raises_at_turn: int | None = None,
        reset_raises: bool = False,
        reset_raises_unless_seed: int | None = None,
    ):
        super().__init__()
        self.columns, self.height, self.mask_in = columns, height, mask_in
        self.raise_at_turn, self.observe_raises_at_turn = raise_at_turn, observe_raises_at_turn
        self.reset_raises, self.reset_raises_unless_seed = reset_raises, reset_raises_unless_seed
        self.possible_agents = ["player_0", "player_1"]
        board = spaces.Box(0, height, (columns,), np.int64)
        mask = spaces.Box(0, 1, (columns,), np.int8)
        self._observation_space = (
            spaces.Dict({"board": board, "action_mask": mask}) if mask_in == "observation" else board
        )

    def observation_space(self, agent):
        return self._observation_space

    def action_space(self, agent):
        return spaces.Discrete(self.columns)

    def _legal(self) -> np.ndarray:
        return (self.board < self.height).astype(np.int8)

    def observe(self, agent):
        if self.observe_raises_at_turn is not None and self.turn >= self.observe_raises_at_turn:
            raise KeyError(f"no observation at turn {self.turn}")
        board = self.board.copy()
        return {"board": board, "action_mask": self._legal()} if self.mask_in == "observation" else board

    def _update_infos(self):
        mask = {"action_mask": self._legal()} if self.mask_in == "info" else {}
        self.infos = {agent: dict(mask, turn=self.turn, note=object()) for agent in self.agents}  # not JSON

    def reset(self, seed=None, options=None):
        unless = self.reset_raises_unless_seed
        if self.reset_raises or (unless is not None and seed != unless):
            raise OSError("the board file is missing")
        self.agents = list(self.possible_agents)
        self.board = np.zeros(self.columns, np.int64)
        self.turn = 0
        self.rewards = dict.fromkeys(self.agents, 0.0)
        self._cumulative_rewards = dict.fromkeys(self.agents, 0.0)
        self.terminations = dict.fromkeys(self.agents, False)
        self.truncations = dict.fromkeys(self.agents, False)
        self.agent_selection = self.agents[0]
        self._update_infos()

    def step(self, action):
        agent = self.agent_selection
        if self.terminations[agent] or self.truncations[agent]:
            self._was_dead_step(action)
            return
        self.turn += 1
        if self.raise_at_turn is not None and self.turn == self.raise_at_turn:
            raise RuntimeError(f"the game broke on purpose at turn {self.turn}")
        if not 0 <= action < self.columns or self.board[action] >= self.height:
            raise IllegalMove(f"column {action} is full")
        self.board[action] += 1
        self._cumulative_rewards[agent] = 0.0
        self.rewards = dict.fromkeys(self.agents, 0.0)
        self.rewards[agent] = float(action + 1)
        if not self._legal().any():
            self.terminations = dict.fromkeys(self.agents, True)
        self.agent_selection = self.agents[1 - self.agents.index(agent)]
        self._accumulate_rewards()
        self._update_infos()


def env(**kwargs):
    return Columns(**kwargs)
