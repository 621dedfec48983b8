"""Broken: a submission whose constructor raises, as a bot submitted with a bug would.

A ladder's qualification rejects it, with the traceback as the reason; ``evaluate`` and ``run``
refuse it before the first episode.
"""

from mettagrid.policy.policy import MultiAgentPolicy


class Broken(MultiAgentPolicy):
    def __init__(self, policy_env_info, **kwargs):
        raise RuntimeError("this bot was submitted with a bug: it cannot even be built")
