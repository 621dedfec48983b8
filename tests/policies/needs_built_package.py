"""Imports ``trojan``, a package its submission's requirements bring only as an sdist (so it plays only
where that sdist was built), and says what the build left in it."""

import trojan
from mettagrid.policy.noop import NoopPolicy


class NeedsBuiltPackage(NoopPolicy):
    def __init__(self, policy_env_info, **kwargs):
        print("trojan says", trojan.VALUE, "from", trojan.__file__, flush=True)
        super().__init__(policy_env_info, **kwargs)
