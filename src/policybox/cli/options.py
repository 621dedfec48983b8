"""The options every command that plays episodes shares (run, evaluate), declared once.

Typer reads a command's options from its signature; ``with_episode_options`` adds these to a
command's own and hands the command one ``episode: dict`` of their values instead, which
``EpisodeSettings.from_options`` turns into settings. The same names are the keys of a tournament file.
"""

from __future__ import annotations

import functools
import inspect
import typing
from collections.abc import Callable
from typing import Annotated, Any

import typer

from policybox.limits import Limits
from policybox.sandbox import SandboxLevel
from policybox.settings import ENVIRONMENT_LIMIT_MB, Cells, LauncherName, Mode, OnFailure

DEFAULTS = Limits()
# What --help shows as each option's value: a word, not a Python type ("<int range>").
METAVARS = {
    "env": "GAME",
    "env_kwargs": "JSON",
    "preload": "MODULE",
    "seed": "SEED",
    "index_url": "URL",
    "find_links": "DIR",
    "environments": "DIR",
}
UNITS = {"_ms": "MS", "_s": "S", "_mb": "MIB"}


def _option(name: str, annotation: Any, default: Any) -> inspect.Parameter:
    kind, option = typing.get_args(annotation)[:2]
    if option.metavar is None and _valued(kind):  # choices and flags show themselves
        option.metavar = METAVARS.get(name) or next((v for k, v in UNITS.items() if name.endswith(k)), "N")
    return inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, annotation=annotation, default=default)


def _valued(kind: Any) -> bool:
    """Whether an option of this type takes a free value (a number, a text) rather than a choice or a flag."""
    plain = [arg for arg in typing.get_args(kind) if arg is not type(None)] or [kind]
    return all(arg in (int, float, str) or typing.get_origin(arg) is list for arg in plain)


EPISODE_OPTIONS = [
    _option(
        "agents",
        Annotated[
            int | None,
            typer.Option(
                "--agents",
                "-n",
                min=1,
                max=1024,
                help="Number of agents. Default: the game's own number (a PettingZoo game, a MettaGrid config "
                "file); 4 for arena and navigation.",
            ),
        ],
        None,
    ),
    _option("steps", Annotated[int, typer.Option(min=1, help="Episode length in steps.")], 1000),
    _option("seed", Annotated[int, typer.Option(min=0, help="Seeds the game, its map and every agent's RNGs.")], 0),
    _option(
        "env",
        Annotated[
            str,
            typer.Option(
                help="Game: arena, navigation, a MettaGridConfig JSON/YAML file (or mettagrid:FILE), or "
                "pettingzoo:MODULE:FACTORY for a PettingZoo game "
                "(e.g. pettingzoo:mpe2.simple_spread_v3:parallel_env)."
            ),
        ],
        "arena",
    ),
    _option(
        "env_kwargs",
        Annotated[
            str | None,
            typer.Option(help="Keyword arguments for a PettingZoo game's factory, a JSON object: '{\"N\": 4}'."),
        ],
        None,
    ),
    _option(
        "mode",
        Annotated[Mode, typer.Option(help="process: each agent in its own process. inline: all in this one (debug).")],
        "process",
    ),
    _option(
        "cells",
        Annotated[
            Cells,
            typer.Option(
                help="per-agent: every agent in a cell of its own. per-policy: the seats of one policy share a cell, "
                "stepped as a batch when the policy can (MettaGrid's step_group, step_batch); its agents are then "
                "not isolated from each other, policies still are.",
            ),
        ],
        "per-agent",
    ),
    _option(
        "act_timeout_ms",
        Annotated[
            float,
            typer.Option(min=1, help="Per-step deadline per agent; a late agent plays the fallback action that step."),
        ],
        DEFAULTS.act_timeout_ms,
    ),
    _option(
        "time_bank_ms",
        Annotated[float, typer.Option(min=0, help="Per-agent budget for time past deadlines; then it is disabled.")],
        DEFAULTS.time_bank_ms,
    ),
    _option(
        "init_timeout_s",
        Annotated[float, typer.Option(min=0.1, help="Deadline for a cell to import its policy and load its data.")],
        DEFAULTS.init_timeout_s,
    ),
    _option(
        "episode_timeout_s",
        Annotated[
            float | None, typer.Option(min=0.1, help="Wall-clock limit on play, after start-up; the episode ends then.")
        ],
        None,
    ),
    _option(
        "log_limit_mb",
        Annotated[float, typer.Option(min=0.01, help="Cap on each agent's printed output; the rest is discarded.")],
        DEFAULTS.log_limit_mb,
    ),
    _option(
        "launcher",
        Annotated[
            LauncherName,
            typer.Option(help="zygote: fork cells from a pre-warmed process (fast). spawn: a fresh interpreter each."),
        ],
        "zygote",
    ),
    _option(
        "preload",
        Annotated[
            list[str] | None,
            typer.Option(
                help="Module the zygote imports before forking cells, repeatable. Torch needs no asking: a policy "
                "that imports it forks from a zygote with torch."
            ),
        ],
        None,
    ),
    _option(
        "index_url",
        Annotated[
            str | None,
            typer.Option(
                help="Package index for policies' requirements (uv's --index-url). Default: what this machine's "
                "pip install reaches (pip's index, extra indexes and find-links)."
            ),
        ],
        None,
    ),
    _option(
        "find_links",
        Annotated[
            list[str] | None,
            typer.Option(help="A folder of wheels for policies' requirements, repeatable (offline: with no index)."),
        ],
        None,
    ),
    _option(
        "sdists",
        Annotated[
            bool,
            typer.Option(
                "--sdists/--wheels-only",
                help="Allow requirements built from source where no wheel meets them: the build runs sandboxed, "
                "like a setup script, offline, from --find-links folders and file:// indexes.",
            ),
        ],
        False,
    ),
    _option(
        "environments",
        Annotated[
            str | None,
            typer.Option(
                help="Folder where policies' environments are built once and kept. Default: evaluate's results "
                "folder, or ~/.cache/policybox/environments for run."
            ),
        ],
        None,
    ),
    _option(
        "environment_limit_mb",
        Annotated[
            int,
            typer.Option(
                min=16,
                help="The most disk a policy's environment may take to build (uv's cache and the environment, in "
                "its cell's tmpfs); the build's cell may use --memory-limit-mb on top of it.",
            ),
        ],
        ENVIRONMENT_LIMIT_MB,
    ),
    _option(
        "threads_per_cell",
        Annotated[
            int | None,
            typer.Option(
                min=1,
                max=1024,
                help="Threads each cell's torch/OpenMP/BLAS may use. Default: the cores divided among the cells, "
                "at least 1 (a policy's env.OMP_NUM_THREADS wins).",
            ),
        ],
        None,
    ),
    _option(
        "sandbox",
        Annotated[
            SandboxLevel,
            typer.Option(
                help="standard: every layer this machine supports. strict: refuse to run unless all work. "
                "off: no protection (debugging)."
            ),
        ],
        SandboxLevel.STANDARD,
    ),
    _option(
        "seccomp",
        Annotated[
            bool,
            typer.Option(
                "--seccomp/--no-seccomp", help="The seccomp syscall filter at the standard level (strict has it)."
            ),
        ],
        True,
    ),
    _option(
        "cpu_limit_s",
        Annotated[int, typer.Option(min=1, help="CPU seconds per cell, over all its processes.")],
        DEFAULTS.cpu_limit_s,
    ),
    _option(
        "memory_limit_mb",
        Annotated[int, typer.Option(min=64, help="Memory per cell, MiB (at most the budget).")],
        DEFAULTS.memory_limit_mb,
    ),
    _option(
        "memory_budget_mb",
        Annotated[
            int | None,
            typer.Option(
                min=64,
                help="Memory all cells running at once may use together, MiB (one cgroup over them; evaluate's "
                "workers share it). Default: 80% of the memory available at start.",
            ),
        ],
        None,
    ),
    _option(
        "file_size_limit_mb",
        Annotated[int, typer.Option(min=1, help="Largest file a cell may write, MiB.")],
        DEFAULTS.file_size_limit_mb,
    ),
    _option(
        "disk_limit_mb",
        Annotated[
            int, typer.Option(min=1, help="Bytes a cell may keep in its scratch folder, MiB (counts as memory).")
        ],
        DEFAULTS.disk_limit_mb,
    ),
    _option(
        "disk_limit_files",
        Annotated[int, typer.Option(min=16, help="Files and folders a cell may keep in its scratch folder.")],
        DEFAULTS.disk_limit_files,
    ),
    _option(
        "max_processes",
        Annotated[int, typer.Option(min=8, help="Processes and threads per cell.")],
        DEFAULTS.max_processes,
    ),
    _option(
        "max_open_files",
        Annotated[int, typer.Option(min=64, help="Open files per cell.")],
        DEFAULTS.max_open_files,
    ),
    _option(
        "on_agent_failure",
        Annotated[
            OnFailure,
            typer.Option(
                help="continue: a failed agent plays the game's fallback action (MettaGrid: noop) to the end. "
                "abort: end the episode at the failure."
            ),
        ],
        "continue",
    ),
]
EPISODE_OPTION_NAMES = frozenset(option.name for option in EPISODE_OPTIONS)


def with_episode_options(command: Callable[..., None]) -> Callable[..., None]:
    """Give ``command`` the shared options; it receives their values as ``episode`` (a dict)."""
    hints = typing.get_type_hints(command, include_extras=True)  # resolved in the command's own module
    own = [
        p.replace(annotation=hints.get(p.name, p.annotation))
        for p in inspect.signature(command).parameters.values()
        if p.name != "episode"
    ]

    @functools.wraps(command)
    def wrapper(**kwargs: Any) -> None:
        episode = {name: kwargs.pop(name) for name in EPISODE_OPTION_NAMES}
        return command(episode=episode, **kwargs)

    parameters = [*own, *EPISODE_OPTIONS]
    # inspect reads a function's __signature__ when it has one; typeshed does not declare the attribute.
    wrapper.__signature__ = inspect.Signature(parameters)  # type: ignore[attr-defined]
    wrapper.__annotations__ = {p.name: p.annotation for p in parameters}
    del wrapper.__wrapped__  # typer must read the new signature, not the command's own
    return wrapper
