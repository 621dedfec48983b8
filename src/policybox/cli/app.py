"""The ``policybox`` command line: argument parsing and presentation only; the work is in episode and evaluate."""

from __future__ import annotations

import os
import warnings
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn
from rich.table import Table

import policybox
from policybox.cli.common import POLICY_HELP, check_folder, console, error_line, errors, guarded, show_warning
from policybox.cli.ladder_commands import ladder_app
from policybox.cli.options import EPISODE_OPTION_NAMES, with_episode_options
from policybox.cli.tables import show_episode, show_final, show_summary
from policybox.cli.verdict import ALPHA, BETA, EFFECT, MAX_EPISODES, WORKERS, live_line, show_result
from policybox.episode import assign_policies, default_log_dir, run_episode
from policybox.errors import SpecError
from policybox.files import environments
from policybox.files.environments import with_environments
from policybox.files.setup_scripts import prepared_for_now
from policybox.inert import shown
from policybox.league.evaluate.results_folder import REPORT_FILE, as_final, load_summary, play_tournament
from policybox.league.evaluate.results_folder import Progress as EvaluationProgress
from policybox.league.ladder import rerun
from policybox.league.ladder.folder import LadderFolder
from policybox.league.play.backends import Backend, ray_backend
from policybox.league.play.seating import Seating, cycle
from policybox.league.play.tournament import Tournament, entrants, game_file_relative_to, load_tournament_file
from policybox.league.ranking import RankBy
from policybox.league.views.summary import Summary
from policybox.results import AgentStatus, EpisodeResult
from policybox.settings import DEFAULT_AGENTS, REPLAY_SUFFIX, EpisodeSettings, agent_count
from policybox.spec import PolicySpec, parse_policy_arg
from policybox.storage import StorageFull, write_atomically

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    rich_markup_mode=None,  # plain help and errors: readable at 80 columns, paths never broken by a box
    help="Run multi-agent episodes with every agent's policy in its own OS process.",
)


def _version(value: bool) -> None:
    if value:
        console.print(f"policybox {policybox.__version__}")
        raise typer.Exit(0)


@app.callback()
def _root(
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="Print the version and exit.")
    ] = False,
) -> None:
    """Run multi-agent episodes with every agent's policy in its own OS process."""
    warnings.showwarning = show_warning


@app.command()
@with_episode_options
def run(
    ctx: typer.Context,
    episode: dict[str, Any],
    policies: Annotated[list[str] | None, typer.Option("--policy", "-p", metavar="SPEC", help=POLICY_HELP)] = None,
    ladder: Annotated[
        Path | None,
        typer.Option(
            metavar="DIR",
            help="Play as this ladder plays (its game, steps, seats and limits; options given here override "
            "them), a -p NAME@vN being that version's stored files: a match page's command plays the match again.",
        ),
    ] = None,
    match: Annotated[
        int | None,
        typer.Option(
            metavar="ID",
            min=0,
            max=2**63 - 1,
            help="With --ladder: play the ladder's match ID again (its seed, its seats' versions) and compare "
            "with the stored result: exit 0 when every reward and status is the same, 1 when any differs "
            "(saying what changed since: policybox, the game, its config, a version's files).",
        ),
    ] = None,
    final: Annotated[
        int | None,
        typer.Option(
            metavar="F",
            min=1,
            max=2**63 - 1,
            help="With --ladder and --match N: play match N of the ladder's final F again (numbered from 0 in "
            "schedule order, as its log folder final-F-0000N), compared the same way.",
        ),
    ] = None,
    out: Annotated[
        Path | None, typer.Option(metavar="FILE", help="Write the episode result as JSON to this file.")
    ] = None,
    replay: Annotated[
        Path | None,
        typer.Option(
            metavar="FILE",
            help="Write the episode's replay to this .json.z file: a MettaGrid replay (MettaScope plays it), "
            "or a PettingZoo game's moves.",
        ),
    ] = None,
    log_dir: Annotated[
        Path | None,
        typer.Option(
            metavar="DIR",
            help="Folder for per-agent logs (policy stdout/stderr). Default: ./policybox-logs/<time>-seed<N>.",
        ),
    ] = None,
    check: Annotated[
        bool,
        typer.Option(
            "--check/--no-check",
            help="Refuse (exit 2) a policy that cannot be built in its cell, before any step. --no-check plays "
            "the episode anyway: its agents fail, the others play on.",
        ),
    ] = True,
) -> None:
    """Play one episode and print every agent's policy, reward and status.

    Exit code 0 when every agent ended with status ok, 1 when any did not, the game itself raised (the
    result is written either way) or a file could not be written for a full disk, 2 for bad input.
    """
    with guarded("every cell was stopped; no result written"):
        _check_replay_name(replay)
        options = {**episode, "replay": str(replay) if replay else None}
        again = None
        if final is not None and match is None:
            raise SpecError("--final F plays a match of the ladder's final F again: give --match N too")
        if match is not None:
            settings, default_agents, again = _match_from_ladder(ctx, ladder, options, (match, final), policies)
            parsed = again.specs
        elif ladder is None:
            settings, default_agents, parsed = EpisodeSettings.from_options(options), DEFAULT_AGENTS, _parsed(policies)
        else:
            settings, default_agents, parsed = _from_ladder(ctx, ladder, options, policies or [])
        agents = agent_count(settings, episode["agents"], default_agents)
        specs = assign_policies(parsed, agents)
        # Whom each seat plays for: a match's versions, else each -p (cells per policy group seats by it).
        entrants = assign_policies(again.seats if again else [str(i) for i in range(len(parsed))], agents)
        _check_writable(out)
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
        console.print(shown(f"agent logs {note}", "yellow"))  # the episode itself is whole
    if out is not None:
        try:
            write_atomically(out, result.model_dump_json(indent=2))
        except StorageFull as kept_out:
            unwritten.append(kept_out)
        except OSError as exc:  # shown above, so the episode is not lost; say why the file is missing
            errors.print(error_line(f"could not write --out {out}: {exc.strerror}"), soft_wrap=True)
            raise typer.Exit(2) from None
        else:
            console.print(shown(f"result: {out}"))
    if replay is not None and not any(full.path == replay for full in unwritten):
        console.print(shown(f"replay: {replay}"))
    for full in unwritten:  # each file a full disk kept out; the episode itself is shown above
        errors.print(error_line(full.with_outcome("the result is shown above", "run again")), soft_wrap=True)
    if again is not None:
        raise typer.Exit(0 if _compared(again, result) and not unwritten else 1)
    clean = result.game_fault is None and all(a.status == AgentStatus.OK for a in result.agents)
    raise typer.Exit(0 if clean and not unwritten else 1)


def _compared(again: rerun.Replay, result: EpisodeResult) -> bool:
    """Say whether match ``again`` played the same as when it was stored, and what changed since; whether it did."""
    changed = rerun.outcome_changes(again.seats, again.result, result)
    since = rerun.stamp_changes(again)
    if not changed:
        console.print(shown(f"{again.what} played again: every reward and status as stored", "green"))
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
        if rerun.is_version(text):
            raise SpecError(f"-p {text} names a ladder's version: give --ladder DIR, the ladder's folder")
    return [parse_policy_arg(text) for text in policies]


def _from_ladder(
    ctx: typer.Context, folder: Path, options: dict[str, Any], policies: list[str]
) -> tuple[EpisodeSettings, int, list[PolicySpec]]:
    """The ladder's settings with the options given on the command line, its seats, and the specs
    (``NAME@vN`` its versions')."""
    given = {name: value for name, value in options.items() if name == "replay" or _given(ctx, name)}
    with LadderFolder.open(folder, read_only=True) as opened:
        settings = rerun.episode_settings(opened, given)
        specs = [rerun.resolve(opened, text) if rerun.is_version(text) else parse_policy_arg(text) for text in policies]
        return settings, opened.settings.agents, specs


def _match_from_ladder(
    ctx: typer.Context,
    folder: Path | None,
    options: dict[str, Any],
    match: tuple[int, int | None],
    policies: list[str] | None,
) -> tuple[EpisodeSettings, int, rerun.Replay]:
    """The ladder's settings (with the options given on the command line) and the match to play
    again -- ``match`` is (ID, None) for a rated match, (N, F) for match N of final F: its seed, its seats."""
    if folder is None:
        raise SpecError("--match ID plays a ladder's match again: give --ladder DIR, the ladder's folder")
    if policies:
        raise SpecError("--match ID plays the match's own versions: give no -p")
    given = {name: value for name, value in options.items() if name == "replay" or _given(ctx, name)}
    with LadderFolder.open(folder, read_only=True) as opened:
        settings = rerun.episode_settings(opened, given)
        again = rerun.replay(opened, match[0], settings, final=match[1])
        return settings.model_copy(update={"seed": again.seed}), opened.settings.agents, again


def _given(ctx: typer.Context, name: str) -> bool:
    return getattr(ctx.get_parameter_source(name), "name", None) == "COMMANDLINE"


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


@app.command()
@with_episode_options
def evaluate(
    ctx: typer.Context,
    episode: dict[str, Any],
    tournament_file: Annotated[
        Path | None,
        typer.Argument(
            metavar="[TOURNAMENT]",
            help="A YAML/JSON tournament file: policies, episodes, agents, out, and any option below by its "
            "name (act_timeout_ms: 500); options given here override it.",
        ),
    ] = None,
    policies: Annotated[list[str] | None, typer.Option("--policy", "-p", metavar="SPEC", help=POLICY_HELP)] = None,
    episodes: Annotated[
        int,
        typer.Option(
            min=1,
            max=1_000_000,
            metavar="N",
            help="Number of episodes. More than a folder holds grows its tournament: the first ones are kept.",
        ),
    ] = 12,
    out: Annotated[
        Path | None,
        typer.Option(metavar="DIR", help="Results folder: tournament.json, results.jsonl, summary.json, logs/."),
    ] = None,
    workers: Annotated[
        int | None,
        typer.Option(min=1, max=256, metavar="N", help="Episodes played at once (default: the number of cores)."),
    ] = None,
    seating: Annotated[
        Seating,
        typer.Option(
            help="rotate: every policy plays every seat equally often. random: seeded shuffles. balanced: "
            "a final's schedule, every pair of policies meeting as evenly as the seats allow."
        ),
    ] = "rotate",
    replays: Annotated[
        bool,
        typer.Option(
            "--replays", help="Write each episode's replay (MettaGrid's, or a PettingZoo game's moves) to DIR/replays/."
        ),
    ] = False,
    backend: Annotated[
        Backend,
        typer.Option(help="local: worker processes on this machine. ray: each episode a Ray task on a cluster."),
    ] = "local",
    ray_address: Annotated[
        str | None,
        typer.Option(
            metavar="HOST:PORT",
            help="With --backend ray: the cluster (e.g. 10.0.0.1:6379); default: a Ray started for the run.",
        ),
    ] = None,
    rank_by: Annotated[
        RankBy,
        typer.Option(
            help="forfeit: an agent that ended error, crashed or disabled, or timed out or acted invalidly on more "
            "than 10% of its turns, forfeits its episode (ranked below every policy that did not). reward: the "
            "game's reward alone."
        ),
    ] = "forfeit",
    summary: Annotated[
        Path | None, typer.Option("--summary", metavar="DIR", help="Print the summary of a results folder and exit.")
    ] = None,
    report: Annotated[
        bool,
        typer.Option("--report", help="At the end, write DIR/report.html: the leaderboard as one self-contained page."),
    ] = False,
    final: Annotated[
        bool,
        typer.Option(
            "--final",
            help="A final: balanced seating (every policy equally often, in every seat equally often), episodes "
            "rounded up to whole cycles, and a Plackett-Luce ranking with intervals, groups and rank probabilities.",
        ),
    ] = False,
) -> None:
    """Play a tournament: many isolated episodes, seats rotated, scores with intervals and ratings.

    Re-running the same command resumes: finished episodes are kept, the rest are played. Exit code 0
    when every episode finished, 1 when some could not or the folder's disk is full (what is written
    is kept), 2 for bad input (nothing is touched).
    """
    with guarded("finished episodes are kept; run the same command to resume"):
        if summary is not None:
            _show_summary(load_summary(summary))
            raise typer.Exit(0)
        values, from_file = _tournament_values(ctx, tournament_file, episode)
        tournament, out_dir = _tournament(values, tournament_file, from_file)
        check_folder(out_dir, "--out")
        board = _play_tournament(tournament, out_dir, values)
    _show_summary(board)
    console.print(shown(f"results: {out_dir}"))
    if report:
        from policybox.league.report import write_report  # Jinja2 and the database layer, only when asked

        with guarded("the results are kept; policybox report DIR writes the report"):
            console.print(shown(f"report: {write_report(out_dir)}"))
    raise typer.Exit(0 if board.episodes_done == board.episodes_expected else 1)


TOURNAMENT_KEYS = {
    "policies",
    "episodes",
    "out",
    "workers",
    "seating",
    "replays",
    "backend",
    "ray_address",
    "rank_by",
    "final",
} | EPISODE_OPTION_NAMES


def _tournament_values(
    ctx: typer.Context, tournament_file: Path | None, episode: dict[str, Any]
) -> tuple[dict[str, Any], set[str]]:
    """The tournament's values -- the file's, overridden by every option given on the command line --
    and the names of those that came from the file."""
    given = {name: value for name, value in {**ctx.params, **episode}.items() if name in TOURNAMENT_KEYS}
    if tournament_file is None:
        return given, set()
    from_file = load_tournament_file(tournament_file)
    unknown = set(from_file) - TOURNAMENT_KEYS
    if unknown:
        raise SpecError(f"tournament file {tournament_file}: unknown keys {sorted(unknown)}")
    explicit = {
        name: value
        for name, value in given.items()
        if getattr(ctx.get_parameter_source(name), "name", None) == "COMMANDLINE"
    }
    return {**given, **from_file, **explicit}, set(from_file) - set(explicit)


def _tournament(values: dict[str, Any], tournament_file: Path | None, from_file: set[str]) -> tuple[Tournament, Path]:
    """The tournament and its results folder. Paths the file gives are relative to the file's folder;
    paths given on the command line, to the current folder."""
    if not values.get("policies"):
        raise SpecError("give the policies: -p SPEC (repeatable), or policies: in a tournament file")
    if not values.get("out"):
        raise SpecError("give a results folder: --out DIR, or out: in a tournament file")
    base = tournament_file.parent if tournament_file else Path.cwd()
    out_dir = base / values["out"] if "out" in from_file else Path(values["out"])
    if "env" in from_file:
        values = {**values, "env": game_file_relative_to(values["env"], base)}
    settings = EpisodeSettings.from_options({k: v for k, v in values.items() if k in EPISODE_OPTION_NAMES})
    tournament = Tournament(
        entrants=entrants(values["policies"], base if "policies" in from_file else None),
        episodes=values["episodes"],
        agents=agent_count(settings, values.get("agents"), DEFAULT_AGENTS),
        seating=values["seating"],
        settings=settings,
        rank_by=values.get("rank_by") or "forfeit",
    )
    if values.get("final"):
        tournament = as_final(tournament)
        length = cycle(len(tournament.entrants), tournament.agents)
        console.print(
            shown(f"final: balanced seating, {tournament.episodes} episodes (whole cycles of {length})", "dim")
        )
    return tournament, out_dir


def _play_tournament(tournament: Tournament, out_dir: Path, values: dict[str, Any]) -> Summary:
    columns = [
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[rate]} episodes/s · {task.fields[failures]} agent failures"),
        TimeRemainingColumn(),
    ]
    with Progress(*columns, console=console, disable=not console.is_terminal) as bar:
        task = bar.add_task("episodes", total=tournament.episodes, rate="-", failures=0)
        said_kept = False

        def update(progress: EvaluationProgress) -> None:
            nonlocal said_kept
            if progress.kept and not said_kept:
                console.print(
                    shown(f"resuming: {progress.kept} of {progress.total} episodes already done in {out_dir}")
                )
                said_kept = True
            rate = "-" if progress.rate is None else f"{progress.rate:.2f}"
            bar.update(task, completed=progress.done, rate=rate, failures=progress.failures)

        return play_tournament(
            tournament,
            out_dir,
            values.get("workers"),
            bool(values.get("replays")),
            update,
            backend=values.get("backend") or "local",
            ray_address=values.get("ray_address"),
        )


def _show_summary(board: Summary) -> None:
    show_summary(console, board)
    if board.final is not None:
        show_final(console, board.final)


@app.command()
@with_episode_options
def versus(
    ctx: typer.Context,
    episode: dict[str, Any],
    a: Annotated[str, typer.Argument(metavar="A", help="The base version: a -p SPEC (see --against).")],
    b: Annotated[str, typer.Argument(metavar="B", help="The version tested against it: a -p SPEC.")],
    against: Annotated[
        list[str] | None,
        typer.Option(
            metavar="SPEC",
            help="An opponent (a -p SPEC), repeatable: A and B take turns in the same seats against them. "
            "None: A and B play each other, swapping seats.",
        ),
    ] = None,
    alpha: ALPHA = 0.05,
    beta: BETA = 0.05,
    effect: EFFECT = 0.2,
    max_episodes: MAX_EPISODES = 2000,
    workers: WORKERS = None,
    out: Annotated[
        Path,
        typer.Option(metavar="DIR", help="Results folder: evaluate's files, and versus.json with the verdict."),
    ] = Path("versus-results"),
    json: Annotated[bool, typer.Option("--json", help="Print the result as JSON instead of a line.")] = False,
) -> None:
    """Is B better than A? Paired episodes -- the same seed and seats, once with A and once with B --
    until a sequential test decides: B better, B not better, or undecided at the cap.

    The test may be read at every pair without raising its error rates (alpha: B found better when it
    is not; beta: B found not better when it is better by --effect). Without --seed the run's seed is
    secret, so no policy can tell its episodes from a ladder's matches. Re-running the same command
    resumes: no finished pair is played again. Exit code 0 for any verdict, 1 when some episodes could
    not be played or the folder's disk is full (what is written is kept), 2 for bad input.
    """
    from policybox.league.evaluate.versus import versus as play_versus

    if not _given(ctx, "seed"):
        episode = {**episode, "seed": None}  # secret, kept in the folder: episodes no policy tells from a match
    with guarded("finished episodes are kept; run the same command to resume"):
        check_folder(out, "--out")
        with live_line(json) as update:
            result = play_versus(
                a, b, against or (), alpha, beta, effect, max_episodes, workers, out, on_state=update, **episode
            )
    show_result(result, out, json)
    raise typer.Exit(1 if result.incomplete else 0)


@app.command()
def report(
    folder: Annotated[
        Path, typer.Argument(metavar="DIR", help="A results folder of policybox evaluate, or a ladder's folder.")
    ],
    out: Annotated[
        Path | None, typer.Option(metavar="FILE", help=f"Where to write the page (default: DIR/{REPORT_FILE}).")
    ] = None,
) -> None:
    """Write a results folder or a ladder as one self-contained HTML page: the standings, the reward
    intervals, head-to-head, latency, seats and failures.

    The page works offline and can be shared: inline SVG plots, no script, nothing fetched, and every
    text a policy controls escaped. Exit code 0 when it is written, 1 for a full disk, 2 for bad input.
    """
    from policybox.league.report import render, report_data  # Jinja2 and the database layer, only here

    with guarded("no report was written"):
        data = report_data(folder)
        target = out or folder / REPORT_FILE
        _check_writable(target, REPORT_FILE)
        write_atomically(target, render(data))
    console.print(shown(f"report: {target}"))


@app.command()
def doctor(
    ray_address: Annotated[
        str | None,
        typer.Option(help="Check every node of this Ray cluster instead of this machine: one table per node."),
    ] = None,
    ladder: Annotated[
        Path | None,
        typer.Option(
            metavar="DIR",
            help="Also check a ladder's folder: which of its paths other users (and so cells) may read, "
            "and the chmod that closes each.",
        ),
    ] = None,
) -> None:
    """Show which sandbox layers work on this machine, found by trying each in a real cell.

    Exit code 0 when every layer works (so --sandbox strict can run) on every machine checked, and the
    ladder's folder (--ladder) is private; 1 otherwise.
    """
    with guarded("nothing was changed"):
        private = None if ladder is None else _ladder_privacy(ladder)
        if ray_address is None:
            from policybox.host.diagnosis import diagnose

            with console.status("Starting a probe cell with every sandbox layer…"):
                machines = [("this machine", list(diagnose()))]
        else:
            with console.status(f"Starting a probe cell on every node of {ray_address}…"):
                machines = ray_backend().diagnose_nodes(ray_address)
    for name, checks in machines:
        table = Table(title=f"policybox doctor: sandbox layers on {name}")
        for column in ("layer", "works", "detail"):
            table.add_column(column)
        for check in checks:
            table.add_row(check.layer.value, "[green]yes[/]" if check.works else "[red]no[/]", shown(check.detail))
        console.print(table)
    if private is not None:
        console.print(private[0])
    works = all(check.works for _, checks in machines for check in checks) and (private is None or private[1])
    raise typer.Exit(0 if works else 1)


def _ladder_privacy(folder: Path) -> tuple[Table, bool]:
    """The table of a ladder folder's paths and who may read them; whether all are private."""
    from policybox.league.ladder import private
    from policybox.league.ladder.database import LadderError
    from policybox.league.ladder.folder import FOLDER_FILE

    if not (folder / FOLDER_FILE).is_file():
        raise LadderError(f"{folder} is not a ladder (it has no {FOLDER_FILE}): give --ladder a ladder's folder")
    table = Table(title=shown(f"policybox doctor: who may read ladder {folder}"))
    for column in ("path", "private", "detail"):
        table.add_column(column)
    checked = private.checked(folder.absolute())
    for entry in checked:
        if entry.exposed:
            table.add_row(shown(entry.path), "[red]no[/]", shown(f"{entry.detail}: {entry.fix}"))
        else:
            table.add_row(shown(entry.path), "[green]yes[/]", f"mode {entry.mode:04o}")
    return table, not any(entry.exposed for entry in checked)


def _check_writable(out: Path | None, example: str = "result.json") -> None:
    """``out`` is a file that can be written (``example``: a file name to suggest when it is a folder)."""
    if out is None:
        return
    if out.is_dir():
        raise typer.BadParameter(f"{out} is a folder; give a file name such as {out / example}", param_hint="--out")
    if not out.parent.resolve().is_dir():
        raise typer.BadParameter(f"folder {out.parent} does not exist", param_hint="--out")
    if not os.access(out.parent.resolve(), os.W_OK):
        raise typer.BadParameter(f"folder {out.parent} is not writable", param_hint="--out")


def _check_replay_name(replay: Path | None) -> None:
    """A replay file is named as MettaGrid names them, which is how MettaScope tells how to read it."""
    if replay is not None and not replay.name.endswith(REPLAY_SUFFIX):
        raise typer.BadParameter(f"{replay} does not end in {REPLAY_SUFFIX}", param_hint="--replay")


app.add_typer(ladder_app, name="ladder")


def main() -> None:
    app()
