"""The package's structure, as rules a change cannot quietly break: no module imports itself back
round a cycle, the engine never imports the league, the engine's floors and the league's wings import
only downwards, and the names say what they hold.

Read from the source with ``ast`` (every import, also those inside functions), and checked on the
import system where it matters: ``import policybox.episode`` loads nothing of the league.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

SRC = Path(__file__).parents[1] / "src" / "policybox"

# The league's wings, lowest first: a module may import its own wing and those below, never above.
FLOORS = {
    "policybox.league.choices": 0,
    "policybox.league.ranking": 0,
    "policybox.league.stats": 0,
    "policybox.league.play": 1,
    "policybox.league.ladder": 2,
    "policybox.league.views": 3,
    "policybox.league.evaluate": 4,
    "policybox.league.report": 5,
    "policybox.league.web": 5,
}
# The engine's floors, lowest first, as the league's wings: a module may import its own floor and those
# below, never above. A row names a module, or a package and everything in it; ``policybox`` itself (its
# version, and public names imported on first use, by name) only by its name.
ENGINE_FLOORS = {
    # the ground: errors, text, limits, storage, the wire and the sandbox's plan -- no game, no cell
    **dict.fromkeys(
        ["policybox", "policybox.errors", "policybox.lines", "policybox.limits", "policybox.inert", "policybox.wire"], 0
    ),
    **dict.fromkeys(["policybox.process_names", "policybox.threads", "policybox.storage", "policybox.sandbox"], 0),
    **dict.fromkeys(["policybox.untrusted_files", "policybox.submission"], 0),
    # what a policy is (its spec, its environment's layer) and what happened to it
    **dict.fromkeys(["policybox.spec", "policybox.layers", "policybox.results"], 1),
    "policybox.envs": 2,  # the games
    **dict.fromkeys(["policybox.settings", "policybox.cell", "policybox.probe"], 3),
    "policybox.host": 4,  # the cells, from the host's side
    **dict.fromkeys(["policybox.game", "policybox.startup"], 5),  # an episode's game and cells, started
    **dict.fromkeys(["policybox.episode", "policybox.files"], 6),
    # on top: the MettaGrid wrapper, the ladder from Python, the command line and the league
    **dict.fromkeys(["policybox.mettagrid", "policybox.ladder", "policybox.__main__", "policybox.cli"], 7),
    "policybox.league": 7,
}
# Above the engine: what may import the league (the CLI, the public API's ladder, the package's lazy names).
LEAGUE_USERS = ("policybox.league", "policybox.cli", "policybox.ladder", "policybox.__init__", "policybox.__main__")


def module_name(path: Path) -> str:
    parts = path.relative_to(SRC.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules() -> dict[str, Path]:
    return {module_name(path): path for path in sorted(SRC.rglob("*.py"))}


def imports(path: Path) -> set[str]:
    """Every module ``path`` imports, anywhere in it (``from a import b`` counts as ``a.b`` if that
    is a module, else ``a``)."""
    known = modules()
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                found.add(f"{node.module}.{alias.name}" if f"{node.module}.{alias.name}" in known else node.module)
    return {name for name in found if name.startswith("policybox")}


def floor(module: str) -> int | None:
    for prefix, level in FLOORS.items():
        if module == prefix or module.startswith(prefix + "."):
            return level
    return None


def engine_floor(module: str) -> int | None:
    """The floor of a module's own row, else of its innermost package's (``policybox`` only by its name)."""
    parts = module.split(".")
    for end in range(len(parts), 0, -1):
        name = ".".join(parts[:end])
        if name in ENGINE_FLOORS and (end == len(parts) or name != "policybox"):
            return ENGINE_FLOORS[name]
    return None


def test_every_module_is_on_an_engine_floor():
    """A new module goes into a floor (or the table above gets a row): none floats outside."""
    assert [module for module in modules() if engine_floor(module) is None] == []


def test_no_engine_module_imports_one_above_it():
    offenders = [
        f"{module} (floor {engine_floor(module)}) imports {target} (floor {engine_floor(target)})"
        for module, path in modules().items()
        for target in imports(path)
        if (engine_floor(target) or 0) > (engine_floor(module) or 0)
    ]
    assert offenders == []


def test_the_engine_never_imports_the_league():
    offenders = [
        f"{module} imports {target}"
        for module, path in modules().items()
        if not module.startswith(LEAGUE_USERS) and module != "policybox"
        for target in imports(path)
        if target.startswith("policybox.league") or target == "policybox.ladder"
    ]
    assert offenders == []


def test_no_wing_imports_one_above_it():
    offenders = [
        f"{module} (floor {floor(module)}) imports {target} (floor {floor(target)})"
        for module, path in modules().items()
        if floor(module) is not None
        for target in imports(path)
        if floor(target) is not None and floor(target) > floor(module)
    ]
    assert offenders == []


def test_every_league_module_is_in_a_wing():
    """A new league module goes into a wing (or the table above gets a row): none floats outside."""
    loose = [module for module in modules() if module.startswith("policybox.league.") and floor(module) is None]
    assert loose == []


ENGINE_ENTRIES = ["policybox.episode", "policybox.settings", "policybox.files.setup_scripts", "policybox.mettagrid"]


@pytest.mark.parametrize("module", ENGINE_ENTRIES)
def test_the_engine_loads_no_league(module):
    code = f"import sys, {module}; print('\\n'.join(sorted(sys.modules)))"
    run = subprocess.run([sys.executable, "-I", "-c", code], capture_output=True, text=True, check=True)
    loaded = run.stdout.split()
    assert [name for name in loaded if name.startswith(("policybox.league", "sqlalchemy", "starlette"))] == []


def test_exactly_one_class_is_named_ladder():
    classes = [
        module
        for module, path in modules().items()
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.ClassDef) and node.name == "Ladder"
    ]
    assert classes == ["policybox.ladder"]


def test_no_two_league_files_share_a_name():
    """Each file name says what it holds: no two ``ladder.py`` (``__init__`` aside)."""
    files = [path for path in (SRC / "league").rglob("*.py") if "starters" not in path.parts]  # not modules
    names = Counter(path.name for path in files if path.name != "__init__.py")
    assert [name for name, count in names.items() if count > 1] == []


def import_graph() -> dict[str, list[str]]:
    """Each module of the package, and those of the package it imports."""
    known = modules()
    return {module: sorted(target for target in imports(path) if target in known) for module, path in known.items()}


def import_cycles(graph: dict[str, list[str]]) -> list[list[str]]:
    """The groups of modules that import each other, however far round: each strongly connected component
    of ``graph`` with more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    cycles = []

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        for target in graph[module]:
            if target not in index:
                visit(target)
                low[module] = min(low[module], low[target])
            elif target in stack:
                low[module] = min(low[module], index[target])
        if low[module] == index[module]:
            component = stack[stack.index(module) :]
            del stack[stack.index(module) :]
            if len(component) > 1:
                cycles.append(sorted(component))

    for module in graph:
        if module not in index:
            visit(module)
    return cycles


def cycle_through(first: str, component: list[str], graph: dict[str, list[str]]) -> list[str]:
    """The shortest import path from ``first`` back to itself within ``component``."""
    paths = {first: [first]}
    reached = [first]
    for module in reached:  # breadth first: ``reached`` grows as it is read
        for target in graph[module]:
            if target == first:
                return [*paths[module], first]
            if target in component and target not in paths:
                paths[target] = [*paths[module], target]
                reached.append(target)
    raise AssertionError(f"{component} is no cycle")


def test_no_import_cycle():
    """No module imports one that imports it back, however far round, even inside a function."""
    graph = import_graph()
    cycles = [cycle_through(component[0], component, graph) for component in import_cycles(graph)]
    assert not cycles, "import cycles:\n" + "\n".join(" -> ".join(cycle) for cycle in cycles)


def test_the_views_read_only_through_the_reads_module():
    """A view reads a ladder's database only through ``policybox.league.ladder.reads``: none imports a
    store (``*_store``), takes more of SQLAlchemy than the ``Connection`` type it hands the reads, or
    executes anything."""
    offenders = []
    for module, path in modules().items():
        if not module.startswith("policybox.league.views"):
            continue
        offenders.extend(f"{module} imports {name}" for name in imports(path) if name.endswith("_store"))
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import) and any(alias.name.split(".")[0] == "sqlalchemy" for alias in node.names):
                offenders.append(f"{module} imports sqlalchemy")
            elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "sqlalchemy":
                taken = {f"{node.module}.{alias.name}" for alias in node.names} - {"sqlalchemy.Connection"}
                offenders.extend(f"{module} imports {name}" for name in sorted(taken))
            elif isinstance(node, ast.Attribute) and node.attr == "execute":
                offenders.append(f"{module} executes SQL (line {node.lineno})")
    assert offenders == []
