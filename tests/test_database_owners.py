"""One owner per noun of a ladder's database: only the modules that own a noun's SQL -- its store
(``version_store``, ``match_store``, ``team_store``, ``scrimmage_store``, ``final_store``), the
heartbeat's row, the views' reads (``reads``), the schema's versions (``migrations``) and a connection's
pragmas (``database``) -- run a query or name a table. Read from the source with ``ast``: a new
``connection.execute`` elsewhere fails here."""

from __future__ import annotations

import ast
from pathlib import Path

from policybox.league.ladder import schema

SRC = Path(__file__).parents[1] / "src" / "policybox"
LADDER = "policybox.league.ladder"
OWNERS = {
    f"{LADDER}.{module}"
    for module in (
        "database",
        "migrations",
        "reads",
        "heartbeat",
        "version_store",
        "match_store",
        "team_store",
        "scrimmage_store",
        "final_store",
    )
}
TABLES = set(schema.metadata.tables)


def _sql(path: Path) -> list[str]:
    """What in ``path`` runs SQL or names a table: each ``.execute(`` call, each table imported."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "execute":
            found.append(f"line {node.lineno}: .execute(")
        elif isinstance(node, ast.ImportFrom) and node.module == f"{LADDER}.schema":
            found.extend(f"line {node.lineno}: imports {alias.name}" for alias in node.names if alias.name in TABLES)
        elif _names_a_table(node):
            found.append(f"line {node.lineno}: {ast.unparse(node)}")
    return found


def _names_a_table(node: ast.AST) -> bool:
    """``schema.versions`` and the like."""
    return (
        isinstance(node, ast.Attribute)
        and isinstance(node.value, ast.Name)
        and node.value.id == "schema"
        and node.attr in TABLES
    )


def test_only_the_owners_run_sql_on_a_ladders_database():
    offenders = []
    for path in sorted((SRC / "league").rglob("*.py")):
        module = ".".join(path.relative_to(SRC.parent).with_suffix("").parts)
        if module not in OWNERS:
            offenders += [f"{module} {what}" for what in _sql(path)]
    assert offenders == []


def test_the_schema_names_the_writer_of_every_table():
    """``schema``'s docstring says which module writes each table: none is left out."""
    said = ast.get_docstring(ast.parse((SRC / "league" / "ladder" / "schema.py").read_text())) or ""
    assert [table for table in sorted(TABLES) if f"``{table}``" not in said] == []
