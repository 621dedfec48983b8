"""The ``policybox`` command line: argument parsing and presentation only; the work is in episode."""

from __future__ import annotations

import os
import tempfile
from datetime import datetime
from pathlib import Path
from typing import Annotated

import typer
from pydantic import ValidationError
from rich.console import Console
from rich.table import Table

from policybox.envs import ConfigError
from policybox.episode import (
    REPLAY_SUFFIX,
    EpisodeSettings,
    LauncherName,
    Mode,
    OnFailure,
    assign_policies,
    run_episode,
)
from policybox.host.zygote import ZygoteError
from policybox.limits import Limits
from policybox.results import AgentStatus, EpisodeResult
from policybox.sandbox import SandboxLevel, SandboxUnavailable
from policybox.spec import SpecError, parse_policy_arg

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    help="Run multi-agent episodes with every agent's policy in its own OS process.",
)
DEFAULTS = Limits()
console = Console()
errors = Console(stderr=True)

POLICY_HELP = (
    "Policy for the agents, repeatable; agent i plays the (i mod n)-th -p. Forms: a shorthand (random, noop), "
    "a dotted path (pkg.mod.Class), a file path (bots/greedy.py:Greedy), each optionally followed by "
    "',data=CHECKPOINT', ',name=NAME', ',path=IMPORT_ROOT', ',kw.KEY=VALUE' (VALUE read as JSON when it "
    "parses); or a JSON/YAML spec file; or a submission folder with a policy_spec.json."
)


@app.callback()
def _root() -> None:
    """Run multi-agent episodes with every agent's policy in its own OS process."""


@app.command()
def run(
    policies: Annotated[list[str], typer.Option("--policy", "-p", help=POLICY_HELP)],
    agents: Annotated[int, typer.Option("--agents", "-n", min=1, max=1024, help="Number of agents.")] = 4,
    steps: Annotated[int, typer.Option(min=1, help="Episode length in steps.")] = 1000,
    seed: Annotated[int, typer.Option(min=0, help="Seeds the game, its map and every agent's RNGs.")] = 0,
    env: Annotated[str, typer.Option(help="Game: arena, navigation, or a MettaGridConfig JSON/YAML file.")] = "arena",
    mode: Annotated[
        Mode, typer.Option(help="process: each agent in its own process. inline: all in this process (debugging).")
    ] = "process",
    out: Annotated[Path | None, typer.Option(help="Write the episode result as JSON to this file.")] = None,
    replay: Annotated[
        Path | None,
        typer.Option(help="Write the episode as a MettaGrid replay to this .json.z file (MettaScope plays it)."),
    ] = None,
    log_dir: Annotated[
        Path | None,
        typer.Option(
            help="Folder for per-agent logs (policy stdout/stderr). Default: ./policybox-logs/<time>-seed<N>."
        ),
    ] = None,
    act_timeout_ms: Annotated[
        float, typer.Option(min=1, help="Per-step deadline per agent; a late agent plays no-op on that step.")
    ] = DEFAULTS.act_timeout_ms,
    time_bank_ms: Annotated[
        float, typer.Option(min=0, help="Per-agent budget for time past deadlines; once spent, the agent is disabled.")
    ] = DEFAULTS.time_bank_ms,
    init_timeout_s: Annotated[
        float, typer.Option(min=0.1, help="Deadline for a cell to import its policy and load its checkpoint.")
    ] = DEFAULTS.init_timeout_s,
    episode_timeout_s: Annotated[
        float | None, typer.Option(min=0.1, help="Wall-clock limit for the episode; it ends early when reached.")
    ] = None,
    log_limit_mb: Annotated[
        float, typer.Option(min=0.01, help="Cap on each agent's printed output; the rest is discarded.")
    ] = DEFAULTS.log_limit_mb,
    launcher: Annotated[
        LauncherName,
        typer.Option(help="zygote: fork cells from a pre-warmed process (fast). spawn: a fresh interpreter each."),
    ] = "zygote",
    preload: Annotated[
        list[str] | None,
        typer.Option(help="Module the zygote imports before forking cells, repeatable (e.g. torch)."),
    ] = None,
    sandbox: Annotated[
        SandboxLevel,
        typer.Option(
            help="standard: every layer this machine supports. strict: refuse to run unless all work. "
            "off: no protection (debugging)."
        ),
    ] = SandboxLevel.STANDARD,
    seccomp: Annotated[
        bool,
        typer.Option(
            "--seccomp/--no-seccomp", help="The seccomp syscall filter at the standard level (strict always has it)."
        ),
    ] = True,
    cpu_limit_s: Annotated[
        int, typer.Option(min=1, help="CPU seconds per cell, over all its processes.")
    ] = DEFAULTS.cpu_limit_s,
    memory_limit_mb: Annotated[int, typer.Option(min=64, help="Memory per cell, MiB.")] = DEFAULTS.memory_limit_mb,
    file_size_limit_mb: Annotated[
        int, typer.Option(min=1, help="Largest file a cell may write, MiB.")
    ] = DEFAULTS.file_size_limit_mb,
    disk_limit_mb: Annotated[
        int, typer.Option(min=1, help="Bytes a cell may keep in its scratch folder, MiB (counts as its memory).")
    ] = DEFAULTS.disk_limit_mb,
    disk_limit_files: Annotated[
        int, typer.Option(min=16, help="Files and folders a cell may keep in its scratch folder.")
    ] = DEFAULTS.disk_limit_files,
    max_processes: Annotated[int, typer.Option(min=8, help="Processes and threads per cell.")] = DEFAULTS.max_processes,
    max_open_files: Annotated[int, typer.Option(min=64, help="Open files per cell.")] = DEFAULTS.max_open_files,
    on_agent_failure: Annotated[
        OnFailure,
        typer.Option(help="continue: a failed agent plays no-op to the end. abort: end the episode at the failure."),
    ] = "continue",
) -> None:
    """Play one episode and print every agent's policy, reward and status.

    Exit code 0 when every agent ended with status ok, 1 when any did not, 2 for bad input.
    """
    try:
        specs = assign_policies([parse_policy_arg(text) for text in policies], agents)
        limits = Limits(
            act_timeout_ms=act_timeout_ms,
            time_bank_ms=time_bank_ms,
            init_timeout_s=init_timeout_s,
            episode_timeout_s=episode_timeout_s,
            log_limit_mb=log_limit_mb,
            cpu_limit_s=cpu_limit_s,
            memory_limit_mb=memory_limit_mb,
            file_size_limit_mb=file_size_limit_mb,
            disk_limit_mb=disk_limit_mb,
            disk_limit_files=disk_limit_files,
            max_processes=max_processes,
            max_open_files=max_open_files,
        )
        settings = EpisodeSettings(
            env=env,
            steps=steps,
            seed=seed,
            mode=mode,
            launcher=launcher,
            preload=preload or [],
            limits=limits,
            sandbox=sandbox,
            seccomp=seccomp,
            on_agent_failure=on_agent_failure,
            replay=str(replay) if replay is not None else None,
        )
        _check_writable(out)
        _check_replay_name(replay)
        logs = log_dir or Path("policybox-logs") / f"{datetime.now():%Y%m%d-%H%M%S}-seed{seed}"
        _check_log_dir(logs)
        with console.status(f"Playing {steps} steps with {agents} agents ({mode} mode)…"):
            result = run_episode(specs, settings, logs)
    except (SpecError, ConfigError, ValidationError, SandboxUnavailable, ZygoteError) as exc:
        errors.print(f"[bold red]error:[/] {exc}", highlight=False)
        raise typer.Exit(2) from None
    except KeyboardInterrupt:
        errors.print("[yellow]interrupted: every cell was stopped; no result written[/]")
        raise typer.Exit(130) from None
    _show(result)
    if out is not None:
        try:
            _write_atomically(out, result.model_dump_json(indent=2))
        except OSError as exc:  # shown above, so the episode is not lost; say why the file is missing
            errors.print(f"[bold red]error:[/] could not write --out {out}: {exc.strerror}", highlight=False)
            raise typer.Exit(2) from None
        console.print(f"result: {out}", highlight=False)
    if replay is not None:
        console.print(f"replay: {replay}", highlight=False)
    raise typer.Exit(0 if all(a.status == AgentStatus.OK for a in result.agents) else 1)


@app.command()
def doctor() -> None:
    """Show which sandbox layers work on this machine, found by trying each in a real cell.

    Exit code 0 when every layer works (so --sandbox strict can run), 1 otherwise.
    """
    from policybox.doctor import diagnose

    with console.status("Starting a probe cell with every sandbox layer…"):
        checks = diagnose()
    table = Table(title="policybox doctor: sandbox layers on this machine")
    for column in ("layer", "works", "detail"):
        table.add_column(column)
    for check in checks:
        table.add_row(check.layer.value, "[green]yes[/]" if check.works else "[red]no[/]", check.detail)
    console.print(table)
    raise typer.Exit(0 if all(check.works for check in checks) else 1)


def _check_log_dir(log_dir: Path) -> None:
    """The log folder exists or can be made there (checked without creating anything)."""
    existing = next(path for path in (log_dir, *log_dir.absolute().parents) if path.exists())
    if not existing.is_dir():
        raise typer.BadParameter(f"{existing} is a file, not a folder", param_hint="--log-dir")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise typer.BadParameter(f"folder {existing} is not writable", param_hint="--log-dir")


def _check_writable(out: Path | None) -> None:
    if out is None:
        return
    if out.is_dir():
        raise typer.BadParameter(
            f"{out} is a folder; give a file name such as {out / 'result.json'}", param_hint="--out"
        )
    if not out.parent.resolve().is_dir():
        raise typer.BadParameter(f"folder {out.parent} does not exist", param_hint="--out")
    if not os.access(out.parent.resolve(), os.W_OK):
        raise typer.BadParameter(f"folder {out.parent} is not writable", param_hint="--out")


def _check_replay_name(replay: Path | None) -> None:
    """A replay file is named as MettaGrid names them, which is how MettaScope tells how to read it."""
    if replay is not None and not replay.name.endswith(REPLAY_SUFFIX):
        raise typer.BadParameter(f"{replay} does not end in {REPLAY_SUFFIX}", param_hint="--replay")


def _write_atomically(path: Path, text: str) -> None:
    """Write via a temporary file and rename, so a reader never sees half a result."""
    fd, tmp = tempfile.mkstemp(dir=path.parent.resolve(), prefix=f".{path.name}.", suffix=".tmp")
    with os.fdopen(fd, "w") as handle:
        handle.write(text)
    os.replace(tmp, path)


def _show(result: EpisodeResult) -> None:
    table = Table(
        title=f"{result.env.get('label', 'episode')} · seed {result.seed} · {result.steps} steps · {result.mode}"
    )
    for column in ("agent", "policy", "reward", "status", "p50 ms", "p99 ms"):
        table.add_column(column, justify="right" if column in ("agent", "reward", "p50 ms", "p99 ms") else "left")
    for agent in result.agents:
        status = agent.status.value if agent.status == AgentStatus.OK else f"[red]{agent.status.value}[/]"
        if agent.failure is not None:
            status += f" — {agent.failure.one_line()}"
        table.add_row(
            str(agent.agent_id),
            agent.policy,
            f"{agent.reward:g}",
            status,
            _ms(agent.latency.p50_ms),
            _ms(agent.latency.p99_ms),
        )
    console.print(table)
    for agent in result.agents:
        if agent.minimum_action_timeout_ms > result.limits.act_timeout_ms:
            needs = f"{agent.minimum_action_timeout_ms} ms per step"
            limit = f"--act-timeout-ms is {result.limits.act_timeout_ms:g}"
            console.print(f"[yellow]agent {agent.agent_id} ({agent.policy}) declares it needs {needs}; {limit}[/]")
    if result.sandbox == SandboxLevel.OFF:
        why = "inline mode" if result.mode == "inline" else "--sandbox off"
        console.print(f"[bold red]SANDBOX OFF ({why}): policies ran with this process's privileges[/]")
    if result.aborted:
        console.print(f"[bold red]episode aborted:[/] {result.aborted}", highlight=False)
    _show_tracebacks(result)
    rate = result.steps / result.play_s if result.play_s else 0.0
    console.print(
        f"{result.steps} steps in {result.play_s:.2f} s ({rate:,.0f} steps/s), "
        f"after {result.startup_s:.2f} s of start-up"
    )
    if result.agents and result.agents[0].log_path:
        console.print(f"agent logs: {Path(result.agents[0].log_path).parent}", highlight=False)


def _show_tracebacks(result: EpisodeResult) -> None:
    """Each distinct traceback once, headed by the agents it belongs to."""
    by_traceback: dict[str, list[str]] = {}
    for agent in result.agents:
        if agent.failure is not None and agent.failure.traceback:
            by_traceback.setdefault(agent.failure.traceback, []).append(f"{agent.agent_id} ({agent.policy})")
    for traceback, owners in by_traceback.items():
        console.print(f"[bold]agent {', '.join(owners)}:[/]", highlight=False)
        console.print(traceback.rstrip(), markup=False, highlight=False)


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def main() -> None:
    app()
