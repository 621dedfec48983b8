"""The MettaGrid adapter reproduces MettaGrid exactly: the same observation objects as MettaGrid's
own SimulationAgent.observation, and the same episode as MettaGrid's in-process Rollout."""

import importlib.util
from pathlib import Path

from mettagrid.simulator.rollout import Rollout

from policybox.envs.mettagrid import MettaGridCell, MettaGridHost, encode_observation, make_config


def test_cell_rebuilds_mettagrids_own_observations():
    host = MettaGridHost(make_config("arena", 4, 30, seed=5), seed=5)
    cell = MettaGridCell(host.cell_setup(0))
    for _ in range(20):
        for agent_id in range(4):
            ours = cell.decode_observation(agent_id, bytes(host.observation(agent_id)))
            theirs = host._sim.agent(agent_id).observation
            assert ours.agent_id == theirs.agent_id and list(ours.talk) == list(theirs.talk)
            assert [(t.feature, t.value, t.raw_token.tolist()) for t in ours.tokens] == [
                (t.feature, t.value, t.raw_token.tolist()) for t in theirs.tokens
            ]
            # policybox's raw_tokens: the whole buffer, whose rows up to the first empty one are the tokens
            raw = ours.raw_tokens
            assert raw.shape == (500, 3) and raw.dtype == "uint8" and not raw.flags.writeable
            assert raw[: len(theirs.tokens)].tolist() == [t.raw_token.tolist() for t in theirs.tokens]
            assert (raw[len(theirs.tokens) :, 1] == 255).all()
            host.apply_action(agent_id, cell.encode_action(["move_north", "move_east", 0, "noop"][agent_id]))
        host.step()
    host.close()


def test_inline_episode_equals_mettagrids_rollout(play):
    """policybox's episode loop is MettaGrid's: same policy, same seed, same stats and rewards."""
    path = Path(__file__).parent / "policies" / "stateful.py"
    module_spec = importlib.util.spec_from_file_location("stateful_for_rollout", path)
    module = importlib.util.module_from_spec(module_spec)
    module_spec.loader.exec_module(module)

    config = make_config("arena", 4, 120, seed=9)
    host = MettaGridHost(config, seed=9)
    cell = MettaGridCell(host.cell_setup(0))
    agents = [module.Stateful(cell.policy_env_info).agent_policy(i) for i in range(4)]
    host.close()
    rollout = Rollout(config, agents, seed=9)
    rollout.run_until_done()
    theirs = rollout._sim.episode_stats

    ours = play([str(path) + ":Stateful"], agents=4, steps=120, seed=9, mode="inline")
    assert ours.game_stats == {k: float(v) for k, v in theirs["game"].items()}
    assert [a.stats for a in ours.agents] == [{k: float(v) for k, v in s.items()} for s in theirs["agent"]]
    assert [a.reward for a in ours.agents] == [float(r) for r in rollout._sim.episode_rewards]


def test_observation_tokens_are_built_when_first_read():
    """A policy that never reads its tokens does not pay for them; one that does gets them, once."""
    from mettagrid.simulator.interface import AgentObservation

    host = MettaGridHost(make_config("arena", 2, 5, seed=1), seed=1)
    cell = MettaGridCell(host.cell_setup(0))
    observation = cell.decode_observation(0, bytes(host.observation(0)))
    assert isinstance(observation, AgentObservation) and observation.agent_id == 0
    assert observation._tokens is None  # nothing built yet
    tokens = observation.tokens
    assert tokens and observation.tokens is tokens  # built once, then kept
    host.close()


def test_an_observation_mettagrid_built_encodes_to_the_bytes_the_host_sends():
    """SandboxedPolicy gets MettaGrid's own AgentObservation; its payload must be the host's, talk included."""
    config = make_config("arena", 4, 10, 0)
    config.game.talk.enabled = True
    host = MettaGridHost(config, 0)
    try:
        host._sim.agent(1).set_talk("hello there")
        host.step()
        shape = tuple(host._policy_env.observation_shape)
        observations = [host._sim.agent(i).observation for i in range(4)]
        assert any(obs.talk for obs in observations)
        for i, obs in enumerate(observations):
            assert encode_observation(obs, shape, talk=True) == bytes(host.observation(i))
    finally:
        host.close()
