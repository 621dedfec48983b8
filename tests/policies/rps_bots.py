"""Rock-paper-scissors bots for PettingZoo's ``rps_v2``: each always plays one move (0 rock, 1 paper,
2 scissors), so rock beats scissors beats paper beats rock, every time."""

from __future__ import annotations


class _Always:
    move = 0

    def __init__(self, observation_space, action_space, **kwargs):
        pass

    def act(self, observation):
        return self.move


class Rock(_Always):
    move = 0


class Paper(_Always):
    move = 1


class Scissors(_Always):
    move = 2


class Stone(_Always):
    """Rock under another name: it draws with Rock."""

    move = 0
