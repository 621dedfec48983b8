"""PettingZoo's connect-four (``connect_four_v3``), which also renders as text: ``render_mode="ansi"``
gives the board, six rows of seven cells (``.`` empty, ``X`` player_0, ``O`` player_1), top row first.
The game is PettingZoo's own; only ``render`` is added."""

from __future__ import annotations

import numpy as np
from pettingzoo.classic.connect_four import connect_four
from pettingzoo.utils import wrappers


class TextConnectFour(connect_four.raw_env):
    metadata = {**connect_four.raw_env.metadata, "render_modes": ["human", "rgb_array", "ansi"]}

    def render(self):
        if self.render_mode != "ansi":
            return super().render()
        rows = np.array(self.board).reshape(6, 7)
        return "\n".join("".join(".XO"[cell] for cell in row) for row in rows)


def env(**kwargs):
    """Wrapped as ``connect_four_v3.env`` wraps the game."""
    game = TextConnectFour(**kwargs)
    game = wrappers.TerminateIllegalWrapper(game, illegal_reward=-1)
    game = wrappers.AssertOutOfBoundsWrapper(game)
    return wrappers.OrderEnforcingWrapper(game)
