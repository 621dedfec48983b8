"""A policy as a team packs it in a MettaGrid submission zip: plays noop and prints its checkpoint."""

from pathlib import Path

from mettagrid.policy.noop import NoopPolicy


class Packed(NoopPolicy):
    def load_policy_data(self, policy_data_path):
        print("checkpoint:", Path(policy_data_path).read_text())
