"""What a participant needs before submitting: this ladder's rules as data (``/rules`` and
``/api/rules``), and a starter submission for its game (``/rules/starter.zip``).

The rules say the game (its family, its name -- never where the organiser keeps its file -- its
keyword arguments, seats and steps), every limit a cell plays under, the ranking rule, the placement
and suspension rules, and what a submission holds, with the upload limits in force: all read from the
ladder's settings, so the page cannot say other than what ``ladder run`` does.

The starter is a minimal submission that qualifies as it is: ``policy_spec.json`` and ``bot.py``
from ``starters/<family>/`` (a random action of a MettaGrid game; a random legal move of a PettingZoo
one), zipped at the top, as ``ladder submit`` and the upload form take it.
"""

from __future__ import annotations

import io
import zipfile
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from policybox.envs import split_env
from policybox.league import ranking
from policybox.league.ladder.folder import LadderFolder
from policybox.league.ladder.settings import EPISODE_LIMIT_FORMULA
from policybox.league.views import own_code
from policybox.spec import SUBMISSION_MANIFEST, SUBMISSION_SPEC

STARTERS = Path(__file__).parent / "starters"
STARTER_FILES = ("policy_spec.json", "bot.py")
CELLS = {
    "per-agent": "one per agent: each agent in a cell of its own",
    "per-policy": "one per version in a match: its seats share a cell and are stepped together, with one "
    "step_group (or step_batch) call when its policy can batch them",
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
    family: str = Field(description="mettagrid or pettingzoo")
    env: str = Field(description="The game, by its name or file name")
    env_kwargs: dict[str, Any] = Field(description="Keyword arguments of a PettingZoo game's factory")
    agents: int = Field(description="Seats of every match")
    steps: int = Field(description="Steps of every match (the game's limit)")
    versions_per_match: int
    seating: str = Field(description="How a match's versions share its seats")
    on_agent_failure: str = Field(description="What happens to an agent that fails: continue (fallback) or abort")
    cells: str = Field(
        description="Each agent in a cell of its own, or a version's seats in one cell, stepped together "
        "(step_group or step_batch when its policy can)"
    )


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


def rules(ladder: LadderFolder, upload_cap: int | None = None) -> Rules:
    """This ladder's rules; ``upload_cap`` the web page's request body cap in bytes, if it serves one."""
    settings = ladder.settings
    episode = settings.episode_settings
    family, target = split_env(episode.env)
    limits = episode.limits.model_dump()
    return Rules(
        game=Game(
            family=family,
            env=own_code.submitted(target),
            env_kwargs=episode.env_kwargs,
            agents=settings.agents,
            steps=episode.steps,
            versions_per_match=settings.versions_per_match,
            seating=settings.seating,
            on_agent_failure=str(episode.on_agent_failure),
            cells=CELLS[episode.cells],
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
                f"a zip with {SUBMISSION_SPEC} at its top: class_path (bot.py:Class), and optional data_path "
                "(a checkpoint), init_kwargs, setup_script; every path relative to the zip's top and inside it",
                f"or a {SUBMISSION_MANIFEST} with the same fields in its [policy] table",
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
        starter="/rules/starter.zip",
    )


def starter_zip(ladder: LadderFolder) -> bytes:
    """A minimal submission for this ladder's game family, zipped (a few KiB, made in memory). For a
    Kaggle game, Kaggle's format: a ``main.py`` whose agent plays as one of the game's built-in agents."""
    family, target = split_env(ladder.settings.settings.env)
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        if family == "kaggle":
            archive.writestr("main.py", _kaggle_starter(target))
        else:
            for name in STARTER_FILES:
                archive.write(STARTERS / family / name, name)
    return buffer.getvalue()


def _kaggle_starter(target: str) -> str:
    """A Kaggle agent file that plays as one of the game's built-in agents (its random one where it has one,
    else its first), called from the package the cells import it from."""
    from policybox.envs.kaggle import make_env

    agents = make_env(target, {}).agents
    name = next((name for name in ("random", "random_agent") if name in agents), next(iter(agents)))
    builtin = agents[name]
    return (
        f'"""A starter agent for {target.partition("?")[0]}: it plays as the game\'s own {name} agent. Replace\n'
        "its body with yours: the last function of main.py is the agent, called as agent(observation,\n"
        'configuration) each turn, as Kaggle calls it."""\n\n'
        f"from {builtin.__module__} import {builtin.__name__} as _builtin\n\n\n"
        "def agent(observation, configuration):\n"
        "    return _builtin(*[observation, configuration][: _builtin.__code__.co_argcount])\n"
    )
