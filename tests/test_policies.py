"""Policies as MettaGrid users write them run unchanged in their cells; checkpoints load in the cell."""

import gc
import sys
import threading
from pathlib import Path

import numpy as np
from conftest import policy
from helpers.replays import digest_of

from policybox.envs import mettagrid, mettagrid_shorthands
from policybox.results import AgentStatus


def test_checkpoint_weights_are_loaded_inside_the_cell(play, tmp_path):
    north, west = tmp_path / "north.npz", tmp_path / "west.npz"
    np.savez(north, weights=np.array([0, 9, 0, 0, 0], dtype=float))  # move_north
    np.savez(west, weights=np.array([0, 0, 0, 9, 0], dtype=float))  # move_west
    result = play(
        [
            policy("weights.py:Weights", data=north),
            policy("weights.py:Weights", data=west),
            policy("weights.py:Weights"),
        ],
        agents=3,
        steps=40,
    )
    north_agent, west_agent, untrained = result.agents
    assert north_agent.policy == "Weights:north.npz"
    # The digest covers every action the game received: exactly move_north (id 1) 40 times, etc.
    assert north_agent.action_digest == digest_of([1] * 40)
    assert west_agent.action_digest == digest_of([3] * 40)
    assert untrained.action_digest == digest_of([0] * 40)
    assert north_agent.stats["action.move.success"] + north_agent.stats["action.move.failed"] == 40
    # load_policy_data ran in the cell: its print is in that agent's log, not in the host.
    assert "loaded weights [0.0, 9.0, 0.0, 0.0, 0.0]" in Path(north_agent.log_path).read_text()
    assert "loaded weights" not in Path(untrained.log_path).read_text()


def test_mettagrid_bundled_policies_by_shorthand_and_dotted_path(play):
    result = play(["random", "noop", "mettagrid.policy.random_agent.RandomMultiAgentPolicy"], agents=3, steps=30)
    assert [a.status for a in result.agents] == [AgentStatus.OK] * 3
    assert [a.policy for a in result.agents] == ["random", "noop", "RandomMultiAgentPolicy"]
    assert result.agents[1].stats.get("action.noop.success") == 30
    assert result.agents[0].latency.count == 30


class _Cycle:
    """Garbage with a finaliser: collecting it runs Python code, where the interpreter may switch threads."""

    def __del__(self) -> None:
        pass


def test_shorthands_resolve_in_threads_at_once_while_garbage_is_collected():
    """A ladder's upload threads check shorthands at once. The registry is read from MettaGrid's source
    with ast.parse, which CPython 3.11 breaks when two threads parse at once across a garbage collection
    ("AST constructor recursion depth mismatch": 9 rounds of 20 failed without the registry's lock)."""
    interval, threshold = sys.getswitchinterval(), gc.get_threshold()
    sys.setswitchinterval(1e-6)
    gc.set_threshold(5)
    errors: list[BaseException] = []
    try:
        for _ in range(20):
            mettagrid_shorthands._read_registry.cache_clear()
            start = threading.Barrier(8)

            def resolve(start: threading.Barrier = start) -> None:
                start.wait()
                for garbage in [_Cycle() for _ in range(100)]:
                    garbage.itself = garbage
                try:
                    assert mettagrid.resolve_shorthand("random").endswith("RandomMultiAgentPolicy")
                except BaseException as exc:
                    errors.append(exc)

            threads = [threading.Thread(target=resolve) for _ in range(8)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
    finally:
        sys.setswitchinterval(interval)
        gc.set_threshold(*threshold)
    assert errors == []


def test_init_kwargs_reach_the_policy(play):
    results = [
        play([policy("stateful.py:Stateful", **{"kw.stride": stride})], agents=2, steps=30) for stride in (1, 50)
    ]
    assert results[0].agents[0].action_digest != results[1].agents[0].action_digest


def test_policy_output_goes_to_its_log_file_not_the_protocol(play):
    result = play([policy("chatty.py:Chatty"), "noop"], agents=2, steps=25)
    chatty, quiet = result.agents
    assert chatty.status == AgentStatus.OK and chatty.stats["action.noop.success"] == 25
    log = Path(chatty.log_path).read_text()
    assert "agent 0 step 24 stdout" in log and "agent 0 step 24 stderr" in log
    assert Path(quiet.log_path).read_text() == ""


def test_python_path_is_importable_only_in_the_cell(play, tmp_path):
    package = tmp_path / "roots" / "mybots"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "bot.py").write_text(
        "from mettagrid.policy.noop import NoopPolicy\n\nclass Bot(NoopPolicy):\n    pass\n"
    )
    result = play([f"mybots.bot.Bot,path={tmp_path / 'roots'}"], agents=2, steps=10)
    assert [a.status for a in result.agents] == [AgentStatus.OK] * 2
    import sys

    assert str(tmp_path / "roots") not in sys.path
    assert "mybots" not in sys.modules


def test_cells_compute_concurrently(play):
    """Every step, all four agents were inside step() at the same moment: sent all, then gathered."""
    result = play([policy("sleepy.py:Sleepy")], agents=4, steps=5)
    spans = [
        [tuple(map(float, line.split()[1:])) for line in Path(agent.log_path).read_text().splitlines()]
        for agent in result.agents
    ]
    for step in range(5):
        starts, ends = zip(*(agent_spans[step] for agent_spans in spans), strict=True)
        assert max(starts) < min(ends), f"step {step}: agents ran one after another"


def test_spec_environment_reaches_only_its_cells(play, monkeypatch):
    monkeypatch.setenv("HOST_ONLY_TOKEN", "secret")
    reader = policy("env_reader.py:EnvReader", **{"env.POLICY_MODE": "tournament"})
    with_env, without = play([reader, policy("env_reader.py:EnvReader")], agents=2, steps=3).agents
    assert (
        "'POLICY_MODE'" in Path(with_env.log_path).read_text() and "tournament" in Path(with_env.log_path).read_text()
    )
    assert "POLICY_MODE" not in Path(without.log_path).read_text()
    assert "HOST_ONLY_TOKEN" not in Path(with_env.log_path).read_text()
