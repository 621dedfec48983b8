"""The serialised outcome of an episode: what happened to the game and to every agent; and the one
formatter of a failure's line (``failure_line``), which every view of a failure goes through."""

from __future__ import annotations

from enum import StrEnum
from typing import Any

from pydantic import BaseModel, Field

from policybox.limits import Limits
from policybox.lines import clip, first_line
from policybox.spec import PolicySpec

ONE_LINE = 200  # characters of a failure's one line (cut at a word, marked)


def step_number(index: int) -> int:
    """A step as people count it, from 1 -- what every message and page shows -- for a step index, from 0
    (what results and the database store): an agent that failed on its 50th step failed at step 50."""
    return index + 1


START_UP = "start-up"  # where a failure before an agent's first step happened, as every view says it


def failure_step(step: int | None) -> str:
    """A failure's step as a table's step column shows it: its number from 1 (``step_number``), or
    ``START_UP`` for a failure before the first step (None)."""
    return START_UP if step is None else str(step_number(step))


def failure_line(kind: str | None, step: int | None, message: str | None) -> str:
    """A failure's line -- "CAUSE at start-up: MESSAGE" or "CAUSE at step N: MESSAGE" -- the one
    formatter of it: ``Failure.one_line`` (the command line's, the JSON's, the report's and every stored
    reason's), and ``ladder show``'s failures, whose parts a view has already cut for its viewer."""
    where = START_UP if step is None else f"step {failure_step(step)}"
    return f"{kind} at {where}: {message}"


class AgentStatus(StrEnum):
    """How an agent's episode went. The first three keep the agent playing; the rest end its policy."""

    OK = "ok"
    # Where an agent has no (valid) action it plays its game family's fallback action (MettaGrid: noop).
    TIMEOUT = "timeout"  # missed one or more step deadlines; played the fallback on those steps
    INVALID_ACTION = "invalid_action"  # returned something that is not an action; the fallback on that step
    DISABLED = "disabled"  # stopped by the host: not ready in time, or its time bank is spent; fallback to the end
    ERROR = "error"  # the policy raised, its cell broke the protocol, or its action made the game raise
    CRASHED = "crashed"  # the cell process died; fallback to the end

    @property
    def is_terminal(self) -> bool:
        return self in (AgentStatus.DISABLED, AgentStatus.ERROR, AgentStatus.CRASHED)


class Failure(BaseModel):
    """The first thing that went wrong for an agent, with enough detail to act on it."""

    step: int | None = Field(
        description="Step index it happened at, from 0 (``one_line`` and the pages number steps from 1: "
        "``step_number``); None during start-up"
    )
    phase: str = Field(description="init, step or stop")
    kind: str = Field(description="Exception type name, or a host-side cause such as ProtocolError")
    message: str
    traceback: str | None = None
    exit_code: int | None = None
    signal: str | None = None
    log_tail: str | None = None

    @classmethod
    def from_report(cls, report: dict[str, Any], step: int | None) -> Failure:
        """From a cell's ERROR report: untrusted JSON, so every field is coerced and bounded."""
        return cls(
            step=step,
            phase=str(report.get("phase", "init" if step is None else "step"))[:20],
            kind=str(report.get("type", "Error"))[:200],
            message=str(report.get("message", ""))[:2000],
            traceback=str(report.get("traceback") or "")[-8000:] or None,
        )

    def one_line(self) -> str:
        """Its line (``failure_line``), cut to its first line and ``ONE_LINE`` characters."""
        return clip(first_line(failure_line(self.kind, self.step, self.message)), ONE_LINE)


class GameFault(BaseModel):
    """The game itself raised, so the episode ended there: where, what, and whose action it was applying."""

    phase: str = Field(description="observe (building an observation or a turn) or step (applying actions)")
    step: int = Field(description="The step index it happened at, from 0 (``one_line`` says ``step_number``)")
    kind: str = Field(description="The exception's type name")
    message: str
    traceback: str | None = None
    agent: int | None = Field(
        default=None,
        description="The seat whose action the game was applying (a turn-based game's mover, or the one agent "
        "that acted); None when it was applying several agents' actions at once, or building an observation",
    )
    blamed: bool = Field(
        default=False,
        description="Whether that agent is blamed (its status became error): it is, unless the action was its "
        "fallback (policybox's choice) or one the host had checked against the game's own legal moves (then the "
        "raise is the game's bug)",
    )

    def one_line(self) -> str:
        whose = "" if self.agent is None else f" applying agent {self.agent}'s action"
        return clip(
            first_line(f"the game raised {self.kind} at step {step_number(self.step)}{whose}: {self.message}"), 300
        )


class Latency(BaseModel):
    """Host-measured time from sending an observation to receiving the full reply, in ms."""

    count: int = 0
    p50_ms: float | None = None
    p99_ms: float | None = None
    max_ms: float | None = None


class MemoryLimit(BaseModel):
    """The memory limit in force for one cell, and what enforces it."""

    mib: int
    enforced_by: str = Field(
        description="cgroup v1 or cgroup v2 (its own memory cgroup, inside the host's budget where there is "
        "one), or address space (approximate: it counts memory reserved, not used)"
    )


class MemoryBudget(BaseModel):
    """The memory all the cells of the host that played the episode could use together."""

    mib: int
    enforced_by: str = Field(
        description="cgroup v1 or cgroup v2: one cgroup over all the host's cells, with this limit; "
        "divided: no such cgroup here, so each cell's limit is at most its share (approximate)"
    )
    cgroup: str | None = Field(default=None, description="The budget's cgroup folder")


class AgentResult(BaseModel):
    agent_id: int = Field(description="The agent's seat: its index in the game's agents")
    agent: str | None = Field(
        default=None, description="The agent's name in the game (MettaGrid: its id; PettingZoo: its agent name)"
    )
    policy: str
    spec: PolicySpec
    reward: float
    stats: dict[str, float] = Field(description="The environment's per-agent episode stats")
    status: AgentStatus
    failure: Failure | None = Field(default=None, description="What set the status (the latest terminal failure)")
    first_failure_step: int | None = Field(default=None, description="Step of the agent's first failure")
    turns: int | None = Field(
        default=None, description="Steps the agent was asked to act (its turns; every step in MettaGrid)"
    )
    timeouts: int = 0
    invalid_actions: int = 0
    minimum_action_timeout_ms: int = 0
    threads: int | None = Field(default=None, description="Threads its torch/OpenMP/BLAS were allowed")
    left_at_step: int | None = Field(
        default=None,
        description="Step at which the agent left the game (terminated or truncated) and its cell was "
        "stopped; None: it was in the game to the end",
    )
    latency: Latency
    memory: MemoryLimit | None = Field(
        default=None, description="Its cell's memory limit in force; None: none (inline mode, sandbox off)"
    )
    sandbox: dict[str, str] = Field(
        default_factory=dict, description="Each sandbox layer of this agent's cell: active, or why not"
    )
    action_digest: str = Field(description="SHA-256 of the action payloads applied to the env for this agent")
    log_path: str | None = None
    log_tail: str | None = Field(
        default=None, description="The end of the agent's log, failed or not (a failure's is also its log_tail)"
    )
    log_note: str | None = Field(
        default=None, description="Why the agent's log ends early: the host could not write all of it (a full disk)"
    )


class EpisodeResult(BaseModel):
    policybox_version: str
    mode: str
    cells: str = Field(
        default="per-agent",
        description="per-agent: each agent in its own cell; forked: each agent in a process of its own, forked from "
        "one loader of its policy (its seats shared one copy of its network, its uid and its sandbox); per-policy: "
        "each policy's seats shared one cell",
    )
    seed: int
    steps: int
    env: dict[str, Any]
    limits: Limits
    on_agent_failure: str
    sandbox: str = Field(description="Sandbox level: strict, standard, or off (inline mode is always off)")
    cleanup: str = Field(description="How cells were killed: cgroup+process-group, process-group, or inline")
    game_stats: dict[str, float] = Field(description="The environment's own episode stats")
    agents: list[AgentResult]
    started_at: str
    duration_s: float
    startup_s: float = Field(description="From the start until every cell was ready (or given up on)")
    play_s: float = Field(description="Stepping the episode, after start-up")
    aborted: str | None = Field(default=None, description="Why the episode ended before the game did, if it did")
    node: str | None = Field(
        default=None, description="The Ray node that played it (its agents' logs are there); None: played locally"
    )
    game_fault: GameFault | None = Field(
        default=None, description="The game's own exception, when that is what ended the episode (see aborted)"
    )
    memory_budget: MemoryBudget | None = Field(
        default=None, description="The memory the host's cells shared (host.budget); None: no limit (inline, off)"
    )


class EpisodeRecord(EpisodeResult):
    """One line of an evaluation's ``results.jsonl``: an episode's result, its index and its seat map."""

    episode: int = Field(description="Index of the episode in its tournament (its seed derives from it)")
    seats: list[str] = Field(description="The policy in each seat, in agent-id order, by its tournament key")
