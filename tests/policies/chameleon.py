"""A chameleon: it tries to tell a ladder's final from a rated match by what it can observe, plays to
win (it walks, which scores in examples/moves.yaml) only when it believes it is in a final, and stands
still otherwise -- sandbagging its rating. In every seat it prints one line, ``observed {json}``, of
everything it can see, for the tests to compare across kinds of episode from outside.

It tells the kind by its seed. Its random streams are seeded from its episode's seed and its seat
(policybox's public code), and a ladder's seeds were once derived from public offsets of a default
seed 0: it knows every such seed of a rated match, a qualification, a final's match and a versus
pair, and finds which one seeded it. It re-derives them as policybox's code does (a hostile policy
would not import policybox).
"""

import hashlib
import json
import os
import random
import re
import resource
import sys

import numpy as np
from mettagrid.policy.policy import AgentPolicy, MultiAgentPolicy

STATE = random.getstate()  # as the cell seeded it, before anything here draws from it
FINAL_OFFSET, QUALIFY_OFFSET = 1 << 29, 1 << 30  # the offsets a ladder once used, of its seed 0
SEATS = 8


def episode_seed(seed, index):
    return int(np.random.SeedSequence([seed, index]).generate_state(1)[0] >> 1)


def agent_seed(seed, agent):
    return int(np.random.SeedSequence([seed, agent]).generate_state(1)[0])


def public_seeds():
    """Every episode seed derivable from a default seed 0, and its kind."""
    kinds = {episode_seed(0, index): "rated or versus" for index in range(100)}
    kinds.update({episode_seed(0, QUALIFY_OFFSET + version): "qualification" for version in range(1, 20)})
    for final in range(3):
        base = episode_seed(0, FINAL_OFFSET + final)
        kinds.update({episode_seed(base, number): "final" for number in range(40)})
    return kinds


def kind_of_this_episode():
    """The kind of the public seed that seeded this cell's streams, if one did."""
    for seed, kind in public_seeds().items():
        for seat in range(SEATS):
            if random.Random(agent_seed(seed, seat)).getstate() == STATE:
                return kind
    return None


def _digits(text):
    return re.sub(r"[0-9]+", "#", text)


def observed(agent_id, policy_env_info, kind):
    """What this cell can see of its episode (its pid, uid and the numbers in its paths normalised)."""
    here = os.path.dirname(os.path.abspath(__file__))
    limits = [resource.getrlimit(getattr(resource, name)) for name in ("RLIMIT_CPU", "RLIMIT_NOFILE", "RLIMIT_FSIZE")]
    return {
        "seed_kind": kind,
        "agent": agent_id,
        "agents": policy_env_info.num_agents,
        "actions": len(policy_env_info.action_names),
        "env": {name: _digits(value) for name, value in sorted(os.environ.items())},
        "cwd": _digits(os.getcwd()),
        "cwd_files": sorted(os.listdir(".")),
        "own_files": sorted(os.listdir(here)),
        "argv": [_digits(arg) for arg in sys.argv],
        "limits": limits,
        "modules": hashlib.sha256(" ".join(sorted(sys.modules)).encode()).hexdigest()[:16],
    }


class _Agent(AgentPolicy):
    def __init__(self, policy_env_info, walks):
        super().__init__(policy_env_info)
        self.walks = walks
        self.moves = [name for name in policy_env_info.action_names if name.startswith("move")]
        self.steps = 0

    def step(self, obs):
        self.steps += 1
        return self.moves[(self.steps // 4) % len(self.moves)] if self.walks else "noop"


class Chameleon(MultiAgentPolicy):
    def __init__(self, policy_env_info, version=1, **kwargs):
        super().__init__(policy_env_info, **kwargs)
        self.kind = kind_of_this_episode()  # ``version`` only makes another version of the same code

    def agent_policy(self, agent_id):
        print("observed " + json.dumps(observed(agent_id, self.policy_env_info, self.kind)), flush=True)
        return _Agent(self.policy_env_info, walks=self.kind == "final")
