"""MettaGrid's policy shorthands (``-p random``): its registry of ``short_names``, read from the
source of its policy packages -- never imported -- once per process (``policybox.envs.mettagrid``
resolves a shorthand with it).
"""

from __future__ import annotations

import ast
import functools
import importlib.util
import threading
from pathlib import Path

# The packages MettaGrid's own discovery walks for policies with ``short_names``
# (mettagrid.policy.loader.discover_and_register_policies).
POLICY_PACKAGES = (
    "mettagrid.policy",
    "metta.agent.policy",
    "metta.rl.training.cuda_teacher",
    "cogames.policy",
    "cogames_agents.policy",
)


# One thread at a time builds the registry: CPython 3.11's ast.parse, run in two threads at once while a
# garbage collection switches between them, fails with "AST constructor recursion depth mismatch" (a
# ladder's upload threads check shorthands).
_REGISTRY_LOCK = threading.Lock()


def shorthand_registry() -> dict[str, str]:
    """MettaGrid's shorthand registry (``_read_registry``), read once per process."""
    with _REGISTRY_LOCK:
        return _read_registry()


@functools.cache
def _read_registry() -> dict[str, str]:
    """MettaGrid's shorthand registry, read from the source of its policy packages, not imported.

    MettaGrid builds its registry by importing every module of those packages (its policies
    register themselves with ``short_names`` when their class is created) -- torch included, for its
    network policies. Reading the ``short_names`` of each class from the source gives the same
    names without importing a single policy: a host, a zygote and a ``-p random`` cell stay free of
    torch, and a policy whose module cannot be imported fails in its cell saying why, instead of
    being an "unknown shorthand".
    """
    registry: dict[str, str] = {}
    for package in POLICY_PACKAGES:
        try:
            spec = importlib.util.find_spec(package)
        except ImportError:
            continue
        for root in spec.submodule_search_locations or [] if spec else []:
            for path in sorted(Path(root).rglob("*.py")):
                module = ".".join([package, *path.relative_to(root).with_suffix("").parts])
                if ".bindings" not in module:
                    for cls, short_names in _declared_short_names(path):
                        for short_name in short_names:
                            registry.setdefault(short_name, f"{module.removesuffix('.__init__')}.{cls}")
    return registry


def _declared_short_names(path: Path) -> list[tuple[str, list[str]]]:
    """(class name, short_names) for every top-level class of a module that lists its short names."""
    try:
        tree = ast.parse(path.read_bytes())
    except (SyntaxError, ValueError, OSError):
        return []
    found = []
    for node in tree.body:
        if isinstance(node, ast.ClassDef):
            for statement in node.body:
                value = _short_names_value(statement)
                if value:
                    found.append((node.name, value))
    return found


def _short_names_value(statement: ast.stmt) -> list[str] | None:
    if isinstance(statement, ast.Assign):
        targets, value = statement.targets, statement.value
    elif isinstance(statement, ast.AnnAssign) and statement.value is not None:
        targets, value = [statement.target], statement.value
    else:
        return None
    if not any(isinstance(t, ast.Name) and t.id == "short_names" for t in targets):
        return None
    if not isinstance(value, (ast.List, ast.Tuple)):
        return None
    return [item.value for item in value.elts if isinstance(item, ast.Constant) and isinstance(item.value, str)]
