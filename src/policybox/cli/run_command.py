"""What ``policybox run`` does: play one episode -- or a ladder's match again, compared with its stored
result -- show every agent, and write the result and the replay.

Imported when ``run`` runs, not before (``policybox.cli.app``). A ladder's modules (SQLAlchemy) are
imported only with ``--ladder``.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from policybox.cli.common import check_folder, check_writable, console, error_line, errors, guarded, open_ladder, say
from policybox.cli.options import given
from policybox.cli.result_tables import show_episode
from policybox.episode import assign_policies, default_log_dir, run_episode
from policybox.errors import SpecError
from policybox.files import environments
from policybox.files.environments import with_environments
from policybox.files.setup_scripts import prepared_for_now
from policybox.files.version_files import is_version
from policybox.inert import shown
from policybox.results import AgentStatus, EpisodeResult
from policybox.settings import DEFAULT_AGENTS, EpisodeSettings, agent_count
from policybox.spec import PolicySpec, parse_policy_arg
from policybox.storage import StorageFull, write_atomically

if TYPE_CHECKING:
    from policybox.league.ladder.rerun import Replay


def play_one(
    ctx: typer.Context,
    episode: dict[str, Any],
    policies: list[str] | None,
    ladder: Path | None,
    match: tuple[int | None, int | None],
    out: Path | None,
    log_dir: Path | None,
    check: bool,
) -> None:
    """``policybox run``, its options as the command took them (``match``: --match and --final)."""
    with guarded("every cell was stopped; no result written"):
        again = None
        if match[1] is not None and match[0] is None:
            raise SpecError("--final F plays a match of the ladder's final F again: give --match N too")
        if match[0] is not None and ladder is None:
            raise SpecError("--match ID plays a ladder's match again: give --ladder DIR, the ladder's folder")
        if match[0] is not None and policies:
            raise SpecError("--match ID plays the match's own versions: give no -p")
        if ladder is None:
            settings, default_agents, parsed = EpisodeSettings.from_options(episode), DEFAULT_AGENTS, _parsed(policies)
        else:
            settings, default_agents, parsed, again = _from_ladder(ctx, ladder, episode, policies or [], match)
        agents = agent_count(settings, episode["agents"], default_agents)
        specs = assign_policies(parsed, agents)
        # Whom each seat plays for: a match's versions, else each -p (cells per policy group seats by it).
        entrants = assign_policies(again.seats if again else [str(i) for i in range(len(parsed))], agents)
        check_writable(out)
        logs = log_dir or default_log_dir(settings.seed)
        check_folder(logs, "--log-dir")
        with (
            console.status(f"Playing {settings.steps} steps with {len(specs)} agents ({settings.mode} mode)…"),
            prepared_for_now(specs, settings) as ready,  # setup scripts, in a cell each, into a temporary folder
        ):
            ready = with_environments(ready, settings, environments.default_folder())
            result, unwritten = _played(ready, entrants, settings, logs, check)
    show_episode(console, result)
    for note in sorted({agent.log_note for agent in result.agents if agent.log_note}):
        say(f"agent logs {note}", "yellow")  # the episode itself is whole
    if out is not None:
        try:
            write_atomically(out, result.model_dump_json(indent=2))
        except StorageFull as kept_out:
            unwritten.append(kept_out)
        except OSError as exc:  # shown above, so the episode is not lost; say why the file is missing
            errors.print(error_line(f"could not write --out {out}: {exc.strerror}"), soft_wrap=True)
            raise typer.Exit(2) from None
        else:
            say(f"result: {out}")
    replay = episode["replay"]
    if replay is not None and not any(full.path == Path(replay) for full in unwritten):
        say(f"replay: {replay}")
    for full in unwritten:  # each file a full disk kept out; the episode itself is shown above
        errors.print(error_line(full.with_outcome("the result is shown above", "run again")), soft_wrap=True)
    if again is not None:
        raise typer.Exit(0 if _compared(again, result) and not unwritten else 1)
    clean = result.game_fault is None and all(a.status == AgentStatus.OK for a in result.agents)
    raise typer.Exit(0 if clean and not unwritten else 1)


def _compared(again: Replay, result: EpisodeResult) -> bool:
    """Say whether match ``again`` played the same as when it was stored, and what changed since; whether it did."""
    from policybox.league.ladder import rerun

    changed = rerun.outcome_changes(again.seats, again.result, result)
    since = rerun.stamp_changes(again)
    if not changed:
        say(f"{again.what} played again: every reward and status as stored", "green")
    else:
        errors.print(error_line(f"{again.what} played again differs from the stored result:"))
        for line in changed:
            errors.print(shown(f"  {line}"), soft_wrap=True)
    if since:
        errors.print(shown("changed since it was played:" if changed else "though changed since it was played:"))
        for line in since:
            errors.print(shown(f"  {line}"), soft_wrap=True)
    elif changed:
        errors.print(shown("its stamp names no change (policybox, the game, its config, the versions' files)"))
    return not changed


def _parsed(policies: list[str] | None) -> list[PolicySpec]:
    if not policies:
        raise SpecError("give the policies to play: -p SPEC, one per seat or one for every seat")
    for text in policies:
        if is_version(text):
            raise SpecError(f"-p {text} names a ladder's version: give --ladder DIR, the ladder's folder")
    return [parse_policy_arg(text) for text in policies]


def _from_ladder(
    ctx: typer.Context, folder: Path, options: dict[str, Any], policies: list[str], match: tuple[int | None, int | None]
) -> tuple[EpisodeSettings, int, list[PolicySpec], Replay | None]:
    """The ladder's settings with the options given on the command line, its seats, and the specs
    (``NAME@vN`` its versions'); with ``match`` -- (ID, None) for a rated match, (N, F) for match N of
    final F -- the match to play again too: its seed, its seats' versions."""
    from policybox.league.ladder import rerun

    given_here = {name: value for name, value in options.items() if given(ctx, name)}
    with open_ladder(folder, read_only=True) as opened:
        settings = rerun.episode_settings(opened, given_here)
        if match[0] is None:
            specs = [rerun.resolve(opened, text) if is_version(text) else parse_policy_arg(text) for text in policies]
            return settings, opened.settings.agents, specs, None
        again = rerun.replay(opened, match[0], settings, final=match[1])
        return settings.model_copy(update={"seed": again.seed}), opened.settings.agents, again.specs, again


def _played(
    specs: list[PolicySpec], entrants: list[str], settings: EpisodeSettings, logs: Path, check: bool
) -> tuple[EpisodeResult, list[StorageFull]]:
    """The episode's result, and the error of its replay if a full disk kept that from being written."""
    try:
        return run_episode(specs, settings, logs, refuse_unbuilt=check, entrants=entrants), []
    except StorageFull as full:
        if full.result is None:  # its logs could not be made: no episode was played
            raise
        return full.result, [full]
