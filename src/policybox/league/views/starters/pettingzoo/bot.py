"""A starter bot for a PettingZoo ladder: a legal move at random (the game's ``action_mask``, in the
observation or the info, where it gives one), else any action of its action space.

policybox builds it as ``Starter(observation_space, action_space)`` and calls ``act(observation,
info)`` at each of its turns (its action space's RNG is seeded per agent). Change ``act`` to play
better. ``policy_spec.json`` names this class; zip this folder's files (no folder around them) and
submit the zip.
"""

import numpy as np


class Starter:
    def __init__(self, observation_space, action_space, **kwargs):
        self.action_space = action_space

    def act(self, observation, info=None):
        mask = observation.get("action_mask") if isinstance(observation, dict) else None
        if mask is None:
            mask = (info or {}).get("action_mask")
        if mask is not None:
            return self.action_space.sample(mask=np.asarray(mask, dtype=np.int8))
        return self.action_space.sample()
