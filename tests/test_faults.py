"""The fault suite: real policy files that fail in every way we know, run through `policybox run`.

For each fault: the episode finishes, the faulty agent (seat 0) has the right status, cause and
step, every other agent acted exactly as in a run where seat 0 was a no-op policy, the result file
is complete, the table shows the cause in one line, and no process remains.
"""

from __future__ import annotations

import re
from pathlib import Path

import psutil
import pytest
from conftest import policy
from helpers.processes import alive
from helpers.runs import policybox_run
from typer.testing import CliRunner

from policybox.cli import app
from policybox.host.cgroup import kill_cgroup_parent
from policybox.results import AgentStatus, EpisodeResult

STEPS = 150
# A healthy cell answers in about a millisecond; 2 s deadlines leave room for a loaded machine (a run of the
# whole suite on three workers once stalled the 10 ms pacer past 500 ms), and the pacer keeps the episode
# long enough (>1.4 s after step 10) for a hung agent to spend its bank.
LIMITS = ["--act-timeout-ms", "2000", "--time-bank-ms", "500", "--init-timeout-s", "5", "--log-limit-mb", "0.1"]
OTHERS = [
    policy("seeded_random.py:SeededRandom"),
    policy("stateful.py:Stateful"),
    policy("sleepy.py:Sleepy", **{"kw.sleep_s": "0.01"}),
]


def play_seat_zero(first: str, folder: Path) -> tuple[EpisodeResult, str]:
    others = [arg for spec in OTHERS for arg in ("-p", spec)]
    result, _, output = policybox_run(
        folder, "-n", "4", "-p", first, *others, "--steps", str(STEPS), "--seed", "3", *LIMITS
    )
    return result, output


@pytest.fixture(scope="module")
def reference(tmp_path_factory) -> EpisodeResult:
    result, _ = play_seat_zero("noop", tmp_path_factory.mktemp("reference"))
    assert [a.status for a in result.agents] == [AgentStatus.OK] * 4
    return result


def check_fault(first: str, tmp_path: Path, reference: EpisodeResult, status: AgentStatus, kind: str | None, step):
    """Play the fault in seat 0 and check everything the suite promises; the faulty agent's result."""
    result, table = play_seat_zero(first, tmp_path)
    faulty, *others = result.agents
    assert result.steps == STEPS and result.aborted is None
    assert faulty.status == status, faulty.failure
    if kind is not None:
        assert (faulty.failure.kind, faulty.failure.step, faulty.first_failure_step) == (kind, step, step)
        squeeze = lambda text: re.sub(r"[\s│┃]", "", text)  # noqa: E731 - the table wraps long causes
        assert squeeze(faulty.failure.one_line()) in squeeze(table)
    assert faulty.stats.get("action.noop.success") == STEPS  # the game only ever saw no-ops from it
    assert [a.action_digest for a in others] == [a.action_digest for a in reference.agents[1:]]
    assert [(a.status, a.reward, a.stats) for a in others] == [
        (a.status, a.reward, a.stats) for a in reference.agents[1:]
    ]
    assert [a.agent_id for a in result.agents] == [0, 1, 2, 3]
    return faulty


def invalid_action(returns: str) -> tuple:
    return policy("faults.py:InvalidAction", **{"kw.returns": returns}), AgentStatus.INVALID_ACTION, "InvalidAction", 10


def forged(forge: str, status: AgentStatus = AgentStatus.ERROR, kind: str = "ProtocolError") -> tuple:
    return policy("faults.py:ForgeFrame", **{"kw.forge": forge}), status, kind, 10


FAULTS = {
    # fault: (seat-0 policy, status, failure kind, failure step)
    "import error": (policy("bad_import.py:Bot"), AgentStatus.ERROR, "ModuleNotFoundError", None),
    "unknown class": (policy("faults.py:NoSuchClass"), AgentStatus.ERROR, "AttributeError", None),
    "exception in __init__": (policy("faults.py:RaiseInInit"), AgentStatus.ERROR, "ValueError", None),
    "not a policy class": (policy("faults.py:NotAPolicy"), AgentStatus.ERROR, "TypeError", None),
    "hang in start-up": (policy("faults.py:HangInInit"), AgentStatus.DISABLED, "Timeout", None),
    "exception in step": (policy("faults.py:RaiseInStep"), AgentStatus.ERROR, "RuntimeError", 10),
    "os._exit in step": (policy("faults.py:ExitInStep"), AgentStatus.CRASHED, "Crashed", 10),
    "segfault in step": (policy("faults.py:SegfaultInStep"), AgentStatus.CRASHED, "Crashed", 10),
    "infinite loop in step": (policy("faults.py:InfiniteLoopInStep"), AgentStatus.DISABLED, "TimeBank", 10),
    "ignores SIGTERM and hangs": (policy("faults.py:IgnoreSigterm"), AgentStatus.DISABLED, "TimeBank", 10),
    "out-of-range action index": invalid_action("index"),
    "unknown action name": invalid_action("name"),
    "action of the wrong type": invalid_action("type"),
    "closes its own socket": (policy("faults.py:CloseSocket"), AgentStatus.CRASHED, "Crashed", 10),
    "garbage bytes": forged("garbage"),
    "frame of the wrong type": forged("wrong_type"),
    "frame for the wrong step": forged("wrong_seq"),
    "absurd frame length": forged("absurd_length"),
    "half a frame, then silence": forged("half_frame", AgentStatus.DISABLED, "TimeBank"),
    "a reply for a seat not asked": forged("other_seat"),
}

MESSAGES = {
    "import error": "No module named 'policybox_test_no_such_module'",
    "unknown class": "no class 'NoSuchClass' in ",
    "exception in __init__": "bad configuration for this policy",
    "not a policy class": "faults.py:NotAPolicy is not a MettaGrid policy",
    "hang in start-up": "not ready within the init timeout of 5 s",
    "exception in step": "policy gave up at step 10",
    "os._exit in step": "cell exited with code 3",
    "segfault in step": "cell killed by SIGSEGV",
    "infinite loop in step": "time bank used up: step 10 ran",
    "ignores SIGTERM and hangs": "time bank used up: step 10 ran",
    "out-of-range action index": "action index 99 out of range 0..4",
    "unknown action name": "unknown action 'fly_to_the_moon'",
    "action of the wrong type": "step() returned float; expected an Action, action name or index",
    "closes its own socket": "cell exited with code 3",
    "garbage bytes": "frame header has non-zero reserved bytes: deadbeef",
    "frame of the wrong type": "OBSERVATION is not allowed in this direction",
    "frame for the wrong step": "unexpected ACTION frame for sequence 9999",
    "absurd frame length": "claims 2147483647 bytes",
    "half a frame, then silence": "time bank used up: step 10 ran",
    "a reply for a seat not asked": "ACTION frame answers agent 99 where agent 0 was asked",
}


@pytest.mark.parametrize("fault", list(FAULTS))
def test_fault_is_contained(fault, tmp_path, reference):
    spec, status, kind, step = FAULTS[fault]
    faulty = check_fault(spec, tmp_path, reference, status, kind, step)
    assert MESSAGES[fault] in faulty.failure.message
    if status in (AgentStatus.ERROR, AgentStatus.CRASHED) and step is not None:
        assert faulty.latency.count == step  # it answered every step before the fault, in time


def test_checkpoint_missing_inside_its_folder(tmp_path, reference):
    empty = tmp_path / "checkpoint"
    empty.mkdir()
    spec = policy("faults.py:NeedsCheckpoint", data=empty)
    faulty = check_fault(spec, tmp_path, reference, AgentStatus.ERROR, "FileNotFoundError", None)
    assert "model.npz" in faulty.failure.message and "load_policy_data" in faulty.failure.traceback


def test_sleep_past_the_deadline_then_recover(tmp_path, reference):
    # 0.2 s past the deadline: in the bank. Its late reply, a move, is dropped: check_fault sees only no-ops.
    sleeper = policy("faults.py:SleepOnceInStep", **{"kw.sleep_s": "2.2", "kw.late_action": "move_north"})
    faulty = check_fault(sleeper, tmp_path, reference, AgentStatus.TIMEOUT, "Timeout", 10)
    assert faulty.timeouts >= 1
    # Every step was either answered in time or counted as missed, and it answered again after.
    assert faulty.latency.count + faulty.timeouts == STEPS
    assert faulty.latency.count > 10


def test_flood_of_output_is_capped(tmp_path, reference):
    faulty = check_fault(policy("faults.py:Flood"), tmp_path, reference, AgentStatus.OK, None, None)
    log = Path(faulty.log_path)
    assert log.stat().st_size <= 0.1 * 1024 * 1024
    assert "log limit reached" in log.read_text()


@pytest.mark.parametrize("escape", [False, True], ids=["same-process-group", "setsid-escape"])
def test_grandchild_that_ignores_sigterm_does_not_survive(escape, tmp_path, reference):
    if escape and kill_cgroup_parent() is None:
        pytest.skip("this machine lets the host create no cgroup v2: a setsid() grandchild can escape")
    spec = policy("faults.py:Grandchild", **{"kw.escape": str(escape).lower()})
    faulty = check_fault(spec, tmp_path, reference, AgentStatus.OK, None, None)
    pid = int(re.search(r"grandchild pid (\d+)", Path(faulty.log_path).read_text())[1])
    try:
        grandchild = psutil.Process(pid)
    except psutil.NoSuchProcess:
        return
    assert not alive(grandchild), grandchild.cmdline()


def test_abort_ends_the_episode_at_the_failure(tmp_path):
    exit_policy = policy("faults.py:ExitInStep")
    args = ["-n", "2", "-p", exit_policy, "-p", "random", "--steps", "100", "--on-agent-failure", "abort"]
    result, exit_code, output = policybox_run(tmp_path, *args)
    assert exit_code == 1
    assert result.steps == 11  # step indices 0..10 were played; the failure at index 10 (step 11) stopped the episode
    assert (
        result.aborted == "agent 0 (ExitInStep) crashed: Crashed at step 11: cell exited with code 3 "
        "(the cell closed its connection)"
    )
    assert "episode aborted" in output
    assert result.agents[1].status == AgentStatus.OK


def test_episode_time_limit(tmp_path):
    """The episode ends at its limit, and the agent that held it up -- its replies took more than half
    the time played -- is disabled for it; the other is untouched."""
    sleepy = policy("sleepy.py:Sleepy", **{"kw.sleep_s": "0.3"})  # far longer than the host's own step
    result, exit_code, _ = policybox_run(
        tmp_path, "-n", "2", "-p", sleepy, "-p", "noop", "--steps", "1000", "--episode-timeout-s", "4"
    )  # 1000 steps of 0.3 s would take 300 s; the limit counts play only (start-up has its own)
    assert exit_code == 1  # an agent did not end ok
    assert 0 < result.steps < 1000
    assert result.aborted == f"episode time limit reached after {result.steps} steps"
    assert result.duration_s < 30
    slow, fast = result.agents
    assert slow.status == AgentStatus.DISABLED and slow.failure.kind == "EpisodeTimeLimit"
    assert fast.status == AgentStatus.OK and fast.failure is None


@pytest.mark.parametrize("mode", ["process", "inline"])
def test_inline_mode_reports_init_failures_the_same_way(play, mode):
    result = play([policy("faults.py:NotAPolicy"), "noop"], agents=2, steps=5, mode=mode)
    bad, good = result.agents
    assert (bad.status, bad.failure.kind, bad.failure.phase) == (AgentStatus.ERROR, "TypeError", "init")
    assert good.status == AgentStatus.OK and good.stats["action.noop.success"] == 5


@pytest.mark.parametrize("fault", ["import error", "unknown class", "exception in __init__", "hang in start-up"])
def test_run_refuses_a_policy_that_cannot_be_built_before_any_step(fault, tmp_path):
    """Without --no-check the same start-up faults are refused: exit 2, one message naming the policy
    and its error, no result written, no cell left."""
    spec = FAULTS[fault][0]
    out = tmp_path / "result.json"
    args = ["run", "-n", "2", "-p", spec, "-p", "noop", "--steps", "5", *LIMITS, "--out", str(out)]
    run = CliRunner().invoke(app, [*args, "--log-dir", str(tmp_path / "logs")], env={"COLUMNS": "300"})
    assert run.exit_code == 2 and not out.exists()
    name = spec.rsplit(":", 1)[1]
    assert f"Error: {name} cannot be built: " in run.output and MESSAGES[fault] in run.output
