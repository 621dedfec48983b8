"""How big a ladder's folder grows: its replays, its agents' logs and its database, per 1,000 matches.

    .venv/bin/python benchmarks/bench_folder_size.py [--game arena|connect-four] [--matches 100]
        [--steps 1000] [--replays/--no-replays] [--workers 2]

A fresh SQLite ladder of ``--game`` (``arena``: MettaGrid's arena, the default ladder's game and 4
seats; ``connect-four``: PettingZoo's ``connect_four_v3``), with the default keep settings
(``keep_logs`` 100, ``keep_replays`` 1000), ``random`` against ``random`` -- both let in without
their validation episodes -- plays ``--matches`` matches of ``--steps`` steps. Then each part of the
folder is measured (files' bytes; a log folder and the whole folder as ``du`` counts them, a small
file taking a whole block) and extrapolated to 1,000 matches:

* the database grows with every match (its size after, less its size before, times 1000 / matches);
* a match's replay and its log folder are each the mean of those written; the folder keeps the
  latest ``keep_replays`` replays and ``keep_logs`` log folders, so 1,000 matches keep
  min(1000, keep) of each. A log is the entrant's to fill: at most ``keep_logs`` x seats x the
  per-agent log limit. ``random`` logs nothing: its log folders are the floor.
"""

from __future__ import annotations

import argparse
import os
import tempfile
from pathlib import Path

from policybox import EpisodeSettings, LadderSettings
from policybox.ladder import Ladder
from policybox.league.ladder import version_store
from policybox.league.ladder.database import transaction
from policybox.league.ladder.folder import SQLITE_FILE

GAMES = {"arena": "arena", "connect-four": "pettingzoo:pettingzoo.classic.connect_four_v3:env"}
PER = 1000


def size(path: Path, blocks: bool = False) -> int:
    """Bytes of ``path`` and everything in it: its files' sizes, or (``blocks``) what it takes on disk,
    as du counts it (a small file takes a whole 4 KiB block)."""
    paths = [path, *path.rglob("*")] if path.is_dir() else [path] if path.exists() else []
    if blocks:
        return sum(os.stat(p).st_blocks * 512 for p in paths)
    return sum(os.stat(p).st_size for p in paths if p.is_file())


def database(folder: Path) -> int:
    """The SQLite database's size, with the ladder closed (its write-ahead log checkpointed into it)."""
    return sum(size(p) for p in folder.glob(f"{SQLITE_FILE}*"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--game", choices=sorted(GAMES), default="arena")
    parser.add_argument("--matches", type=int, default=100)
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--replays", action=argparse.BooleanOptionalAction, default=None)
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="policybox-size-")) / "cup"
    game = EpisodeSettings(env=GAMES[args.game], steps=args.steps)
    settings = LadderSettings(settings=game, agents=4 if args.game == "arena" else 2, replays=args.replays)
    with Ladder.create(folder, settings) as ladder:
        for name in ("red", "blue"):
            ladder.submit(name, "random")
            with transaction(ladder.engine) as connection:  # let in without its validation episodes
                version_store.finish_qualification(
                    connection, version_store.latest_version(connection, name), True, None, None, None
                )
    before = database(folder)
    with Ladder.open(folder) as ladder:
        played = ladder.run(matches=args.matches, workers=args.workers).played
        kept = ladder.settings
    replays = sorted((folder / "replays").glob("match-*")) if (folder / "replays").is_dir() else []
    logs = sorted((folder / "logs").glob("match-*"))
    grown = database(folder) - before
    replay_each = sum(size(p) for p in replays) / len(replays) if replays else 0
    log_each = sum(size(p, blocks=True) for p in logs) / len(logs) if logs else 0
    print(f"{args.game}: {played} matches of up to {args.steps} steps, replays {'on' if replays else 'off'}")
    print(f"  database: {grown / played:,.0f} B a match -> {grown / played * PER / 2**20:,.1f} MiB per {PER}")
    print(
        f"  replays: {replay_each:,.0f} B each, {min(PER, kept.keep_replays)} kept -> "
        f"{replay_each * min(PER, kept.keep_replays) / 2**20:,.1f} MiB per {PER}"
    )
    print(
        f"  logs: {log_each:,.0f} B on disk a match folder, {min(PER, kept.keep_logs)} kept -> "
        f"{log_each * min(PER, kept.keep_logs) / 2**20:,.1f} MiB per {PER}"
    )
    print(f"  the whole folder now: {size(folder, blocks=True) / 2**20:,.1f} MiB on disk ({folder})")


if __name__ == "__main__":
    main()
