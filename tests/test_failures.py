"""A failing policy is that agent's failure: recorded on it, with the others playing on untouched."""

import pytest
from conftest import policy

from policybox.results import AgentStatus


@pytest.mark.parametrize("mode", ["process", "inline"])
def test_policy_that_is_not_a_policy_gets_an_error_naming_the_class(play, mode):
    result = play([policy("faults.py:NotAPolicy"), "noop"], agents=2, steps=5, mode=mode)
    bad, good = result.agents
    assert bad.status == AgentStatus.ERROR
    assert bad.failure.kind == "TypeError" and bad.failure.step is None and bad.failure.phase == "init"
    assert "faults.py:NotAPolicy is not a MettaGrid policy" in bad.failure.message
    assert good.status == AgentStatus.OK and good.stats["action.noop.success"] == 5


def test_exception_in_init_is_reported_with_its_traceback(play):
    bad, good = play([policy("faults.py:RaiseInInit"), "random"], agents=2, steps=5).agents
    assert (bad.status, bad.failure.kind, bad.failure.message) == (
        AgentStatus.ERROR,
        "ValueError",
        "bad configuration for this policy",
    )
    assert 'faults.py", line' in bad.failure.traceback
    assert good.status == AgentStatus.OK


def test_exception_in_step_is_pinned_on_its_step_and_the_others_play_on(play):
    noop_only = play(["noop", "random", "random"], agents=3, steps=30, seed=5)
    result = play([policy("faults.py:RaiseInStep"), "random", "random"], agents=3, steps=30, seed=5)
    bad = result.agents[0]
    assert bad.status == AgentStatus.ERROR
    assert (bad.failure.kind, bad.failure.step, bad.failure.phase) == ("RuntimeError", 10, "step")
    assert "policy gave up at step 10" in bad.failure.traceback
    assert bad.stats["action.noop.success"] == 30  # its policy's noops, then the host's
    # The failing agent played no-op throughout, so the others saw exactly the no-op episode.
    assert [a.action_digest for a in result.agents[1:]] == [a.action_digest for a in noop_only.agents[1:]]


def test_process_exit_is_a_crash_with_its_exit_code(play):
    bad, good = play([policy("faults.py:ExitInStep"), "random"], agents=2, steps=30).agents
    assert bad.status == AgentStatus.CRASHED
    assert (bad.failure.step, bad.failure.exit_code) == (10, 3)
    assert good.status == AgentStatus.OK and good.latency.count == 30


def test_unknown_dotted_class_is_an_init_error(play):
    bad = play(["mettagrid.policy.noop.NoSuchPolicy"], agents=1, steps=5).agents[0]
    assert bad.status == AgentStatus.ERROR
    assert bad.failure.kind == "AttributeError" and "NoSuchPolicy" in bad.failure.message
