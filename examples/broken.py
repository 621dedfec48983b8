"""Broken: a submission whose constructor raises, as a bot submitted with a bug would.

``ladder submit`` and a ladder's web upload refuse it before anything is stored, as ``evaluate``
and ``run`` refuse it before the first episode.
"""

from mettagrid.policy.policy import MultiAgentPolicy


class Broken(MultiAgentPolicy):
    def __init__(self, policy_env_info, **kwargs):
        raise RuntimeError("this bot was submitted with a bug: it cannot even be built")
