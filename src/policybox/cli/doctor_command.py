"""What ``policybox doctor`` does: try each sandbox layer in a real cell, here or on every node of a Ray
cluster, and check who may read a ladder's folder; a table of each. Imported when ``doctor`` runs."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.table import Table

from policybox.cli.common import console, guarded
from policybox.inert import shown


def diagnose(ray_address: str | None, ladder: Path | None) -> None:
    """``policybox doctor``: exit 0 when every layer works on every machine checked and the ladder's
    folder is private, 1 otherwise."""
    with guarded("nothing was changed"):
        private = None if ladder is None else _ladder_privacy(ladder)
        if ray_address is None:
            from policybox.host.diagnosis import diagnose as try_each_layer

            with console.status("Starting a probe cell with every sandbox layer…"):
                machines = [("this machine", list(try_each_layer()))]
        else:
            from policybox.league.play.backends import ray_backend

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
