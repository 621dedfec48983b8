"""The commands' options: those of a setting generated from the model that owns it, the others declared once.

A setting is declared once, as a pydantic field of ``EpisodeSettings``, ``Limits``, ``LadderSettings``,
the ``Runner``, ``evaluate``'s ``Evaluation`` or ``ladder serve``'s ``ServeSettings``: its type,
default, bounds and description. ``field_option`` makes it a typer option:

* its description is the help, and its default carries over;
* its bounds (``ge``, ``gt``, ``le``, ``lt``) are checked as the value is parsed, by the field's own
  constraints -- one line naming the option, exit 2 -- and shown as click shows a range
  (``[default: 1000; x>0]``);
* a list is a repeatable option, a dict a JSON object's text, a required field (the seats) an option
  whose default the command works out.

A tournament file, a ladder's stored settings and the Python API are validated by the same models, so
they accept exactly the values the command line does. ``LOOKS`` keeps what a field cannot say: a short
flag, the words of an on/off flag, a metavar. ``with_options`` adds a group of options to a command
and hands it their values as one dict (``episode``, ``ladder``, ``runner``, ``evaluation``, ``test``,
``keep``, ``web``); an option no model owns is declared here once, with its default (``option``), or as
an annotated type.

This module is imported by every command, ``--help`` included: it imports typer, pydantic and the
settings models alone (``tests/test_cli_imports.py``).
"""

from __future__ import annotations

import functools
import inspect
import types
import typing
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import typer
from annotated_types import Ge, Gt, Le, Lt
from pydantic import BaseModel, Field, TypeAdapter, ValidationError
from pydantic.fields import FieldInfo

from policybox.league.choices import Evaluation, Runner
from policybox.league.ladder.settings import LadderSettings
from policybox.limits import GAME_RULED, Limits
from policybox.settings import Agents, EpisodeSettings


@dataclass(frozen=True)
class Look:
    """How an option is written where its field's name and type do not say: its flags, its metavar."""

    flags: tuple[str, ...] = ()
    metavar: str | None = None


LOOKS = {
    "agents": Look(("--agents", "-n")),
    "env": Look(metavar="GAME"),
    "env_kwargs": Look(metavar="JSON"),
    "replay": Look(metavar="FILE"),
    "preload": Look(metavar="MODULE"),
    "seed": Look(metavar="SEED"),
    "index_url": Look(metavar="URL"),
    "find_links": Look(metavar="DIR"),
    "environments": Look(metavar="DIR"),
    "sdists": Look(("--sdists/--wheels-only",)),
    "play_share": Look(metavar="SHARE"),
    "versions_per_match": Look(metavar="M"),
    "placement_matches": Look(metavar="P"),
    "suspend_after": Look(metavar="K"),
    "ray_address": Look(metavar="HOST:PORT"),
    "keep_logs_hours": Look(metavar="H"),
    "out": Look(metavar="DIR"),
    "final": Look(("--final",)),
    "host": Look(metavar="HOST"),
    "port": Look(metavar="PORT"),
    "max_upload_mb": Look(metavar="MB"),
    "request_timeout": Look(metavar="S"),
    "keep_alive": Look(metavar="S"),
}
UNITS = {"_ms": "MS", "_s": "S", "_mb": "MIB"}  # a free value's metavar, from its name's unit


def field_option(name: str, field: FieldInfo) -> inspect.Parameter:
    """The option of setting ``name``, as its ``field`` declares it (see the module's docstring). A limit a
    game may rule (``GAME_RULED``) is None unless given: the settings then take the game's own, or the default."""
    default = None if field.is_required() or field.default_factory is not None else field.default
    ruled = name in GAME_RULED
    annotation = _cli_type(field.annotation, None if ruled else default)
    look = LOOKS.get(name, Look())
    flags = look.flags or (
        (f"--{_dashed(name)}/--no-{_dashed(name)}",) if _plain(annotation) is bool else (f"--{_dashed(name)}",)
    )
    help_text = _sentence(field.description or "") + (" Repeatable." if _is_list(annotation) else "")
    checked: dict[str, Any] = {}
    bounds = [item for item in field.metadata if isinstance(item, Ge | Gt | Le | Lt)]
    if bounds or ruled:  # click cannot say x>0, nor "or the game's": shown as click shows its own, checked by the field
        shown = (
            [] if default is None else [f"default: {_shown(default)}" + (", or a Kaggle game's own" if ruled else "")]
        )
        help_text += f"  [{'; '.join(shown + ([_range(bounds)] if bounds else []))}]"
        checked = {"show_default": False} | ({"parser": _Parser(field)} if bounds else {})
    option = typer.Option(*flags, metavar=look.metavar or _metavar(name, annotation), help=help_text, **checked)
    return inspect.Parameter(
        name,
        inspect.Parameter.KEYWORD_ONLY,
        annotation=Annotated[annotation, option],
        default=None if ruled else default,
    )


def ladders_own(name: str) -> inspect.Parameter:
    """The option of ``LadderSettings`` field ``name`` for a command that overrides the ladder's value
    this once: not given, it is the ladder's."""
    field = LadderSettings.model_fields[name]
    once = FieldInfo.merge_field_infos(field, default=None, description=f"{field.description}. Default: the ladder's")
    return field_option(name, once)


def model_options(model: type[BaseModel], names: Iterable[str]) -> list[inspect.Parameter]:
    """The options of ``model``'s fields ``names``, in that order."""
    return [field_option(name, model.model_fields[name]) for name in names]


def with_options(group: str, options: list[inspect.Parameter]) -> Callable[[Callable[..., None]], Callable[..., None]]:
    """Give a command ``options`` beside its own; it receives their values as one dict, its argument ``group``."""
    names = [option.name for option in options]

    def decorate(command: Callable[..., None]) -> Callable[..., None]:
        hints = typing.get_type_hints(command, include_extras=True)  # resolved in the command's own module
        own = [
            p.replace(annotation=hints.get(p.name, p.annotation))
            for p in inspect.signature(command).parameters.values()
            if p.name != group
        ]

        @functools.wraps(command)
        def wrapper(**kwargs: Any) -> None:
            values = {name: kwargs.pop(name) for name in names}
            return command(**{group: values}, **kwargs)

        parameters = [*own, *options]
        # inspect reads a function's __signature__ when it has one; typeshed does not declare the attribute.
        wrapper.__signature__ = inspect.Signature(parameters)  # type: ignore[attr-defined]
        wrapper.__annotations__ = {p.name: p.annotation for p in parameters}
        del wrapper.__wrapped__  # typer must read the new signature, not the command's own
        return wrapper

    return decorate


def option(name: str, annotation: Any, default: Any, *flags: str, **settings: Any) -> inspect.Parameter:
    """An option no model owns, that several commands take (``with_options``), with its default."""
    declared = typer.Option(*flags, **settings)
    return inspect.Parameter(
        name, inspect.Parameter.KEYWORD_ONLY, annotation=Annotated[annotation, declared], default=default
    )


def given(ctx: typer.Context, name: str) -> bool:
    """Whether option ``name`` was given on the command line (not its default, nor a tournament file's value)."""
    return getattr(ctx.get_parameter_source(name), "name", None) == "COMMANDLINE"


class _Parser:
    """Parses an option's text by its field's own type and constraints (built on first use: most options are
    never given); a value out of bounds is that option's error, worded as click words its own."""

    def __init__(self, field: FieldInfo) -> None:
        self.field = field
        self.adapter: TypeAdapter[Any] | None = None

    def __call__(self, text: str) -> Any:
        if self.adapter is None:
            self.adapter = TypeAdapter(Annotated[_plain(self.field.annotation), *self.field.metadata])  # type: ignore[arg-type]
        try:
            return self.adapter.validate_python(text)
        except ValidationError as exc:
            raise typer.BadParameter(exc.errors()[0]["msg"]) from None


def _cli_type(annotation: Any, default: Any) -> Any:
    """The type the command line takes: a dict as its JSON text; optional when its default is None (a field
    the command works out when not given, or one whose default is made fresh, as a list's)."""
    if typing.get_origin(annotation) is dict:
        annotation = str
    return annotation | None if default is None and _plain(annotation) is annotation else annotation


def _plain(annotation: Any) -> Any:
    """``annotation`` without ``None``: ``int | None`` is ``int``."""
    if typing.get_origin(annotation) not in (typing.Union, types.UnionType):
        return annotation
    args = [arg for arg in typing.get_args(annotation) if arg is not type(None)]
    return args[0] if len(args) == 1 else annotation


def _is_list(annotation: Any) -> bool:
    return typing.get_origin(_plain(annotation)) is list


def _range(bounds: list[Any]) -> str:
    """The range as click describes its own: ``x>=1``, ``x>0``, ``1<=x<=1024``."""
    low = high = None  # (the bound, "=" if it is in the range)
    for bound in bounds:
        match bound:
            case Ge(ge=value):
                low = (_shown(value), "=")
            case Gt(gt=value):
                low = (_shown(value), "")
            case Le(le=value):
                high = (_shown(value), "=")
            case Lt(lt=value):
                high = (_shown(value), "")
    if low and high:
        return f"{low[0]}<{low[1]}x<{high[1]}{high[0]}"
    if low:
        return f"x>{low[1]}{low[0]}"
    assert high is not None
    return f"x<{high[1]}{high[0]}"


def _shown(value: Any) -> str:
    if isinstance(value, bool):
        return "on" if value else "off"
    return f"{value:g}" if isinstance(value, float) else str(value)


def _sentence(text: str) -> str:
    return text if not text or text.endswith(".") else f"{text}."


def _dashed(name: str) -> str:
    return name.replace("_", "-")


def _metavar(name: str, annotation: Any) -> str | None:
    """A word for a free value, from the name's unit or its type; None for a choice or a flag (they show
    themselves)."""
    plain = _plain(annotation)
    if typing.get_origin(plain) is list:
        plain = typing.get_args(plain)[0]
    if plain not in (int, float, str):
        return None
    return next((unit for suffix, unit in UNITS.items() if name.endswith(suffix)), "TEXT" if plain is str else "N")


AGENTS = FieldInfo.from_annotated_attribute(
    Agents,
    Field(
        default=None,
        description="Number of agents. Default: the game's own number (a PettingZoo game, a MettaGrid config "
        "file); 4 for arena and navigation",
    ),
)
# The options of an episode: -n, EpisodeSettings' own fields (but its limits, a model of their own, and its
# replay, a file only run names: evaluate and a ladder name theirs), and the limits' fields. A tournament
# file's keys too.
EPISODE_OPTIONS = [
    field_option("agents", AGENTS),
    *model_options(
        EpisodeSettings, [name for name in EpisodeSettings.model_fields if name not in ("limits", "replay")]
    ),
    *model_options(Limits, Limits.model_fields),
]
EPISODE_OPTION_NAMES = frozenset(option.name for option in EPISODE_OPTIONS)
# A ladder's own (ladder init): LadderSettings' fields but its episodes' settings and its seats (-n above).
LADDER_OPTIONS = model_options(
    LadderSettings, [name for name in LadderSettings.model_fields if name not in ("settings", "agents")]
)
# What ladder prune keeps, this once, in place of the ladder's own.
KEEP_OPTIONS = [ladders_own(name) for name in ("keep_logs", "keep_replays", "keep_logs_hours")]
# Which runner plays (evaluate, ladder run, ladder final); versus and ladder test take its --workers alone.
RUNNER_OPTIONS = model_options(Runner, Runner.model_fields)
with_episode_options = with_options("episode", EPISODE_OPTIONS)
with_run_options = with_options(
    "episode", [*EPISODE_OPTIONS, field_option("replay", EpisodeSettings.model_fields["replay"])]
)
with_ladder_options = with_options("ladder", LADDER_OPTIONS)
with_runner_options = with_options("runner", RUNNER_OPTIONS)
with_workers_option = with_options("runner", RUNNER_OPTIONS[:1])
with_keep_options = with_options("keep", KEEP_OPTIONS)
# doctor's --ray-address: the Runner's, a cluster to check rather than to play on.
CLUSTER = FieldInfo.merge_field_infos(
    Runner.model_fields["ray_address"],
    description="Check every node of this Ray cluster instead of this machine: one table per node",
)
with_cluster_option = with_options("runner", [field_option("ray_address", CLUSTER)])
# How evaluate plays and keeps its tournament; a tournament file's keys too.
with_evaluation_options = with_options("evaluation", model_options(Evaluation, Evaluation.model_fields))

# The options that are no setting's, each declared once for every command that takes it.
POLICY_HELP = (
    "Policy for the agents, repeatable; agent i plays the (i mod n)-th -p. SPEC is a shorthand (random, "
    "noop; MettaGrid's lstm, ...), a dotted path (pkg.mod.Class) or a file path (bots/greedy.py:Greedy), "
    "each optionally followed by ,data=CHECKPOINT ,name=NAME ,path=IMPORT_ROOT ,kw.KEY=VALUE (VALUE read "
    "as JSON when it parses) ,env.NAME=VALUE (a variable for its cells; @FILE or $VAR for a secret), or "
    "written class=CLASS,...; or a JSON/YAML spec file; or a submission folder (with a policy_spec.json or "
    "cogames.toml; a setup_script in it runs first, in a cell) or a submission zip or tar.gz."
)
POLICIES = Annotated[list[str] | None, typer.Option("--policy", "-p", metavar="SPEC", help=POLICY_HELP)]
# The ladder commands' arguments.
DIR = Annotated[Path, typer.Argument(metavar="DIR", help="The ladder's folder.")]
NAME = Annotated[str, typer.Argument(metavar="NAME", help="A submission's name: [a-z0-9][a-z0-9_-]{0,39}.")]
TEAM = Annotated[str, typer.Argument(metavar="TEAM", help="The team: [a-z0-9][a-z0-9_-]{0,39}.")]
JSON = Annotated[bool, typer.Option("--json", help="Print it as JSON instead of a table.")]
RESULT_JSON = Annotated[bool, typer.Option("--json", help="Print the result as JSON instead of a line.")]
# A sequential test's (versus, ladder test), their defaults with them.
TEST_OPTIONS = [
    option("alpha", float, 0.05, metavar="P", help="The chance of 'B better' when B is not better (0 < P < 0.5)."),
    option(
        "beta",
        float,
        0.05,
        metavar="P",
        help="The chance of 'B not better' when B is better by --effect (0 < P < 0.5).",
    ),
    option(
        "effect",
        float,
        0.2,
        metavar="E",
        help="The effect to find, in standard deviations of the paired difference B - A.",
    ),
    option(
        "max_episodes",
        int,
        2000,
        min=2,
        max=1_000_000,
        metavar="N",
        help="The cap: undecided after this many episodes (whole pairs).",
    ),
]
with_test_options = with_options("test", TEST_OPTIONS)
