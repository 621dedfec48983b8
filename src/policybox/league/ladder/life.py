"""A version's life: its states, and every rule that moves a version or a name from one to another.

::

    qualifying --qualified--> active --failed in K matches in a row--> suspended --reinstate--> active
    qualifying --refused----> rejected
    active, suspended --a newer version of its name qualifies--> superseded

- **Qualification** (``verdict``): a version qualifies when every agent of its validation episode
  ended ``ok`` and the game raised nothing; else it is rejected with why. One whose setup or
  validation episode the machinery keeps failing is rejected too (``platform_failed``), saying it was
  not the policy's doing, rather than retried at every turn for good. A rejection changes only
  that version: its name's state and the version that plays stay as they were.
- **Start rating** (``start_rating``): a qualified version starts from its name's latest earlier
  qualified version's mu, with sigma reset to the model's default (Halite's rule); a first version
  from the default. The live ladder and ``ladder rerate`` both start versions so.
- **Suspension** (``suspension``): an active version whose agents failed (error, crashed, disabled) in
  ``suspend_after`` matches in a row is suspended; so is one whose ``suspend_after`` matches in a row
  were void, more than any other version's in its last void match (``void_suspension``: the machinery
  failed them, or the database refused them -- a version that is in every void match is the likeliest
  cause, whatever the cause was, and an opponent it kept voiding matches with never has more);
  ``ladder reinstate`` lifts it.
- **Supersede** (``superseded``): when a version qualifies, its name's earlier active or suspended
  version is superseded: one version per name plays, the latest qualified one.
- **Retire and reinstate** (``check_submission``, ``reinstate``): retiring is the organiser's
  decision. A retired name never plays, its queued versions wait, and a submission to it is refused
  before anything is stored; only ``ladder reinstate`` brings it back.
- **Ranked** (``ranked``): only a name whose playing version is active, and that is not retired, is
  ranked once it has played; the others are listed below the ranked rows with their state and reason.

``version_store`` and ``match_store`` write what these functions decide; no other module decides a state.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum

from policybox.errors import SpecError
from policybox.league import ranking
from policybox.lines import first_line
from policybox.results import AgentResult, AgentStatus, EpisodeResult


class VersionState(StrEnum):
    """A version's state, as the database stores it."""

    QUALIFYING = "qualifying"
    ACTIVE = "active"
    REJECTED = "rejected"
    SUSPENDED = "suspended"
    SUPERSEDED = "superseded"


RETIRED = "retired"  # a name's state (names.retired), shown in its row's state column
RETIRED_REASON = "retired by the organiser: it plays no more until policybox ladder reinstate brings it back"
QUALIFIED = (VersionState.ACTIVE, VersionState.SUSPENDED, VersionState.SUPERSEDED)  # passed qualification
PLAYING = (VersionState.ACTIVE,)
REPLACED = (VersionState.ACTIVE, VersionState.SUSPENDED)  # what a newer qualified version supersedes
DETAIL_CHARS = 2000  # of a rejected agent's traceback or log tail kept in its reason


class Retired(SpecError):
    """A submission to a retired name: refused, nothing stored (HTTP 409 on the web page)."""


def verdict(result: EpisodeResult) -> str | None:
    """Why a validation episode rejects its version, or None: it qualifies."""
    if result.game_fault is not None:
        return f"its validation episode ended when the game raised: {result.game_fault.one_line()}"
    failed = next((agent for agent in result.agents if agent.status != AgentStatus.OK), None)
    return None if failed is None else _failure_reason(failed)


def _failure_reason(agent: AgentResult) -> str:
    """Why a version's validation agent failed: its status and step, and its traceback or log tail."""
    failure = agent.failure
    if failure is None:
        return f"agent {agent.agent_id} ended {agent.status.value}"
    detail = (failure.traceback or failure.log_tail or "").strip()
    head = f"agent {agent.agent_id} ended {agent.status.value}: {failure.one_line()}"
    return f"{head}\n{detail[-DETAIL_CHARS:]}" if detail else head


def start_rating(previous_mu: float | None) -> ranking.Rated:
    """A newly qualified version's rating: its name's previous qualified version's mu (sigma reset), or
    the model's default for a name's first."""
    return ranking.MODEL.rating() if previous_mu is None else ranking.MODEL.rating(mu=previous_mu)


def superseded(earlier: Iterable[tuple[int, str]]) -> list[int]:
    """Of a newly qualified version's earlier versions (id, state), those it supersedes."""
    return [version_id for version_id, state in earlier if state in REPLACED]


def suspension(state: str, streak: int, suspend_after: int, failed: AgentResult | None) -> str | None:
    """Why a version is suspended after a match that left it with ``streak`` failing matches in a row
    (``failed``: one of its agents that failed in it), or None: it is not."""
    if failed is None or streak < suspend_after or state != VersionState.ACTIVE:
        return None
    last = f"{failed.status.value}: {failed.failure.one_line()}" if failed.failure else failed.status.value
    return f"its agents failed in {streak} matches in a row; the last: {last}"


def platform_failed(what: str, attempts: int) -> str:
    """Why a version is rejected whose ``what`` (its setup, its validation episode) the machinery failed
    ``attempts`` times: not its own doing, so it says so, and how to try again."""
    return (
        f"its {what} could not be run: the platform failed it {attempts} times in a row, not the policy; "
        "submit it again"
    )


def void_suspension(state: str, streak: int, others: int, suspend_after: int, why: str) -> str | None:
    """Why a version is suspended after a void match that left it with ``streak`` void matches in a
    row -- ``others``: the longest such streak among the match's other versions, ``why``: the match's
    reason -- or None: it is not. Only a version whose streak is longer than every other's in the
    match: an opponent it kept voiding matches against has as many at most, never more."""
    if streak < suspend_after or streak <= others or state != VersionState.ACTIVE:
        return None
    return f"its last {streak} matches were void; the last: {first_line(why)}"


def check_submission(name: str, retired: bool) -> None:
    """Refuse a submission to a retired name: the organiser's decision, undone only by reinstate."""
    if retired:
        raise Retired(
            f"{name} is retired: it takes no new version until the organiser brings it back "
            f"(policybox ladder reinstate DIR {name})"
        )


@dataclass(frozen=True)
class Reinstatement:
    """What ``ladder reinstate`` does: bring the name back, lift its playing version's suspension."""

    unretire: bool
    lift: int | None  # the suspended version's id


def reinstate(name: str, retired: bool, current: tuple[int, str] | None) -> Reinstatement:
    """Reinstating ``name`` (``current``: its playing version's id and state): it plays again. Refused
    for a name neither retired nor suspended."""
    lift = current[0] if current is not None and current[1] == VersionState.SUSPENDED else None
    if not retired and lift is None:
        raise SpecError(f"{name} is neither retired nor suspended: there is nothing to reinstate")
    return Reinstatement(unretire=retired, lift=lift)


def shown_state(retired: bool, state: str) -> str:
    """A name's state in its standings row: retired, else its playing version's."""
    return RETIRED if retired else state


def ranked(shown: str) -> bool:
    """Whether a row in this state is ranked (once it has played): only an active, unretired name's."""
    return shown == VersionState.ACTIVE
