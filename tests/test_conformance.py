"""Every adapter passes the same conformance check (``policybox.envs.conformance``), MettaGrid's and
PettingZoo's, over PettingZoo games of every shape this machine has -- with no code of their own:
Parallel and turn-based, mixed observation and action spaces, continuous actions, Dict observations
with action masks, agents leaving early."""

from __future__ import annotations

from pathlib import Path

import pytest

from policybox.envs.conformance import check_adapter

STAGGERED = f"pettingzoo:{Path(__file__).parent / 'games' / 'staggered.py'}:parallel_env"
GAMES = [
    ("arena", {}),
    ("navigation", {}),
    ("pettingzoo:mpe2.simple_spread_v3:parallel_env", {}),
    ("pettingzoo:mpe2.simple_spread_v3:env", {}),  # the same game as an AEC env
    ("pettingzoo:mpe2.simple_spread_v3:parallel_env", {"continuous_actions": True}),  # Box actions
    ("pettingzoo:mpe2.simple_tag_v3:parallel_env", {}),  # predators and prey see differently
    ("pettingzoo:mpe2.simple_speaker_listener_v4:parallel_env", {}),  # different action spaces
    ("pettingzoo:pettingzoo.classic.connect_four_v3:env", {}),
    ("pettingzoo:pettingzoo.classic.tictactoe_v3:env", {}),
    ("pettingzoo:pettingzoo.classic.rps_v2:parallel_env", {}),
    ("pettingzoo:pettingzoo.classic.go_v5:env", {"board_size": 5}),
    (STAGGERED, {"lifetimes": [1, 3, 8]}),
]


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
@pytest.mark.parametrize(("env", "kwargs"), GAMES, ids=[f"{env.split('/')[-1]}{kwargs or ''}" for env, kwargs in GAMES])
def test_adapter_conformance(env, kwargs):
    check_adapter(env, kwargs, agents=3, steps=40)


def test_the_check_catches_a_game_that_is_not_reproducible(monkeypatch):
    """The check can fail: a game whose observations depend on something besides its seed."""
    import numpy as np

    from policybox.envs import pettingzoo

    real = pettingzoo.ParallelGame.step

    def noisy(self):  # observations that depend on an unseeded generator
        real(self)
        self._observations = {a: o + np.random.default_rng().random() for a, o in self._observations.items()}

    monkeypatch.setattr(pettingzoo.ParallelGame, "step", noisy)
    with pytest.raises(AssertionError, match="two plays from seed 3 with the same actions differ"):
        check_adapter("pettingzoo:mpe2.simple_spread_v3:parallel_env")
