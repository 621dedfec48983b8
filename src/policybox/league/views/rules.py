"""What a participant needs before submitting: this ladder's rules as data (``/rules`` and
``/api/rules``), and a starter submission for its game (``/rules/starter.zip``).

The rules say the game (what it is -- never where the organiser keeps its file --, its seats and steps,
the packages it runs on, its reward and its spaces: ``game_facts``), every limit a cell plays under, the
ranking rule, the placement and suspension rules, and what a submission holds, with the upload limits in
force: all read from the ladder's settings and the game itself, so the page cannot say other than what
``ladder run`` does.

They say how to play at home (``AtHome``): install policybox and the game's package at the versions the
ladder runs, download the game (``/rules/game``) and the starter, and ``policybox run`` the starter
against the ladder's own shorthand bots (its names that play a shorthand such as ``random``) in the
ladder's settings: its seats, steps, versions per match and every limit that is not the default.

The starter is a minimal submission that qualifies as it is: ``policy_spec.json`` and ``bot.py``
from ``starters/<family>/`` (a random action of a MettaGrid game; a random legal move of a PettingZoo
one), zipped at the top, as ``ladder submit`` and the upload form take it, with a ``README.md`` that
holds those commands.
"""

from __future__ import annotations

import functools
import io
import itertools
import shlex
import zipfile
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field, ValidationError

from policybox.envs import split_env
from policybox.league import ranking
from policybox.league.ladder import reads
from policybox.league.ladder.database import reading
from policybox.league.ladder.folder import LadderFolder
from policybox.league.ladder.settings import EPISODE_LIMIT_FORMULA, LadderSettings
from policybox.league.views.game_facts import GameFacts, Seats, game_facts
from policybox.limits import Limits
from policybox.spec import KAGGLE_AGENT, REQUIREMENTS_FILE, SUBMISSION_MANIFEST, SUBMISSION_SPEC, PolicySpec

STARTERS = Path(__file__).parent / "starters"
GAME_URL = "/rules/game"
STARTER_URL = "/rules/starter.zip"
BOT = "bot"  # the folder the starter is unpacked to, as the commands name it
RESULT = "result.json"
MACHINE_LIMITS = ("memory_budget_mb",)  # the organiser's machine's, not a rule of the game: not in the command
FALLBACK_OPPONENT = "random"  # when no name of the ladder plays a shorthand
STARTER_FILES = ("policy_spec.json", "bot.py")
CELLS = {
    "per-agent": "one per agent: each agent in a cell of its own",
    "per-policy": "one per version in a match: its seats share a cell and are stepped together, with one "
    "step_group (or step_batch) call when its policy can batch them",
    "forked": "your agents each run in a process of their own, forked from one loader of your submission: they "
    "share one copy of its network, its uid and its sandbox, and can reach each other; other submissions "
    "cannot reach them",
}
# The limits a cell plays under, as the page names them (each a field of policybox.limits.Limits).
LIMITS = {
    "act_timeout_ms": "per-step deadline (ms): a later reply is dropped and that step plays the fallback action, "
    "unless the step waits on the bank",
    "time_bank_ms": "time bank (ms): the time an agent may spend past its deadlines, over the episode",
    "wait_on_bank": "whether a late reply is waited for, and counts, while its time bank lasts (Kaggle's overage "
    "time); if not, it is dropped",
    "init_timeout_s": "start-up deadline (s): interpreter, policy import, checkpoint load",
    "cpu_limit_s": "CPU seconds per cell, over all its processes",
    "memory_limit_mb": "memory per cell (MiB)",
    "max_processes": "processes and threads per cell",
    "disk_limit_mb": "scratch folder per cell (MiB, counts as memory)",
    "file_size_limit_mb": "largest file a cell may write (MiB)",
    "max_open_files": "open files per cell",
    "log_limit_mb": "printed output kept per agent (MiB)",
}


class Game(BaseModel):
    family: str = Field(description="mettagrid, pettingzoo or kaggle")
    name: str = Field(description="What the game is: its family, its own name, seats and steps")
    env: str = Field(description="What policybox run --env takes to play it, beside the file /rules/game serves")
    env_kwargs: dict[str, Any] = Field(description="Keyword arguments of a PettingZoo game's factory")
    agents: int = Field(description="Seats of every match")
    steps: int = Field(description="Steps of every match (the game's limit)")
    versions_per_match: int
    seating: str = Field(description="How a match's versions share its seats")
    on_agent_failure: str = Field(description="What happens to an agent that fails: continue (fallback) or abort")
    cells: str = Field(
        description="Each agent in a cell of its own; each in a process of its own forked from one loader of its "
        "version (one copy of its network, one uid and sandbox); or a version's seats in one cell, stepped "
        "together (step_group or step_batch when its policy can)"
    )
    packages: dict[str, str] = Field(description="policybox and the game's package, at the versions the ladder runs")
    reward: list[str] = Field(description="How the game gives reward, as it defines it, and what a match scores")
    spaces: list[Seats] = Field(description="The observation and action spaces, as the game defines them")
    action_names: list[str] = Field(description="A MettaGrid game's actions, by name, in the game's order")


class Limit(BaseModel):
    name: str
    value: float | int | None
    meaning: str


class Submission(BaseModel):
    formats: list[str]
    setup_timeout_s: float
    max_upload_mb: float | None = Field(description="A web upload's request body, MiB (None: not served here)")
    max_unpacked_mb: int
    max_file_mb: int
    max_entries: int
    submissions_per_hour: int = Field(description="Per team, over the web page")
    names_per_team: int


class Opponent(BaseModel):
    name: str = Field(description="The ladder's name")
    policy: str = Field(description="The shorthand it plays, as -p takes it")


class AtHome(BaseModel):
    """How to play the starter at home against the ladder's shorthand bots, in the ladder's settings."""

    game_file: str = Field(description="The name to save the download of /rules/game as")
    opponents: list[Opponent] = Field(description="The ladder's names that play a shorthand: the command's -p")
    install: str = Field(description="Install policybox and the game's package at the ladder's versions")
    unpack: str = Field(description="Unpack the starter into the folder the command plays")
    play: str = Field(description="Play the starter against the opponents, with the ladder's settings")


class Rules(BaseModel):
    game: Game
    limits: list[Limit]
    episode_limit_s: float = Field(description="Every match's wall-clock limit on play, after start-up")
    episode_limit_rule: str | None = Field(description="How it is derived, when the organiser did not set it")
    rank_by: str
    ranking_rule: str
    placement_matches: int = Field(description="P: matches a new version plays first, before the others pick it")
    suspend_after: int = Field(description="K: consecutive matches with a failed agent that suspend a version")
    submission: Submission
    starter: str = Field(description="The path of a starter submission that qualifies as it is")
    game_file: str = Field(description="The path of the game's file, as policybox run takes it")
    at_home: AtHome


def rules(ladder: LadderFolder, upload_cap: int | None = None) -> Rules:
    """This ladder's rules; ``upload_cap`` the web page's request body cap in bytes, if it serves one."""
    settings = ladder.settings
    episode = settings.episode_settings
    facts = _facts(settings)
    limits = episode.limits.model_dump()
    return Rules(
        game=Game(
            family=split_env(episode.env)[0],
            name=facts.name,
            env=facts.env,
            env_kwargs=episode.env_kwargs,
            agents=settings.agents,
            steps=episode.steps,
            versions_per_match=settings.versions_per_match,
            seating=settings.seating,
            on_agent_failure=str(episode.on_agent_failure),
            cells=CELLS[episode.cells_applied],
            packages=facts.packages,
            reward=facts.reward,
            spaces=facts.spaces,
            action_names=facts.action_names,
        ),
        limits=[Limit(name=name, value=limits[name], meaning=meaning) for name, meaning in LIMITS.items()],
        episode_limit_s=settings.episode_limit_s,
        episode_limit_rule=None if settings.settings.limits.episode_timeout_s else EPISODE_LIMIT_FORMULA,
        rank_by=settings.rank_by,
        ranking_rule=ranking.RULES[settings.rank_by],
        placement_matches=settings.placement_matches,
        suspend_after=settings.suspend_after,
        submission=Submission(
            formats=[
                f"a zip (or tar.gz) with {SUBMISSION_SPEC} at its top, or in the one folder it holds: class_path "
                "(bot.py:Class), and optional data_path (a checkpoint), init_kwargs, setup_script, requirements; "
                "every path relative to the spec's folder and inside it",
                f"or a {SUBMISSION_MANIFEST} with the same fields in its [policy] table",
                f"a {REQUIREMENTS_FILE} beside the spec (or its requirements field) names the packages it needs "
                "that the ladder lacks (pkg==1.2, one a line): they are built into an environment of its own "
                "when it qualifies, from the organiser's package index",
                "a setup_script runs once, in a cell, when the version qualifies (its output is your team's "
                "to read); the files it writes are the version's",
                "data files (checkpoints, weights) go in the zip beside the code",
                "a new submission to a name is its next version: it qualifies (one episode with every seat its "
                "own, which no agent of it may fail) before it plays",
            ],
            setup_timeout_s=settings.setup_timeout_s,
            max_upload_mb=None if upload_cap is None else round(upload_cap / 2**20, 1),
            max_unpacked_mb=settings.max_unpacked_mb,
            max_file_mb=settings.max_file_mb,
            max_entries=settings.max_entries,
            submissions_per_hour=settings.submissions_per_hour,
            names_per_team=settings.names_per_team,
        ),
        starter=STARTER_URL,
        game_file=GAME_URL,
        at_home=at_home(settings, facts, _opponents(ladder)),
    )


def game_file(ladder: LadderFolder) -> tuple[str, bytes]:
    """The game's file, as ``policybox run`` takes it: its name and its bytes (``game_facts``)."""
    download = _facts(ladder.settings).download
    return download.name, download.body


def _facts(settings: LadderSettings) -> GameFacts:
    episode = settings.settings
    return game_facts(episode.env, episode.env_kwargs, settings.agents, episode.steps)


def _opponents(ladder: LadderFolder) -> list[Opponent]:
    """The ladder's names that play now and whose policy is a shorthand with nothing else set (``random``)."""
    with reading(ladder.engine) as connection:
        rows = reads.playing_specs(connection)
    found = []
    for row in rows:
        try:
            spec = PolicySpec.model_validate(row.spec)
        except ValidationError:  # a spec stored by another version of policybox: not one to offer
            continue
        if spec.is_shorthand and spec == PolicySpec(class_path=spec.class_path, name=spec.name, label=spec.label):
            found.append(Opponent(name=row.name, policy=spec.class_path))
    return found


def at_home(settings: LadderSettings, facts: GameFacts, opponents: list[Opponent]) -> AtHome:
    """The commands that play the starter at home as the ladder plays a match: its seats shared by the
    starter and ``versions_per_match - 1`` of the ladder's shorthand bots (cycled; ``random`` if it has none),
    seat i playing the (i mod n)-th ``-p`` as a rotated match seats them."""
    episode = settings.episode_settings
    family, target = split_env(episode.env)
    fallback = f"kaggle:{_kaggle_builtin(target)[0]}" if family == "kaggle" else FALLBACK_OPPONENT
    others = itertools.islice(
        itertools.cycle([o.policy for o in opponents] or [fallback]), settings.versions_per_match - 1
    )
    command = ["policybox", "run", "--env", facts.env, *shlex.split(facts.env_kwargs_option or "")]
    for policy in (f"./{BOT}", *others):
        command += ["-p", policy]
    command += ["--agents", str(settings.agents), "--steps", str(episode.steps), *_limit_options(episode.limits)]
    if episode.cells is not None:  # else the game's default, at home as on the ladder
        command += ["--cells", episode.cells]
    if episode.on_agent_failure != "continue":
        command += ["--on-agent-failure", str(episode.on_agent_failure)]
    pins = [f"{name}=={version}" for name, version in facts.packages.items()]
    return AtHome(
        game_file=facts.download.name,
        opponents=opponents,
        install=shlex.join(["pip", "install", *pins]),
        unpack=f"unzip starter.zip -d {BOT}",
        play=shlex.join([*command, "--out", RESULT]),
    )


def _limit_options(limits: Limits) -> list[str]:
    """The options that set each limit the ladder plays with that is not ``policybox run``'s default."""
    options = []
    for name, field in Limits.model_fields.items():
        value = getattr(limits, name)
        if name in MACHINE_LIMITS or value == field.default:
            continue
        dashed = name.replace("_", "-")
        if isinstance(value, bool):
            options.append(f"--{dashed}" if value else f"--no-{dashed}")
        elif value is not None:
            options += [f"--{dashed}", _number(value)]
    return options


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else repr(float(value))


def starter_zip(ladder: LadderFolder) -> bytes:
    """A minimal submission for this ladder's game family, zipped (a few KiB, made in memory), with a README.md
    of the commands that play it at home. For a Kaggle game, Kaggle's format: a ``main.py`` whose agent plays
    as one of the game's built-in agents."""
    family, target = split_env(ladder.settings.settings.env)
    facts = _facts(ladder.settings)
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        spec = KAGGLE_AGENT if family == "kaggle" else SUBMISSION_SPEC
        archive.writestr("README.md", readme(facts, at_home(ladder.settings, facts, _opponents(ladder)), spec))
        if family == "kaggle":
            archive.writestr("main.py", _kaggle_starter(target))
        else:
            for name in STARTER_FILES:
                archive.write(STARTERS / family / name, name)
    return buffer.getvalue()


def readme(facts: GameFacts, home: AtHome, spec: str) -> str:
    """The starter's README.md: what the game is, and the commands that play the starter at home; ``spec``
    the file that makes it a submission."""
    against = ", ".join(f"{o.name} (`-p {o.policy}`)" for o in home.opponents) or "a random player"
    another = "\nTo play another of them, give its `-p` instead.\n" if len(home.opponents) > 1 else ""
    return f"""# A starter for {facts.name}

This folder is a submission that qualifies as it is. Change the bot, play it at home, then submit it.

## Play it at home

Download the game from the ladder's rules page ({GAME_URL}) as `{home.game_file}`, beside `starter.zip`,
then play the starter against the ladder's own {against}, with the ladder's seats, steps and
limits:

```sh
{home.install}
{home.unpack}
{home.play}
```

{another}
`{RESULT}` then holds every agent's reward and status, and `policybox-logs/` what each printed.

## Submit it

Zip the folder's files (`cd {BOT} && zip -r ../{BOT}.zip .`; a zip of the folder itself is read as that
folder too) and upload it on the ladder's submit page. Packages the ladder lacks go in a
`{REQUIREMENTS_FILE}` beside `{spec}`.
"""


@functools.cache
def _kaggle_builtin(target: str) -> tuple[str, Any]:
    """The game's random built-in agent where it has one, else its first: (name, function); looked up once."""
    from policybox.envs.kaggle import make_env

    agents = make_env(target, {}).agents
    name = next((name for name in ("random", "random_agent") if name in agents), next(iter(agents)))
    return name, agents[name]


def _kaggle_starter(target: str) -> str:
    """A Kaggle agent file that plays as one of the game's built-in agents (its random one where it has one,
    else its first), called from the package the cells import it from."""
    name, builtin = _kaggle_builtin(target)
    return (
        f'"""A starter agent for {target.partition("?")[0]}: it plays as the game\'s own {name} agent. Replace\n'
        "its body with yours: the last function of main.py is the agent, called as agent(observation,\n"
        'configuration) each turn, as Kaggle calls it."""\n\n'
        f"from {builtin.__module__} import {builtin.__name__} as _builtin\n\n\n"
        "def agent(observation, configuration):\n"
        "    return _builtin(*[observation, configuration][: _builtin.__code__.co_argcount])\n"
    )
