"""Nothing a cell sends can break the host's episode: cells that forge every kind of frame, judged from outside.

Every forger is ``tests/policies/frame_forger.py`` in a real cell, rewriting what its cell sends the host
with one attack: READY frames that are not one, ERROR frames of every wrong shape (the hostile review's
5,000-deep JSON among them), replies that answer the wrong agents, claim too many bytes or hold deep
JSON, unknown frame types, wrong sequence numbers, reserved bytes set, frames split over many writes,
and seeded random mutations of valid frames. Many attacks share an episode, a forger to a cell, with
an honest policy beside them: ``policybox run`` must write a result with every agent in it, each
forger's agents failed with the cause named (or playing on, where what it sent was still valid), and
the honest agents ``ok`` with every step played.
"""

from __future__ import annotations

import contextlib
import random
from pathlib import Path
from typing import NamedTuple

import pytest
from conftest import policy
from helpers.runs import policybox_run

from policybox.envs import GameRequest, InvalidAction, family, split_env
from policybox.envs.conformance import HOSTILE_PAYLOADS
from policybox.host.pool_cell import MAX_CLAIM_CHARS
from policybox.results import AgentResult, AgentStatus, EpisodeResult

STEPS = 3
AT_STEP = 1  # the step whose replies a reply attack rewrites (frame_forger.AT_STEP)
LIMITS = ["--act-timeout-ms", "2000", "--time-bank-ms", "2000", "--init-timeout-s", "60", "--log-limit-mb", "0.1"]
HONEST = "noop"


class Expect(NamedTuple):
    status: AgentStatus
    kind: str | None = None  # the failure's kind (None: no failure)
    text: str = ""  # in the failure's message
    step: int | None = None  # the failure's step


def refused(text: str, step: int | None = None) -> Expect:
    return Expect(AgentStatus.ERROR, "ProtocolError", text, step)


PLAYS_ON = Expect(AgentStatus.OK)

AT_START = {
    "none": PLAYS_ON,
    "split": PLAYS_ON,  # every frame in many writes: read whole all the same
    "ready_deep": refused("READY frame nests JSON arrays and objects more than 32 deep"),
    "ready_not_object": refused("READY frame holds JSON list, expected an object"),
    "ready_bad_utf8": refused("READY frame does not hold valid UTF-8 JSON"),
    "ready_protocol": refused("cell speaks protocol 99, host 2"),
    "ready_minimum_bool": refused("READY's minimum_action_timeout_ms is True, not a whole number of ms"),
    "ready_minimum_negative": refused("READY's minimum_action_timeout_ms is -1, not a whole number of ms"),
    "ready_minimum_huge": refused("READY's minimum_action_timeout_ms is 1000000000000000000000000000000, not"),
    "ready_minimum_float": refused("READY's minimum_action_timeout_ms is 5.5, not a whole number of ms"),
    "ready_torch_text": refused("READY's torch is 'yes', not true or false"),
    "ready_sandbox_list": refused("READY's sandbox is [1, 2], not an object of layer names and texts"),
    "ready_sandbox_unknown": refused("READY's sandbox is {'layer0': 'active', "),
    "ready_sandbox_number": refused("READY's sandbox is {'uid': 7}, not an object of layer names and texts"),
    "ready_sandbox_long": PLAYS_ON,  # every claim cut short (checked below)
    "ready_twice": refused("unexpected READY frame for sequence 0"),
    "ready_wrong_seq": refused("unexpected READY frame for sequence 7"),
    "before_ready": refused("ACTION frame before READY"),
    "error_deep": refused("ERROR frame nests JSON arrays and objects more than 32 deep"),
    "error_huge": Expect(AgentStatus.ERROR, "Huge", "x" * 2000),
    "error_oversize": refused("ERROR frame claims 300000 bytes, limit is 262144"),
    "error_not_object": refused("ERROR frame holds JSON str, expected an object"),
    "error_bad_utf8": refused("ERROR frame does not hold valid UTF-8 JSON"),
    "error_surrogates": Expect(AgentStatus.ERROR, "\\ud800", "lone \\udfff"),
    "error_wrong_types": Expect(AgentStatus.ERROR, "{'a': [1]}", "12345"),
    "unknown_type": refused("unknown frame type 99"),
    "wrong_direction": refused("frame type SETUP is not allowed in this direction"),
    "reserved_bytes": refused("frame header has non-zero reserved bytes"),
}

ON_REPLIES = {
    "step_error_deep": refused("ERROR frame nests JSON arrays and objects more than 32 deep", AT_STEP),
    "step_ready": refused("READY frame during the episode", AT_STEP),
    "reply_truncated": refused("frame ends inside an entry's header", AT_STEP),
    "reply_wrong_agent": refused("ACTION frame answers agent 99 where agent", AT_STEP),
    "reply_unknown_kind": refused("ACTION frame holds a reply of unknown kind 42 for agent", AT_STEP),
    "reply_trailing": refused("ACTION frame holds 5 bytes after the replies of the agents asked", AT_STEP),
    "reply_oversize_entry": refused("an entry claims 2147483647 bytes", AT_STEP),
    "reply_error_deep": refused("ERROR reply nests JSON arrays and objects more than 32 deep", AT_STEP),
    "reply_error_bad_utf8": refused("ERROR reply does not hold valid UTF-8 JSON", AT_STEP),
    "reply_error_not_object": refused("ERROR reply holds JSON list, expected an object", AT_STEP),
    "reply_error_wrong_types": Expect(AgentStatus.ERROR, "5", "['a']", AT_STEP),
    "reply_hostile_action": Expect(AgentStatus.INVALID_ACTION, "InvalidAction", "action id -1 out of range", AT_STEP),
    "reply_hostile_talk": Expect(AgentStatus.INVALID_ACTION, "InvalidAction", "talk rejected", AT_STEP),
    "frame_oversize": refused("ACTION frame claims 2147483647 bytes, limit is", AT_STEP),
    "seq_old": refused("unexpected ACTION frame for sequence 0", AT_STEP),
    "seq_far": refused("unexpected ACTION frame for sequence 4294967295", AT_STEP),
    "step_unknown_type": refused("unknown frame type 99", AT_STEP),
    "step_reserved": refused("frame header has non-zero reserved bytes", AT_STEP),
}
# Replies that are still valid, but for their first seat's: with a cell per policy, the other seats play on.
FIRST_SEAT_ONLY = {"reply_error_wrong_types", "reply_hostile_action", "reply_hostile_talk"}
MUTATIONS = [f"mutate-{seed}" for seed in range(8)]  # even seeds: of READY; odd: of step 1's replies


def forger(attack: str) -> str:
    return policy("frame_forger.py:FrameForger", **{"kw.attack": attack})


def play(folder: Path, attacks: list[str], seats_each: int, *options: str) -> EpisodeResult:
    """One episode of a forger per attack and the honest policy, each in ``seats_each`` seats (agent i
    plays entry ``i % len``); ``policybox run`` ends as for any agent that did not end ok: exit 1, the
    result written."""
    specs = [forger(attack) for attack in attacks] + [HONEST]
    args = [arg for spec in specs for arg in ("-p", spec)]
    agents = str(len(specs) * seats_each)
    result, exit_code, _ = policybox_run(folder, "-n", agents, *args, "--steps", str(STEPS), *LIMITS, *options)
    assert exit_code == 1
    assert result.steps == STEPS and result.aborted is None and result.game_fault is None
    assert [agent.agent_id for agent in result.agents] == list(range(len(specs) * seats_each))
    for agent in result.agents[len(attacks) :: len(specs)]:
        assert (agent.status, agent.failure, agent.turns) == (AgentStatus.OK, None, STEPS)
    return result


def check(agent: AgentResult, attack: str, expect: Expect) -> None:
    failure = agent.failure
    seen = (agent.status, failure and failure.kind, failure and failure.step)
    assert seen == (expect.status, expect.kind, expect.step), f"{attack}: {failure}"
    assert failure is None or expect.text in failure.message, f"{attack}: {failure.message[:300]}"
    if expect.status != AgentStatus.ERROR:
        assert agent.turns == STEPS, attack  # it played on: every step asked


def check_mutated(agent: AgentResult, attack: str) -> None:
    """A mutated frame may still be valid: whatever it did, it is this agent's, with its cause named."""
    assert agent.status == AgentStatus.OK or (agent.failure is not None and agent.failure.message), attack


def test_forged_frames_of_cells_per_agent_fail_only_their_agents(tmp_path):
    attacks = [*AT_START, *ON_REPLIES, *MUTATIONS]
    result = play(tmp_path, attacks, 1)
    for attack, agent in zip(attacks, result.agents, strict=False):
        if attack in MUTATIONS:
            check_mutated(agent, attack)
        else:
            check(agent, attack, {**AT_START, **ON_REPLIES}[attack])
    long_claims = result.agents[attacks.index("ready_sandbox_long")].sandbox.values()
    assert "x" * MAX_CLAIM_CHARS in long_claims and max(map(len, long_claims)) <= MAX_CLAIM_CHARS + 100


def test_forged_group_replies_of_cells_per_policy_fail_only_their_cells(tmp_path):
    attacks = ["none", "split", *ON_REPLIES, *MUTATIONS[1::2]]
    result = play(tmp_path, attacks, 2, "--cells", "per-policy")
    cells = len(attacks) + 1
    for index, attack in enumerate(attacks):
        first, second = result.agents[index], result.agents[index + cells]
        assert first.log_path == second.log_path  # one cell played both seats
        if attack in MUTATIONS:
            check_mutated(first, attack)
            check_mutated(second, attack)
            continue
        expect = {**AT_START, **ON_REPLIES}[attack]
        check(first, attack, expect)
        check(second, attack, PLAYS_ON if attack in FIRST_SEAT_ONLY else expect)


GAMES = [
    "mettagrid:arena",
    "pettingzoo:mpe2.simple_spread_v3:parallel_env",
    "pettingzoo:pettingzoo.classic.tictactoe_v3:env",  # a legal-move mask the host checks moves against
]


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
@pytest.mark.parametrize("env", GAMES)
def test_any_action_bytes_are_an_action_or_an_invalid_action(env):
    """The host half of every game family takes any bytes as an action or refuses them with
    InvalidAction -- never another exception, which would end the episode as the game's fault."""
    name, target = split_env(env)
    adapter = family(name)
    host = adapter.open_host(GameRequest(target, {}, adapter.fixed_agents(target, {}) or 2, 10, 5))
    rng = random.Random(5)
    payloads = [*HOSTILE_PAYLOADS, *(rng.randbytes(rng.randrange(48)) for _ in range(3000))]
    payloads += [b"\x00\x00\xff\xff" + rng.randbytes(rng.randrange(1, 16)) for _ in range(200)]  # MettaGrid talk
    try:
        for _ in range(2):
            for seat in host.acting():
                for payload in payloads:
                    with contextlib.suppress(InvalidAction):  # anything else fails the test
                        host.apply_action(seat, payload)
                host.apply_fallback(seat)
            host.step()  # and the game plays on
    finally:
        host.close()
